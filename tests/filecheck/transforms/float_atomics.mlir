// dhir-float-atomics: a float memref.generic_atomic_rmw in host code becomes a load, its
// body and a store; one in device code (a gpu.launch body, not yet outlined, or a kernel
// in a gpu.module) stays atomic: its threads run at once.
// RUN: dhir-opt %s -p dhir-float-atomics | filecheck %s

// CHECK-LABEL: func.func @host
func.func @host(%a: memref<4xf32>, %c: f32, %i: index) {
  // CHECK:      %[[X:.*]] = memref.load %a[%i] : memref<4xf32>
  // CHECK-NEXT: %[[S:.*]] = arith.addf %[[X]], %c : f32
  // CHECK-NEXT: memref.store %[[S]], %a[%i] : memref<4xf32>
  // CHECK-NOT:  generic_atomic_rmw
  %x = memref.generic_atomic_rmw %a[%i] : memref<4xf32> {
  ^bb0(%cur: f32):
    %s = arith.addf %cur, %c : f32
    memref.atomic_yield %s : f32
  }
  return
}

// CHECK-LABEL: func.func @launch
func.func @launch(%a: memref<4xf32>, %c: f32) {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    %zero = arith.constant 0 : index
    // CHECK: memref.generic_atomic_rmw %a[%zero] : memref<4xf32>
    %x = memref.generic_atomic_rmw %a[%zero] : memref<4xf32> {
    ^bb0(%cur: f32):
      %s = arith.addf %cur, %c : f32
      memref.atomic_yield %s : f32
    }
    gpu.terminator
  }
  return
}

// CHECK-LABEL: gpu.module @kernels
gpu.module @kernels {
  gpu.func @k(%a: memref<4xf32>, %c: f32, %i: index) kernel {
    // CHECK: memref.generic_atomic_rmw %a[%i] : memref<4xf32>
    %x = memref.generic_atomic_rmw %a[%i] : memref<4xf32> {
    ^bb0(%cur: f32):
      %s = arith.addf %cur, %c : f32
      memref.atomic_yield %s : f32
    }
    gpu.return
  }
}
