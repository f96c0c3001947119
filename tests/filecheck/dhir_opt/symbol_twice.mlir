// A symbol defined twice in one module is an error at its second definition, with a note
// at the first, as in MLIR 22 (xDSL blamed the module, which in a file has no location:
// the error named no line).
// RUN: not dhir-opt %s --split-input-file 2>&1 | filecheck %s --match-full-lines

func.func private @cos(f64) -> f64
func.func @main() {
  return
}
func.func private @cos(f64) -> f64

// CHECK:      {{.*}}symbol_twice.mlir:10:1: error: @cos is defined twice in one module; rename or remove one of them
// CHECK-NEXT: func.func private @cos(f64) -> f64
// CHECK-NEXT: ^
// CHECK-NEXT: {{.*}}symbol_twice.mlir:6:1: note: the first definition of it is here

// -----

gpu.module @kernels {
  gpu.func @f() kernel {
    gpu.return
  }
  gpu.func @f() kernel {
    gpu.return
  }
}

// CHECK:      {{.*}}symbol_twice.mlir:23:3: error: @f is defined twice in one module; rename or remove one of them
// CHECK:      {{.*}}symbol_twice.mlir:20:3: note: the first definition of it is here
