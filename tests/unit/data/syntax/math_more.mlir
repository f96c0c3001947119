func.func @sincos_and_clamp(%x: f32, %v: vector<4xf64>, %t: tensor<2x?xf16>, %lo: f32, %hi: f32) -> (f32, f32, f32) {
  %s, %c = math.sincos %x : f32
  %both:2 = math.sincos %v fastmath<fast> : vector<4xf64>
  %tb:2 = math.sincos %t : tensor<2x?xf16>
  %clamped = math.clampf %x to [%lo, %hi] : f32
  %vc = math.clampf %both#0 to [%both#1, %v] fastmath<nnan,ninf> {note} : vector<4xf64>
  return %s, %c, %clamped : f32, f32, f32
}
