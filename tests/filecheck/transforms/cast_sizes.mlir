// dhir-cast-sizes: a host memref.cast that gives a dimension of run-time size a static
// one checks that size as it runs (dimension 0 here, not the static dimension 1), and
// writes the sizes where it fails; a cast to a run-time size, and one in GPU code, get
// none. A host expand_shape with a run-time size checks its sizes (@split).
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

// A host expand_shape with a run-time size checks that its sizes are 0 or more and split
// the source's dimension (their product in 128 bits); one of static sizes gets none.
// CHECK-LABEL: func.func @split
// CHECK:      arith.cmpi sge, %n, %{{.*}} : index
// CHECK:      arith.muli %{{.*}}, %{{.*}} : i128
// CHECK:      arith.cmpi eq, %{{.*}}, %{{.*}} : i128
// CHECK:      cf.assert %{{.*}}, "ERROR: Runtime op verification failed\0A^ expand_shape's output_shape does not split dimension 0 of its source\0ALocation: loc(\22{{.*}}cast_sizes.mlir\22:{{[0-9]+}}:8)"
// CHECK-NEXT: %e = memref.expand_shape
// CHECK-NOT:  cf.assert
// CHECK:      %f = memref.expand_shape
func.func @split(%a: memref<?xf32>, %n: index) -> memref<?x4xf32> {
  %e = memref.expand_shape %a [[0, 1]] output_shape [%n, 4] : memref<?xf32> into memref<?x4xf32>
  %s = memref.alloc() : memref<8xf32>
  %f = memref.expand_shape %s [[0, 1]] output_shape [2, 4] : memref<8xf32> into memref<2x4xf32>
  return %e : memref<?x4xf32>
}

// CHECK: func.func private @dhir_rt_cast_size(i64, i64, i64)
