// The proposal's example, exactly as written there (made concrete): it parses,
// verifies, prints in canonical form, and the canonical and generic forms parse back.
// RUN: dhir-opt %s | filecheck %s
// RUN: dhir-opt %s | dhir-opt | filecheck %s
// RUN: dhir-opt %s --print-op-generic | dhir-opt | filecheck %s

func.func @main(%a: memref<20xi32>, %b: memref<20xi32>, %c: memref<20xi32>) {
  dhir.schedule %a, %b, %c {
    %cpu = dhir.target{arch = "x86_64"}
    %gpu = dhir.target{arch = "sm_90"}
    %task1 = dhir.task %cpu, %a, %b, %c {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c20 = arith.constant 20 : index
      scf.parallel (%i) = (%c0) to (%c20) step (%c1) {
        %x = memref.load %a[%i] : memref<20xi32>
        %y = memref.load %b[%i] : memref<20xi32>
        %z = arith.addi %x, %y : i32
        memref.store %z, %c[%i] : memref<20xi32>
      }
    }
    %task3 = dhir.task %gpu, %c, %a {
      %c1 = arith.constant 1 : index
      %c20 = arith.constant 20 : index
      gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
                 threads(%tx, %ty, %tz) in (%sx = %c20, %sy = %c1, %sz = %c1) {
        %v = memref.load %c[%tx] : memref<20xi32>
        memref.store %v, %a[%tx] : memref<20xi32>
        gpu.terminator
      }
    }
  }
  return
}

// CHECK:      func.func @main(%a: memref<20xi32>, %b: memref<20xi32>, %c: memref<20xi32>) {
// CHECK-NEXT:   dhir.schedule %a, %b, %c {
// CHECK-NEXT:     %cpu = dhir.target {arch = "x86_64"}
// CHECK-NEXT:     %gpu = dhir.target {arch = "sm_90"}
// CHECK-NEXT:     %task1 = dhir.task %cpu, %a, %b, %c {
// CHECK-NEXT:       %c0 = arith.constant 0 : index
// CHECK-NEXT:       %c1 = arith.constant 1 : index
// CHECK-NEXT:       %c20 = arith.constant 20 : index
// CHECK-NEXT:       scf.parallel (%i) = (%c0) to (%c20) step (%c1) {
// CHECK-NEXT:         %x = memref.load %a[%i] : memref<20xi32>
// CHECK-NEXT:         %y = memref.load %b[%i] : memref<20xi32>
// CHECK-NEXT:         %z = arith.addi %x, %y : i32
// CHECK-NEXT:         memref.store %z, %c[%i] : memref<20xi32>
// CHECK-NEXT:         scf.reduce
// CHECK-NEXT:       }
// CHECK-NEXT:     }
// CHECK-NEXT:     %task3 = dhir.task %gpu, %c, %a {
// CHECK-NEXT:       %c1_1 = arith.constant 1 : index
// CHECK-NEXT:       %c20_1 = arith.constant 20 : index
// CHECK-NEXT:       gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1_1, %gy = %c1_1, %gz = %c1_1) threads(%tx, %ty, %tz) in (%sx = %c20_1, %sy = %c1_1, %sz = %c1_1) {
// CHECK-NEXT:         %v = memref.load %c[%tx] : memref<20xi32>
// CHECK-NEXT:         memref.store %v, %a[%tx] : memref<20xi32>
// CHECK-NEXT:         gpu.terminator
// CHECK-NEXT:       }
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   func.return
// CHECK-NEXT: }
