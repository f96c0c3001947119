// Scalars in and out of C (tests/unit/data/link/kernel.c), and a memref passed as its
// descriptor's fields (no llvm.emit_c_interface).
func.func private @sum_plain(memref<16xf64>) -> f64
func.func private @twice(i32) -> i32

func.func @main(%b: memref<16xf64>, %out: memref<1xf64>, %n: memref<1xi32>) {
  dhir.schedule %b, %out, %n {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %b, %out {
      %s = func.call @sum_plain(%b) : (memref<16xf64>) -> f64
      %c0 = arith.constant 0 : index
      memref.store %s, %out[%c0] : memref<1xf64>
    }
    %t1 = dhir.task %cpu, %n {
      %c0 = arith.constant 0 : index
      %x = memref.load %n[%c0] : memref<1xi32>
      %y = func.call @twice(%x) : (i32) -> i32
      memref.store %y, %n[%c0] : memref<1xi32>
    }
  }
  return
}
