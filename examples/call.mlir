// A task that calls a function: dhir cannot see what @scale does to its argument,
// so it counts as reading and writing it; the next task must wait for it.
func.func @scale(%m: memref<4x4xf32>, %k: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %c4 step %c1 {
      %v = memref.load %m[%i, %j] : memref<4x4xf32>
      %w = arith.mulf %v, %k : f32
      memref.store %w, %m[%i, %j] : memref<4x4xf32>
    }
  }
  return
}

func.func @main(%m: memref<4x4xf32>, %out: memref<4xf32>, %k: f32) {
  dhir.schedule %m, %out, %k {
    %cpu = dhir.target {kind = "cpu"}
    %scaled = dhir.task %cpu, %m {
      func.call @scale(%m, %k) : (memref<4x4xf32>, f32) -> ()
    }
    %rowsum = dhir.task %cpu, %m, %out {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %zero = arith.constant 0.0 : f32
      scf.for %i = %c0 to %c4 step %c1 {
        %s = scf.for %j = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
          %v = memref.load %m[%i, %j] : memref<4x4xf32>
          %n = arith.addf %acc, %v : f32
          scf.yield %n : f32
        }
        memref.store %s, %out[%i] : memref<4xf32>
      }
    }
  }
  return
}
