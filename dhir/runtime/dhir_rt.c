/* dhir's C runtime. Every failure ends in dhir_rt_fatal, which aborts all ranks: a rank that
 * merely exited would leave the others blocked in a collective, and the run would hang. */
#include "dhir_rt.h"

#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Cached so that reporting an error never calls back into a possibly broken MPI. */
static int world_rank = -1;
static int world_size = -1;

/* MPI counts are int; larger transfers go in pieces of this many bytes (tests make it small). */
#ifndef DHIR_RT_CHUNK_BYTES
#define DHIR_RT_CHUNK_BYTES ((int64_t)1 << 30)
#endif
static const int64_t CHUNK_BYTES = DHIR_RT_CHUNK_BYTES;

_Noreturn void dhir_rt_fatal(const char *format, ...) {
  /* One write, so that messages of ranks failing together do not interleave. */
  char message[4096];
  int used = snprintf(message, sizeof message, "dhir: error on rank %d: ", world_rank);
  va_list args;
  va_start(args, format);
  vsnprintf(message + used, sizeof message - (size_t)used - 1, format, args);
  va_end(args);
  fprintf(stderr, "%s\n", message);
  fflush(stderr);
  /* mpirun may exit before it has forwarded the ranks' output (MPICH does so under load), so
   * the message also goes to a file the launcher reads. */
  const char *dir = getenv("DHIR_ERROR_DIR");
  char path[PATH_MAX];
  if (dir != NULL && snprintf(path, sizeof path, "%s/rank%d.err", dir, world_rank) < (int)sizeof path) {
    FILE *file = fopen(path, "a");
    if (file != NULL) {
      fprintf(file, "%s\n", message);
      fclose(file);
    }
  }
  fflush(stdout);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized)
    MPI_Abort(MPI_COMM_WORLD, 1);
  exit(1); /* MPI_Abort is allowed to return; this rank must still stop */
}

static void check(int code, const char *call) {
  if (code == MPI_SUCCESS)
    return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    snprintf(text, sizeof text, "error code %d", code);
  dhir_rt_fatal("%s failed: %s", call, text);
}

/* Compiled code ignores the return codes of the MPI calls it makes; this handler turns any
 * failure in them into the same clear message instead of MPI's default abort text. */
static void on_mpi_error(MPI_Comm *comm, int *code, ...) {
  (void)comm;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(*code, text, &length) != MPI_SUCCESS)
    snprintf(text, sizeof text, "error code %d", *code);
  dhir_rt_fatal("MPI call failed: %s", text);
}

void dhir_rt_init(int *argc, char ***argv, int32_t expected_ranks) {
  int provided = 0;
  /* FUNNELED: OpenMP-parallel loops may run between MPI calls, never inside them. */
  check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  check(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &world_size), "MPI_Comm_size");
  MPI_Errhandler handler;
  check(MPI_Comm_create_errhandler(on_mpi_error, &handler), "MPI_Comm_create_errhandler");
  check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, handler), "MPI_Comm_set_errhandler");
  if (expected_ranks > 0 && world_size != expected_ranks) {
    /* Rank 0 alone reports, so the message appears once; the others wait for its abort, and
     * abort themselves should it never come. */
    if (world_rank != 0)
      sleep(10);
    dhir_rt_fatal("this program was built for %d MPI ranks but was started on %d; "
                  "run it with mpirun -n %d (or rebuild it for %d ranks)",
                  expected_ranks, world_size, expected_ranks, world_size);
  }
}

void dhir_rt_finalize(void) { check(MPI_Finalize(), "MPI_Finalize"); }

int32_t dhir_rt_comm_size(void) { return world_size; }

int32_t dhir_rt_comm_rank(void) { return world_rank; }

void dhir_rt_barrier(void) { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

void dhir_rt_bcast(int64_t ptr, int64_t bytes, int32_t root) {
  if (bytes < 0)
    dhir_rt_fatal("dhir_rt_bcast: negative size %lld bytes", (long long)bytes);
  if (root < 0 || root >= world_size)
    dhir_rt_fatal("dhir_rt_bcast: root rank %d does not exist (the program runs on %d ranks)",
                  root, world_size);
  char *data = (char *)(intptr_t)ptr;
  if (data == NULL && bytes > 0)
    dhir_rt_fatal("dhir_rt_bcast: null buffer");
  for (int64_t done = 0; done < bytes; done += CHUNK_BYTES) {
    int64_t piece = bytes - done < CHUNK_BYTES ? bytes - done : CHUNK_BYTES;
    check(MPI_Bcast(data + done, (int)piece, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
  }
}

void dhir_rt_expect_argc(int argc, int expected, const char *usage) {
  if (argc != expected)
    dhir_rt_fatal("expected %d command-line arguments, got %d; usage: %s", expected - 1, argc - 1,
                  usage);
}

int64_t dhir_rt_parse_int(const char *text, int64_t low, int64_t high, const char *what) {
  char *end = NULL;
  errno = 0;
  long long value = strtoll(text, &end, 0);
  if (errno != 0 || end == text || *end != '\0' || value < low || value > high)
    dhir_rt_fatal("%s: '%s' is not an integer in [%lld, %lld]", what, text, (long long)low,
                  (long long)high);
  return value;
}

double dhir_rt_parse_float(const char *text, const char *what) {
  char *end = NULL;
  errno = 0;
  double value = strtod(text, &end);
  /* ERANGE is fine: subnormals and overflow to inf are what the caller asked for. */
  if (end == text || *end != '\0')
    dhir_rt_fatal("%s: '%s' is not a number", what, text);
  return value;
}

int64_t dhir_rt_layout(int32_t rank, const int64_t *sizes, int64_t *strides, int64_t element_bytes) {
  int64_t count = 1;
  for (int32_t d = rank - 1; d >= 0; --d) {
    if (sizes[d] < 0)
      dhir_rt_fatal("dimension %d has negative size %lld", d, (long long)sizes[d]);
    strides[d] = count;
    if (__builtin_mul_overflow(count, sizes[d], &count))
      dhir_rt_fatal("array of %d dimensions is too large to address", rank);
  }
  int64_t bytes = 0;
  if (__builtin_mul_overflow(count, element_bytes, &bytes))
    dhir_rt_fatal("array of %d dimensions is too large to address", rank);
  return bytes;
}

void *dhir_rt_load_arg(int32_t index, const char *path, int64_t bytes) {
  /* 64-byte alignment lets vectorized code use aligned loads; aligned_alloc needs a multiple. */
  size_t capacity = ((size_t)bytes + 63) / 64 * 64;
  char *data = aligned_alloc(64, capacity ? capacity : 64);
  if (data == NULL)
    dhir_rt_fatal("argument #%d: cannot allocate %lld bytes", index, (long long)bytes);
  if (world_rank == 0) {
    FILE *file = fopen(path, "rb");
    if (file == NULL)
      dhir_rt_fatal("argument #%d: cannot open %s: %s", index, path, strerror(errno));
    struct stat info;
    if (fstat(fileno(file), &info) != 0)
      dhir_rt_fatal("argument #%d: cannot stat %s: %s", index, path, strerror(errno));
    if ((int64_t)info.st_size != bytes)
      dhir_rt_fatal("argument #%d: %s holds %lld bytes, the argument needs %lld", index, path,
                    (long long)info.st_size, (long long)bytes);
    if (bytes > 0 && fread(data, 1, (size_t)bytes, file) != (size_t)bytes)
      dhir_rt_fatal("argument #%d: cannot read %s: %s", index, path,
                    ferror(file) ? strerror(errno) : "file ended early");
    fclose(file);
  }
  dhir_rt_bcast((int64_t)(intptr_t)data, bytes, 0);
  return data;
}

void dhir_rt_save_arg(const char *dir, int32_t index, const void *data, int64_t bytes) {
  if (world_rank != 0)
    return;
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s/arg%d.raw", dir, index) >= (int)sizeof path)
    dhir_rt_fatal("output directory name too long: %s", dir);
  FILE *file = fopen(path, "wb");
  if (file == NULL)
    dhir_rt_fatal("cannot create %s: %s", path, strerror(errno));
  if (bytes > 0 && fwrite(data, 1, (size_t)bytes, file) != (size_t)bytes)
    dhir_rt_fatal("cannot write %s: %s", path, strerror(errno));
  if (fclose(file) != 0)
    dhir_rt_fatal("cannot write %s: %s", path, strerror(errno));
}
