// dhir-split-devices cuts a loop bound to any device over a GPU rank and a CPU rank by
// their rates (1:3 here), pins each piece and binds it to its device; the GPU piece
// records the rows it copies in and out. dhir-gpu-data then copies those rows only, and
// dhir-gpu-row-copies turns the copies of row views into runtime calls.
// RUN: dhir-opt %s -p 'dhir-split-devices{ranks=2}' | filecheck %s
// RUN: dhir-opt %s -p 'dhir-split-devices{ranks=2},dhir-gpu-data{ranks=2}' | filecheck %s --check-prefix=DATA
// RUN: dhir-opt %s -p 'dhir-split-devices{ranks=2},dhir-gpu-data{ranks=2},dhir-gpu-row-copies' | filecheck %s --check-prefix=CALLS

builtin.module attributes {dlti.target_system_spec = #dlti.target_system_spec<
    "n0.cpu" = #dlti.target_device_spec<"arch" = "x86_64", "kind" = "cpu", "node" = "n0",
      "peak_gflops" = 1.0e+02 : f64, "cores" = 8 : i64, "ranks" = 1 : i64>,
    "n0.gpu0" = #dlti.target_device_spec<"arch" = "sm_90", "kind" = "gpu", "node" = "n0",
      "peak_gflops" = 3.0e+02 : f64, "ranks" = 1 : i64>>,
    dhir.machine = {name = "node", nodes = [{name = "n0"}]}} {
  func.func @main(%a: memref<40x16xf64>, %b: memref<40x16xf64>) {
    dhir.schedule %a, %b {
      %any = dhir.target {kind = "any"}
      %t = dhir.task %any, %a, %b {
        %c0 = arith.constant 0 : index
        %c1 = arith.constant 1 : index
        %c16 = arith.constant 16 : index
        %c39 = arith.constant 39 : index
        scf.parallel (%i, %j) = (%c1, %c0) to (%c39, %c16) step (%c1, %c1) {
          %im = arith.subi %i, %c1 : index
          %ip = arith.addi %i, %c1 : index
          %x = memref.load %a[%im, %j] : memref<40x16xf64>
          %y = memref.load %a[%ip, %j] : memref<40x16xf64>
          %z = arith.addf %x, %y : f64
          memref.store %z, %b[%i, %j] : memref<40x16xf64>
        }
      }
    }
    func.return
  }
}

// CHECK:      %[[CPU:.*]] = dhir.target {kind = "cpu"}
// CHECK-NEXT: %[[GPU:.*]] = dhir.target {arch = "sm_90"}
// CHECK-NEXT: dhir.task %[[CPU]], %a, %b attributes {dhir.piece = [0 : i64, 0 : i64], dhir.rank = 0 : i64}
// CHECK:      scf.parallel (%{{.*}}, %{{.*}}) = (%{{.*}}, %c0) to (%[[TEN:.*]], %c16)
// CHECK:      dhir.task %[[GPU]], %a, %b attributes {dhir.piece = [0 : i64, 1 : i64], dhir.rank = 1 : i64, dhir.rows = {{\[}}[9 : i64, 40 : i64, 0 : i64, 0 : i64], [0 : i64, 0 : i64, 10 : i64, 39 : i64]]}

// DATA:      memref.subview %a_dev1[9, 0] [31, 16] [1, 1]
// DATA-NEXT: memref.subview %a[9, 0] [31, 16] [1, 1]
// DATA-NEXT: gpu.memcpy
// DATA-NOT:  gpu.memcpy
// DATA:      scf.parallel
// DATA:      memref.subview %b[10, 0] [29, 16] [1, 1]
// DATA-NEXT: memref.subview %b_dev1[10, 0] [29, 16] [1, 1]
// DATA-NEXT: gpu.memcpy
// DATA-NOT:  gpu.memcpy

// CALLS-NOT:  gpu.memcpy
// CALLS:      arith.constant 1152 : i64
// CALLS:      arith.constant 3968 : i64
// CALLS:      func.call @dhir_rt_gpu_copy(%{{.*}}, %{{.*}}, %{{.*}}) : (i64, i64, i64) -> ()
// CALLS:      func.call @dhir_rt_gpu_copy
// CALLS:      func.func private @dhir_rt_gpu_copy(i64, i64, i64) -> ()
