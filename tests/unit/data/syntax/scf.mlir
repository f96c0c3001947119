func.func @loops(%n: index, %f: f32, %m: memref<?xf32>, %c: i1) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %f) -> f32 {
    %s = arith.addf %acc, %f : f32
    scf.yield %s : f32
  }
  %p, %q = scf.for %i = %c0 to %n step %c1 iter_args(%a = %f, %b = %f) -> (f32, f32) {
    scf.yield %b, %a : f32, f32
  }
  scf.for %i = %c0 to %n step %c1 {
    memref.store %f, %m[%i] : memref<?xf32>
  }
  %k0 = arith.constant 0 : i32
  %k9 = arith.constant 9 : i32
  %k1 = arith.constant 1 : i32
  scf.for %j = %k0 to %k9 step %k1 : i32 {
  }
  scf.while : () -> () {
    scf.condition(%c)
  } do {
    scf.yield
  }
  %w = scf.while (%x = %f) : (f32) -> f32 {
    scf.condition(%c) %x : f32
  } do {
  ^bb0(%y: f32):
    scf.yield %y : f32
  }
  %v = scf.if %c -> f32 {
    scf.yield %r : f32
  } else {
    scf.yield %w : f32
  }
  scf.if %c {
    memref.store %f, %m[%c0] : memref<?xf32>
  }
  %e = scf.execute_region -> f32 {
    cf.cond_br %c, ^a, ^b
  ^a:
    scf.yield %p : f32
  ^b:
    scf.yield %q : f32
  }
  %ci = arith.index_cast %c1 : index to i32
  %sw = scf.index_switch %c0 -> f32
  case 1 {
    scf.yield %e : f32
  }
  default {
    scf.yield %v : f32
  }
  return %sw : f32
}
