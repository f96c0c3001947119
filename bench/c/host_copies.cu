// Host <-> device copy bandwidth as dhir's GPU runtime copies (cuMemcpyAsync on a stream,
// then a wait), from pageable memory (malloc, what dhir's host buffers are) and from the
// same memory page-locked with cudaHostRegister, with what registering costs. Argument:
// bytes (default 256 MiB). Prints one line per case: GB/s (median of 5) or ms.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <vector>

static void check(cudaError_t code) {
  if (code != cudaSuccess) {
    fprintf(stderr, "host_copies.cu: %s\n", cudaGetErrorString(code));
    exit(1);
  }
}

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

static double median_gbs(void *to, const void *from, size_t bytes, cudaMemcpyKind kind,
                         cudaStream_t stream) {
  std::vector<double> rates;
  for (int k = 0; k < 5; ++k) {
    double began = now();
    check(cudaMemcpyAsync(to, from, bytes, kind, stream));
    check(cudaStreamSynchronize(stream));
    rates.push_back(bytes / (now() - began) / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  return rates[2];
}

int main(int argc, char **argv) {
  size_t bytes = argc > 1 ? (size_t)atoll(argv[1]) : (size_t)256 << 20;
  char *host = (char *)malloc(bytes);
  memset(host, 1, bytes);
  void *device;
  check(cudaMalloc(&device, bytes));
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  median_gbs(device, host, bytes, cudaMemcpyHostToDevice, stream);  // warm up
  printf("pageable h2d %.1f GB/s\n", median_gbs(device, host, bytes, cudaMemcpyHostToDevice, stream));
  printf("pageable d2h %.1f GB/s\n", median_gbs(host, device, bytes, cudaMemcpyDeviceToHost, stream));
  double began = now();
  check(cudaHostRegister(host, bytes, cudaHostRegisterDefault));
  printf("register %.2f ms for %zu MiB\n", (now() - began) * 1e3, bytes >> 20);
  printf("pinned h2d %.1f GB/s\n", median_gbs(device, host, bytes, cudaMemcpyHostToDevice, stream));
  printf("pinned d2h %.1f GB/s\n", median_gbs(host, device, bytes, cudaMemcpyDeviceToHost, stream));
  began = now();
  check(cudaHostUnregister(host));
  printf("unregister %.2f ms\n", (now() - began) * 1e3);
  return 0;
}
