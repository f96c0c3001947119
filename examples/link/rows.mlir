// Row blocks of an array handed to the user's C code (examples/link/rows.c): each task
// passes two rows as a view. dhir assumes a call reads and writes all of every memref it
// is passed, so the tasks run one after another, wherever they are placed.
func.func private @normalize_rows(memref<?x?xf64, strided<[?, ?], offset: ?>>) attributes {llvm.emit_c_interface}

func.func @main(%a: memref<8x16xf64>) {
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %a {
      %rows = memref.subview %a[0, 0] [2, 16] [1, 1] : memref<8x16xf64> to memref<2x16xf64, strided<[16, 1]>>
      %v = memref.cast %rows : memref<2x16xf64, strided<[16, 1]>> to memref<?x?xf64, strided<[?, ?], offset: ?>>
      func.call @normalize_rows(%v) : (memref<?x?xf64, strided<[?, ?], offset: ?>>) -> ()
    }
    %t1 = dhir.task %cpu, %a {
      %rows = memref.subview %a[2, 0] [2, 16] [1, 1] : memref<8x16xf64> to memref<2x16xf64, strided<[16, 1], offset: 32>>
      %v = memref.cast %rows : memref<2x16xf64, strided<[16, 1], offset: 32>> to memref<?x?xf64, strided<[?, ?], offset: ?>>
      func.call @normalize_rows(%v) : (memref<?x?xf64, strided<[?, ?], offset: ?>>) -> ()
    }
    %t2 = dhir.task %cpu, %a {
      %rows = memref.subview %a[4, 0] [2, 16] [1, 1] : memref<8x16xf64> to memref<2x16xf64, strided<[16, 1], offset: 64>>
      %v = memref.cast %rows : memref<2x16xf64, strided<[16, 1], offset: 64>> to memref<?x?xf64, strided<[?, ?], offset: ?>>
      func.call @normalize_rows(%v) : (memref<?x?xf64, strided<[?, ?], offset: ?>>) -> ()
    }
    %t3 = dhir.task %cpu, %a {
      %rows = memref.subview %a[6, 0] [2, 16] [1, 1] : memref<8x16xf64> to memref<2x16xf64, strided<[16, 1], offset: 96>>
      %v = memref.cast %rows : memref<2x16xf64, strided<[16, 1], offset: 96>> to memref<?x?xf64, strided<[?, ?], offset: ?>>
      func.call @normalize_rows(%v) : (memref<?x?xf64, strided<[?, ?], offset: ?>>) -> ()
    }
  }
  return
}
