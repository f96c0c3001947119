// affine.max, affine.delinearize_index, affine.linearize_index; an affine.if whose
// region ends in an op of no known dialect gets its affine.yield, as in MLIR.
func.func @max(%a: index, %b: index, %c: index) -> index {
  %0 = affine.max affine_map<(d0)[s0] -> (1000, d0 + 512, s0)> (%a)[%b]
  %1 = affine.max affine_map<()[s0, s1] -> (s0 - s1, 11)> ()[%b, %c] {note}
  %2 = affine.max affine_map<()[] -> (77, 78, 79)> ()[]
  return %0 : index
}

func.func @index(%l: index, %b0: index, %b1: index) -> index {
  %0:2 = affine.delinearize_index %l into (%b0, %b1) : index, index
  %1:3 = affine.delinearize_index %l into (4, %b0, 8) : index, index, index
  %2:2 = affine.delinearize_index %l into (%b1) : index, index
  %3 = affine.linearize_index [%b0, %b1] by (4, 8) : index
  %4 = affine.linearize_index disjoint [%b0, %b1] by (%l, 8) : index
  return %4 : index
}

func.func @if_unknown_last() {
  affine.if affine_set<() : ()> () {
  } else {
    "foo"() : () -> ()
  } {some_attr = true}
  return
}
