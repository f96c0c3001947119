// dhir-cast-checks (under --runtime-checks): a reinterpret_cast of an allocation (followed
// back through views) checks that its view's lowest and highest elements lie in the
// allocation; one of a function's argument is left alone (its buffer's size is unknown).
// RUN: dhir-opt %s -p dhir-cast-checks | filecheck %s

// CHECK-LABEL: func.func @alloc
// CHECK:      %[[BUF:.*]] = memref.alloc(%n) : memref<?xf32>
// CHECK:      %[[SIZE:.*]] = memref.dim %[[BUF]], %{{.*}} : memref<?xf32>
// CHECK:      %[[TOTAL:.*]] = arith.muli %{{.*}}, %[[SIZE]] : index
// CHECK:      %[[STEP:.*]] = arith.muli %{{.*}}, %s : index
// CHECK:      %[[LOW:.*]] = arith.addi %o, %{{.*}} : index
// CHECK:      %[[HIGH:.*]] = arith.addi %o, %{{.*}} : index
// CHECK-NEXT: arith.cmpi sge, %[[LOW]], %{{.*}} : index
// CHECK-NEXT: arith.cmpi slt, %[[HIGH]], %[[TOTAL]] : index
// CHECK:      cf.assert %{{.*}}, "ERROR: Runtime op verification failed\0A^ result of reinterpret_cast is out-of-bounds of the base memref\0ALocation: loc(\22{{.*}}cast_checks.mlir\22:20:3)"
// CHECK-NEXT: memref.reinterpret_cast %c
func.func @alloc(%n: index, %o: index, %s: index) -> memref<4xf32, strided<[?], offset: ?>> {
  %a = memref.alloc(%n) : memref<?xf32>
  %c = memref.cast %a : memref<?xf32> to memref<*xf32>
  %v = memref.reinterpret_cast %c to offset: [%o], sizes: [4], strides: [%s] : memref<*xf32> to memref<4xf32, strided<[?], offset: ?>>
  return %v : memref<4xf32, strided<[?], offset: ?>>
}

// CHECK-LABEL: func.func @argument
// CHECK-NOT:  cf.assert
func.func @argument(%a: memref<8xf32>, %o: index) -> memref<4xf32, strided<[1], offset: ?>> {
  %v = memref.reinterpret_cast %a to offset: [%o], sizes: [4], strides: [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: ?>>
  return %v : memref<4xf32, strided<[1], offset: ?>>
}
