// Access regions through integer casts of every signedness and width, and through
// arith.select of memrefs: a cast reads its operand as its own signed or unsigned value
// (an iN value wraps modulo 2^N), and a memref that may be either of two is a may-access
// of each, never a must-write.
// RUN: dhir-opt %s -p dhir-annotate-dependences | filecheck %s

func.func @casts(%a: memref<8xi32>, %w: memref<256xi32>, %flag: i1) {
  dhir.schedule %a, %w {
    %cpu = dhir.target {kind = "cpu"}
    // -2 : i3 read unsigned is 6 (the user's program); read signed, -2 (+ 4 = 2).
    // CHECK: %unsigned = dhir.task {{.*}}dhir.write_regions = ["must { [x0 = 6]; [x0 = 2] }"]
    %unsigned = dhir.task %cpu, %a {
      %c = arith.constant -2 : i3
      %i = arith.index_castui %c : i3 to index
      %s = arith.index_cast %c : i3 to index
      %c4 = arith.constant 4 : index
      %j = arith.addi %s, %c4 : index
      %x = arith.constant 7 : i32
      memref.store %x, %a[%i] : memref<8xi32>
      memref.store %x, %a[%j] : memref<8xi32>
    }
    // An i3 loop from -4 to 3 through index_castui: rows 0-2 and 4-7.
    // CHECK: %loop = dhir.task {{.*}}dhir.write_regions = ["must { [x0] : 0 <= x0 <= 7 and 8*floor((-3 + x0)/8) <= -4 + x0 }"]
    %loop = dhir.task %cpu, %a {
      %lo = arith.constant -4 : i3
      %hi = arith.constant 3 : i3
      %one = arith.constant 1 : i3
      scf.for %i = %lo to %hi step %one : i3 {
        %x = arith.index_castui %i : i3 to index
        %v = arith.extsi %i : i3 to i32
        memref.store %v, %a[%x] : memref<8xi32>
      }
    }
    // Extensions read their own signedness: extui -1 : i3 is 7, extsi -1 : i3 then
    // index_castui of the i8 is 255; trunci of 13 to i3 read unsigned is 5; true read
    // unsigned is 1, signed -1 (+ 3 = 2).
    // CHECK: %widths = dhir.task {{.*}}dhir.write_regions = ["must { [x0] : 0 < x0 <= 2; [x0 = 255]; [x0 = 7]; [x0 = 5] }"]
    %widths = dhir.task %cpu, %w {
      %m1 = arith.constant -1 : i3
      %z = arith.extui %m1 : i3 to i8
      %zi = arith.index_cast %z : i8 to index
      %s = arith.extsi %m1 : i3 to i8
      %si = arith.index_castui %s : i8 to index
      %c13 = arith.constant 13 : index
      %t32 = arith.index_cast %c13 : index to i32
      %t3 = arith.trunci %t32 : i32 to i3
      %ti = arith.index_castui %t3 : i3 to index
      %true = arith.constant true
      %bu = arith.index_castui %true : i1 to index
      %bs = arith.index_cast %true : i1 to index
      %c3 = arith.constant 3 : index
      %b3 = arith.addi %bs, %c3 : index
      %x = arith.constant 1 : i32
      memref.store %x, %w[%zi] : memref<256xi32>
      memref.store %x, %w[%si] : memref<256xi32>
      memref.store %x, %w[%ti] : memref<256xi32>
      memref.store %x, %w[%bu] : memref<256xi32>
      memref.store %x, %w[%b3] : memref<256xi32>
    }
    // A loop variable truncated to i3 and read back unsigned: i mod 8, for i in 0..12.
    // An i64 loop is exact.
    // CHECK: %wrap = dhir.task {{.*}}dhir.write_regions = ["must { [x0] : 0 <= x0 <= 103 and (x0 >= 100 or x0 <= 7) }"]
    %wrap = dhir.task %cpu, %w {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c13 = arith.constant 13 : index
      %x = arith.constant 2 : i32
      scf.for %i = %c0 to %c13 step %c1 {
        %n = arith.index_cast %i : index to i3
        %k = arith.index_castui %n : i3 to index
        memref.store %x, %w[%k] : memref<256xi32>
      }
      %lo = arith.constant 100 : i64
      %hi = arith.constant 104 : i64
      %one = arith.constant 1 : i64
      scf.for %i = %lo to %hi step %one : i64 {
        %k = arith.index_castui %i : i64 to index
        memref.store %x, %w[%k] : memref<256xi32>
      }
    }
  }
  return
}

func.func @select(%a: memref<8xi32>, %b: memref<8xi32>, %flag: i1) {
  dhir.schedule %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    // A store through a select of %a and %b may write either; neither surely.
    // CHECK: %both = dhir.task {{.*}}dhir.write_regions = ["may { [x0 = 1] }", "may { [x0 = 1] }"]
    %both = dhir.task %cpu, %a, %b {
      %m = arith.select %flag, %a, %b : memref<8xi32>
      %c1 = arith.constant 1 : index
      %x = arith.constant 7 : i32
      memref.store %x, %m[%c1] : memref<8xi32>
    }
    // Through a subview of the select, in a loop, reading the other choice: rows 2..5
    // of either may be written, rows 1..4 of either read.
    // CHECK: %view = dhir.task {{.*}}dhir.read_regions = ["{ [x0] : 0 < x0 <= 4 }", "{ [x0] : 0 < x0 <= 4 }"], dhir.write_regions = ["may { [x0] : 2 <= x0 <= 5 }", "may { [x0] : 2 <= x0 <= 5 }"]
    %view = dhir.task %cpu, %a, %b {
      %src = arith.select %flag, %a, %b : memref<8xi32>
      %dst = arith.select %flag, %b, %a : memref<8xi32>
      %sub = memref.subview %dst[1] [6] [1] : memref<8xi32> to memref<6xi32, strided<[1], offset: 1>>
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      scf.for %i = %c0 to %c4 step %c1 {
        %ip = arith.addi %i, %c1 : index
        %v = memref.load %src[%ip] : memref<8xi32>
        memref.store %v, %sub[%ip] : memref<6xi32, strided<[1], offset: 1>>
      }
    }
    // A select of %a and a local buffer may write %a (not surely); the same memref
    // twice is that memref: a must-write.
    // CHECK: %local = dhir.task {{.*}}dhir.write_regions = ["may { [x0 = 3] }", "must { [x0 = 4] }"]
    %local = dhir.task %cpu, %a, %b {
      %tmp = memref.alloca() : memref<8xi32>
      %m = arith.select %flag, %a, %tmp : memref<8xi32>
      %same = arith.select %flag, %b, %b : memref<8xi32>
      %c3 = arith.constant 3 : index
      %c4 = arith.constant 4 : index
      %x = arith.constant 7 : i32
      memref.store %x, %m[%c3] : memref<8xi32>
      memref.store %x, %same[%c4] : memref<8xi32>
    }
  }
  return
}
