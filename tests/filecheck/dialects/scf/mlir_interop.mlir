// REQUIRES: mlir
// RUN: dhir-opt %s | mlir-opt-22 | dhir-opt | filecheck %s
// RUN: dhir-opt %s | mlir-opt-22 --mlir-print-op-generic | dhir-opt | filecheck %s
// RUN: dhir-opt %s --print-op-generic | mlir-opt-22 | dhir-opt | filecheck %s

// What dhir prints, mlir-opt-22 accepts; what mlir-opt-22 prints back, in
// either form, dhir parses to the same IR.

// CHECK-LABEL: func.func @f
func.func @f(%lb: index, %ub: index, %m: memref<?x?xf32>, %f: f32, %k: i32) -> (f32, i32) {
  %c1 = arith.constant 1 : index
  // CHECK:      scf.parallel (%[[I:.*]], %[[J:.*]]) = (%{{.*}}, %{{.*}}) to (%{{.*}}, %{{.*}}) step (%[[C1:.*]], %[[C1]]) {
  // CHECK-NEXT:   memref.store %{{.*}}, %{{.*}}[%[[I]], %[[J]]] : memref<?x?xf32>
  // CHECK-NEXT:   scf.reduce{{$}}
  // CHECK-NEXT: } {mapping = [#gpu.loop_dim_map<processor = block_x, map = (d0) -> (d0), bound = (d0) -> (d0)>, #gpu.loop_dim_map<processor = sequential, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
  scf.parallel (%i, %j) = (%lb, %lb) to (%ub, %ub) step (%c1, %c1) {
    memref.store %f, %m[%i, %j] : memref<?x?xf32>
  } {mapping = [#gpu.loop_dim_map<processor = block_x, map = (d0) -> (d0), bound = (d0) -> (d0)>, #gpu.loop_dim_map<processor = sequential, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
  // CHECK-NEXT: %{{.*}}, %{{.*}} = scf.parallel (%[[K:.*]]) = (%{{.*}}) to (%{{.*}}) step (%[[C1]]) init (%{{.*}}, %{{.*}}) -> (f32, i32) {
  // CHECK-NEXT:   %[[X:.*]] = memref.load %{{.*}}[%[[K]], %[[K]]] : memref<?x?xf32>
  // CHECK-NEXT:   scf.reduce(%[[X]], %{{.*}} : f32, i32) {
  // CHECK-NEXT:   ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32):
  // CHECK-NEXT:     %[[S:.*]] = arith.addf %[[A]], %[[B]] : f32
  // CHECK-NEXT:     scf.reduce.return %[[S]] : f32
  // CHECK-NEXT:   }, {
  // CHECK-NEXT:   ^bb0(%[[C:.*]]: i32, %[[D:.*]]: i32):
  // CHECK-NEXT:     %[[T:.*]] = arith.muli %[[C]], %[[D]] : i32
  // CHECK-NEXT:     scf.reduce.return %[[T]] : i32
  // CHECK-NEXT:   }
  // CHECK-NEXT: }
  %r, %q = scf.parallel (%i) = (%lb) to (%ub) step (%c1) init (%f, %k) -> (f32, i32) {
    %v = memref.load %m[%i, %i] : memref<?x?xf32>
    scf.reduce(%v, %k : f32, i32) {
    ^bb0(%a: f32, %b: f32):
      %s = arith.addf %a, %b : f32
      scf.reduce.return %s : f32
    }, {
    ^bb0(%a: i32, %b: i32):
      %s = arith.muli %a, %b : i32
      scf.reduce.return %s : i32
    }
  }
  func.return %r, %q : f32, i32
}
