// dhir-accurate-math cannot unroll a scalable vector (its lane count is known at run time
// only): an error, not the first lanes alone.
// RUN: not dhir-opt %s --split-input-file -p dhir-accurate-math 2>&1 | filecheck %s

func.func @f(%s: vector<[4]xf64>) -> vector<[4]xf64> {
  // CHECK: accurate_math_scalable.mlir:[[# @LINE + 1]]:8: error: 'math.expm1' on a scalable vector is not supported natively
  %e = math.expm1 %s : vector<[4]xf64>
  return %e : vector<[4]xf64>
}

// -----

func.func @g(%s: vector<[4]xf64>, %m: vector<[4]xi8>) -> vector<[4]xf64> {
  // CHECK: accurate_math_scalable.mlir:[[# @LINE + 1]]:8: error: 'math.fpowi' on a scalable vector is not supported natively
  %z = math.fpowi %s, %m : vector<[4]xf64>, vector<[4]xi8>
  return %z : vector<[4]xf64>
}
