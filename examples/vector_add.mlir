// The proposal's example with both tasks on CPUs: c = a + b, then a = c * 2.
// Run it: dhir run examples/vector_add.mlir -n 2 --input a.npy --input b.npy --input c.npy --print
// (or with no inputs from Python: dhir.run("examples/vector_add.mlir", a, b, c, ranks=2)).
func.func @main(%a: memref<20xi32>, %b: memref<20xi32>, %c: memref<20xi32>) {
  dhir.schedule %a, %b, %c {
    %cpu = dhir.target {arch = "x86_64"}
    %any = dhir.target {kind = "cpu"}
    %add = dhir.task %cpu, %a, %b, %c {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c20 = arith.constant 20 : index
      scf.parallel (%i) = (%c0) to (%c20) step (%c1) {
        %x = memref.load %a[%i] : memref<20xi32>
        %y = memref.load %b[%i] : memref<20xi32>
        %z = arith.addi %x, %y : i32
        memref.store %z, %c[%i] : memref<20xi32>
      }
    }
    %double = dhir.task %any, %c, %a {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c20 = arith.constant 20 : index
      %two = arith.constant 2 : i32
      scf.for %i = %c0 to %c20 step %c1 {
        %v = memref.load %c[%i] : memref<20xi32>
        %w = arith.muli %v, %two : i32
        memref.store %w, %a[%i] : memref<20xi32>
      }
    }
  }
  return
}
