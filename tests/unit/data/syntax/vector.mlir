func.func @reshape_and_slice(%v: vector<2x3x4xf32>, %w: vector<4x6xf32>) -> (vector<6x4xf32>, vector<4x2xf32>, vector<4x6xf32>) {
  %flat = vector.shape_cast %v : vector<2x3x4xf32> to vector<6x4xf32>
  %back = vector.shape_cast %flat : vector<6x4xf32> to vector<2x3x4xf32>
  %one = vector.shape_cast %back : vector<2x3x4xf32> to vector<24xf32>
  %t = vector.transpose %w, [1, 0] : vector<4x6xf32> to vector<6x4xf32>
  %t3 = vector.transpose %v, [2, 0, 1] {note} : vector<2x3x4xf32> to vector<4x2x3xf32>
  %part = vector.extract_strided_slice %t {offsets = [1, 0], sizes = [4, 2], strides = [1, 1]} : vector<6x4xf32> to vector<4x2xf32>
  %put = vector.insert_strided_slice %part, %w {offsets = [0, 3], strides = [1, 1]} : vector<4x2xf32> into vector<4x6xf32>
  %row = vector.extract_strided_slice %one {offsets = [4], sizes = [8], strides = [1]} : vector<24xf32> to vector<8xf32>
  return %flat, %part, %put : vector<6x4xf32>, vector<4x2xf32>, vector<4x6xf32>
}

func.func @masks(%n: index) -> (vector<8xi1>, vector<4x4xi1>, vector<i1>) {
  %all = vector.constant_mask [8] : vector<8xi1>
  %corner = vector.constant_mask [2, 3] : vector<4x4xi1>
  %none = vector.constant_mask [0] : vector<i1>
  %some = vector.create_mask %n : vector<8xi1>
  return %all, %corner, %none : vector<8xi1>, vector<4x4xi1>, vector<i1>
}

func.func @in_a_loop(%m: memref<16x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %z = arith.constant 0.0 : f32
  scf.for %i = %c0 to %c16 step %c1 {
    %row = vector.transfer_read %m[%i, %c0], %z : memref<16x4xf32>, vector<1x4xf32>
    %flat = vector.shape_cast %row : vector<1x4xf32> to vector<4xf32>
    %tail = vector.extract_strided_slice %flat {offsets = [2], sizes = [2], strides = [1]} : vector<4xf32> to vector<2xf32>
    %head = vector.insert_strided_slice %tail, %flat {offsets = [0], strides = [1]} : vector<2xf32> into vector<4xf32>
    %back = vector.shape_cast %head : vector<4xf32> to vector<1x4xf32>
    vector.transfer_write %back, %m[%i, %c0] : vector<1x4xf32>, memref<16x4xf32>
  }
  return
}

func.func @products_and_prints(%a: vector<4xf32>, %b: vector<3xf32>, %acc: vector<4x3xf32>, %s: f32, %i: vector<2xi32>) -> vector<4x3xf32> {
  %outer = vector.outerproduct %a, %b : vector<4xf32>, vector<3xf32>
  %sum = vector.outerproduct %a, %b, %acc : vector<4xf32>, vector<3xf32>
  %top = vector.outerproduct %a, %b, %sum {kind = #vector.kind<maxnumf>} : vector<4xf32>, vector<3xf32>
  %axpy = vector.outerproduct %a, %s, %a : vector<4xf32>, f32
  %ints = vector.outerproduct %i, %i {note} : vector<2xi32>, vector<2xi32>
  vector.print %a : vector<4xf32>
  vector.print %s : f32 punctuation <comma>
  vector.print %i : vector<2xi32> punctuation <no_punctuation>
  vector.print punctuation <newline>
  vector.print str "done\n"
  return %top : vector<4x3xf32>
}
