// A schedule inside a time loop: each step smooths u into v on one task and copies
// v back into u on another; host code in the loop sees the data every step.
func.func @main(%u: memref<16xf64>, %v: memref<16xf64>, %steps: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %t = %c0 to %steps step %c1 {
    dhir.schedule %u, %v {
      %cpu = dhir.target {kind = "cpu"}
      %smooth = dhir.task %cpu, %u, %v {
        %one = arith.constant 1 : index
        %c15 = arith.constant 15 : index
        %half = arith.constant 0.5 : f64
        scf.for %i = %one to %c15 step %one {
          %im = arith.subi %i, %one : index
          %ip = arith.addi %i, %one : index
          %a = memref.load %u[%im] : memref<16xf64>
          %b = memref.load %u[%ip] : memref<16xf64>
          %s = arith.addf %a, %b : f64
          %m = arith.mulf %s, %half : f64
          memref.store %m, %v[%i] : memref<16xf64>
        }
      }
      %copy = dhir.task %cpu, %v, %u {
        %one = arith.constant 1 : index
        %c15 = arith.constant 15 : index
        scf.for %i = %one to %c15 step %one {
          %x = memref.load %v[%i] : memref<16xf64>
          memref.store %x, %u[%i] : memref<16xf64>
        }
      }
    }
  }
  return
}
