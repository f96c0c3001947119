// RUN: dhir-opt %s | filecheck %s

// The generic form mlir-opt-22 --mlir-print-op-generic prints reads back into
// the custom syntax; an alloca_scope's return-less body gets its implicit
// return elided again.

"builtin.module"() ({
  "memref.global"() <{constant, initial_value = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>, sym_name = "c", sym_visibility = "private", type = memref<2xf32>}> : () -> ()
  "memref.global"() <{initial_value, sym_name = "g", type = memref<4xi32>}> : () -> ()
  "memref.global"() <{sym_name = "ext", type = memref<2xf32>}> : () -> ()
  "func.func"() <{function_type = (memref<4xf32>, memref<4xf32>, index, f32) -> (), sym_name = "f"}> ({
  ^bb0(%a: memref<4xf32>, %b: memref<4xf32>, %i: index, %v: f32):
    "memref.copy"(%a, %b) : (memref<4xf32>, memref<4xf32>) -> ()
    %c = "memref.cast"(%a) : (memref<4xf32>) -> memref<?xf32>
    %x = "memref.atomic_rmw"(%v, %a, %i) <{kind = 12 : i64}> : (f32, memref<4xf32>, index) -> f32
    "memref.alloca_scope"() ({
      %t = "memref.alloca"() <{operandSegmentSizes = array<i32: 0, 0>}> : () -> memref<4xf32>
      "memref.alloca_scope.return"() : () -> ()
    }) : () -> ()
    "func.return"() : () -> ()
  }) : () -> ()
}) : () -> ()

// CHECK:      memref.global "private" constant @c : memref<2xf32> = dense<[1.000000e+00, 2.000000e+00]>
// CHECK-NEXT: memref.global @g : memref<4xi32> = uninitialized
// CHECK-NEXT: memref.global @ext : memref<2xf32>{{$}}
// CHECK:      memref.copy %a, %b : memref<4xf32> to memref<4xf32>
// CHECK-NEXT: %c = memref.cast %a : memref<4xf32> to memref<?xf32>
// CHECK-NEXT: %x = memref.atomic_rmw mulf %v, %a[%i] : (f32, memref<4xf32>) -> f32
// CHECK-NEXT: memref.alloca_scope {
// CHECK-NEXT:   %t = memref.alloca() : memref<4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: func.return
