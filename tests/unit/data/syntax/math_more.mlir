func.func @sincos_and_clamp(%x: f32, %v: vector<4xf64>, %t: tensor<2x?xf16>, %lo: f32, %hi: f32) -> (f32, f32, f32) {
  %s, %c = math.sincos %x : f32
  %both:2 = math.sincos %v fastmath<fast> : vector<4xf64>
  %tb:2 = math.sincos %t : tensor<2x?xf16>
  %clamped = math.clampf %x to [%lo, %hi] : f32
  %vc = math.clampf %both#0 to [%both#1, %v] fastmath<nnan,ninf> {note} : vector<4xf64>
  return %s, %c, %clamped : f32, f32, f32
}
func.func @classes_and_erfc(%x: f32, %v: vector<4xf64>, %h: f16, %b: bf16, %t: tensor<2x?xf32>) -> (i1, vector<4xi1>, f32) {
  %nan = math.isnan %x : f32
  %inf = math.isinf %h {fastmath = #arith.fastmath<nnan,ninf>} : f16
  %fin = math.isfinite %b {note} : bf16
  %normal = math.isnormal %v : vector<4xf64>
  %tn = math.isnan %t : tensor<2x?xf32>
  %e = math.erfc %x : f32
  %ve = math.erfc %v fastmath<fast> : vector<4xf64>
  %te = math.erfc %t : tensor<2x?xf32>
  return %nan, %normal, %e : i1, vector<4xi1>, f32
}
