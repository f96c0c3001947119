func.func @main(%a: memref<4xi32>, %b: memref<4xi32>, %flag: i1) {
  dhir.schedule %a, %b, %flag {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %a {
      %c0 = arith.constant 0 : index
      %v = arith.constant 7 : i32
      memref.store %v, %a[%c0] : memref<4xi32>
    }
    %t1 = dhir.task %cpu, %a, %b {
      %c0 = arith.constant 0 : index
      cf.cond_br %flag, ^yes, ^no
    ^yes:
      %x = memref.load %a[%c0] : memref<4xi32>
      memref.store %x, %b[%c0] : memref<4xi32>
      cf.br ^done
    ^no:
      %m = arith.constant -1 : i32
      memref.store %m, %b[%c0] : memref<4xi32>
      cf.br ^done
    ^done:
      dhir.yield
    }
  }
  return
}
