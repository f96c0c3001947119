// The hand-written baseline of bench/gpu_triad.py: the same triad over the same float64
// arrays (1 GiB in all), one thread per element in blocks of 256, timed with CUDA events
// over `iterations` launches after 10 to warm up. Prints seconds per iteration.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void triad(double *a, const double *b, const double *c, double s, size_t n) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = b[i] + s * c[i];
}

static void check(cudaError_t code) {
  if (code != cudaSuccess) {
    fprintf(stderr, "triad.cu: %s\n", cudaGetErrorString(code));
    exit(1);
  }
}

int main(int argc, char **argv) {
  size_t n = (size_t)atoll(argv[1]);
  int iterations = atoi(argv[2]);
  double *a, *b, *c;
  check(cudaMalloc(&a, n * 8));
  check(cudaMalloc(&b, n * 8));
  check(cudaMalloc(&c, n * 8));
  check(cudaMemset(b, 0, n * 8));
  check(cudaMemset(c, 0, n * 8));
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start));
  check(cudaEventCreate(&stop));
  unsigned blocks = (unsigned)((n + 255) / 256);
  for (int k = 0; k < 10; k++) triad<<<blocks, 256>>>(a, b, c, 3.0, n);
  check(cudaEventRecord(start));
  for (int k = 0; k < iterations; k++) triad<<<blocks, 256>>>(a, b, c, 3.0, n);
  check(cudaEventRecord(stop));
  check(cudaEventSynchronize(stop));
  float ms;
  check(cudaEventElapsedTime(&ms, start, stop));
  printf("%.9e\n", ms * 1e-3 / iterations);
  return 0;
}
