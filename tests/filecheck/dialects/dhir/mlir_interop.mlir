// mlir-opt-22 has no dhir dialect, but in generic form it carries dhir ops as
// unregistered ops and checks everything else (scf.parallel, gpu.launch, memref):
// the main example survives the trip there and back.
// REQUIRES: mlir
// RUN: dhir-opt %S/../../../../examples/proposal.mlir --print-op-generic \
// RUN:   | mlir-opt-22 --allow-unregistered-dialect --mlir-print-op-generic \
// RUN:   | dhir-opt | filecheck %s

// CHECK:      dhir.schedule %arg0, %arg1, %arg2 {
// CHECK-NEXT:   %0 = dhir.target {arch = "x86_64"}
// CHECK-NEXT:   %1 = dhir.target {arch = "sm_90"}
// CHECK-NEXT:   %2 = dhir.task %0, %arg0, %arg1, %arg2 {
// CHECK:          scf.parallel ([[I:%.*]]) = ({{%.*}}) to ({{%.*}}) step ({{%.*}}) {
// CHECK-NEXT:       {{%.*}} = memref.load %arg0[[[I]]] : memref<20xi32>
// CHECK:        %{{.*}} = dhir.task %1, %arg2, %arg0 {
// CHECK:          gpu.launch blocks
// CHECK:            gpu.terminator
