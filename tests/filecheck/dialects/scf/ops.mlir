// RUN: dhir-opt %s | filecheck %s
// RUN: dhir-opt %s | dhir-opt | filecheck %s
// RUN: dhir-opt %s --print-op-generic | dhir-opt | filecheck %s

// scf.parallel and scf.reduce in MLIR 22's custom syntax. As mlir-opt-22 does,
// dhir adds the operand-less scf.reduce terminator when it is left out and
// always prints it.

// CHECK-LABEL: func.func @implicit_reduce
func.func @implicit_reduce(%lb: index, %ub: index, %st: index, %m: memref<?xf32>, %v: f32) {
  // CHECK-NEXT: scf.parallel (%i) = (%lb) to (%ub) step (%st) {
  // CHECK-NEXT:   memref.store %v, %m[%i] : memref<?xf32>
  // CHECK-NEXT:   scf.reduce{{$}}
  // CHECK-NEXT: }
  scf.parallel (%i) = (%lb) to (%ub) step (%st) {
    memref.store %v, %m[%i] : memref<?xf32>
  }
  // CHECK-NEXT: scf.parallel (%i_1) = (%lb) to (%ub) step (%st) {
  // CHECK-NEXT:   scf.reduce{{$}}
  // CHECK-NEXT: }
  scf.parallel (%i) = (%lb) to (%ub) step (%st) {
  }
  func.return
}

// CHECK-LABEL: func.func @nest_and_attributes
func.func @nest_and_attributes(%lb: index, %ub: index, %m: memref<?x?xf32>, %v: f32) {
  %c1 = arith.constant 1 : index
  // CHECK:      scf.parallel (%i, %j) = (%lb, %lb) to (%ub, %ub) step (%c1, %c1) {
  // CHECK-NEXT:   memref.store %v, %m[%i, %j] : memref<?x?xf32>
  // CHECK-NEXT:   scf.reduce{{$}}
  // CHECK-NEXT: } {mapping = [#gpu.loop_dim_map<processor = block_x, map = (d0) -> (d0), bound = (d0) -> (d0)>, #gpu.loop_dim_map<processor = thread_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
  scf.parallel (%i, %j) = (%lb, %lb) to (%ub, %ub) step (%c1, %c1) {
    memref.store %v, %m[%i, %j] : memref<?x?xf32>
    scf.reduce
  } {mapping = [#gpu.loop_dim_map<processor = block_x, map = (d0) -> (d0), bound = (d0) -> (d0)>, #gpu.loop_dim_map<processor = thread_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
  func.return
}

// CHECK-LABEL: func.func @reductions
func.func @reductions(%lb: index, %ub: index, %st: index, %m: memref<?xf32>, %f: f32, %k: i32) -> (f32, f32, i32) {
  // CHECK-NEXT: %sum = scf.parallel (%i) = (%lb) to (%ub) step (%st) init (%f) -> f32 {
  // CHECK-NEXT:   %x = memref.load %m[%i] : memref<?xf32>
  // CHECK-NEXT:   scf.reduce(%x : f32) {
  // CHECK-NEXT:   ^bb0(%a: f32, %b: f32):
  // CHECK-NEXT:     %s = arith.addf %a, %b : f32
  // CHECK-NEXT:     scf.reduce.return %s : f32
  // CHECK-NEXT:   }
  // CHECK-NEXT: }
  %sum = scf.parallel (%i) = (%lb) to (%ub) step (%st) init (%f) -> f32 {
    %x = memref.load %m[%i] : memref<?xf32>
    scf.reduce(%x : f32) {
    ^bb0(%a: f32, %b: f32):
      %s = arith.addf %a, %b : f32
      scf.reduce.return %s : f32
    }
  }
  // CHECK-NEXT: %max, %count = scf.parallel (%i_1) = (%lb) to (%ub) step (%st) init (%f, %k) -> (f32, i32) {
  // CHECK-NEXT:   %x_1 = memref.load %m[%i_1] : memref<?xf32>
  // CHECK-NEXT:   %one = arith.constant 1 : i32
  // CHECK-NEXT:   scf.reduce(%x_1, %one : f32, i32) {
  // CHECK-NEXT:   ^bb0(%a_1: f32, %b_1: f32):
  // CHECK-NEXT:     %s_1 = arith.maximumf %a_1, %b_1 : f32
  // CHECK-NEXT:     scf.reduce.return %s_1 : f32
  // CHECK-NEXT:   }, {
  // CHECK-NEXT:   ^bb0(%a_2: i32, %b_2: i32):
  // CHECK-NEXT:     %s_2 = arith.addi %a_2, %b_2 : i32
  // CHECK-NEXT:     scf.reduce.return %s_2 : i32
  // CHECK-NEXT:   }
  // CHECK-NEXT: } {note = "two reductions"}
  %max, %count = scf.parallel (%i) = (%lb) to (%ub) step (%st) init (%f, %k) -> (f32, i32) {
    %x = memref.load %m[%i] : memref<?xf32>
    %one = arith.constant 1 : i32
    scf.reduce(%x, %one : f32, i32) {
    ^bb0(%a: f32, %b: f32):
      %s = arith.maximumf %a, %b : f32
      scf.reduce.return %s : f32
    }, {
    ^bb0(%a: i32, %b: i32):
      %s = arith.addi %a, %b : i32
      scf.reduce.return %s : i32
    }
  } {note = "two reductions"}
  func.return %sum, %max, %count : f32, f32, i32
}
