// RUN: dhir-opt %s | filecheck %s
// RUN: dhir-opt %s | dhir-opt | filecheck %s
// RUN: dhir-opt %s --print-op-generic | dhir-opt | filecheck %s

// The memref ops xDSL 0.74 reads only in the generic form, in MLIR 22's custom
// syntax.

// A global's initial value is printed without its type: the memref type
// implies it. Visibility and the initial value are both optional.
// CHECK:      memref.global "private" constant @table : memref<2x2xf32> = dense<{{\[\[}}1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]>
// CHECK-NEXT: memref.global @buffer : memref<4xi32> = uninitialized
// CHECK-NEXT: memref.global "private" @zeros : memref<8xf64> = dense<0.000000e+00> {alignment = 64 : i64}
// CHECK-NEXT: memref.global @external : memref<2xf32>{{$}}
// CHECK-NEXT: memref.global "private" @scalar : memref<i64> = dense<7>
memref.global "private" constant @table : memref<2x2xf32> = dense<[[1.0, 2.0], [3.0, 4.0]]>
memref.global @buffer : memref<4xi32> = uninitialized
memref.global "private" @zeros : memref<8xf64> = dense<0.0> {alignment = 64}
memref.global @external : memref<2xf32>
memref.global "private" @scalar : memref<i64> = dense<7>

// CHECK-LABEL: func.func @ops
func.func @ops(%a: memref<4xf32>, %b: memref<4xf32>, %i: index, %v: f32, %n: i32) {
  // CHECK-NEXT: memref.copy %a, %b : memref<4xf32> to memref<4xf32>
  memref.copy %a, %b : memref<4xf32> to memref<4xf32>
  // CHECK-NEXT: %dyn = memref.cast %a : memref<4xf32> to memref<?xf32>
  %dyn = memref.cast %a : memref<4xf32> to memref<?xf32>
  // CHECK-NEXT: %unranked = memref.cast %a : memref<4xf32> to memref<*xf32>
  %unranked = memref.cast %a : memref<4xf32> to memref<*xf32>
  // CHECK-NEXT: %g = memref.get_global @table : memref<2x2xf32>
  %g = memref.get_global @table : memref<2x2xf32>
  // CHECK-NEXT: %rank = memref.rank %a : memref<4xf32>
  %rank = memref.rank %a : memref<4xf32>
  // CHECK-NEXT: %ptr = memref.extract_aligned_pointer_as_index %a : memref<4xf32> -> index
  %ptr = memref.extract_aligned_pointer_as_index %a : memref<4xf32> -> index
  // CHECK-NEXT: %space = memref.memory_space_cast %a : memref<4xf32> to memref<4xf32, 1 : i64>
  %space = memref.memory_space_cast %a : memref<4xf32> to memref<4xf32, 1>
  // CHECK-NEXT: %old = memref.atomic_rmw addf %v, %a[%i] : (f32, memref<4xf32>) -> f32
  %old = memref.atomic_rmw addf %v, %a[%i] : (f32, memref<4xf32>) -> f32
  // CHECK-NEXT: %ints = memref.alloca() : memref<2x3xi32>
  %ints = memref.alloca() : memref<2x3xi32>
  // CHECK-NEXT: %prev = memref.atomic_rmw maxs %n, %ints[%i, %i] {tag} : (i32, memref<2x3xi32>) -> i32
  %prev = memref.atomic_rmw maxs %n, %ints[%i, %i] {tag} : (i32, memref<2x3xi32>) -> i32
  func.return
}

// The return of an alloca_scope without results is implicit.
// CHECK-LABEL: func.func @scopes
func.func @scopes(%n: index) -> index {
  // CHECK-NEXT: memref.alloca_scope {
  // CHECK-NEXT:   %tmp = memref.alloca() : memref<4xf32>
  // CHECK-NEXT: }
  memref.alloca_scope {
    %tmp = memref.alloca() : memref<4xf32>
  }
  // CHECK-NEXT: %r = memref.alloca_scope -> (index) {
  // CHECK-NEXT:   memref.alloca_scope.return %n : index
  // CHECK-NEXT: } {note}
  %r = memref.alloca_scope -> (index) {
    memref.alloca_scope.return %n : index
  } {note}
  func.return %r : index
}
