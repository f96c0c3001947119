func.func @elements(%v: vector<2x2xf32>, %x: f32) {
  %26 = vector.step : vector<4xindex>
  %27 = vector.from_elements %x, %x, %x, %x : vector<2x2xf32>
  %28 = vector.from_elements %x : vector<f32>
  %29:4 = vector.to_elements %v : vector<2x2xf32>
  %30 = vector.to_elements %28 : vector<f32>
  return
}
