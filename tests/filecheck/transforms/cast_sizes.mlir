// dhir-cast-sizes: a host memref.cast that gives a dimension of run-time size a static
// one checks that size as it runs (dimension 0 here, not the static dimension 1), and
// writes the sizes where it fails; a cast to a run-time size, and one in GPU code, get
// none.
// RUN: dhir-opt %s -p dhir-cast-sizes | filecheck %s

// CHECK-LABEL: func.func @rows
// CHECK:      %[[ZERO:.*]] = arith.constant 0 : index
// CHECK-NEXT: %[[SIZE:.*]] = memref.dim %b, %[[ZERO]] : memref<?x3xf64>
// CHECK-NEXT: %[[TWO:.*]] = arith.constant 2 : index
// CHECK-NEXT: %[[OK:.*]] = arith.cmpi eq, %[[SIZE]], %[[TWO]] : index
// CHECK:      scf.if
// CHECK:      %[[GIVEN:.*]] = arith.index_cast %[[SIZE]] : index to i64
// CHECK:      func.call @dhir_rt_cast_size(%{{.*}}, %[[GIVEN]], %{{.*}}) : (i64, i64, i64) -> ()
// CHECK:      cf.assert %[[OK]], "ERROR: Runtime op verification failed\0A^ size mismatch of dim 0\0ALocation: loc(\22{{.*}}cast_sizes.mlir\22:19:8)"
// CHECK-NEXT: %c = memref.cast %b : memref<?x3xf64> to memref<2x3xf64>
// CHECK-NOT:  cf.assert
func.func @rows(%b: memref<?x3xf64>) -> memref<?x3xf64> {
  %c = memref.cast %b : memref<?x3xf64> to memref<2x3xf64>
  %d = memref.cast %c : memref<2x3xf64> to memref<?x3xf64>
  return %d : memref<?x3xf64>
}

// CHECK-LABEL: func.func @kernel
// CHECK-NOT:  cf.assert
func.func @kernel(%b: memref<?xf64>) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%x = %c1, %y = %c1, %z = %c1) threads(%tx, %ty, %tz) in (%u = %c1, %v = %c1, %w = %c1) {
    %c = memref.cast %b : memref<?xf64> to memref<4xf64>
    gpu.terminator
  }
  return
}

// CHECK: func.func private @dhir_rt_cast_size(i64, i64, i64)
