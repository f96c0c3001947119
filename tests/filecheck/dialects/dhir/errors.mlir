// Every verification error of the dhir dialect, each pointing at its source line: checked
// by the annotations, and as printed (with the column) by the CHECK lines.
// RUN: dhir-opt %s --split-input-file --verify-diagnostics
// RUN: not dhir-opt %s --split-input-file 2>&1 | filecheck %s --match-full-lines

func.func @task_outside_schedule(%a: memref<4xf32>) {
  %cpu = dhir.target {arch = "x86_64"}
  // expected-error@+1 {{dhir.task must stand directly inside a dhir.schedule; wrap it: dhir.schedule %a, ... { %t = dhir.task ... }}}
  %t = dhir.task %cpu, %a {
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 4]]:8: error: dhir.task must stand directly inside a dhir.schedule; wrap it: dhir.schedule %a, ... { %t = dhir.task ... }

// -----

func.func @task_in_task(%a: memref<4xf32>) {
  dhir.schedule %a {
    %cpu = dhir.target {arch = "x86_64"}
    %t = dhir.task %cpu, %a {
      // expected-error@+1 {{dhir.task cannot be nested inside another dhir.task; make it a separate task of the schedule}}
      %u = dhir.task %cpu, %a {
      }
    }
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 6]]:12: error: dhir.task cannot be nested inside another dhir.task; make it a separate task of the schedule

// -----

func.func @target_not_a_target(%a: memref<4xf32>, %b: memref<4xf32>) {
  dhir.schedule %a, %b {
    // expected-error@+1 {{the first operand of dhir.task must be its target, a value made by dhir.target, but %a is a block argument of type memref<4xf32>; write dhir.task %cpu, %a, ... with %cpu = dhir.target {arch = "x86_64"}}}
    %t = dhir.task %a, %b {
    }
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 5]]:10: error: the first operand of dhir.task must be its target, a value made by dhir.target, but %a is a block argument of type memref<4xf32>; write dhir.task %cpu, %a, ... with %cpu = dhir.target {arch = "x86_64"}

// -----

func.func @unlisted_memref(%a: memref<4xf32>, %b: memref<4xf32>) {
  dhir.schedule %a, %b {
    %cpu = dhir.target {arch = "x86_64"}
    %t = dhir.task %cpu, %a {
      %c0 = arith.constant 0 : index
      // expected-error@+1 {{'memref.load' uses %b, a memref defined outside this dhir.task that the task does not list; add it to the task's operands (dhir.task <target>, ..., %b)}}
      %x = memref.load %b[%c0] : memref<4xf32>
      memref.store %x, %a[%c0] : memref<4xf32>
    }
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 6]]:12: error: 'memref.load' uses %b, a memref defined outside this dhir.task that the task does not list; add it to the task's operands (dhir.task <target>, ..., %b)

// -----

func.func @unknown_arch() {
  dhir.schedule {
    // expected-error@+1 {{unknown arch "pentium"; known archs are CPU: x86_64, aarch64, riscv64, ppc64le; NVIDIA GPU: sm_50, sm_52, sm_53, sm_60, sm_61, sm_62, sm_70, sm_72, sm_75, sm_80, sm_86, sm_87, sm_89, sm_90, sm_100, sm_101, sm_103, sm_110, sm_120, sm_121 (optionally suffixed a/f)}}
    %t = dhir.target {arch = "pentium"}
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 4]]:10: error: unknown arch "pentium"; known archs are CPU: x86_64, aarch64, riscv64, ppc64le; NVIDIA GPU: sm_50, sm_52, sm_53, sm_60, sm_61, sm_62, sm_70, sm_72, sm_75, sm_80, sm_86, sm_87, sm_89, sm_90, sm_100, sm_101, sm_103, sm_110, sm_120, sm_121 (optionally suffixed a/f)

// -----

func.func @unknown_inline_arch(%a: memref<4xf32>) {
  dhir.schedule %a {
    // expected-error@+1 {{unknown arch "sm_42"; known archs are}}
    %t = dhir.task target = "sm_42", %a {
    }
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 5]]:10: error: unknown arch "sm_42"; known archs are {{.*}}, or a kind: cpu, gpu, any

// -----

func.func @unknown_kind() {
  dhir.schedule {
    // expected-error@+1 {{unknown device kind "fpga"; known kinds are "cpu", "gpu", "any"}}
    %t = dhir.target {kind = "fpga"}
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 4]]:10: error: unknown device kind "fpga"; known kinds are "cpu", "gpu", "any"

// -----

func.func @kind_contradicts_arch() {
  dhir.schedule {
    // expected-error@+1 {{arch "sm_90" is a gpu, not a cpu}}
    %t = dhir.target {arch = "sm_90", kind = "cpu"}
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 4]]:10: error: arch "sm_90" is a gpu, not a cpu

// -----

func.func @empty_target() {
  dhir.schedule {
    // expected-error@+1 {{dhir.target names no device; give it an arch}}
    %t = dhir.target
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 4]]:10: error: dhir.target names no device; give it an arch {{.*}}

// -----

func.func @missing_system_device() {
  dhir.schedule {
    // expected-error@+1 {{device "gpu7" is not in any enclosing dlti.target_system_spec;}}
    %t = dhir.target {device = "gpu7"}
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 4]]:10: error: device "gpu7" is not in any enclosing dlti.target_system_spec; {{.*}}

// -----

func.func @tensor_operand(%a: tensor<4xf32>) {
  // expected-error@+1 {{schedule operand #0 (%a) has type tensor<4xf32>, which dhir cannot distribute; schedule operands must be ranked memrefs of integers, floats or index, or scalars of those types}}
  dhir.schedule %a {
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 4]]:3: error: schedule operand #0 (%a) has type tensor<4xf32>, which dhir cannot distribute; schedule operands must be ranked memrefs of integers, floats or index, or scalars of those types

// -----

func.func @gpu_launch_on_cpu(%a: memref<4xf32>) {
  dhir.schedule %a {
    %cpu = dhir.target {arch = "aarch64"}
    %t = dhir.task %cpu, %a {
      %c1 = arith.constant 1 : index
      // expected-error@+1 {{'gpu.launch' needs a GPU, but this task's target is aarch64 (a CPU); bind the task to a GPU target such as dhir.target {arch = "sm_90"} or write the work as loops (scf.parallel)}}
      gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
                 threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
        gpu.terminator
      }
    }
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 8]]:7: error: 'gpu.launch' needs a GPU, but this task's target is aarch64 (a CPU); bind the task to a GPU target such as dhir.target {arch = "sm_90"} or write the work as loops (scf.parallel)

// -----

func.func @malformed(%a: memref<4xf32>) {
  dhir.schedule %a {
    %cpu = dhir.target {arch = "x86_64"}
    // expected-error@+1 {{expected ', %operand', 'attributes {...}' or the body '{ ... }' here}}
    %t = dhir.task %cpu %a {
    }
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 5]]:25: error: expected ', %operand', 'attributes {...}' or the body '{ ... }' here

// -----

func.func @undefined_header_value(%a: memref<4xf32>) {
  // expected-error@+1 {{use of undefined value %nope; dhir headers name values defined earlier}}
  dhir.schedule %a, %nope {
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 4]]:21: error: use of undefined value %nope; dhir headers name values defined earlier

// -----

func.func @use_before_def() {
  // expected-error@+1 {{operand #0 of 'arith.addi' does not dominate this use (it is defined later, or in a region that does not enclose this op)}}
  %1 = arith.addi %0, %0 : i32
  // expected-note@+1 {{operand defined here}}
  %0 = arith.constant 1 : i32
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 5]]:8: error: operand #0 of 'arith.addi' does not dominate this use (it is defined later, or in a region that does not enclose this op)
// CHECK-NEXT: {{.*}}
// CHECK-NEXT: {{.*}}
// CHECK-NEXT: {{.*}}errors.mlir:[[# @LINE - 6]]:8: note: operand defined here

// -----

func.func @use_of_inner_value() -> index {
  scf.execute_region {
    %0 = arith.constant 1 : index
    scf.yield
  }
  // expected-error@+1 {{use of undefined value %0 (it is never defined, or defined inside a region that does not enclose this use)}}
  %1 = arith.addi %0, %0 : index
  return %1 : index
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 3]]:19: error: use of undefined value %0 (it is never defined, or defined inside a region that does not enclose this use)

// -----

func.func @op_in_schedule_body(%a: memref<4xf32>) {
  dhir.schedule %a {
    // expected-error@+1 {{'memref.alloc' cannot stand directly in a dhir.schedule, which holds only dhir.target and dhir.task ops; move it into a task, or before the schedule}}
    %m = memref.alloc() : memref<4xf32>
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 4]]:10: error: 'memref.alloc' cannot stand directly in a dhir.schedule, which holds only dhir.target and dhir.task ops; move it into a task, or before the schedule

// -----

func.func @memref_not_in_schedule(%a: memref<4xf32>, %b: memref<4xf32>) {
  dhir.schedule %a {
    %cpu = dhir.target {arch = "x86_64"}
    // expected-error@+1 {{dhir.task lists %b, which is not an operand of the enclosing dhir.schedule; add it to the schedule's operands}}
    %t = dhir.task %cpu, %a, %b {
    }
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 5]]:10: error: dhir.task lists %b, which is not an operand of the enclosing dhir.schedule; add it to the schedule's operands

// -----

func.func @scalar_task_operand(%a: memref<4xf32>, %s: f32) {
  dhir.schedule %a, %s {
    %cpu = dhir.target {arch = "x86_64"}
    // expected-error@+1 {{dhir.task operand #2 (%s) has type f32; a task lists only the memrefs it touches (scalars are used directly)}}
    %t = dhir.task %cpu, %a, %s {
    }
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 5]]:10: error: dhir.task operand #2 (%s) has type f32; a task lists only the memrefs it touches (scalars are used directly)

// -----

func.func @schedule_in_task(%a: memref<4xf32>) {
  dhir.schedule %a {
    %cpu = dhir.target {arch = "x86_64"}
    %t = dhir.task %cpu, %a {
      // expected-error@+1 {{dhir.schedule cannot be nested inside a dhir.task; schedules go in ordinary host code (a function body, a loop)}}
      dhir.schedule %a {
      }
    }
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 6]]:7: error: dhir.schedule cannot be nested inside a dhir.task; schedules go in ordinary host code (a function body, a loop)

// -----

func.func @task_uses_token(%a: memref<4xf32>) {
  dhir.schedule %a {
    %cpu = dhir.target {arch = "x86_64"}
    %t = dhir.task %cpu, %a {
    }
    %u = dhir.task %cpu, %a {
      // expected-error@+1 {{'test.op' uses %t, a !dhir.token value; task bodies cannot use dhir targets or task tokens}}
      "test.op"(%t) : (!dhir.token) -> ()
    }
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 5]]:7: error: 'test.op' uses %t, a !dhir.token value; task bodies cannot use dhir targets or task tokens

// -----

func.func @yield_outside() {
  // expected-error@+1 {{dhir.yield ends only dhir.task and dhir.schedule bodies}}
  "dhir.yield"() : () -> ()
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 2]]:3: error: dhir.yield ends only dhir.task and dhir.schedule bodies

// -----

func.func @two_targets(%a: memref<4xf32>) {
  dhir.schedule %a {
    %cpu = dhir.target {arch = "x86_64"}
    // expected-error@+1 {{dhir.task needs exactly one target: an operand (dhir.task %cpu, ...) or an inline name (dhir.task target = "cpu", ...)}}
    %t = "dhir.task"(%cpu, %a) <{target = "gpu", operandSegmentSizes = array<i32: 1, 1>}> ({
      "dhir.yield"() : () -> ()
    }) : (!dhir.target, memref<4xf32>) -> !dhir.token
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 6]]:10: error: dhir.task needs exactly one target: an operand (dhir.task %cpu, ...) or an inline name (dhir.task target = "cpu", ...)

// -----

func.func @task_name_not_a_string(%a: memref<4xf32>) {
  dhir.schedule %a {
    %cpu = dhir.target {arch = "x86_64"}
    // expected-error@+1 {{a task's name must be a non-empty string (name = "fill"), got 3 : i64}}
    %t = dhir.task %cpu, %a attributes {name = 3} {
    }
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 5]]:10: error: a task's name must be a non-empty string (name = "fill"), got 3 : i64

// -----

func.func @task_name_with_a_newline(%a: memref<4xf32>) {
  dhir.schedule %a {
    %cpu = dhir.target {arch = "x86_64"}
    // expected-error@+1 {{a task's name must not hold control characters (tabs, newlines, ...), which no table or profile can show as written; got "line\0Anext"}}
    %t = dhir.task %cpu, %a attributes {name = "line\0Anext"} {
    }
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 5]]:10: error: a task's name must not hold control characters (tabs, newlines, ...), which no table or profile can show as written; got "line\0Anext"

// -----

func.func @task_block_arguments(%a: memref<4xindex>) {
  dhir.schedule %a {
    %cpu = dhir.target {arch = "x86_64"}
    // expected-error@+1 {{a dhir.task body takes no block arguments (nothing would bind them); use the schedule's operands and values defined in the body}}
    %t = dhir.task %cpu, %a {
    ^bb0(%z: index):
      %c0 = arith.constant 0 : index
      memref.store %z, %a[%c0] : memref<4xindex>
    }
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 8]]:10: error: a dhir.task body takes no block arguments (nothing would bind them); use the schedule's operands and values defined in the body

// -----

func.func @inner(%x: memref<4xi32>) {
  dhir.schedule %x {
    %t = dhir.task target = "cpu", %x {
    }
  }
  return
}
func.func @task_calls_a_schedule(%a: memref<4xi32>) {
  dhir.schedule %a {
    %t = dhir.task target = "cpu", %a {
      // expected-error@+1 {{this task calls @inner, which holds a dhir.schedule (or calls a function that does); a schedule cannot run inside a task: call it outside the schedule, or make its tasks tasks of this schedule}}
      func.call @inner(%a) : (memref<4xi32>) -> ()
    }
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 5]]:7: error: this task calls @inner, which holds a dhir.schedule (or calls a function that does); a schedule cannot run inside a task: call it outside the schedule, or make its tasks tasks of this schedule

// -----

func.func @kernel(%x: memref<4xi32>) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    gpu.terminator
  }
  return
}
func.func @cpu_task_calls_gpu_code(%a: memref<4xi32>) {
  dhir.schedule %a {
    %t = dhir.task target = "cpu", %a {
      // expected-error@+1 {{this task runs on a CPU but calls @kernel, which uses GPU ops (or calls a function that does); bind the task to a GPU target}}
      func.call @kernel(%a) : (memref<4xi32>) -> ()
    }
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 5]]:7: error: this task runs on a CPU but calls @kernel, which uses GPU ops (or calls a function that does); bind the task to a GPU target

// -----

func.func @task_without_a_region(%a: memref<4xi32>) {
  dhir.schedule %a {
    %cpu = dhir.target {arch = "x86_64"}
    // expected-error@+1 {{Expected 1 region, but got 0}}
    %t = "dhir.task"(%cpu, %a) <{operandSegmentSizes = array<i32: 1, 1>}> : (!dhir.target, memref<4xi32>) -> !dhir.token
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 4]]:10: error: Expected 1 region, but got 0

// -----

func.func @task_attribute_typo(%a: memref<4xf32>) {
  dhir.schedule %a {
    %cpu = dhir.target {arch = "x86_64"}
    // expected-error@+1 {{dhir.task has an attribute dhir.rnak that dhir does not know (did you mean dhir.rank?); dhir.task takes dhir.rank, dhir.split, dhir.reassociate: remove it or correct its name}}
    %t = dhir.task %cpu, %a attributes {dhir.rnak = 1 : i64} {
    }
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 5]]:10: error: dhir.task has an attribute dhir.rnak that dhir does not know (did you mean dhir.rank?); dhir.task takes dhir.rank, dhir.split, dhir.reassociate: remove it or correct its name

// -----

func.func @schedule_attribute_typo(%a: memref<4xf32>) {
  // expected-error@+1 {{dhir.schedule has an attribute dhir.shardng that dhir does not know (did you mean dhir.shardings?); dhir.schedule takes dhir.shardings: remove it or correct its name}}
  dhir.schedule %a attributes {dhir.shardng = 1 : i64} {
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 4]]:3: error: dhir.schedule has an attribute dhir.shardng that dhir does not know (did you mean dhir.shardings?); dhir.schedule takes dhir.shardings: remove it or correct its name

// -----

func.func @target_attribute(%a: memref<4xf32>) {
  dhir.schedule %a {
    // expected-error@+1 {{dhir.target has an attribute dhir.threds that dhir does not know; dhir.target takes arch, kind, spec, device: remove it or correct its name}}
    %cpu = dhir.target {arch = "x86_64", dhir.threds = 2 : i64}
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 4]]:12: error: dhir.target has an attribute dhir.threds that dhir does not know; dhir.target takes arch, kind, spec, device: remove it or correct its name

// -----

func.func @target_key_typo(%a: memref<4xf32>) {
  dhir.schedule %a {
    // expected-error@+1 {{dhir.target has an attribute arhc that dhir does not know (did you mean arch?); dhir.target takes arch, kind, spec, device: remove it or correct its name}}
    %cpu = dhir.target {kind = "cpu", arhc = "aarch64"}
  }
  return
}
// CHECK: {{.*}}errors.mlir:[[# @LINE - 4]]:12: error: dhir.target has an attribute arhc that dhir does not know (did you mean arch?); dhir.target takes arch, kind, spec, device: remove it or correct its name
