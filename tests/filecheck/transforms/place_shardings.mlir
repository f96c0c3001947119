// Shardings on a schedule's operands place the tasks that write within one rank's
// rows (dhir.placement.hints): %a's 16 rows split over 4 ranks, 4 each. The tasks come
// in reverse order, where round-robin alone would give task K rank K; the last writes
// rows of two ranks' blocks, so placement chooses its rank as it would.
// RUN: dhir-opt %s -p 'dhir-place{ranks=4}' | filecheck %s
// RUN: dhir-opt %s -p 'dhir-place{ranks=4 algorithm=best}' | filecheck %s
// A sharding dhir cannot follow is an error at the schedule.
// RUN: sed 's/axisarray\[\[0\]\]/axisarray[[], [0]]/' %s | not dhir-opt -p 'dhir-place{ranks=4}' 2>&1 | filecheck %s --check-prefix=BAD

func.func @main(%a: memref<16xf64>) {
  dhir.schedule %a attributes {dhir.shardings = [#shard<axisarray[[0]]>]} {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %a {
      %lo = arith.constant 12 : index
      %hi = arith.constant 16 : index
      %c1 = arith.constant 1 : index
      %v = arith.constant 0.0 : f64
      scf.for %i = %lo to %hi step %c1 {
        memref.store %v, %a[%i] : memref<16xf64>
      }
    }
    %t1 = dhir.task %cpu, %a {
      %lo = arith.constant 8 : index
      %hi = arith.constant 12 : index
      %c1 = arith.constant 1 : index
      %v = arith.constant 1.0 : f64
      scf.for %i = %lo to %hi step %c1 {
        memref.store %v, %a[%i] : memref<16xf64>
      }
    }
    %t2 = dhir.task %cpu, %a {
      %lo = arith.constant 4 : index
      %hi = arith.constant 8 : index
      %c1 = arith.constant 1 : index
      %v = arith.constant 2.0 : f64
      scf.for %i = %lo to %hi step %c1 {
        memref.store %v, %a[%i] : memref<16xf64>
      }
    }
    %t3 = dhir.task %cpu, %a {
      %lo = arith.constant 0 : index
      %hi = arith.constant 4 : index
      %c1 = arith.constant 1 : index
      %v = arith.constant 3.0 : f64
      scf.for %i = %lo to %hi step %c1 {
        memref.store %v, %a[%i] : memref<16xf64>
      }
    }
    %t4 = dhir.task %cpu, %a {
      %lo = arith.constant 0 : index
      %hi = arith.constant 8 : index
      %c1 = arith.constant 1 : index
      %v = arith.constant 4.0 : f64
      scf.for %i = %lo to %hi step %c1 {
        memref.store %v, %a[%i] : memref<16xf64>
      }
    }
  }
  func.return
}

// CHECK: %t0 = dhir.task %cpu, %a attributes {dhir.rank = 3 : i64}
// CHECK: %t1 = dhir.task %cpu, %a attributes {dhir.rank = 2 : i64}
// CHECK: %t2 = dhir.task %cpu, %a attributes {dhir.rank = 1 : i64}
// CHECK: %t3 = dhir.task %cpu, %a attributes {dhir.rank = 0 : i64}
// CHECK: %t4 = dhir.task %cpu, %a attributes {dhir.rank =
// BAD: error: dhir.shardings: #shard<axisarray[[], [0]]> is not a sharding dhir can follow
