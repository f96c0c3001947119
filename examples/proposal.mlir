// The proposal's example, made concrete: a CPU task adds two vectors, a GPU task
// copies the sum back into the first one.
func.func @main(%a: memref<20xi32>, %b: memref<20xi32>, %c: memref<20xi32>) {
  dhir.schedule %a, %b, %c {
    %cpu = dhir.target{arch = "x86_64"}
    %gpu = dhir.target{arch = "sm_90"}
    %task1 = dhir.task %cpu, %a, %b, %c {
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
    %task3 = dhir.task %gpu, %c, %a {
      %c1 = arith.constant 1 : index
      %c20 = arith.constant 20 : index
      gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
                 threads(%tx, %ty, %tz) in (%sx = %c20, %sy = %c1, %sz = %c1) {
        %v = memref.load %c[%tx] : memref<20xi32>
        memref.store %v, %a[%tx] : memref<20xi32>
        gpu.terminator
      }
    }
  }
  return
}
