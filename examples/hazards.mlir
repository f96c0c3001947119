// Read-after-write, write-after-read and write-after-write hazards between tasks:
// t0: x += 10; t1: y = 2x (RAW on x); t2: x = 0 but x[0] = 5 (WAR: after t1 read x);
// t3: y[3] = 7 (WAW with t1, and only part of y).
func.func @main(%x: memref<8xf32>, %y: memref<8xf32>) {
  dhir.schedule %x, %y {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %x {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %ten = arith.constant 10.0 : f32
      scf.for %i = %c0 to %c8 step %c1 {
        %v = memref.load %x[%i] : memref<8xf32>
        %w = arith.addf %v, %ten : f32
        memref.store %w, %x[%i] : memref<8xf32>
      }
    }
    %t1 = dhir.task %cpu, %x, %y {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      scf.for %i = %c0 to %c8 step %c1 {
        %v = memref.load %x[%i] : memref<8xf32>
        %w = arith.addf %v, %v : f32
        memref.store %w, %y[%i] : memref<8xf32>
      }
    }
    %t2 = dhir.task %cpu, %x {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %zero = arith.constant 0.0 : f32
      %five = arith.constant 5.0 : f32
      scf.for %i = %c0 to %c8 step %c1 {
        memref.store %zero, %x[%i] : memref<8xf32>
      }
      memref.store %five, %x[%c0] : memref<8xf32>
    }
    %t3 = dhir.task %cpu, %y {
      %c3 = arith.constant 3 : index
      %seven = arith.constant 7.0 : f32
      memref.store %seven, %y[%c3] : memref<8xf32>
    }
  }
  return
}
