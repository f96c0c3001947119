// CPU task -> GPU task -> CPU task, all on one rank: the GPU task copies what it
// touches to the device first (%b too: a kernel may write only part of it), and copies
// back only what it wrote (%b), since a CPU task reads it next. Device buffers are
// allocated before the schedule and freed after it.
// RUN: dhir-opt %s -p 'dhir-gpu-data{ranks=1}' | filecheck %s
// A whole build's view: the copies sit inside the GPU task's branch, between the
// messages lower-to-mpi adds.
// RUN: dhir-opt %s -p 'dhir-place{ranks=1},dhir-gpu-data{ranks=1},dhir-lower-to-mpi{ranks=1}' | filecheck %s --check-prefix=LOWERED
// Each device buffer is paired with its host memref; given the entry, its arguments are
// paired as lasting the whole run (the runtime may page-lock them) and unlocked before
// the entry returns.
// RUN: dhir-opt %s -p 'dhir-gpu-data{ranks=1 entry=main}' | filecheck %s --check-prefix=ENTRY

// CHECK:      memref.global "private" constant @dhir_gpu_task_name0 : memref<{{[0-9]+}}xi8>
// CHECK-LABEL: func.func @main(%a: memref<16xf32>, %b: memref<16xf32>)
// CHECK:        func.call @dhir_rt_gpu_task(%{{.*}}) : (i64) -> ()
// CHECK-NEXT:   %a_dev0 = gpu.alloc () {dhir.device_buffer} : memref<16xf32>
// CHECK-NEXT:   %b_dev0 = gpu.alloc () {dhir.device_buffer} : memref<16xf32>
// CHECK:        %[[NO:.*]] = arith.constant 0 : i64
// CHECK-NEXT:   func.call @dhir_rt_gpu_pair(%{{.*}}, %{{.*}}, %[[NO]]) : (i64, i64, i64) -> ()
// CHECK:        func.call @dhir_rt_gpu_pair(
// CHECK-NEXT:   dhir.schedule %a, %b {
// CHECK:          %t0 = dhir.task %cpu, %a {
// CHECK-NOT:        gpu.memcpy
// CHECK:          }
// CHECK-NEXT:     %t1 = dhir.task %gpu, %a, %b attributes {name = "double"} {
// CHECK:            func.call @dhir_rt_gpu_task
// CHECK-NEXT:       gpu.memcpy %a_dev0, %a : memref<16xf32>, memref<16xf32>
// CHECK-NEXT:       gpu.memcpy %b_dev0, %b : memref<16xf32>, memref<16xf32>
// CHECK:            memref.load %a_dev0[%{{.*}}]
// CHECK:            memref.store %{{.*}}, %b_dev0[%{{.*}}]
// CHECK:            gpu.memcpy %b, %b_dev0 : memref<16xf32>, memref<16xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:     %t2 = dhir.task %cpu, %b {
// CHECK-NOT:        gpu.memcpy
// CHECK:          }
// CHECK-NEXT:   }
// CHECK-NEXT:   gpu.dealloc %a_dev0 : memref<16xf32>
// CHECK-NEXT:   gpu.dealloc %b_dev0 : memref<16xf32>
// CHECK-NEXT:   func.return
// CHECK:      func.func private @dhir_rt_gpu_task(i64) -> ()
// CHECK-NOT:  @dhir_rt_gpu_unpin_all

// ENTRY:        %a_dev0 = gpu.alloc
// ENTRY:        %[[DEV:.*]] = memref.extract_aligned_pointer_as_index %a_dev0
// ENTRY-NEXT:   %[[D:.*]] = arith.index_cast %[[DEV]] : index to i64
// ENTRY-NEXT:   %[[HOST:.*]] = memref.extract_aligned_pointer_as_index %a :
// ENTRY-NEXT:   %[[H:.*]] = arith.index_cast %[[HOST]] : index to i64
// ENTRY-NEXT:   %[[YES:.*]] = arith.constant 1 : i64
// ENTRY-NEXT:   func.call @dhir_rt_gpu_pair(%[[D]], %[[H]], %[[YES]])
// ENTRY:        gpu.dealloc %b_dev0 : memref<16xf32>
// ENTRY-NEXT:   func.call @dhir_rt_gpu_unpin_all() : () -> ()
// ENTRY-NEXT:   func.return
// ENTRY:      func.func private @dhir_rt_gpu_unpin_all() -> ()

// LOWERED-LABEL: func.func private @main.schedule0.part0
// LOWERED:         gpu.memcpy %a_dev0, %a
// LOWERED-NEXT:    gpu.memcpy %b_dev0, %b
// LOWERED:         gpu.memcpy %b, %b_dev0
// LOWERED-NOT:     gpu.memcpy
// LOWERED:         func.return

func.func @main(%a: memref<16xf32>, %b: memref<16xf32>) {
  dhir.schedule %a, %b {
    %cpu = dhir.target {arch = "x86_64"}
    %gpu = dhir.target {arch = "sm_90"}
    %t0 = dhir.task %cpu, %a {
      %c0 = arith.constant 0 : index
      %x = arith.constant 1.0 : f32
      memref.store %x, %a[%c0] : memref<16xf32>
    }
    %t1 = dhir.task %gpu, %a, %b attributes {name = "double"} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c16 = arith.constant 16 : index
      scf.parallel (%i) = (%c0) to (%c16) step (%c1) {
        %x = memref.load %a[%i] : memref<16xf32>
        %y = arith.addf %x, %x : f32
        memref.store %y, %b[%i] : memref<16xf32>
      }
    }
    %t2 = dhir.task %cpu, %b {
      %c0 = arith.constant 0 : index
      %x = memref.load %b[%c0] : memref<16xf32>
      memref.store %x, %b[%c0] : memref<16xf32>
    }
  }
  return
}
