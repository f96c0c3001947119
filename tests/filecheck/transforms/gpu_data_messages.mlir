// A GPU task on rank 1 writes %b, which a GPU task on rank 0 reads next: rank 1's device
// buffer goes straight to rank 0's (dhir_rt_gpu_send at the end of the writer,
// dhir_rt_gpu_recv at the start of the reader, tag 1: %b's place in the schedule), with
// no copy to either host and no message from lower-to-mpi. Rank 1 writes %b again in the
// third task: it first waits for its send (dhir_rt_gpu_ready). Code after the schedule
// reads both: each comes out of the device that last wrote it.
// RUN: dhir-opt %s -p 'dhir-gpu-data{ranks=2},dhir-lower-to-mpi{ranks=2}' | filecheck %s
// Without device messages, %b goes out to rank 1's host, and into rank 0's device there.
// RUN: dhir-opt %s -p 'dhir-gpu-data{ranks=2 device-messages=false}' \
// RUN:   | filecheck %s --check-prefix=HOSTS
// HOSTS-NOT:   dhir_rt_gpu_send
// HOSTS:       gpu.memcpy %b, %b_dev1
// HOSTS:       gpu.memcpy %b_dev0, %b
// HOSTS-NOT:   dhir_rt_gpu_recv

// CHECK-LABEL: func.func private @main.schedule0.part0
// CHECK:         scf.if %on1 {
// CHECK:           func.call @dhir_rt_gpu_task
// CHECK-NEXT:      gpu.memcpy %a_dev1, %a
// CHECK-NEXT:      gpu.memcpy %b_dev1, %b
// CHECK:           gpu.launch
// CHECK-NOT:       gpu.memcpy
// CHECK:           %[[SENT:.*]] = memref.extract_aligned_pointer_as_index %b_dev1
// CHECK-NEXT:      %[[SENT64:.*]] = arith.index_cast %[[SENT]] : index to i64
// CHECK-NEXT:      %[[TO:.*]] = arith.constant 0 : i32
// CHECK-NEXT:      %[[TAG:.*]] = arith.constant 1 : i32
// CHECK-NEXT:      func.call @dhir_rt_gpu_send(%[[SENT64]], %[[TO]], %[[TAG]])
// The third task, on rank 1 too, joins its branch (past rank 0's, whose ops rank 1
// never runs).
// CHECK-NOT:       dhir_rt_isend
// CHECK:           func.call @dhir_rt_gpu_task
// CHECK-NEXT:      memref.extract_aligned_pointer_as_index %b_dev1
// CHECK-NEXT:      arith.index_cast
// CHECK-NEXT:      func.call @dhir_rt_gpu_ready
// CHECK:           gpu.launch
// CHECK:           gpu.memcpy %b, %b_dev1
// CHECK:         }
// CHECK-NEXT:    scf.if %on0 {
// CHECK:           func.call @dhir_rt_gpu_task
// CHECK-NEXT:      %[[INTO:.*]] = memref.extract_aligned_pointer_as_index %b_dev0
// CHECK-NEXT:      %[[INTO64:.*]] = arith.index_cast %[[INTO]] : index to i64
// CHECK-NEXT:      %[[FROM:.*]] = arith.constant 1 : i32
// CHECK-NEXT:      %[[TAG2:.*]] = arith.constant 1 : i32
// CHECK-NEXT:      func.call @dhir_rt_gpu_recv(%[[INTO64]], %[[FROM]], %[[TAG2]])
// CHECK-NEXT:      gpu.memcpy %a_dev0, %a
// CHECK:           gpu.launch
// CHECK:           gpu.memcpy %a, %a_dev0
// CHECK-NEXT:    }
// CHECK-DAG:     func.func private @dhir_rt_gpu_send(i64, i32, i32)
// CHECK-DAG:     func.func private @dhir_rt_gpu_recv(i64, i32, i32)
// CHECK-DAG:     func.func private @dhir_rt_gpu_ready(i64)

func.func @main(%a: memref<8xf64>, %b: memref<8xf64>) {
  dhir.schedule %a, %b {
    %gpu = dhir.target {kind = "gpu"}
    %produce = dhir.task %gpu, %a, %b attributes {dhir.rank = 1 : i64} {
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
                 threads(%tx, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1) {
        %v = memref.load %a[%tx] : memref<8xf64>
        memref.store %v, %b[%tx] : memref<8xf64>
        gpu.terminator
      }
    }
    %consume = dhir.task %gpu, %a, %b attributes {dhir.rank = 0 : i64} {
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
                 threads(%tx, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1) {
        %v = memref.load %b[%tx] : memref<8xf64>
        %w = arith.addf %v, %v : f64
        memref.store %w, %a[%tx] : memref<8xf64>
        gpu.terminator
      }
    }
    %again = dhir.task %gpu, %b attributes {dhir.rank = 1 : i64} {
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
                 threads(%tx, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1) {
        %v = memref.load %b[%tx] : memref<8xf64>
        %w = arith.mulf %v, %v : f64
        memref.store %w, %b[%tx] : memref<8xf64>
        gpu.terminator
      }
    }
  }
  return
}
