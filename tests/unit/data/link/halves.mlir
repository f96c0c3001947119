// A bf16 view and an f16 memref passed to C (halves.c), which reads and writes their bits.
func.func private @negate_bits(memref<?xbf16, strided<[?], offset: ?>>, memref<?xi16, strided<[?], offset: ?>>) attributes {llvm.emit_c_interface}
func.func private @negate_half(memref<6xf16>, memref<?xi16, strided<[?], offset: ?>>) attributes {llvm.emit_c_interface}

func.func @main(%h: memref<6xf16>, %bits: memref<9xi16>, %out: memref<6xf32>) {
  dhir.schedule %h, %bits, %out {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %h, %bits, %out {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c6 = arith.constant 6 : index
      %buf = memref.alloc() : memref<6xbf16>
      scf.for %i = %c0 to %c6 step %c1 {
        %x = memref.load %h[%i] : memref<6xf16>
        %y = arith.extf %x : f16 to f32
        %b = arith.truncf %y : f32 to bf16
        memref.store %b, %buf[%i] : memref<6xbf16>
      }
      %v = memref.subview %buf[1] [3] [2] : memref<6xbf16> to memref<3xbf16, strided<[2], offset: 1>>
      %w = memref.cast %v : memref<3xbf16, strided<[2], offset: 1>> to memref<?xbf16, strided<[?], offset: ?>>
      %o = memref.subview %bits[0] [3] [1] : memref<9xi16> to memref<3xi16, strided<[1]>>
      %p = memref.cast %o : memref<3xi16, strided<[1]>> to memref<?xi16, strided<[?], offset: ?>>
      func.call @negate_bits(%w, %p) : (memref<?xbf16, strided<[?], offset: ?>>, memref<?xi16, strided<[?], offset: ?>>) -> ()
      %q = memref.subview %bits[3] [6] [1] : memref<9xi16> to memref<6xi16, strided<[1], offset: 3>>
      %r = memref.cast %q : memref<6xi16, strided<[1], offset: 3>> to memref<?xi16, strided<[?], offset: ?>>
      func.call @negate_half(%h, %r) : (memref<6xf16>, memref<?xi16, strided<[?], offset: ?>>) -> ()
      scf.for %i = %c0 to %c6 step %c1 {
        %b = memref.load %buf[%i] : memref<6xbf16>
        %y = arith.extf %b : bf16 to f32
        memref.store %y, %out[%i] : memref<6xf32>
      }
    }
  }
  return
}
