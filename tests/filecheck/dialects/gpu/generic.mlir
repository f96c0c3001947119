// RUN: dhir-opt %s | filecheck %s
// RUN: dhir-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// The generic form mlir-opt-22 --mlir-print-op-generic prints: gpu.func's
// kernel marker is the `gpu.kernel` attribute, gpu.memcpy and gpu.dealloc
// have no operandSegmentSizes, and the number of workgroup attributions is an
// attribute. dhir reads it and prints it back the same way.

"builtin.module"() ({
  "gpu.module"() <{sym_name = "kernels"}> ({
    "gpu.func"() <{function_type = (f32) -> ()}> ({
    ^bb0(%a: f32, %w: memref<32xf32, #gpu.address_space<workgroup>>):
      %t = "gpu.thread_id"() <{dimension = #gpu<dim x>, upper_bound = 128 : index}> : () -> index
      "gpu.return"() : () -> ()
    }) {gpu.kernel, sym_name = "k", workgroup_attributions = 1 : i64} : () -> ()
  }) : () -> ()
  "func.func"() <{function_type = (memref<?xf32>, memref<?xf32>, f32) -> (), sym_name = "host"}> ({
  ^bb0(%x: memref<?xf32>, %y: memref<?xf32>, %f: f32):
    %c1 = "arith.constant"() <{value = 1 : index}> : () -> index
    %t0 = "gpu.wait"() : () -> !gpu.async.token
    %t1 = "gpu.memcpy"(%t0, %x, %y) : (!gpu.async.token, memref<?xf32>, memref<?xf32>) -> !gpu.async.token
    %t2 = "gpu.dealloc"(%t1, %x) : (!gpu.async.token, memref<?xf32>) -> !gpu.async.token
    "gpu.launch_func"(%c1, %c1, %c1, %c1, %c1, %c1, %f) <{kernel = @kernels::@k, operandSegmentSizes = array<i32: 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0>}> : (index, index, index, index, index, index, f32) -> ()
    "gpu.wait"(%t2) : (!gpu.async.token) -> ()
    "func.return"() : () -> ()
  }) : () -> ()
}) {gpu.container_module} : () -> ()

// CHECK:      gpu.func @k(%a: f32) workgroup(%w : memref<32xf32, #gpu.address_space<workgroup>>) kernel {
// CHECK-NEXT:   %t = gpu.thread_id x upper_bound 128
// CHECK:      %t1 = gpu.memcpy async [%t0] %x, %y : memref<?xf32>, memref<?xf32>
// CHECK-NEXT: %t2 = gpu.dealloc async [%t1] %x : memref<?xf32>
// CHECK-NEXT: gpu.launch_func @kernels::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%f : f32)
// CHECK-NEXT: gpu.wait [%t2]

// GENERIC:      "gpu.func"() <{function_type = (f32) -> ()}> ({
// GENERIC:      }) {gpu.kernel, sym_name = "k", workgroup_attributions = 1 : i64} : () -> ()
// GENERIC:      %t1 = "gpu.memcpy"(%t0, %x, %y) : (!gpu.async.token, memref<?xf32>, memref<?xf32>) -> !gpu.async.token
// GENERIC-NEXT: %t2 = "gpu.dealloc"(%t1, %x) : (!gpu.async.token, memref<?xf32>) -> !gpu.async.token
