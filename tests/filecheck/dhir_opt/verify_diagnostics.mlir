// --verify-diagnostics checks errors and warnings against expected-* annotations: it
// passes when they agree, and fails, saying what differs, when one is missing or extra.
// RUN: dhir-opt %s --split-input-file --verify-diagnostics -p dhir-split{ranks=2} | filecheck %s --check-prefix=OK
// RUN: sed -e 's/ANNOTATION-MISSING/expected-error@+1/' %s | not dhir-opt --split-input-file --verify-diagnostics -p dhir-split{ranks=2} 2>&1 | filecheck %s --check-prefix=MISSING
// RUN: sed -e 's/expected-warning@-5/nothing/' %s | not dhir-opt --split-input-file --verify-diagnostics -p dhir-split{ranks=2} 2>&1 | filecheck %s --check-prefix=UNEXPECTED

// A chunk without errors is printed.
func.func @fine() {
  return
}
// OK: func.func @fine()

// -----

func.func @errors_and_notes() {
  // expected-error@+1 {{operand #0 of 'arith.addi' does not dominate this use}}
  %1 = arith.addi %0, %0 : i32
  %0 = arith.constant 1 : i32 // expected-note {{operand defined here}}
  return
}

// -----

// @below is the next line that is not an annotation.
func.func @below(%a: memref<4xf32>) {
  dhir.schedule %a {
    // expected-error@below {{unknown arch "pentium"}}
    %t = dhir.target {arch = "pentium"}
  }
  return
}

// -----

// Warnings (here dhir-split's) are checked too.
func.func @warning(%a: memref<8xf32>) {
  dhir.schedule %a {
    %cpu = dhir.target {arch = "x86_64"}
    %t = dhir.task %cpu, %a attributes {dhir.split = 3 : i64} {
      %c0 = arith.constant 0 : index
      %f = arith.constant 1.0 : f32
      memref.store %f, %a[%c0] : memref<8xf32>
    }
    // expected-warning@-5 {{dhir.split = 3 on}}
  }
  return
}

// -----

// A function that verifies, where the test expects an error.
func.func @nothing_wrong() {
  // ANNOTATION-MISSING {{some error}}
  return
}

// MISSING: <stdin>:[[# @LINE - 4]]:6: error: expected error "some error" was not produced
// MISSING-NOT: error:

// UNEXPECTED: <stdin>:[[# @LINE - 21]]:10: error: unexpected warning: dhir.split = 3 on {{.*}} has no effect
// UNEXPECTED-NOT: error:
