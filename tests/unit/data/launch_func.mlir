// A gpu.func of the program's own gpu.module, launched by gpu.launch_func in a task.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @double(%m: memref<32xf32>) kernel {
      %t = gpu.thread_id x
      %v = memref.load %m[%t] : memref<32xf32>
      %w = arith.addf %v, %v : f32
      memref.store %w, %m[%t] : memref<32xf32>
      gpu.return
    }
  }
  func.func @main(%a: memref<32xf32>) {
    dhir.schedule %a {
      %gpu = dhir.target {arch = "sm_90"}
      %t0 = dhir.task %gpu, %a {
        %c1 = arith.constant 1 : index
        %c32 = arith.constant 32 : index
        gpu.launch_func @kernels::@double blocks in (%c1, %c1, %c1) threads in (%c32, %c1, %c1) args(%a : memref<32xf32>)
      }
    }
    return
  }
}
