// The host code of the program's functions that the entry's host code calls runs on every
// rank too: a weight from C there is agreed. A function a task calls as well (one rank
// runs it there) is left as it is, and so are those only tasks reach.
// RUN: dhir-opt %s -p 'dhir-agree-calls{ranks=2}' | filecheck %s

func.func private @weight() -> f32

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
