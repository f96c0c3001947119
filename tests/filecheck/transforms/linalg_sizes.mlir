// dhir-linalg-sizes: a host linalg op checks each operand dimension that a loop runs
// along alone against the first one that gives the loop its size, where either is known
// at run time only (here %b's rows against %a's, not the static columns), and writes the
// sizes where they differ; one of static sizes gets none.
// RUN: dhir-opt %s -p dhir-linalg-sizes | filecheck %s

// CHECK-LABEL: func.func @add
// CHECK:      %[[ZERO:.*]] = arith.constant 0 : index
// CHECK-NEXT: %[[ROWS:.*]] = memref.dim %b, %[[ZERO]] : memref<?x3xf64>
// CHECK-NEXT: %[[LOOP:.*]] = memref.dim %a, %[[ZERO]] : memref<?x3xf64>
// CHECK-NEXT: %[[OK:.*]] = arith.cmpi eq, %[[ROWS]], %[[LOOP]] : index
// CHECK:      scf.if
// CHECK:      func.call @dhir_rt_loop_size(
// CHECK:      cf.assert %[[OK]], "ERROR: Runtime op verification failed\0A^ dimension #0 of input/output operand #1 is incompatible\0ALocation: loc(\22{{.*}}linalg_sizes.mlir\22:19:3)"
// CHECK:      cf.assert %{{.*}} "ERROR: Runtime op verification failed\0A^ dimension #0 of input/output operand #2 is incompatible
// CHECK-NEXT: linalg.add
// CHECK-NOT:  cf.assert
func.func @add(%a: memref<?x3xf64>, %b: memref<?x3xf64>, %o: memref<2x3xf64>) {
  linalg.add ins(%a, %b : memref<?x3xf64>, memref<?x3xf64>) outs(%o : memref<2x3xf64>)
  return
}

// CHECK-LABEL: func.func @static
// CHECK-NOT:  cf.assert
func.func @static(%a: memref<2x3xf64>, %o: memref<2x3xf64>) {
  linalg.add ins(%a, %a : memref<2x3xf64>, memref<2x3xf64>) outs(%o : memref<2x3xf64>)
  return
}

// CHECK: func.func private @dhir_rt_loop_size(i64, i64, i64, i64)
