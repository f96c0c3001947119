/* The kernel `dhir_calibrate_gpu fma` times: f32 fused multiply-adds, DHIR_FMA_LANES independent
   chains per thread (enough, with many warps per SM, to cover the FMA latency), ITERS steps
   each; every thread writes its sum, so nothing can be folded away.

   Compiled to PTX for the GPU's chip by dhir/toolchain/calibrate_gpu.py with clang's NVPTX
   back end (`clang -cc1 -triple nvptx64-nvidia-cuda`): no CUDA toolkit needed, and the
   driver compiles the PTX when the program loads it, as it does for programs built with
   format `isa`. */

#include "dhir_calibrate_gpu.h"

__attribute__((nvptx_kernel)) void dhir_fma(float *out, int iters, float scale, float shift) {
  int thread = __nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() +
               __nvvm_read_ptx_sreg_tid_x();
  float acc[DHIR_FMA_LANES];
  for (int j = 0; j < DHIR_FMA_LANES; j++)
    acc[j] = (float)(j + thread);
  for (int i = 0; i < iters; i++)
    for (int j = 0; j < DHIR_FMA_LANES; j++)
      acc[j] = __builtin_fmaf(acc[j], scale, shift);
  float sum = 0.0f;
  for (int j = 0; j < DHIR_FMA_LANES; j++)
    sum += acc[j];
  out[thread] = sum;
}
