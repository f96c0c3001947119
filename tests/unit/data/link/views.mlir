// Tasks calling C (tests/unit/data/link/kernel.c): a row block of %a passed as a view
// through llvm.emit_c_interface, and %b as a bare pointer.
func.func private @scale_rows(memref<?x?xf64, strided<[?, ?], offset: ?>>, f64) attributes {llvm.emit_c_interface}
func.func private @add_one(i64, i64)

func.func @main(%a: memref<8x4xf64>, %b: memref<16xf64>) {
  dhir.schedule %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %a {
      %top = memref.subview %a[0, 0] [4, 4] [1, 1] : memref<8x4xf64> to memref<4x4xf64, strided<[4, 1]>>
      %v = memref.cast %top : memref<4x4xf64, strided<[4, 1]>> to memref<?x?xf64, strided<[?, ?], offset: ?>>
      %f = arith.constant 2.0 : f64
      func.call @scale_rows(%v, %f) : (memref<?x?xf64, strided<[?, ?], offset: ?>>, f64) -> ()
    }
    %t1 = dhir.task %cpu, %a {
      %low = memref.subview %a[4, 0] [4, 4] [1, 1] : memref<8x4xf64> to memref<4x4xf64, strided<[4, 1], offset: 16>>
      %v = memref.cast %low : memref<4x4xf64, strided<[4, 1], offset: 16>> to memref<?x?xf64, strided<[?, ?], offset: ?>>
      %f = arith.constant 3.0 : f64
      func.call @scale_rows(%v, %f) : (memref<?x?xf64, strided<[?, ?], offset: ?>>, f64) -> ()
    }
    %t2 = dhir.task %cpu, %b {
      %p = memref.extract_aligned_pointer_as_index %b : memref<16xf64> -> index
      %pi = arith.index_cast %p : index to i64
      %n = arith.constant 16 : i64
      func.call @add_one(%pi, %n) : (i64, i64) -> ()
    }
  }
  return
}
