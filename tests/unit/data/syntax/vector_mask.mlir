#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @masked(%v: vector<6xf32>, %m: vector<6xi1>, %buf: memref<10xf32>, %i: index, %pad: vector<6xf32>) -> (f32, vector<6xf32>) {
  %z = arith.constant 0.0 : f32
  %sum = vector.mask %m { vector.reduction <add>, %v : vector<6xf32> into f32 } : vector<6xi1> -> f32
  %r = vector.mask %m, %pad { vector.transfer_read %buf[%i], %z : memref<10xf32>, vector<6xf32> } : vector<6xi1> -> vector<6xf32>
  vector.mask %m { vector.transfer_write %r, %buf[%i] : vector<6xf32>, memref<10xf32> } {note} : vector<6xi1>
  vector.mask %m { } : vector<6xi1>
  vector.mask %m { vector.yield } : vector<6xi1>
  %same = vector.mask %m { vector.yield %v : vector<6xf32> } : vector<6xi1> -> vector<6xf32>
  return %sum, %same : f32, vector<6xf32>
}

func.func @masked_contract(%a: vector<2x4xf32>, %b: vector<4x3xf32>, %c: vector<2x3xf32>, %m: vector<2x3x4xi1>) -> vector<2x3xf32> {
  %r = vector.mask %m { vector.contract {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]} %a, %b, %c : vector<2x4xf32>, vector<4x3xf32> into vector<2x3xf32> } : vector<2x3x4xi1> -> vector<2x3xf32>
  return %r : vector<2x3xf32>
}
