func.func @reduce(%v: vector<3x5x7xf32>, %acc: vector<5xf32>, %s: f32, %i: vector<6x2xi64>, %j: vector<2xi64>) -> (vector<5xf32>, f32, vector<2xi64>) {
  %a = vector.multi_reduction <maximumf>, %v, %acc [0, 2] : vector<3x5x7xf32> to vector<5xf32>
  %b = vector.multi_reduction <mul>, %v, %s {note} [0, 1, 2] : vector<3x5x7xf32> to f32
  %c = vector.multi_reduction <xor>, %i, %j [0] : vector<6x2xi64> to vector<2xi64>
  return %a, %b, %c : vector<5xf32>, f32, vector<2xi64>
}

func.func @scans(%v: vector<3x4xi32>, %init: vector<4xi32>, %w: vector<8xf32>, %z: vector<f32>) -> (vector<3x4xi32>, vector<f32>) {
  %r:2 = vector.scan <add>, %v, %init {reduction_dim = 0 : i64, inclusive = false} : vector<3x4xi32>, vector<4xi32>
  %s, %t = vector.scan <minnumf>, %w, %z {inclusive = true, reduction_dim = 0 : i64} : vector<8xf32>, vector<f32>
  return %r#0, %t : vector<3x4xi32>, vector<f32>
}
