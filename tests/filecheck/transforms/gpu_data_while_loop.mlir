// A schedule alone in an scf.while's body keeps its data on the device between steps,
// as in an scf.for (gpu_data_time_loop.mlir). A while loop that counts as an scf.for
// tests its counter for its first step and its last: %a and %b go in on the first step
// only, %b (which the GPU writes) out on the last only. Any other while loop (here, an
// unsigned test) carries a flag that is true on its first step, for the copies in; no
// test tells its last step before its condition, so %b goes out once after the loop,
// in a schedule of its own, where the loop ran a step (its flag came back false).
// RUN: dhir-opt %s -p 'dhir-gpu-data' | filecheck %s

// CHECK-LABEL: func.func @counted
// CHECK:         %left = scf.while (%i = %c0) : (index) -> index {
// CHECK:         ^bb0(%[[I:.*]]: index):
// CHECK:             %first_step = arith.cmpi eq, %[[I]], %c0 : index
// CHECK-NEXT:        scf.if %first_step {
// CHECK-NEXT:          gpu.memcpy %a_dev0, %a
// CHECK-NEXT:          gpu.memcpy %b_dev0, %b
// CHECK-NEXT:        }
// CHECK:             gpu.launch
// CHECK:             %[[STEP:.*]] = arith.constant 1 : index
// CHECK-NEXT:        %[[NEXT:.*]] = arith.addi %[[I]], %[[STEP]] : index
// CHECK-NEXT:        %last_step = arith.cmpi sge, %[[NEXT]], %n : index
// CHECK-NEXT:        scf.if %last_step {
// CHECK-NEXT:          gpu.memcpy %b, %b_dev0
// CHECK-NEXT:        }
// CHECK-NEXT:      }
// CHECK-NOT:       gpu.memcpy
// CHECK:         gpu.dealloc %a_dev0

// CHECK-LABEL: func.func @unsigned
// CHECK:         %first = arith.constant true
// CHECK:         %left, %[[LEFT:.*]] = scf.while (%i = %c0, %[[FLAG:.*]] = %first) : (index, i1) -> (index, i1) {
// CHECK-NEXT:      %go = arith.cmpi ult, %i, %n : index
// CHECK-NEXT:      scf.condition(%go) %i, %[[FLAG]] : index, i1
// CHECK-NEXT:    } do {
// CHECK-NEXT:    ^bb0(%{{.*}}: index, %first_step: i1):
// CHECK:             scf.if %first_step {
// CHECK-NEXT:          gpu.memcpy %a_dev0, %a
// CHECK-NEXT:          gpu.memcpy %b_dev0, %b
// CHECK-NEXT:        }
// CHECK:             gpu.launch
// CHECK-NOT:         gpu.memcpy
// CHECK:           %[[LATER:.*]] = arith.constant false
// CHECK-NEXT:      scf.yield %next, %[[LATER]] : index, i1
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[TRUE:.*]] = arith.constant true
// CHECK-NEXT:    %ran = arith.xori %[[LEFT]], %[[TRUE]] : i1
// CHECK-NEXT:    dhir.schedule %b {
// CHECK-NEXT:      %{{.*}} = dhir.target {kind = "gpu"}
// CHECK-NEXT:      %{{.*}} = dhir.task %{{.*}}, %b attributes {dhir.rank = 0 : i64} {
// CHECK:             func.call @dhir_rt_gpu_task
// CHECK-NEXT:        scf.if %ran {
// CHECK-NEXT:          gpu.memcpy %b, %b_dev0
// CHECK-NEXT:        }
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    gpu.dealloc %a_dev0

func.func @counted(%a: memref<8xf64>, %b: memref<8xf64>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %left = scf.while (%i = %c0) : (index) -> index {
    %go = arith.cmpi slt, %i, %n : index
    scf.condition(%go) %i : index
  } do {
  ^bb0(%i: index):
    dhir.schedule %a, %b {
      %gpu = dhir.target {kind = "gpu"}
      %copy = dhir.task %gpu, %a, %b {
        %g1 = arith.constant 1 : index
        %g8 = arith.constant 8 : index
        gpu.launch blocks(%bx, %by, %bz) in (%gx = %g1, %gy = %g1, %gz = %g1)
                   threads(%tx, %ty, %tz) in (%sx = %g8, %sy = %g1, %sz = %g1) {
          %v = memref.load %a[%tx] : memref<8xf64>
          memref.store %v, %b[%tx] : memref<8xf64>
          gpu.terminator
        }
      }
    }
    %next = arith.addi %i, %c1 : index
    scf.yield %next : index
  }
  return
}

func.func @unsigned(%a: memref<8xf64>, %b: memref<8xf64>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %left = scf.while (%i = %c0) : (index) -> index {
    %go = arith.cmpi ult, %i, %n : index
    scf.condition(%go) %i : index
  } do {
  ^bb0(%i: index):
    dhir.schedule %a, %b {
      %gpu = dhir.target {kind = "gpu"}
      %copy = dhir.task %gpu, %a, %b {
        %g1 = arith.constant 1 : index
        %g8 = arith.constant 8 : index
        gpu.launch blocks(%bx, %by, %bz) in (%gx = %g1, %gy = %g1, %gz = %g1)
                   threads(%tx, %ty, %tz) in (%sx = %g8, %sy = %g1, %sz = %g1) {
          %v = memref.load %a[%tx] : memref<8xf64>
          memref.store %v, %b[%tx] : memref<8xf64>
          gpu.terminator
        }
      }
    }
    %next = arith.addi %i, %c1 : index
    scf.yield %next : index
  }
  return
}
