// A dhir.target naming a device the machine description does not have.
// RUN: dhir-opt %s --verify-diagnostics
// RUN: not dhir-opt %s 2>&1 | filecheck %s

module attributes {
  dlti.target_system_spec = #dlti.target_system_spec<
    "cpu0" = #dlti.target_device_spec<"arch" = "x86_64", "kind" = "cpu", "node" = "n0",
      "cores" = 8 : i64>>
} {
  func.func @main(%a: memref<64xf32>) {
    dhir.schedule %a {
      // expected-error@+1 {{device "gpu0" is not in any enclosing dlti.target_system_spec}}
      %gpu = dhir.target {device = "gpu0"}
      %t = dhir.task %gpu, %a {
      }
    }
    return
  }
}
// CHECK: device "gpu0" is not in any enclosing dlti.target_system_spec
