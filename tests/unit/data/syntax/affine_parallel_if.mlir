#set = affine_set<(d0)[s0] : (d0 - 10 >= 0, s0 - d0 - 1 >= 0)>
#eq = affine_set<(d0, d1) : (d0 - d1 == 0)>
func.func @parallel(%m: memref<64x64xf32>, %n: index, %k: index, %f: f32) -> (f32, f32, i32) {
  affine.parallel (%i, %j) = (0, 0) to (%n, 10) step (1, 2) {
    affine.store %f, %m[%i, %j] : memref<64x64xf32>
  }
  affine.parallel (%i, %j) = (max(0, %n - 4), symbol(%k)) to (min(symbol(%n), 60, %k * 2 + 1), %n floordiv 2) {
    %v = affine.load %m[%i, %j] : memref<64x64xf32>
    affine.store %v, %m[%j, %i] : memref<64x64xf32>
    %w = affine.load %m[symbol(%n), %n + %i] : memref<64x64xf32>
    affine.store %w, %m[%i, symbol(%k) + %k] : memref<64x64xf32>
  } {note = "kept"}
  affine.parallel (%i) = (max(symbol(%n), %n, 3)) to (min(%n, symbol(%n), %k)) step (3) {
  }
  affine.parallel () = () to () {
  }
  %s:2 = affine.parallel (%i, %j) = (0, 0) to (%n, 16) reduce ("addf", "maximumf") -> (f32, f32) {
    %v = affine.load %m[%i, %j] : memref<64x64xf32>
    affine.yield %v, %v : f32, f32
  }
  %t = affine.parallel (%i) = (0) to (8) step (2) reduce ("muli") -> (i32) {
    %c = arith.index_cast %i : index to i32
    affine.yield %c : i32
  }
  %u:3 = affine.parallel (%i) = (0) to (8) reduce ("addi", "andi", "ori") -> (i64, i64, i64) {
    %c = arith.index_cast %i : index to i64
    affine.yield %c, %c, %c : i64, i64, i64
  }
  %g = affine.parallel (%i) = (0) to (4) reduce ("minimumf") -> f64 {
    %z = arith.constant 1.5 : f64
    affine.yield %z : f64
  }
  return %s#0, %s#1, %t : f32, f32, i32
}

func.func @conditions(%m: memref<64xf32>, %n: index, %f: f32) -> f32 {
  affine.for %i = 0 to 64 {
    affine.if #set(%i)[%n] {
      affine.store %f, %m[%i] : memref<64xf32>
    }
    affine.if affine_set<(d0)[s0] : (d0 - 10 >= 0, s0 - d0 - 1 >= 0)>(%i)[%n] {
      affine.store %f, %m[%i] : memref<64xf32>
    } else {
      %v = affine.load %m[%i] : memref<64xf32>
      affine.store %v, %m[%i + 1 - 1] : memref<64xf32>
    }
    affine.if #eq(%i, %n) {
    } else {
    } {note}
    affine.if affine_set<()[s0] : (s0 mod 2 == 0, s0 floordiv 3 - 1 >= 0)>()[%n] {
    }
  }
  %r = affine.if #set(%n)[%n] -> f32 {
    %v = affine.load %m[%n] : memref<64xf32>
    affine.yield %v : f32
  } else {
    affine.yield %f : f32
  }
  %p:2 = affine.if affine_set<(d0) : (d0 >= 0)>(%n) -> (f32, index) {
    affine.yield %r, %n : f32, index
  } else {
    %c = arith.constant 0 : index
    affine.yield %f, %c : f32, index
  }
  %q = affine.parallel (%i) = (0) to (%n) reduce ("addf") -> (f32) {
    %w = affine.if #set(%i)[%n] -> (f32) {
      affine.yield %p#0 : f32
    } else {
      affine.yield %f : f32
    }
    affine.yield %w : f32
  }
  return %q : f32
}
