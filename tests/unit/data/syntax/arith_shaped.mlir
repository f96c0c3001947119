func.func @vector_casts(%f: vector<4xf32>, %i: vector<4xi32>, %x: index) -> vector<4xf64> {
  %0 = arith.sitofp %i : vector<4xi32> to vector<4xf32>
  %1 = arith.uitofp %i : vector<4xi32> to vector<4xf64>
  %2 = arith.fptosi %f : vector<4xf32> to vector<4xi16>
  %3 = arith.fptoui %f : vector<4xf32> to vector<4xi64>
  %4 = arith.extsi %2 : vector<4xi16> to vector<4xi32>
  %5 = arith.extui %2 : vector<4xi16> to vector<4xi64>
  %6 = arith.trunci %5 : vector<4xi64> to vector<4xi8>
  %7 = arith.index_cast %i : vector<4xi32> to vector<4xindex>
  %8 = arith.index_castui %7 : vector<4xindex> to vector<4xi64>
  %9 = arith.index_cast %x : index to i64
  %10 = arith.extf %f : vector<4xf32> to vector<4xf64>
  return %10 : vector<4xf64>
}

func.func @tensor_casts(%f: tensor<2x?xf32>, %i: tensor<2x?xi8>) -> tensor<2x?xi32> {
  %0 = arith.sitofp %i : tensor<2x?xi8> to tensor<2x?xf32>
  %1 = arith.fptosi %f : tensor<2x?xf32> to tensor<2x?xi32>
  %2 = arith.extui %i : tensor<2x?xi8> to tensor<2x?xi32>
  %3 = arith.index_cast %2 : tensor<2x?xi32> to tensor<2x?xindex>
  return %1 : tensor<2x?xi32>
}

func.func @select_and_compare(%a: vector<8xf32>, %b: vector<8xf32>, %p: i1, %s: f32, %t: tensor<3xi32>) -> (vector<8xf32>, f32) {
  %lt = arith.cmpf olt, %a, %b : vector<8xf32>
  %min = arith.select %lt, %a, %b : vector<8xi1>, vector<8xf32>
  %whole = arith.select %p, %min, %b {note} : vector<8xf32>
  %one = arith.select %p, %s, %s : f32
  %z = arith.constant dense<0> : tensor<3xi32>
  %pos = arith.cmpi sgt, %t, %z : tensor<3xi32>
  %relu = arith.select %pos, %t, %z : tensor<3xi1>, tensor<3xi32>
  return %whole, %one : vector<8xf32>, f32
}

func.func @remainders(%x: f32, %y: f64, %v: vector<4xf16>) -> f32 {
  %0 = arith.remf %x, %x : f32
  %1 = arith.remf %y, %y fastmath<fast> : f64
  %2 = arith.remf %v, %v : vector<4xf16>
  return %0 : f32
}
