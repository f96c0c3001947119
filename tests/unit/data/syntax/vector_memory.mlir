func.func @gathers(%m: memref<4x32xf32>, %t: tensor<64xi32>, %idx: vector<8xi32>, %mask: vector<8xi1>, %pf: vector<8xf32>, %pi: vector<2x4xi32>, %idx2: vector<2x4xi64>, %mask2: vector<2x4xi1>) -> (vector<8xf32>, vector<2x4xi32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %g = vector.gather %m[%c1, %c2][%idx], %mask, %pf : memref<4x32xf32>, vector<8xi32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
  vector.scatter %m[%c2, %c1] [%idx], %mask, %g {note} : memref<4x32xf32>, vector<8xi32>, vector<8xi1>, vector<8xf32>
  %h = vector.gather %t[%c1][%idx2], %mask2, %pi : tensor<64xi32>, vector<2x4xi64>, vector<2x4xi1>, vector<2x4xi32> into vector<2x4xi32>
  return %g, %h : vector<8xf32>, vector<2x4xi32>
}

func.func @expand_compress(%m: memref<?xi16>, %mask: vector<4xi1>, %p: vector<4xi16>, %i: index) {
  %e = vector.expandload %m[%i], %mask, %p : memref<?xi16>, vector<4xi1>, vector<4xi16> into vector<4xi16>
  vector.compressstore %m[%i], %mask, %e : memref<?xi16>, vector<4xi1>, vector<4xi16>
  return
}

func.func @vector_elements(%m: memref<3x?xvector<2x4xf64>>, %n: memref<9xvector<4xi8>>, %i: index) {
  %v = vector.load %m[%i, %i] : memref<3x?xvector<2x4xf64>>, vector<2x4xf64>
  vector.store %v, %m[%i, %i] : memref<3x?xvector<2x4xf64>>, vector<2x4xf64>
  %w = vector.load %n[%i] {nontemporal = true} : memref<9xvector<4xi8>>, vector<4xi8>
  vector.store %w, %n[%i] : memref<9xvector<4xi8>>, vector<4xi8>
  return
}
