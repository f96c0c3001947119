// A block label defined twice, where a branch named it before its first definition, is
// an error at the second definition (xDSL's parser failed on it with a KeyError: an
// internal error of dhir-opt, dhir schedule and dhir run).
// RUN: dhir-opt %s --split-input-file --verify-diagnostics

func.func @twice(%c: i1) {
  cf.cond_br %c, ^a, ^b
^a:
  return
^b:
// expected-error@+1 {{redefinition of block '^b'}}
^b:
  return
}

// -----

func.func @in_a_region(%c: i1, %p: f32, %q: f32) -> f32 {
  %e = scf.execute_region -> f32 {
    cf.cond_br %c, ^a, ^b
  ^a:
    scf.yield %p : f32
  ^b:
  // expected-error@+1 {{redefinition of block '^b'}}
  ^b:
    scf.yield %q : f32
  }
  return %e : f32
}
