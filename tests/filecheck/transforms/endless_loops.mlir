// dhir-endless-loops: a host scf.while that writes nothing and is not counted gets an
// empty side effect at the head of its before region, so that no pass erases it; a
// loop that stores, a counted loop and a loop in device code are left alone.
// RUN: dhir-opt %s -p dhir-endless-loops | filecheck %s

// CHECK-LABEL: func.func @pure
func.func @pure(%z: i32) {
  // CHECK:      scf.while
  // CHECK-NEXT:   llvm.inline_asm has_side_effects "", "" : () -> ()
  // CHECK-NEXT:   arith.cmpi
  %r = scf.while (%x = %z) : (i32) -> i32 {
    %go = arith.cmpi sge, %x, %z : i32
    scf.condition(%go) %x : i32
  } do {
  ^bb0(%y: i32):
    scf.yield %y : i32
  }
  return
}

// CHECK-LABEL: func.func @stores
func.func @stores(%a: memref<4xi32>, %z: i32) {
  %c0 = arith.constant 0 : index
  // CHECK-NOT: llvm.inline_asm
  %r = scf.while (%x = %z) : (i32) -> i32 {
    %go = arith.cmpi sge, %x, %z : i32
    scf.condition(%go) %x : i32
  } do {
  ^bb0(%y: i32):
    memref.store %y, %a[%c0] : memref<4xi32>
    scf.yield %y : i32
  }
  return
}

// CHECK-LABEL: func.func @counted
func.func @counted(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // CHECK-NOT: llvm.inline_asm
  %r = scf.while (%i = %c0) : (index) -> index {
    %go = arith.cmpi slt, %i, %n : index
    scf.condition(%go) %i : index
  } do {
  ^bb0(%j: index):
    %k = arith.addi %j, %c1 : index
    scf.yield %k : index
  }
  return
}
// CHECK-LABEL: func.func @after
func.func @after() {
  return
}
