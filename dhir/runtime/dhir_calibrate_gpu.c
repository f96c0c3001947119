/* The GPU measurements behind `dhir calibrate` (dhir/toolchain/calibrate_gpu.py builds and
   runs this, once per GPU, with DHIR_GPU_DEVICE naming it).

     dhir_calibrate_gpu copies TRIALS SIZE:REPS...
     dhir_calibrate_gpu fma TRIALS PTX_FILE ITERS

   copies: for each size, the median over TRIALS of one copy's time, each copy waited for
   before the next starts, as compiled programs copy their memrefs: through dhir's own GPU
   runtime (dhir_gpu_rt.c), from and to ordinary malloc'd host memory. Prints one line per
   direction and size, "<h2d|d2h|d2d> <bytes> <seconds> 1".

   fma: the median over TRIALS of one run of the kernel `dhir_fma` of PTX_FILE
   (dhir_calibrate_gpu_kernel.c compiled for this GPU) on FMA_GRID blocks of FMA_BLOCK
   threads, ITERS steps; prints "fma <flops> <seconds> <threads>".

   Each first trial (first touches, the driver's staging buffers) is not kept. */

#include "dhir_calibrate_gpu.h"
#include "dhir_median.h"
#include "dhir_rt.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Blocks and threads per block of the FMA kernel: more blocks than any GPU has SMs times
   the blocks one SM holds, so every SM stays full until the last wave. */
enum { FMA_GRID = 8192, FMA_BLOCK = 256 };

void dhir_rt_gpu_task(int64_t where);
void *mgpuModuleLoadJIT(void *data, int opt_level);
void *mgpuModuleGetFunction(void *module, const char *name);
void mgpuLaunchKernel(void *function, intptr_t grid_x, intptr_t grid_y, intptr_t grid_z,
                      intptr_t block_x, intptr_t block_y, intptr_t block_z, int32_t shared_bytes,
                      void *stream, void **params, void **extra, size_t param_count);
void *mgpuMemAlloc(uint64_t bytes, void *stream, bool host_shared);
void mgpuMemFree(void *pointer, void *stream);
void mgpuMemcpy(void *destination, void *source, size_t bytes, void *stream);
void *mgpuStreamCreate(void);
void mgpuStreamSynchronize(void *stream);
void mgpuStreamDestroy(void *stream);

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The median time of one copy of `bytes` from `from` to `to`. */
static double time_copy(void *to, void *from, size_t bytes, int reps, int trials, double *times,
                        void *stream) {
  for (int trial = 0; trial <= trials; trial++) {
    double start = now();
    for (int r = 0; r < reps; r++) {
      mgpuMemcpy(to, from, bytes, stream);
      mgpuStreamSynchronize(stream);
    }
    times[trial] = (now() - start) / reps;
  }
  return median(times + 1, trials);
}

static int copies(int argc, char **argv, int trials, double *times) {
  size_t largest = 1;
  for (int k = 3; k < argc; k++) {
    size_t bytes = strtoull(argv[k], NULL, 10);
    if (bytes > largest) largest = bytes;
  }
  char *host = malloc(largest);
  if (host == NULL) {
    fprintf(stderr, "dhir_calibrate_gpu: cannot allocate %zu bytes of host memory\n", largest);
    return 3;
  }
  memset(host, 1, largest);
  void *stream = mgpuStreamCreate();
  char *device = mgpuMemAlloc(largest, stream, false);
  char *other = mgpuMemAlloc(largest, stream, false);
  for (int k = 3; k < argc; k++) {
    size_t bytes = strtoull(argv[k], NULL, 10);
    const char *colon = strchr(argv[k], ':');
    int reps = colon != NULL ? atoi(colon + 1) : 1;
    if (bytes < 1 || reps < 1) {
      fprintf(stderr, "dhir_calibrate_gpu: bad size '%s'\n", argv[k]);
      return 2;
    }
    printf("h2d %zu %.9e 1\n", bytes, time_copy(device, host, bytes, reps, trials, times, stream));
    printf("d2h %zu %.9e 1\n", bytes, time_copy(host, device, bytes, reps, trials, times, stream));
    printf("d2d %zu %.9e 1\n", bytes, time_copy(other, device, bytes, reps, trials, times, stream));
  }
  mgpuMemFree(other, stream);
  mgpuMemFree(device, stream);
  mgpuStreamDestroy(stream);
  free(host);
  return 0;
}

/* PATH's whole text, NUL-terminated (the driver reads PTX as a C string); NULL if it fails. */
static char *read_text(const char *path) {
  FILE *file = fopen(path, "rb");
  if (file == NULL) return NULL;
  char *text = NULL;
  long size = fseek(file, 0, SEEK_END) == 0 ? ftell(file) : -1;
  if (size >= 0 && fseek(file, 0, SEEK_SET) == 0 && (text = malloc((size_t)size + 1)) != NULL) {
    if (fread(text, 1, (size_t)size, file) == (size_t)size) {
      text[size] = '\0';
    } else {
      free(text);
      text = NULL;
    }
  }
  fclose(file);
  return text;
}

static int fma(char **argv, int trials, double *times) {
  char *ptx = read_text(argv[3]);
  int iters = atoi(argv[4]);
  if (ptx == NULL || iters < 1) {
    fprintf(stderr, "dhir_calibrate_gpu: cannot read the kernel '%s' (or ITERS < 1)\n", argv[3]);
    return 2;
  }
  void *function = mgpuModuleGetFunction(mgpuModuleLoadJIT(ptx, 4), "dhir_fma");
  void *stream = mgpuStreamCreate();
  size_t threads = (size_t)FMA_GRID * FMA_BLOCK;
  void *out = mgpuMemAlloc(threads * sizeof(float), stream, false);
  float scale = 1.0f - 1.0f / (float)(iters + 2), shift = 1e-7f;
  void *params[] = {&out, &iters, &scale, &shift};
  for (int trial = 0; trial <= trials; trial++) {
    double start = now();
    mgpuLaunchKernel(function, FMA_GRID, 1, 1, FMA_BLOCK, 1, 1, 0, stream, params, NULL, 4);
    mgpuStreamSynchronize(stream);
    times[trial] = now() - start;
  }
  double flops = 2.0 * DHIR_FMA_LANES * (double)iters * (double)threads;
  printf("fma %.9e %.9e %zu\n", flops, median(times + 1, trials), threads);
  mgpuMemFree(out, stream);
  mgpuStreamDestroy(stream);
  free(ptx);
  return 0;
}

int main(int argc, char **argv) {
  int trials = argc >= 4 ? atoi(argv[2]) : 0;
  bool is_copies = trials > 0 && strcmp(argv[1], "copies") == 0;
  bool is_fma = trials > 0 && argc == 5 && strcmp(argv[1], "fma") == 0;
  if (!is_copies && !is_fma) {
    fprintf(stderr, "usage: %s copies TRIALS SIZE:REPS... | fma TRIALS PTX_FILE ITERS\n",
            argv[0]);
    return 2;
  }
  double *times = malloc((size_t)(trials + 1) * sizeof(double));
  if (times == NULL) return 3;
  /* The runtime's errors name what was running. */
  dhir_rt_gpu_task((int64_t)(intptr_t) "the GPU calibration");
  int status = is_copies ? copies(argc, argv, trials, times) : fma(argv, trials, times);
  free(times);
  return status;
}
