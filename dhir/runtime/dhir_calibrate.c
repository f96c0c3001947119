/* The measurements behind `dhir calibrate` (dhir/toolchain/calibrate.py builds and runs this).

     dhir_calibrate pingpong TRIALS SIZE:REPS...  under mpirun -n 2: one-way time per size
     dhir_calibrate triad N TRIALS                a[i] = b[i] + s * c[i] on every core
     dhir_calibrate serial N TRIALS SWEEPS        the same triad on one core, as generated
                                                  code runs it: SWEEPS sweeps per trial
     dhir_calibrate fma ITERS TRIALS              f32 fused multiply-adds on every core
                                                  (on one with OMP_NUM_THREADS=1)
     dhir_calibrate loop SWEEPS TRIALS            one core: f64 5-point stencil sweeps over
                                                  grids in its own cache, plain loops
     dhir_calibrate chain ITERS TRIALS            one core: s = s * a; s = s + b, each op
                                                  waiting for the last (the FP latency)

   Each prints one line per result, "<name> <amount> <seconds> <threads> <spread>", with the
   median time over TRIALS and how far the middle half of the trials spread around it: what a program typically gets, which the cost model predicts. (The
   best was kept at first; on a shared VM a streaming loop's median trial took 5-60% longer
   than its best, so the estimates came out that much too short.) */

#include "dhir_median.h"

#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Independent accumulators per thread: enough vector registers' worth to cover the FMA
   latency on every FMA unit, few enough to stay in registers. */
#if defined(__AVX512F__)
#define FMA_LANES 256
#elif defined(__AVX__)
#define FMA_LANES 96
#else
#define FMA_LANES 64
#endif

/* Room for TRIALS times, or exit. */
static double *trial_times(int trials) {
  double *times = trials < 1 ? NULL : malloc((size_t)trials * sizeof(double));
  if (times == NULL) {
    fprintf(stderr, "dhir_calibrate: need at least one trial\n");
    exit(3);
  }
  return times;
}

/* rank<R>.started in DHIR_STATE_DIR: the rank got past MPI_Init (the launcher otherwise
   says that mpirun did not start it, most often on a host it cannot reach). */
static void mark_started(int rank) {
  const char *dir = getenv("DHIR_STATE_DIR");
  if (dir == NULL) return;
  char path[4096];
  snprintf(path, sizeof path, "%s/rank%d.started", dir, rank);
  FILE *file = fopen(path, "w");
  if (file != NULL) fclose(file);
}

static int pingpong(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  mark_started(rank);
  if (size != 2 || argc < 4) {
    if (rank == 0) fprintf(stderr, "pingpong runs on exactly 2 ranks with sizes\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int trials = atoi(argv[2]);
  size_t largest = 1;
  for (int k = 3; k < argc; k++) {
    size_t bytes = strtoull(argv[k], NULL, 10);
    if (bytes > largest) largest = bytes;
  }
  char *buffer = malloc(largest);
  if (buffer == NULL) MPI_Abort(MPI_COMM_WORLD, 3);
  memset(buffer, rank, largest);
  int peer = 1 - rank;
  /* One more trial than asked: the first warms up the path and is not kept. */
  double *times = trial_times(trials + 1);
  for (int k = 3; k < argc; k++) {
    int bytes = atoi(argv[k]), reps = 1;
    const char *colon = strchr(argv[k], ':');
    if (colon != NULL) reps = atoi(colon + 1);
    for (int trial = 0; trial <= trials; trial++) {
      MPI_Barrier(MPI_COMM_WORLD);
      double start = MPI_Wtime();
      for (int r = 0; r < reps; r++) {
        if (rank == 0) {
          MPI_Send(buffer, bytes, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
          MPI_Recv(buffer, bytes, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
          MPI_Recv(buffer, bytes, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          MPI_Send(buffer, bytes, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
        }
      }
      times[trial] = (MPI_Wtime() - start) / (2.0 * reps);
    }
    double typical = median(times + 1, trials);
    if (rank == 0) printf("pingpong %d %.9e 1 %.4f\n", bytes, typical, spread(times + 1, trials));
  }
  free(times);
  free(buffer);
  MPI_Finalize();
  return 0;
}

static int triad(char **argv) {
  size_t n = strtoull(argv[2], NULL, 10);
  int trials = atoi(argv[3]);
  double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double));
  double *c = malloc(n * sizeof(double));
  if (a == NULL || b == NULL || c == NULL) {
    fprintf(stderr, "triad: cannot allocate 3 x %zu doubles\n", n);
    return 3;
  }
  /* Each thread first touches the pages it works on later, so they are its node's. */
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) {
    a[i] = 0.0;
    b[i] = 1.0;
    c[i] = 2.0;
  }
  double *times = trial_times(trials);
  for (int trial = 0; trial < trials; trial++) {
    double s = 3.0 + trial, start = omp_get_wtime();
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
    times[trial] = omp_get_wtime() - start;
  }
  /* STREAM's count: read b and c, write a (the write-allocate read is not counted). */
  double typical = median(times, trials);
  printf("triad %zu %.9e %d %.4f\n", 3 * n * sizeof(double), typical, omp_get_max_threads(),
         spread(times, trials));
  free(times);
  fprintf(stderr, "check %g\n", a[n / 2]);
  free(a);
  free(b);
  free(c);
  return 0;
}

/* One core streaming as the code dhir generates does: a plain loop, built at -O2 without
   -march, which vectorizes to 128-bit registers; so at most 2 doubles a step here too.
   Small N measures a cache (the first sweep brings the arrays in), large N the memory. */
static int serial(char **argv) {
  size_t n = strtoull(argv[2], NULL, 10);
  int trials = atoi(argv[3]);
  long sweeps = atol(argv[4]);
  double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double));
  double *c = malloc(n * sizeof(double));
  if (a == NULL || b == NULL || c == NULL || sweeps < 1) {
    fprintf(stderr, "serial: cannot allocate 3 x %zu doubles\n", n);
    return 3;
  }
  for (size_t i = 0; i < n; i++) {
    a[i] = 0.0;
    b[i] = 1.0;
    c[i] = 2.0;
  }
  double *times = trial_times(trials);
  for (int trial = 0; trial < trials; trial++) {
    double s = 3.0 + trial, start = omp_get_wtime();
    for (long sweep = 0; sweep < sweeps; sweep++) {
#pragma clang loop vectorize_width(2) interleave_count(1)
      for (size_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
      /* The next sweep depends on this one, so the sweeps cannot be merged. */
      b[sweep % n] += a[n - 1 - sweep % n] * 1e-300;
    }
    times[trial] = omp_get_wtime() - start;
  }
  double moved = (double)sweeps * 3.0 * (double)n * sizeof(double);
  double typical = median(times, trials);
  printf("serial %.9e %.9e 1 %.4f\n", moved, typical, spread(times, trials));
  free(times);
  fprintf(stderr, "check %g\n", a[n / 2]);
  free(a);
  free(b);
  free(c);
  return 0;
}

/* A row of a 5-point stencil, as generated code runs a loop dhir's optimizer does not
   block: a function of its own, on pointers that may alias (clang vectorizes it behind a
   check, as it does generated code), adds and multiplies apart. */
#define LOOP_COLUMNS 256
#define LOOP_ROWS 64
__attribute__((noinline)) static void stencil_row(const double *up, const double *mid,
                                                  const double *down, double *out, double w) {
#pragma clang fp contract(off)
  for (int j = 1; j < LOOP_COLUMNS - 1; j++)
    out[j] = w * (mid[j - 1] + mid[j] + mid[j + 1] + up[j] + down[j]);
}

/* Sweeps of the stencil from one grid to another and back (jacobi-2d's), over two grids
   of 128 KiB: from the core's own cache, as the bands of dhir-time-tiles run. */
static int loop(char **argv) {
  long sweeps = atol(argv[2]);
  int trials = atoi(argv[3]);
  size_t cells = (size_t)LOOP_ROWS * LOOP_COLUMNS;
  double *grids = malloc(2 * cells * sizeof(double));
  if (grids == NULL || sweeps < 1) {
    fprintf(stderr, "loop: cannot allocate 2 x %zu doubles\n", cells);
    return 3;
  }
  for (size_t k = 0; k < 2 * cells; k++) grids[k] = 1.0 + (double)(k % 7);
  double *times = trial_times(trials);
  for (int trial = 0; trial < trials; trial++) {
    double start = omp_get_wtime();
    for (long sweep = 0; sweep < sweeps; sweep++) {
      double *in = grids + (sweep % 2) * cells, *out = grids + (1 - sweep % 2) * cells;
      for (int i = 1; i < LOOP_ROWS - 1; i++)
        stencil_row(in + (i - 1) * LOOP_COLUMNS, in + i * LOOP_COLUMNS,
                    in + (i + 1) * LOOP_COLUMNS, out + i * LOOP_COLUMNS, 0.2);
    }
    times[trial] = omp_get_wtime() - start;
  }
  double flops = 5.0 * (LOOP_ROWS - 2) * (LOOP_COLUMNS - 2) * (double)sweeps;
  double typical = median(times, trials);
  printf("loop %.9e %.9e 1 %.4f\n", flops, typical, spread(times, trials));
  free(times);
  fprintf(stderr, "check %g\n", grids[cells / 2]);
  free(grids);
  return 0;
}

static int chain(char **argv) {
  long iters = atol(argv[2]);
  int trials = atoi(argv[3]);
  /* From the command line, so the compiler cannot fold the chain away. */
  double a = 1.0 - 1.0 / (double)(iters + 2), b = 1.0 / (double)(iters + 3), s = 1.0;
  double *times = trial_times(trials);
  for (int trial = 0; trial < trials; trial++) {
    double start = omp_get_wtime();
    {
#pragma clang fp contract(off)
      for (long it = 0; it < iters; it++) {
        s = s * a;
        s = s + b;
      }
    }
    times[trial] = omp_get_wtime() - start;
  }
  double typical = median(times, trials);
  printf("chain %.9e %.9e 1 %.4f\n", 2.0 * (double)iters, typical, spread(times, trials));
  free(times);
  fprintf(stderr, "check %g\n", s);
  return 0;
}

static int fma(char **argv) {
  long iters = atol(argv[2]);
  int trials = atoi(argv[3]);
  /* From the command line, so the compiler cannot fold the loop away. */
  float scale = (float)(1.0 - 1.0 / (double)(iters + 2)), shift = 1e-7f;
  double *times = trial_times(trials);
  float sink = 0.0f;
  for (int trial = 0; trial < trials; trial++) {
    double start = omp_get_wtime();
#pragma omp parallel reduction(+ : sink)
    {
      float acc[FMA_LANES];
      for (int j = 0; j < FMA_LANES; j++) acc[j] = (float)(j + omp_get_thread_num());
      for (long it = 0; it < iters; it++)
        for (int j = 0; j < FMA_LANES; j++) acc[j] = acc[j] * scale + shift;
      for (int j = 0; j < FMA_LANES; j++) sink += acc[j];
    }
    times[trial] = omp_get_wtime() - start;
  }
  int threads = omp_get_max_threads();
  double flops = 2.0 * FMA_LANES * (double)iters * threads;
  double typical = median(times, trials);
  printf("fma %.9e %.9e %d %.4f\n", flops, typical, threads, spread(times, trials));
  free(times);
  fprintf(stderr, "check %g\n", sink);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 4 && strcmp(argv[1], "pingpong") == 0) return pingpong(argc, argv);
  if (argc == 4 && strcmp(argv[1], "triad") == 0) return triad(argv);
  if (argc == 5 && strcmp(argv[1], "serial") == 0) return serial(argv);
  if (argc == 4 && strcmp(argv[1], "fma") == 0) return fma(argv);
  if (argc == 4 && strcmp(argv[1], "loop") == 0) return loop(argv);
  if (argc == 4 && strcmp(argv[1], "chain") == 0) return chain(argv);
  fprintf(stderr,
          "usage: %s pingpong TRIALS SIZE:REPS... | triad N TRIALS | serial N TRIALS SWEEPS | "
          "fma ITERS TRIALS | loop SWEEPS TRIALS | chain ITERS TRIALS\n",
          argv[0]);
  return 2;
}
