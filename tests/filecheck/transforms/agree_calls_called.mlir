// The host code of the program's functions that the entry's host code calls runs on every
// rank too: a weight from C there is agreed, and so is one in a host parallel loop (run in
// order, as the call makes it), but for the C math library's (the loop stays threaded).
// A function a task calls as well (one rank runs it there) is left as it is, and so are
// those only tasks reach.
// RUN: dhir-opt %s -p 'dhir-agree-calls{ranks=2}' | filecheck %s

func.func private @weight() -> f32
func.func private @sinf(f32) -> f32

// CHECK-LABEL: func.func @main
// CHECK:         scf.parallel
// CHECK:           %[[P:.*]] = func.call @weight() : () -> f32
// CHECK-NEXT:      arith.bitcast %[[P]] : f32 to i32
// CHECK:           func.call @dhir_rt_agree
// CHECK:           func.call @sinf(%{{.*}}) : (f32) -> f32
// CHECK-NEXT:      memref.store
// CHECK-LABEL: func.func private @helper
// CHECK:         %[[W:.*]] = func.call @weight() : () -> f32
// CHECK-NEXT:    arith.bitcast %[[W]] : f32 to i32
// CHECK:         func.call @dhir_rt_agree
// CHECK-LABEL: func.func private @inner
// CHECK:         func.call @weight() : () -> f32
// CHECK:         func.call @dhir_rt_agree
// CHECK-LABEL: func.func private @shared
// CHECK:         func.call @weight() : () -> f32
// CHECK-NOT:     dhir_rt_agree
// CHECK-LABEL: func.func private @tasks_only
// CHECK:         func.call @weight() : () -> f32
// CHECK-NOT:     dhir_rt_agree
// CHECK-LABEL: func.func private @dhir_rt_agree
func.func @main(%a: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    %p = func.call @weight() : () -> f32
    %q = func.call @sinf(%p) : (f32) -> f32
    memref.store %q, %a[%i] : memref<4xf32>
  }
  func.call @helper(%a) : (memref<4xf32>) -> ()
  func.call @shared(%a) : (memref<4xf32>) -> ()
  return
}
func.func private @helper(%a: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %w = func.call @weight() : () -> f32
  func.call @inner(%a) : (memref<4xf32>) -> ()
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %task = dhir.task %cpu, %a {
      memref.store %w, %a[%c0] : memref<4xf32>
      func.call @shared(%a) : (memref<4xf32>) -> ()
      func.call @tasks_only(%a) : (memref<4xf32>) -> ()
    }
  }
  return
}
func.func private @inner(%a: memref<4xf32>) {
  %c1 = arith.constant 1 : index
  %w = func.call @weight() : () -> f32
  memref.store %w, %a[%c1] : memref<4xf32>
  return
}
func.func private @shared(%a: memref<4xf32>) {
  %c2 = arith.constant 2 : index
  %w = func.call @weight() : () -> f32
  memref.store %w, %a[%c2] : memref<4xf32>
  return
}
func.func private @tasks_only(%a: memref<4xf32>) {
  %c3 = arith.constant 3 : index
  %w = func.call @weight() : () -> f32
  memref.store %w, %a[%c3] : memref<4xf32>
  return
}
