// An empty block in a task body of several blocks is an error at the task that says
// how to end it; it named an `scf.execute_region` the program does not have (the op
// dhir holds such a body in).
// RUN: dhir-opt %s --verify-diagnostics

func.func @main(%a: memref<16xi32>) {
  %cpu = dhir.target {arch = "x86_64"}
  dhir.schedule %a {
    // expected-error@+1 {{'dhir.task' has an empty block: in a task body of several blocks, end each with a terminator}}
    %t = dhir.task %cpu, %a {
      %c0 = arith.constant 0 : index
      %z = arith.constant 7 : i32
      memref.store %z, %a[%c0] : memref<16xi32>
      cf.br ^bb1
    ^bb1:
    }
  }
  return
}
