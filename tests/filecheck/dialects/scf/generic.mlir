// RUN: dhir-opt %s | filecheck %s

// The generic form mlir-opt-22 --mlir-print-op-generic prints reads back into
// the custom syntax.

"builtin.module"() ({
  "func.func"() <{function_type = (index, memref<?xf32>, f32) -> f32, sym_name = "f"}> ({
  ^bb0(%n: index, %m: memref<?xf32>, %init: f32):
    %c0 = "arith.constant"() <{value = 0 : index}> : () -> index
    %c1 = "arith.constant"() <{value = 1 : index}> : () -> index
    "scf.parallel"(%c0, %n, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
    ^bb0(%i: index):
      "memref.store"(%init, %m, %i) : (f32, memref<?xf32>, index) -> ()
      "scf.reduce"() : () -> ()
    }) : (index, index, index) -> ()
    %r = "scf.parallel"(%c0, %n, %c1, %init) <{operandSegmentSizes = array<i32: 1, 1, 1, 1>}> ({
    ^bb0(%i: index):
      %x = "memref.load"(%m, %i) : (memref<?xf32>, index) -> f32
      "scf.reduce"(%x) ({
      ^bb0(%a: f32, %b: f32):
        %s = "arith.addf"(%a, %b) <{fastmath = #arith.fastmath<none>}> : (f32, f32) -> f32
        "scf.reduce.return"(%s) : (f32) -> ()
      }) : (f32) -> ()
    }) : (index, index, index, f32) -> f32
    "func.return"(%r) : (f32) -> ()
  }) : () -> ()
}) : () -> ()

// CHECK:      scf.parallel (%i) = (%c0) to (%n) step (%c1) {
// CHECK-NEXT:   memref.store %init, %m[%i] : memref<?xf32>
// CHECK-NEXT:   scf.reduce{{$}}
// CHECK-NEXT: }
// CHECK-NEXT: %r = scf.parallel (%i_1) = (%c0) to (%n) step (%c1) init (%init) -> f32 {
// CHECK-NEXT:   %x = memref.load %m[%i_1] : memref<?xf32>
// CHECK-NEXT:   scf.reduce(%x : f32) {
// CHECK-NEXT:   ^bb0(%a: f32, %b: f32):
// CHECK-NEXT:     %s = arith.addf %a, %b : f32
// CHECK-NEXT:     scf.reduce.return %s : f32
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK-NEXT: func.return %r : f32
