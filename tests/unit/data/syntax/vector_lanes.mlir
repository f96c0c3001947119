func.func @lanes(%a: vector<3xi8>, %b: vector<3xi8>, %c: vector<2x[4]xf32>, %d: vector<5x6xindex>) -> (vector<6xi8>, vector<2x[8]xf32>, vector<5x3xindex>) {
  %ab = vector.interleave %a, %b : vector<3xi8> -> vector<6xi8>
  %cc = vector.interleave %c, %c {note} : vector<2x[4]xf32> -> vector<2x[8]xf32>
  %even, %odd = vector.deinterleave %d : vector<5x6xindex> -> vector<5x3xindex>
  %back:2 = vector.deinterleave %ab : vector<6xi8> -> vector<3xi8>
  return %ab, %cc, %odd : vector<6xi8>, vector<2x[8]xf32>, vector<5x3xindex>
}

func.func @scalable(%s: vector<[16]xi8>, %f: vector<4xi8>, %g: vector<[4]xi8>) -> (index, vector<[16]xi8>, vector<8xi8>) {
  %n = vector.vscale
  %i = vector.scalable.insert %f, %s[4] : vector<4xi8> into vector<[16]xi8>
  %j = vector.scalable.insert %g, %i[0] {note} : vector<[4]xi8> into vector<[16]xi8>
  %e = vector.scalable.extract %j[8] : vector<8xi8> from vector<[16]xi8>
  %k = vector.scalable.extract %j[0] : vector<[4]xi8> from vector<[16]xi8>
  return %n, %j, %e : index, vector<[16]xi8>, vector<8xi8>
}

func.func @bitcasts(%x: vector<3x2xi32>, %y: vector<4xindex>, %z: vector<f64>) -> (vector<3x1xindex>, vector<4x2xf32>, vector<i64>) {
  %p = vector.bitcast %x : vector<3x2xi32> to vector<3x1xindex>
  %q = vector.bitcast %y : vector<4xindex> to vector<8xf32>
  %r = vector.shape_cast %q : vector<8xf32> to vector<4x2xf32>
  %s = vector.bitcast %z : vector<f64> to vector<i64>
  return %p, %r, %s : vector<3x1xindex>, vector<4x2xf32>, vector<i64>
}
