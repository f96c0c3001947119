// gpu.binary, gpu.module's offloading handler, gpu.rotate, gpu.memset and
// gpu.warp_execute_on_lane_0 (xDSL 0.74 defines none of them).
module attributes {gpu.container_module} {
  gpu.binary @b1 [#gpu.object<#nvvm.target, "">]
  gpu.binary @b2 <#gpu.select_object<1>> {note} [#gpu.object<#nvvm.target, bin = "">, #gpu.object<#nvvm.target<chip = "sm_90">, properties = {O = 3 : i32}, "">]

  gpu.module @handled <#gpu.select_object<0>> [#nvvm.target] {
  }

  gpu.module @kernels {
    gpu.func @k(%x: f32) kernel {
      %r, %ok = gpu.rotate %x, 3, 16 : f32
      gpu.return
    }
  }

  func.func @memset(%dst: memref<3x7xf32>, %v: f32) {
    gpu.memset %dst, %v : memref<3x7xf32>, f32
    %t = gpu.wait async
    %t1 = gpu.memset async [%t] %dst, %v : memref<3x7xf32>, f32
    return
  }

  func.func @warp(%lane: index, %v: vector<4xi32>) -> vector<4xi32> {
    gpu.warp_execute_on_lane_0(%lane)[32] {
    }
    %0 = gpu.warp_execute_on_lane_0(%lane)[32] args(%v : vector<4xi32>) -> (vector<4xi32>) {
    ^bb0(%a: vector<128xi32>):
      %c = arith.constant dense<2> : vector<128xi32>
      %s = arith.addi %a, %c : vector<128xi32>
      gpu.yield %s : vector<128xi32>
    }
    return %0 : vector<4xi32>
  }
}
