#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
#dot = {indexing_maps = [affine_map<(k) -> (k)>, affine_map<(k) -> (k)>, affine_map<(k) -> ()>], iterator_types = ["reduction"]}
func.func @matmul(%a: vector<2x3xf32>, %b: vector<3x5xf32>, %c: vector<2x5xf32>) -> vector<2x5xf32> {
  %p = vector.contract {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]} %a, %b, %c : vector<2x3xf32>, vector<3x5xf32> into vector<2x5xf32>
  %q = vector.contract {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<maxnumf>} %a, %b, %p {tag = 3 : i8} : vector<2x3xf32>, vector<3x5xf32> into vector<2x5xf32>
  return %q : vector<2x5xf32>
}

func.func @dots(%x: vector<7xi32>, %y: vector<7xi32>, %s: i32, %h: vector<7xf16>, %f: f32) -> (i32, f32) {
  %d = vector.contract #dot %x, %y, %s : vector<7xi32>, vector<7xi32> into i32
  %e = vector.contract {indexing_maps = [affine_map<(k) -> (k)>, affine_map<(k) -> (k)>, affine_map<(k) -> ()>], iterator_types = ["reduction"], kind = #vector.kind<add>} %h, %h, %f : vector<7xf16>, vector<7xf16> into f32
  return %d, %e : i32, f32
}
