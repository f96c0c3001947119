// Two schedules with host code between them: the host reads what the first
// schedule wrote (on whichever rank) and writes what the second one reads.
func.func @main(%a: memref<6xi64>, %b: memref<6xi64>) {
  dhir.schedule %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    %clear = dhir.task %cpu, %b {
      %c0 = arith.constant 0 : index
      %zero = arith.constant 0 : i64
      memref.store %zero, %b[%c0] : memref<6xi64>
    }
    %fill = dhir.task %cpu, %a {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c6 = arith.constant 6 : index
      scf.for %i = %c0 to %c6 step %c1 {
        %v = arith.index_cast %i : index to i64
        %w = arith.muli %v, %v : i64
        memref.store %w, %a[%i] : memref<6xi64>
      }
    }
  }
  // Host code, on every rank: b[i] = a[i] + a[5].
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %last = memref.load %a[%c5] : memref<6xi64>
  scf.for %i = %c0 to %c6 step %c1 {
    %v = memref.load %a[%i] : memref<6xi64>
    %w = arith.addi %v, %last : i64
    memref.store %w, %b[%i] : memref<6xi64>
  }
  dhir.schedule %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    %sum = dhir.task %cpu, %a, %b {
      %z = arith.constant 0 : index
      %one = arith.constant 1 : index
      %six = arith.constant 6 : index
      scf.for %i = %z to %six step %one {
        %x = memref.load %a[%i] : memref<6xi64>
        %y = memref.load %b[%i] : memref<6xi64>
        %s = arith.addi %x, %y : i64
        memref.store %s, %a[%i] : memref<6xi64>
      }
    }
  }
  return
}
