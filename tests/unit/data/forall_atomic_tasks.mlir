func.func @main(%a: memref<16xi32>, %b: memref<4x8xf64>) {
  dhir.schedule %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    %t1 = dhir.task %cpu, %a {
      %c3 = arith.constant 3 : i32
      scf.forall (%i) = (0) to (16) step (3) {
        %o = memref.generic_atomic_rmw %a[%i] : memref<16xi32> {
        ^bb0(%cur: i32):
          %n = arith.muli %cur, %c3 : i32
          %m = arith.addi %n, %c3 : i32
          memref.atomic_yield %m : i32
        }
      }
    }
    %t2 = dhir.task %cpu, %b, %a {
      scf.forall (%i, %j) in (4, 8) {
        %c0 = arith.constant 0 : index
        %v = memref.load %a[%i] : memref<16xi32>
        %f = arith.sitofp %v : i32 to f64
        %o = memref.generic_atomic_rmw %b[%i, %j] : memref<4x8xf64> {
        ^bb0(%cur: f64):
          %s = arith.addf %cur, %f : f64
          memref.atomic_yield %s : f64
        }
        memref.store %o, %b[%i, %c0] : memref<4x8xf64>
      }
    }
  }
  return
}
