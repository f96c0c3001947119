// A rank that dies mid-run, chosen by %mode: 0 none, 1 the task on rank 1 sleeps %arg
// seconds (for a test to kill it from outside), 2 it calls abort(), 3 it divides by %arg
// (give 0: SIGFPE), 4 it calls exit(%arg).
func.func private @sleep(i32) -> i32
func.func private @abort()
func.func private @exit(i32)
func.func @main(%a: memref<4xi32>, %mode: i32, %arg: i32) {
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %first = dhir.task %cpu, %a attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %one = arith.constant 1 : i32
      memref.store %one, %a[%c0] : memref<4xi32>
    }
    %dies = dhir.task %cpu, %a attributes {dhir.rank = 1 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %x = memref.load %a[%c0] : memref<4xi32>
      %m1 = arith.constant 1 : i32
      %m2 = arith.constant 2 : i32
      %m3 = arith.constant 3 : i32
      %m4 = arith.constant 4 : i32
      %is1 = arith.cmpi eq, %mode, %m1 : i32
      scf.if %is1 {
        %slept = func.call @sleep(%arg) : (i32) -> i32
      }
      %is2 = arith.cmpi eq, %mode, %m2 : i32
      scf.if %is2 {
        func.call @abort() : () -> ()
      }
      %is3 = arith.cmpi eq, %mode, %m3 : i32
      %q = scf.if %is3 -> (i32) {
        %d = arith.divsi %x, %arg : i32
        scf.yield %d : i32
      } else {
        scf.yield %x : i32
      }
      %is4 = arith.cmpi eq, %mode, %m4 : i32
      scf.if %is4 {
        func.call @exit(%arg) : (i32) -> ()
      }
      %y = arith.addi %q, %m1 : i32
      memref.store %y, %a[%c1] : memref<4xi32>
    }
    %last = dhir.task %cpu, %a attributes {dhir.rank = 0 : i64} {
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %x = memref.load %a[%c1] : memref<4xi32>
      %one = arith.constant 1 : i32
      %y = arith.addi %x, %one : i32
      memref.store %y, %a[%c2] : memref<4xi32>
    }
  }
  return
}
