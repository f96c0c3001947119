// dhir-cast-checks (under --runtime-checks): a reinterpret_cast of an allocation (followed
// back through views) checks that its view's lowest and highest elements lie in the
// allocation, or in a function's argument that is all of its buffer; one of an argument
// some call passes a view (its buffer's size unknown) lies inside that view.
// RUN: dhir-opt %s -p dhir-cast-checks | filecheck %s

// CHECK-LABEL: func.func @alloc
// CHECK:      %[[BUF:.*]] = memref.alloc(%n) : memref<?xf32>
// CHECK:      %[[SIZE:.*]] = memref.dim %[[BUF]], %{{.*}} : memref<?xf32>
// CHECK-NEXT: %[[SIZE64:.*]] = arith.index_cast %[[SIZE]] : index to i64
// CHECK-NEXT: %[[WIDE:.*]] = arith.extsi %[[SIZE64]] : i64 to i128
// CHECK-NEXT: %[[TOTAL:.*]] = arith.muli %{{.*}}, %[[WIDE]] : i128
// CHECK:      %[[O64:.*]] = arith.index_cast %o : index to i64
// CHECK-NEXT: %[[O:.*]] = arith.extsi %[[O64]] : i64 to i128
// CHECK:      %[[S64:.*]] = arith.index_cast %s : index to i64
// CHECK-NEXT: %[[S:.*]] = arith.extsi %[[S64]] : i64 to i128
// CHECK:      %[[STEP:.*]] = arith.muli %{{.*}}, %[[S]] : i128
// CHECK:      %[[LOW:.*]] = arith.addi %[[O]], %{{.*}} : i128
// CHECK:      %[[HIGH:.*]] = arith.addi %[[O]], %{{.*}} : i128
// CHECK-NEXT: arith.cmpi sge, %[[LOW]], %{{.*}} : i128
// CHECK-NEXT: arith.cmpi slt, %[[HIGH]], %[[TOTAL]] : i128
// CHECK:      cf.assert %{{.*}}, "ERROR: Runtime op verification failed\0A^ result of reinterpret_cast is out-of-bounds of the base memref\0ALocation: loc(\22{{.*}}cast_checks.mlir\22:27:8)"
// CHECK-NEXT: memref.reinterpret_cast %c
func.func @alloc(%n: index, %o: index, %s: index) -> memref<4xf32, strided<[?], offset: ?>> {
  %a = memref.alloc(%n) : memref<?xf32>
  %c = memref.cast %a : memref<?xf32> to memref<*xf32>
  %v = memref.reinterpret_cast %c to offset: [%o], sizes: [4], strides: [%s] : memref<*xf32> to memref<4xf32, strided<[?], offset: ?>>
  return %v : memref<4xf32, strided<[?], offset: ?>>
}

// No call passes %a a view: it is its buffer, of 8 elements (the entry's arguments, as
// the harness passes them).
// CHECK-LABEL: func.func @argument
// CHECK:      %[[EIGHT:.*]] = arith.constant 8 : index
// CHECK-NEXT: %[[EIGHT64:.*]] = arith.index_cast %[[EIGHT]] : index to i64
// CHECK-NEXT: %[[WIDE:.*]] = arith.extsi %[[EIGHT64]] : i64 to i128
// CHECK-NEXT: %[[TOTAL:.*]] = arith.muli %{{.*}}, %[[WIDE]] : i128
// CHECK:      arith.cmpi slt, %{{.*}}, %[[TOTAL]] : i128
// CHECK:      cf.assert %{{.*}}, "{{.*}}cast_checks.mlir\22:[[# @LINE + 2]]:8)"
func.func @argument(%a: memref<8xf32>, %o: index) -> memref<4xf32, strided<[1], offset: ?>> {
  %v = memref.reinterpret_cast %a to offset: [%o], sizes: [4], strides: [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: ?>>
  return %v : memref<4xf32, strided<[1], offset: ?>>
}

// @part's %p is the first row of @caller's %b at one call: its buffer may be larger, and
// its size is not known here, so the cast must lie inside %p's own view.
// CHECK-LABEL: func.func private @part
// CHECK:      %{{.*}}, %[[OFF:.*]], %{{.*}}, %{{.*}} = memref.extract_strided_metadata %p
// CHECK:      arith.index_cast %[[OFF]] : index to i64
// CHECK:      cf.assert %{{.*}}, "ERROR: Runtime op verification failed\0A^ result of reinterpret_cast is out-of-bounds of its source view, {{.*}}cast_checks.mlir\22:[[# @LINE + 4]]:8)"
// CHECK-NEXT: memref.reinterpret_cast %p
// CHECK-LABEL: func.func @caller
func.func private @part(%p: memref<8xf32>, %o: index) -> memref<4xf32, strided<[1], offset: ?>> {
  %v = memref.reinterpret_cast %p to offset: [%o], sizes: [4], strides: [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: ?>>
  return %v : memref<4xf32, strided<[1], offset: ?>>
}
func.func @caller(%b: memref<4x8xf32>, %o: index) -> memref<4xf32, strided<[1], offset: ?>> {
  %row = memref.reinterpret_cast %b to offset: [0], sizes: [8], strides: [1] : memref<4x8xf32> to memref<8xf32>
  %v = func.call @part(%row, %o) : (memref<8xf32>, index) -> memref<4xf32, strided<[1], offset: ?>>
  return %v : memref<4xf32, strided<[1], offset: ?>>
}

// A memref.view's bytes, from its shift on, lie in its source: 4 bytes an element.
// CHECK-LABEL: func.func @view
// CHECK:      %[[ZERO:.*]] = arith.constant 0 : i128
// CHECK:      %[[EIGHT:.*]] = arith.extsi %{{.*}} : i64 to i128
// CHECK:      %[[N:.*]] = arith.extsi %{{.*}} : i64 to i128
// CHECK:      %[[S:.*]] = arith.extsi %{{.*}} : i64 to i128
// CHECK-NEXT: %[[FROM:.*]] = arith.cmpi sge, %[[S]], %[[ZERO]] : i128
// CHECK-NEXT: %[[FOUR:.*]] = arith.constant 4 : i128
// CHECK-NEXT: arith.cmpi sge, %[[EIGHT]], %[[ZERO]] : i128
// CHECK-NEXT: %[[ROW:.*]] = arith.muli %[[FOUR]], %[[EIGHT]] : i128
// CHECK-NEXT: arith.cmpi sge, %[[N]], %[[ZERO]] : i128
// CHECK-NEXT: %[[BYTES:.*]] = arith.muli %[[ROW]], %[[N]] : i128
// CHECK-NEXT: %[[END:.*]] = arith.addi %[[S]], %[[BYTES]] : i128
// CHECK:      %[[SIZE:.*]] = memref.dim %b, %{{.*}} : memref<?xi8>
// CHECK-NEXT: %[[SIZE64:.*]] = arith.index_cast %[[SIZE]] : index to i64
// CHECK-NEXT: %[[WIDE:.*]] = arith.extsi %[[SIZE64]] : i64 to i128
// CHECK-NEXT: arith.cmpi sle, %[[END]], %[[WIDE]] : i128
// CHECK:      cf.assert %{{.*}}, "ERROR: Runtime op verification failed\0A^ result of view is out-of-bounds of the source memref\0ALocation: loc(\22{{.*}}cast_checks.mlir\22:[[# @LINE + 2]]:8)"
func.func @view(%b: memref<?xi8>, %s: index, %n: index) -> memref<8x?xf32> {
  %v = memref.view %b[%s][%n] : memref<?xi8> to memref<8x?xf32>
  return %v : memref<8x?xf32>
}

// A host expand_shape with a run-time size checks that its sizes are 0 or more and
// multiply to the source's dimension (in 128 bits, the product held at most 2^64); one
// of static sizes gets none.
// CHECK-LABEL: func.func @split
// CHECK:      arith.cmpi sge
// CHECK:      arith.muli %{{.*}}, %{{.*}} : i128
// CHECK:      arith.minsi
// CHECK:      arith.cmpi eq, %{{.*}}, %{{.*}} : i128
// CHECK:      cf.assert %{{.*}}, "ERROR: Runtime op verification failed\0A^ expand_shape's sizes do not multiply to dimension 0 of its source\0ALocation: loc(\22{{.*}}cast_checks.mlir\22:[[# @LINE + 5]]:8)"
// CHECK-NEXT: %e = memref.expand_shape
// CHECK-NOT:  cf.assert
// CHECK:      %f = memref.expand_shape
func.func @split(%a: memref<?xf32>, %n: index) -> memref<?x4xf32> {
  %e = memref.expand_shape %a [[0, 1]] output_shape [%n, 4] : memref<?xf32> into memref<?x4xf32>
  %s = memref.alloc() : memref<8xf32>
  %f = memref.expand_shape %s [[0, 1]] output_shape [2, 4] : memref<8xf32> into memref<2x4xf32>
  return %e : memref<?x4xf32>
}
