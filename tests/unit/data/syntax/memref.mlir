memref.global "private" @g : memref<4xf32> = dense<0.0>
memref.global "private" constant @k : memref<2xi32> = dense<[1, 2]>
func.func @buffers(%m: memref<4x8xf32>, %d: memref<?xf32>, %n: index, %f: f32) {
  %c0 = arith.constant 0 : index
  %a = memref.alloc(%n) : memref<?xf32>
  %s = memref.alloca() : memref<4xf32>
  %g = memref.get_global @g : memref<4xf32>
  memref.copy %g, %s : memref<4xf32> to memref<4xf32>
  memref.copy %s, %d : memref<4xf32> to memref<?xf32>
  %v = memref.subview %m[1, 2] [2, 4] [1, 1] : memref<4x8xf32> to memref<2x4xf32, strided<[8, 1], offset: 10>>
  %cst = memref.cast %s : memref<4xf32> to memref<?xf32>
  %dim = memref.dim %a, %c0 : memref<?xf32>
  %x = memref.load %v[%c0, %c0] : memref<2x4xf32, strided<[8, 1], offset: 10>>
  memref.store %x, %a[%dim] : memref<?xf32>
  %r = memref.atomic_rmw addf %f, %a[%c0] : (f32, memref<?xf32>) -> f32
  %base, %off, %sz:2, %st:2 = memref.extract_strided_metadata %m : memref<4x8xf32> -> memref<f32>, index, index, index, index, index
  %re = memref.reinterpret_cast %base to offset: [0], sizes: [32], strides: [1] : memref<f32> to memref<32xf32>
  %e = memref.expand_shape %s [[0, 1]] output_shape [2, 2] : memref<4xf32> into memref<2x2xf32>
  %c = memref.collapse_shape %m [[0, 1]] : memref<4x8xf32> into memref<32xf32>
  %t = memref.transpose %m (i, j) -> (j, i) : memref<4x8xf32> to memref<8x4xf32, strided<[1, 8]>>
  %tv = memref.transpose %v (d0, d1) -> (d1, d0) {note} : memref<2x4xf32, strided<[8, 1], offset: 10>> to memref<4x2xf32, strided<[1, 8], offset: 10>>
  memref.dealloc %a : memref<?xf32>
  return
}
