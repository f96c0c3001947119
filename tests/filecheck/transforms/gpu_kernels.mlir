// REQUIRES: mlir
// A GPU task's parallel loop becomes a gpu.launch (tiled: 256 threads a block), named
// after the task in the gpu.module of its chip; an explicit gpu.launch keeps its body and
// only gets its kernel's name. CPU tasks are left alone. A task whose loops become kernels
// keeps the rows it needs and writes of each memref (`dhir.gpu_rows`, -1: all of them),
// found while they were loops, for dhir-gpu-data.
// RUN: dhir-opt %s -p dhir-gpu-kernels | filecheck %s

// CHECK-LABEL: func.func @main
// CHECK:         dhir.task %cpu, %a {
// CHECK:           scf.parallel
// CHECK:         dhir.task %gpu, %a attributes {name = "scale", dhir.gpu_rows = {{\[}}[-1 : i64, -1 : i64, -1 : i64, -1 : i64]]} {
// CHECK-NOT:       scf.parallel
// CHECK:           %[[TILE:.*]] = arith.constant 256 : index
// CHECK:           gpu.launch blocks
// CHECK-SAME:      threads(%{{.*}}) in (%{{.*}} = %[[TILE]],
// CHECK-SAME:      module(@dhir_sm_90) function(@scale0_kernel0)
// CHECK:         dhir.task %gpu, %a {
// CHECK:           gpu.launch blocks
// CHECK-SAME:      module(@dhir_sm_90) function(@task1_kernel0)
func.func @main(%a: memref<1000xf32>) {
  dhir.schedule %a {
    %cpu = dhir.target {arch = "x86_64"}
    %gpu = dhir.target {arch = "sm_90"}
    %t0 = dhir.task %cpu, %a {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant 1000 : index
      scf.parallel (%i) = (%c0) to (%n) step (%c1) {
        %one = arith.constant 1.0 : f32
        memref.store %one, %a[%i] : memref<1000xf32>
        scf.reduce
      }
    }
    %t1 = dhir.task %gpu, %a attributes {name = "scale"} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant 1000 : index
      scf.parallel (%i) = (%c0) to (%n) step (%c1) {
        %v = memref.load %a[%i] : memref<1000xf32>
        %w = arith.addf %v, %v : f32
        memref.store %w, %a[%i] : memref<1000xf32>
        scf.reduce
      }
    }
    %t2 = dhir.task %gpu, %a {
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
                 threads(%tx, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1) {
        %v = memref.load %a[%tx] : memref<1000xf32>
        memref.store %v, %a[%tx] : memref<1000xf32>
        gpu.terminator
      }
    }
  }
  return
}
