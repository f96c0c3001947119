// dhir-optimize-bodies takes nests written with affine.for, affine.load and affine.store
// as it takes their scf form: made scf/memref/arith first (as --lower-affine makes them),
// then blocked in registers and vectorised. An affine.parallel becomes an scf.parallel, an
// affine.prefetch a memref.prefetch (dropped where the kernel runs), and a tiled loop's
// bounds move before the loops they do not vary in.
// RUN: dhir-opt %s -p 'dhir-optimize-bodies{vector_bits=256}' | filecheck %s

// CHECK-LABEL: func.func @ikj
// CHECK-NOT:     affine.for
// CHECK:         scf.parallel
// CHECK:           vector.load %C
// CHECK:           vector.load %B
// CHECK:           vector.broadcast
// CHECK-LABEL: func.func @k_innermost
// CHECK-NOT:     affine.for
// CHECK:         scf.parallel
// CHECK:           vector.load %B
// CHECK:           vector.broadcast
// CHECK-LABEL: func.func @parallel
// CHECK-NOT:     affine.
// CHECK:         scf.for %i
// CHECK:           scf.parallel (%j)
// CHECK-LABEL: func.func @tiled
// CHECK-NOT:     affine.for
// CHECK-NOT:     memref.prefetch
// CHECK:         scf.for %jj
// CHECK-NEXT:      affine.min
// CHECK:           scf.parallel
// CHECK:             vector.load %B
// CHECK:             vector.broadcast

func.func @ikj(%A: memref<8x5xf64>, %B: memref<5x16xf64>, %C: memref<8x16xf64>) {
  dhir.schedule %A, %B, %C {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %A, %B, %C {
      affine.for %i = 0 to 8 {
        affine.for %k = 0 to 5 {
          affine.for %j = 0 to 16 {
            %a = affine.load %A[%i, %k] : memref<8x5xf64>
            %b = affine.load %B[%k, %j] : memref<5x16xf64>
            %c = affine.load %C[%i, %j] : memref<8x16xf64>
            %m = arith.mulf %a, %b : f64
            %s = arith.addf %c, %m : f64
            affine.store %s, %C[%i, %j] : memref<8x16xf64>
          }
        }
      }
    }
  }
  return
}

func.func @k_innermost(%A: memref<8x5xf64>, %B: memref<5x16xf64>, %C: memref<8x16xf64>) {
  dhir.schedule %A, %B, %C {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %A, %B, %C {
      affine.for %i = 0 to 8 {
        affine.for %j = 0 to 16 {
          %c = affine.load %C[%i, %j] : memref<8x16xf64>
          %s = affine.for %k = 0 to 5 iter_args(%acc = %c) -> (f64) {
            %a = affine.load %A[%i, %k] : memref<8x5xf64>
            %b = affine.load %B[%k, %j] : memref<5x16xf64>
            %m = arith.mulf %a, %b : f64
            %n = arith.addf %acc, %m : f64
            affine.yield %n : f64
          }
          affine.store %s, %C[%i, %j] : memref<8x16xf64>
        }
      }
    }
  }
  return
}

func.func @parallel(%A: memref<8x5xf64>, %B: memref<5x16xf64>, %C: memref<8x16xf64>) {
  dhir.schedule %A, %B, %C {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %A, %B, %C {
      affine.for %i = 0 to 8 {
        affine.parallel (%j) = (0) to (16) {
          %c = affine.load %C[%i, %j] : memref<8x16xf64>
          %d = arith.addf %c, %c : f64
          affine.store %d, %C[%i, %j] : memref<8x16xf64>
        }
      }
    }
  }
  return
}

func.func @tiled(%A: memref<8x5xf64>, %B: memref<5x40xf64>, %C: memref<8x40xf64>) {
  dhir.schedule %A, %B, %C {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %A, %B, %C {
      affine.for %jj = 0 to 40 step 32 {
        affine.for %i = 0 to 8 {
          affine.for %k = 0 to 5 {
            affine.for %j = affine_map<(d0) -> (d0)>(%jj) to min affine_map<(d0) -> (d0 + 32, 40)>(%jj) {
              affine.prefetch %B[%k + 1, %j], read, locality<3>, data : memref<5x40xf64>
              %a = affine.load %A[%i, %k] : memref<8x5xf64>
              %b = affine.load %B[%k, %j] : memref<5x40xf64>
              %c = affine.load %C[%i, %j] : memref<8x40xf64>
              %m = arith.mulf %a, %b : f64
              %s = arith.addf %c, %m : f64
              affine.store %s, %C[%i, %j] : memref<8x40xf64>
            }
          }
        }
      }
    }
  }
  return
}
