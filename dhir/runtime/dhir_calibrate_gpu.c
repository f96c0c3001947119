/* The GPU measurements behind `dhir calibrate` (dhir/machine/calibrate_gpu.py builds and
   runs this, once per GPU, with DHIR_GPU_DEVICE naming it).

     dhir_calibrate_gpu TRIALS SIZE:REPS...

   For each size, the median over TRIALS of one copy's time, each copy waited for before the
   next starts, as compiled programs copy their memrefs: through dhir's own GPU runtime
   (dhir_gpu_rt.c), from and to ordinary malloc'd host memory. Prints one line per direction
   and size, "<h2d|d2h|d2d> <bytes> <seconds> 1". Kernels are not timed here: the compute
   rate stays the data sheet's. */

#include "dhir_rt.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *times, int n) {
  qsort(times, (size_t)n, sizeof(double), by_value);
  return n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
}

/* The median time of one copy of `bytes` from `from` to `to`; one more trial than asked,
   the first (which pays for first touches and the driver's staging buffers) not kept. */
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

int main(int argc, char **argv) {
  int trials = argc >= 3 ? atoi(argv[1]) : 0;
  if (trials < 1) {
    fprintf(stderr, "usage: %s TRIALS SIZE:REPS...\n", argv[0]);
    return 2;
  }
  size_t largest = 1;
  for (int k = 2; k < argc; k++) {
    size_t bytes = strtoull(argv[k], NULL, 10);
    if (bytes > largest) largest = bytes;
  }
  char *host = malloc(largest);
  double *times = malloc((size_t)(trials + 1) * sizeof(double));
  if (host == NULL || times == NULL) {
    fprintf(stderr, "dhir_calibrate_gpu: cannot allocate %zu bytes of host memory\n", largest);
    return 3;
  }
  memset(host, 1, largest);
  void *stream = mgpuStreamCreate();
  char *device = mgpuMemAlloc(largest, stream, false);
  char *other = mgpuMemAlloc(largest, stream, false);
  for (int k = 2; k < argc; k++) {
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
  free(times);
  free(host);
  return 0;
}
