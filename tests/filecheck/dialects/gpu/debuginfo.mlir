// RUN: dhir-opt %s --print-debuginfo | dhir-opt --print-debuginfo | filecheck %s

// --print-debuginfo writes each gpu.func argument's location after its attributes, as
// mlir-opt does; dhir-opt reads it back (it stopped at "')' expected").

gpu.module @m {
  gpu.func @k(%x: f32 loc("k.cu":1:2), %y: memref<4xf32> {llvm.noalias} loc("k.cu":1:9)) kernel {
    gpu.return
  }
  gpu.func @plain(%z: i32) {
    gpu.return
  }
}

// CHECK: gpu.func @k(%x: f32 loc("k.cu":1:2), %y: memref<4xf32> {llvm.noalias} loc("k.cu":1:9)) kernel {
// CHECK: gpu.func @plain(%z: i32 loc({{.*}})) {
