// arith takes signless integers, as MLIR 22 does (its message: "operand #0 must be
// signless-integer-like"); the op says how to read a sign. arith.select chooses between
// values of any type.
// RUN: dhir-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @unsigned(%a: ui8) {
  // expected-error@+1 {{'arith.addi' takes signless integers, not ui8: write i8}}
  %c = arith.addi %a, %a : ui8
  return
}

// -----

func.func @signed_vector(%v: vector<4xsi16>) {
  // expected-error@+1 {{'arith.muli' takes signless integers, not si16: write i16}}
  %c = arith.muli %v, %v : vector<4xsi16>
  return
}

// -----

func.func @cast(%a: ui32) {
  // expected-error@+1 {{'arith.extui' takes signless integers, not ui32: write i32}}
  %c = arith.extui %a : ui32 to i64
  return
}

// -----

func.func @select(%t: i1, %a: ui8, %b: ui8) -> ui8 {
  %c = arith.select %t, %a, %b : ui8
  return %c : ui8
}
// CHECK: arith.select %{{.*}}, %{{.*}}, %{{.*}} : ui8
