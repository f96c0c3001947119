// A GPU task on rank 1 writes %b, which a CPU task on rank 0 reads: the GPU task copies
// %b back to rank 1's host copy at its end, and only then does lower-to-mpi post its
// send from rank 1's host to rank 0 (a GPU task there would get the device buffer
// itself: gpu_data_messages.mlir).
// RUN: dhir-opt %s -p 'dhir-gpu-data{ranks=2},dhir-lower-to-mpi{ranks=2}' | filecheck %s

// CHECK-LABEL: func.func private @main.schedule0.part0
// Rank 1 runs the GPU task: device copy in, kernel, copy out, then the send and its wait.
// CHECK:         scf.if %on1 {
// CHECK:           func.call @dhir_rt_gpu_task
// CHECK-NEXT:      gpu.memcpy %a_dev1, %a : memref<8xf64>, memref<8xf64>
// CHECK-NEXT:      gpu.memcpy %b_dev1, %b : memref<8xf64>, memref<8xf64>
// CHECK:           gpu.launch
// CHECK:           gpu.memcpy %b, %b_dev1 : memref<8xf64>, memref<8xf64>
// CHECK-NEXT:      arith.constant 0 : i64
// CHECK-NEXT:      memref.extract_aligned_pointer_as_index %b : memref<8xf64>
// CHECK:           func.call @dhir_rt_isend
// Its wait joins its branch (past rank 0's, whose ops rank 1 never runs).
// CHECK:           func.call @dhir_rt_wait
// CHECK-NEXT:    }
// Rank 0 receives into its host copy and runs the CPU task.
// CHECK-NEXT:    scf.if %on0 {
// CHECK-NEXT:      memref.extract_aligned_pointer_as_index %b : memref<8xf64>
// CHECK:           func.call @dhir_rt_recv
// CHECK-NOT:       gpu.memcpy
// CHECK:           memref.load %b
// CHECK:         }

func.func @main(%a: memref<8xf64>, %b: memref<8xf64>) {
  dhir.schedule %a, %b {
    %cpu = dhir.target {kind = "cpu"}
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
    %consume = dhir.task %cpu, %b attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %v = memref.load %b[%c0] : memref<8xf64>
      %w = arith.addf %v, %v : f64
      memref.store %w, %b[%c0] : memref<8xf64>
    }
  }
  return
}
