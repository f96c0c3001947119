// A schedule alone in a time loop's body: its device buffers are made before the loop
// and freed after it, so they last every step, and the loop holds nothing but the
// schedule. dhir-lower-to-mpi then keeps the data where the steps leave it: rank 1's
// copy of %b goes to rank 0 inside each step (the CPU task reads it), and rank 1's part
// of %b reaches rank 0, which writes the results, only once, after the loop. %a, which no
// task writes, stays on rank 1's device from the first step on.
// RUN: dhir-opt %s -p 'dhir-gpu-data{ranks=2}' | filecheck %s
// RUN: dhir-opt %s -p 'dhir-gpu-data{ranks=2},dhir-lower-to-mpi{ranks=2}' | filecheck %s --check-prefix=LOWERED

// CHECK-LABEL: func.func @main
// CHECK:         %a_dev1, %b_dev1 = scf.if %gpu_on1 -> (memref<8xf64>, memref<8xf64>) {
// CHECK:           gpu.alloc
// CHECK:         }{dhir.device_buffer}
// CHECK-NEXT:    scf.for %step = %s0 to %steps step %s1 {
// CHECK-NEXT:      dhir.schedule %a, %b {
// CHECK-NOT:       gpu.alloc
// CHECK-NOT:       gpu.dealloc
// %b, which the CPU task writes, is copied in and out every step; %a, which nothing
// writes, only on the loop's first step: rank 1's device keeps it between steps.
// CHECK:             gpu.memcpy %b_dev1, %b
// CHECK-NEXT:        %first_step = arith.cmpi eq, %step, %s0 : index
// CHECK-NEXT:        scf.if %first_step {
// CHECK-NEXT:          gpu.memcpy %a_dev1, %a
// CHECK-NEXT:        }
// CHECK:             gpu.launch
// CHECK:             gpu.memcpy %b, %b_dev1
// CHECK-NEXT:      }
// CHECK-NOT:       gpu.alloc
// CHECK-NOT:       gpu.dealloc
// CHECK:         {{^    }}}
// CHECK-NEXT:    scf.if %gpu_on1 {
// CHECK-NEXT:      gpu.dealloc %a_dev1
// CHECK-NEXT:      gpu.dealloc %b_dev1
// CHECK:         }{dhir.device_buffer}
// CHECK-NEXT:    func.return

// LOWERED-LABEL: func.func @main
// Rank 0's element 0 of %b goes to rank 1 after every step but the first, in which rank 1
// holds it from the input.
// LOWERED:         scf.for %step = %s0 to %steps step %s1 {
// LOWERED-NEXT:      %later = arith.cmpi ne, %step, %s0 : index
// LOWERED-NEXT:      func.call @main.schedule0.part0
// LOWERED-NEXT:    }
// LOWERED-NEXT:    scf.if %on1 {
// LOWERED:           func.call @dhir_rt_send
// LOWERED:         scf.if %on0 {
// LOWERED:           func.call @dhir_rt_recv
// LOWERED-LABEL: func.func private @main.schedule0.part0
// Rank 0's receive and task join its branch, past rank 1's (whose ops rank 0 never runs).
// LOWERED:         scf.if %on0 {
// LOWERED-NEXT:      scf.if %later {
// LOWERED:             func.call @dhir_rt_isend
// LOWERED:           func.call @dhir_rt_recv
// LOWERED:         scf.if %on1 {
// LOWERED:           gpu.memcpy %b, %b_dev1 : memref<8xf64>, memref<8xf64>
// LOWERED:           func.call @dhir_rt_isend
// LOWERED-NOT:     scf.if %on0

func.func @main(%a: memref<8xf64>, %b: memref<8xf64>, %steps: index) {
  %s0 = arith.constant 0 : index
  %s1 = arith.constant 1 : index
  scf.for %step = %s0 to %steps step %s1 {
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
  }
  return
}
