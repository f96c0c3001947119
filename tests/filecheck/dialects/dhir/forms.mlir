// The other forms of the dialect: kind-level and DLTI targets, inline targets,
// explicit yields, attributes, empty schedules, scalar operands, repeated operands.
// RUN: dhir-opt %s --split-input-file | filecheck %s
// RUN: dhir-opt %s --split-input-file | dhir-opt --split-input-file | filecheck %s
// RUN: dhir-opt %s --split-input-file --print-op-generic | dhir-opt --split-input-file | filecheck %s

// CHECK-LABEL: func.func @kinds
func.func @kinds(%a: memref<4x4xf64>, %s: f64, %n: index) {
  // CHECK-NEXT: dhir.schedule %a, %s, %n {
  dhir.schedule %a, %s, %n {
    // CHECK-NEXT: %any_cpu = dhir.target {kind = "cpu"}
    // CHECK-NEXT: %any_gpu = dhir.target {kind = "gpu"}
    // CHECK-NEXT: %anything = dhir.target {kind = "any"}
    // CHECK-NEXT: %arm = dhir.target {arch = "aarch64", kind = "cpu"}
    // CHECK-NEXT: %blackwell = dhir.target {arch = "sm_100a"}
    %any_cpu = dhir.target {kind = "cpu"}
    %any_gpu = dhir.target {kind = "gpu"}
    %anything = dhir.target {kind = "any"}
    %arm = dhir.target {arch = "aarch64", kind = "cpu"}
    %blackwell = dhir.target {arch = "sm_100a"}
    // CHECK-NEXT: %t = dhir.task %anything, %a attributes {note = "scale"} {
    // CHECK-NEXT:   %c0 = arith.constant 0 : index
    // CHECK-NEXT:   memref.store %s, %a[%c0, %n] : memref<4x4xf64>
    // CHECK-NEXT: }
    %t = dhir.task %anything, %a attributes {note = "scale"} {
      %c0 = arith.constant 0 : index
      memref.store %s, %a[%c0, %n] : memref<4x4xf64>
      dhir.yield
    }
    // CHECK-NEXT: %u = dhir.task target = "gpu", %a, %a {
    // CHECK-NEXT: }
    %u = dhir.task target = "gpu", %a, %a {
    }
    // CHECK-NEXT: %{{.*}} = dhir.task target = "cpu" {
    // CHECK-NEXT: }
    dhir.task target = "cpu" {
      dhir.yield
    }
    dhir.yield
  }
  // CHECK-NEXT: }
  // CHECK-NEXT: dhir.schedule {
  // CHECK-NEXT: }
  dhir.schedule {
  }
  func.return
}

// -----

// CHECK: module attributes {dlti.target_system_spec = #dlti.target_system_spec<"node0.gpu0" = #dlti.target_device_spec<"arch" = "sm_80", "memory_bandwidth_gbps" = 2039 : i64>>}
module attributes {dlti.target_system_spec = #dlti.target_system_spec<
    "node0.gpu0" = #dlti.target_device_spec<"arch" = "sm_80", "memory_bandwidth_gbps" = 2039 : i64>>} {
  func.func @dlti(%a: memref<8xi8>) {
    dhir.schedule %a {
      // CHECK: %dev = dhir.target {device = "node0.gpu0"}
      // CHECK: %spec = dhir.target {spec = #dlti.target_device_spec<"arch" = "x86_64", "l2_cache_size_in_bytes" = 1048576 : i64>}
      %dev = dhir.target {device = "node0.gpu0"}
      %spec = dhir.target {spec = #dlti.target_device_spec<"arch" = "x86_64", "l2_cache_size_in_bytes" = 1048576 : i64>}
      %t = dhir.task %dev, %a {
      }
      %u = dhir.task %spec, %a {
      }
    }
    func.return
  }
}

// -----

// A schedule inside a time loop, and host code between two schedules.
// CHECK-LABEL: func.func @loops
// CHECK:      scf.for %step = %c0 to %c10 step %c1 {
// CHECK-NEXT:   dhir.schedule %a, %step {
// CHECK:      memref.store %one, %a[%c0] : memref<16xf32>
// CHECK-NEXT: dhir.schedule %a {
func.func @loops(%a: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c10 = arith.constant 10 : index
  scf.for %step = %c0 to %c10 step %c1 {
    dhir.schedule %a, %step {
      %cpu = dhir.target {arch = "x86_64"}
      %t = dhir.task %cpu, %a {
        %f = arith.index_cast %step : index to i32
        %v = arith.sitofp %f : i32 to f32
        memref.store %v, %a[%step] : memref<16xf32>
      }
    }
  }
  %one = arith.constant 1.0 : f32
  memref.store %one, %a[%c0] : memref<16xf32>
  dhir.schedule %a {
    %cpu = dhir.target {arch = "x86_64"}
    %t = dhir.task %cpu, %a {
      func.call @helper(%a) : (memref<16xf32>) -> ()
    }
  }
  func.return
}
func.func private @helper(memref<16xf32>)
