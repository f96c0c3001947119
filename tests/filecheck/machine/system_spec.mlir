// A machine description as module attributes (docs/machine.md): one device spec per device
// in dlti.target_system_spec, links and nodes in the dictionary dhir.machine. dhir-opt
// parses, verifies (dhir.target {device = ...} finds its device's arch) and prints it back.
// RUN: dhir-opt %s | filecheck %s
// RUN: dhir-opt %s | dhir-opt | filecheck %s
// RUN: dhir-opt %s --print-op-generic | dhir-opt | filecheck %s

// CHECK:      builtin.module attributes {dlti.target_system_spec = #dlti.target_system_spec<
// CHECK-SAME: "n0.cpu" = #dlti.target_device_spec<"arch" = "x86_64", "kind" = "cpu", "node" = "n0", "peak_gflops" = 3.200000e+03 : f64, "mem_bw_gbs" = 1.900000e+02 : f64, "memory_bytes" = 549755813888 : i64, "cores" = 64 : i64, "ranks" = 1 : i64>,
// CHECK-SAME: "n0.gpu0" = #dlti.target_device_spec<"arch" = "sm_90", "kind" = "gpu", "node" = "n0", "peak_gflops" = 6.700000e+04 : f64, "mem_bw_gbs" = 3.350000e+03 : f64, "memory_bytes" = 85899345920 : i64, "ranks" = 1 : i64, "host_link" = {latency_us = 8.000000e+00 : f64, bandwidth_gbs = 5.000000e+01 : f64}>,
// CHECK-SAME: "n1.cpu" = #dlti.target_device_spec<"arch" = "aarch64", "kind" = "cpu", "node" = "n1", "peak_gflops" = 2.900000e+03 : f64, "mem_bw_gbs" = 4.800000e+02 : f64, "memory_bytes" = 515396075520 : i64, "cores" = 72 : i64, "ranks" = 2 : i64, "guessed" = ["peak_gflops"]>>,
// CHECK-SAME: dhir.machine = {name = "example", links = {
// CHECK-SAME: network = {latency_us = 1.800000e+00 : f64, bandwidth_gbs = 2.400000e+01 : f64},
// CHECK-SAME: intra_node = {latency_us = 4.000000e-01 : f64, bandwidth_gbs = 9.500000e+00 : f64, guessed = true}},
// CHECK-SAME: nodes = [{name = "n0", host = "gpu-a.example.org"}, {name = "n1"}]}}
module attributes {
  dlti.target_system_spec = #dlti.target_system_spec<
    "n0.cpu" = #dlti.target_device_spec<"arch" = "x86_64", "kind" = "cpu", "node" = "n0",
      "peak_gflops" = 3.2e+03 : f64, "mem_bw_gbs" = 1.9e+02 : f64,
      "memory_bytes" = 549755813888 : i64, "cores" = 64 : i64, "ranks" = 1 : i64>,
    "n0.gpu0" = #dlti.target_device_spec<"arch" = "sm_90", "kind" = "gpu", "node" = "n0",
      "peak_gflops" = 6.7e+04 : f64, "mem_bw_gbs" = 3.35e+03 : f64,
      "memory_bytes" = 85899345920 : i64, "ranks" = 1 : i64,
      "host_link" = {latency_us = 8.0 : f64, bandwidth_gbs = 5.0e+01 : f64}>,
    "n1.cpu" = #dlti.target_device_spec<"arch" = "aarch64", "kind" = "cpu", "node" = "n1",
      "peak_gflops" = 2.9e+03 : f64, "mem_bw_gbs" = 4.8e+02 : f64,
      "memory_bytes" = 515396075520 : i64, "cores" = 72 : i64, "ranks" = 2 : i64,
      "guessed" = ["peak_gflops"]>>,
  dhir.machine = {name = "example",
    links = {network = {latency_us = 1.8 : f64, bandwidth_gbs = 2.4e+01 : f64},
             intra_node = {latency_us = 0.4 : f64, bandwidth_gbs = 9.5 : f64, guessed = true}},
    nodes = [{name = "n0", host = "gpu-a.example.org"}, {name = "n1"}]}
} {
  // CHECK-LABEL: func.func @main
  func.func @main(%a: memref<64xf32>) {
    // CHECK-NEXT: dhir.schedule %a {
    // CHECK-NEXT:   %gpu = dhir.target {device = "n0.gpu0"}
    // CHECK-NEXT:   %arm = dhir.target {device = "n1.cpu"}
    dhir.schedule %a {
      %gpu = dhir.target {device = "n0.gpu0"}
      %arm = dhir.target {device = "n1.cpu"}
      %t = dhir.task %gpu, %a {
      }
      %u = dhir.task %arm, %a {
      }
    }
    return
  }
}
