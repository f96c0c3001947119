/* dhir's C runtime. Every failure ends in dhir_rt_fatal, which aborts all ranks: a rank that
 * merely exited would leave the others blocked in a collective, and the run would hang. */
#include "dhir_rt.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h> /* MPIX_Query_cuda_support */
#endif
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Cached so that reporting an error never calls back into a possibly broken MPI. */
static int world_rank = -1;
static int world_size = -1;
/* Messages between device buffers (dhir_rt_device_isend): MPI_COMM_WORLD's duplicate. */
static MPI_Comm device_comm = MPI_COMM_NULL;
/* Per world rank: the lowest world rank on its node (see find_nodes). */
static int *node_of = NULL;

/* MPI counts are int, and OpenMPI 5 has no MPI-4 large-count calls (MPI_Send_c), so every
 * transfer goes as MPI_BYTE in pieces of at most this many bytes. Tests make it small, at
 * build time with -DDHIR_RT_CHUNK_BYTES or at run time with DHIR_MESSAGE_CHUNK_BYTES. */
#ifndef DHIR_RT_CHUNK_BYTES
#define DHIR_RT_CHUNK_BYTES ((int64_t)1 << 30)
#endif
static int64_t chunk_bytes = DHIR_RT_CHUNK_BYTES;

/* The trace (see "the trace" below): whether this run keeps one, and its hooks. */
static int tracing = 0;
static void trace_task(int entering, int64_t id);
static void trace_mpi(int begin, int64_t call, int64_t peer);
static void start_trace(void);
static void partial_trace(const char *why);
static void on_stop(int number);
static const char *task_names = ""; /* the task table dhir_rt_track was given */

/* Set once a rank reports its own error, so that the exit that follows adds no report. */
static int reported = 0;

_Noreturn void dhir_rt_fatal(const char *format, ...) {
  reported = 1;
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
  partial_trace("error");
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized)
    MPI_Abort(MPI_COMM_WORLD, 1);
  exit(1); /* MPI_Abort is allowed to return; this rank must still stop */
}

_Noreturn void dhir_rt_bad_step(int64_t step, int64_t line, int64_t column) {
  if (line > 0)
    dhir_rt_fatal("the loop at line %lld, column %lld has step %lld; MLIR leaves a loop whose step is "
                  "not positive undefined: count up with a positive step",
                  (long long)line, (long long)column, (long long)step);
  dhir_rt_fatal("a loop has step %lld; MLIR leaves a loop whose step is not positive undefined: "
                "count up with a positive step",
                (long long)step);
}

_Noreturn void dhir_rt_counter_overflow(int64_t last, int64_t step, int64_t line,
                                        int64_t column) {
  if (line > 0)
    dhir_rt_fatal("the loop at line %lld, column %lld: its counter overflows its type: %lld + step "
                  "%lld is past its largest value (undefined in MLIR; native code would wrap "
                  "around and keep looping): keep the upper bound at least a step below it",
                  (long long)line, (long long)column, (long long)last, (long long)step);
  dhir_rt_fatal("a loop's counter overflows its type: %lld + step %lld is past its largest value "
                "(undefined in MLIR; native code would wrap around and keep looping)",
                (long long)last, (long long)step);
}

static const char *const index_wraps_why =
    "64-bit index arithmetic in it wraps around, which dhir's analysis of its accesses takes as "
    "exact (an access such as A[3 * i] would read elements the analysis does not expect): keep "
    "the loop's bounds where its index arithmetic stays in 64 bits";

_Noreturn void dhir_rt_index_wraps(int64_t line, int64_t column) {
  if (line > 0)
    dhir_rt_fatal("the loop at line %lld, column %lld runs where %s", (long long)line,
                  (long long)column, index_wraps_why);
  dhir_rt_fatal("a loop runs where %s", index_wraps_why);
}

_Noreturn void dhir_rt_branch_index_wraps(int64_t line, int64_t column) {
  if (line > 0)
    dhir_rt_fatal("the branch at line %lld, column %lld runs where %s", (long long)line,
                  (long long)column, index_wraps_why);
  dhir_rt_fatal("a branch runs where %s", index_wraps_why);
}

_Noreturn void dhir_rt_alloc_too_large(int64_t line, int64_t column) {
  const char *why = "a size is negative or its bytes pass the largest signed 64-bit number "
                    "(MLIR's lowering would wrap them and allocate too few): check the sizes";
  if (line > 0)
    dhir_rt_fatal("the allocation at line %lld, column %lld: %s", (long long)line,
                  (long long)column, why);
  dhir_rt_fatal("an allocation: %s", why);
}

_Noreturn void dhir_rt_alloc_failed(int64_t line, int64_t column, int64_t bytes) {
  /* As dhir.units.byte_size writes them: 1023 B, 1.9 KiB, 728 TiB. */
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double size = (double)bytes;
  int unit = 0;
  while (size >= 1024.0 && unit < 6) {
    size /= 1024.0;
    unit++;
  }
  char amount[32];
  snprintf(amount, sizeof amount, unit == 0 ? "%.0f %s" : "%.3g %s", size, units[unit]);
  const char *why = "malloc gave no memory (the rank's memory, or what the system lets it "
                    "have, is smaller): give smaller sizes, or run on more ranks or nodes";
  if (line > 0)
    dhir_rt_fatal("the allocation at line %lld, column %lld of %s failed: %s", (long long)line,
                  (long long)column, amount, why);
  dhir_rt_fatal("an allocation of %s failed: %s", amount, why);
}

/* dhir_rt_copy_overlaps: a view as a set of element positions. `start` is in elements from
 * an origin common to both views; its dimensions have sizes above 1 and positive strides,
 * largest stride first. */
typedef struct {
  int64_t start;
  int rank;
  int64_t *size;
  int64_t *stride;
} copy_view;

/* The view's dimensions without those of size 1 or stride 0 (their elements repeat), with
 * negative strides turned round, sorted by stride, and a dimension that continues the next
 * one merged into it. 0 when the view has no element. */
static int normal_view(copy_view *view, const int64_t *size, const int64_t *stride, int rank) {
  int kept = 0;
  for (int d = 0; d < rank; d++) {
    if (size[d] <= 0)
      return 0;
    if (size[d] == 1 || stride[d] == 0)
      continue;
    int64_t step = stride[d];
    if (step < 0) {
      view->start += (size[d] - 1) * step;
      step = -step;
    }
    int at = kept++;
    while (at > 0 && view->stride[at - 1] < step) {
      view->size[at] = view->size[at - 1];
      view->stride[at] = view->stride[at - 1];
      at--;
    }
    view->size[at] = size[d];
    view->stride[at] = step;
  }
  int merged = 0;
  for (int d = 0; d < kept; d++) {
    if (merged > 0 && view->stride[merged - 1] == view->size[d] * view->stride[d]) {
      view->size[merged - 1] *= view->size[d];
      view->stride[merged - 1] = view->stride[d];
      continue;
    }
    view->size[merged] = view->size[d];
    view->stride[merged] = view->stride[d];
    merged++;
  }
  view->rank = merged;
  return 1;
}

static int64_t view_span(const copy_view *view) {
  int64_t span = 0;
  for (int d = 0; d < view->rank; d++)
    span += (view->size[d] - 1) * view->stride[d];
  return span;
}

/* Whether each stride exceeds the span of the dimensions inside it: then an element's
 * position has one decomposition, found greedily. */
static int nested_view(const copy_view *view) {
  int64_t inner = 0;
  for (int d = view->rank - 1; d >= 0; d--) {
    if (view->stride[d] <= inner)
      return 0;
    inner += (view->size[d] - 1) * view->stride[d];
  }
  return 1;
}

static int in_nested_view(const copy_view *view, int64_t position) {
  int64_t rest = position - view->start;
  if (rest < 0)
    return 0;
  for (int d = 0; d < view->rank; d++) {
    int64_t index = rest / view->stride[d];
    if (index >= view->size[d])
      return 0;
    rest -= index * view->stride[d];
  }
  return rest == 0;
}

static int compare_positions(const void *left, const void *right) {
  int64_t a = *(const int64_t *)left, b = *(const int64_t *)right;
  return (a > b) - (a < b);
}

/* Each element's position of `view`, in `out` (as many as the view has), in row-major order. */
static void view_positions(const copy_view *view, int64_t *out) {
  int64_t index[view->rank > 0 ? view->rank : 1];
  memset(index, 0, sizeof index);
  int64_t position = view->start, count = 0;
  for (;;) {
    out[count++] = position;
    int d = view->rank - 1;
    while (d >= 0 && index[d] + 1 == view->size[d]) {
      position -= index[d] * view->stride[d];
      index[d--] = 0;
    }
    if (d < 0)
      return;
    index[d]++;
    position += view->stride[d];
  }
}

static int64_t view_count(const copy_view *view) {
  int64_t count = 1;
  for (int d = 0; d < view->rank; d++)
    count *= view->size[d];
  return count;
}

/* Whether an element of `each` at a position p shares bytes with one of `other` at p or,
 * when `also_next`, at p - 1 (`other`'s start lies a part of an element further).
 * `other` is nested, or `sorted` holds its positions in order. */
static int views_meet(const copy_view *each, const copy_view *other, int also_next,
                      const int64_t *sorted, int64_t sorted_count) {
  int64_t low = other->start, high = other->start + view_span(other) + also_next;
  int64_t index[each->rank > 0 ? each->rank : 1];
  memset(index, 0, sizeof index);
  int64_t position = each->start;
  for (;;) {
    if (position >= low && position <= high) {
      for (int64_t next = 0; next <= also_next; next++) {
        int64_t at = position - next;
        int found = sorted == NULL ? in_nested_view(other, at)
                                   : bsearch(&at, sorted, (size_t)sorted_count, sizeof at,
                                             compare_positions) != NULL;
        if (found)
          return 1;
      }
    }
    int d = each->rank - 1;
    while (d >= 0 && index[d] + 1 == each->size[d]) {
      position -= index[d] * each->stride[d];
      index[d--] = 0;
    }
    if (d < 0)
      return 0;
    index[d]++;
    position += each->stride[d];
  }
}

/* Floor and ceiling of a / b for b > 0. */
static __int128 floor_div(__int128 a, __int128 b) { return a / b - (a % b != 0 && a < 0); }
static __int128 ceil_div(__int128 a, __int128 b) { return -floor_div(-a, b); }

/* Whether the progressions p + k*a (0 <= k < n) and q + l*b (0 <= l < m), a and b
 * positive, share a number: k*a - l*b = q - p solved by Euclid's algorithm. */
static int progressions_meet(int64_t p, int64_t a, int64_t n, int64_t q, int64_t b, int64_t m) {
  __int128 old_r = a, r = b, old_x = 1, x = 0;
  while (r != 0) {
    __int128 quotient = old_r / r, next = old_r - quotient * r;
    old_r = r;
    r = next;
    next = old_x - quotient * x;
    old_x = x;
    x = next;
  }
  __int128 g = old_r, gap = (__int128)q - p;
  if (gap % g != 0)
    return 0;
  /* a*old_x = g (mod b): k = old_x*gap/g + t*(b/g), l = (k*a - gap)/b. */
  __int128 kb = b / g, la = a / g;
  __int128 k0 = (old_x % kb) * ((gap / g) % kb) % kb;
  __int128 l0 = (k0 * a - gap) / b;
  __int128 low = ceil_div(-k0, kb), high = floor_div(n - 1 - k0, kb);
  __int128 low_l = ceil_div(-l0, la), high_l = floor_div(m - 1 - l0, la);
  if (low_l > low)
    low = low_l;
  if (high_l < high)
    high = high_l;
  return low <= high;
}

/* views_meet for two nested views, by rows (their innermost dimension, a progression):
 * the rows of each come in order of position and apart, so a sweep meets each pair of
 * rows whose ranges meet, and solves it as two progressions. */
static int nested_views_meet(const copy_view *each, const copy_view *other, int also_next) {
  const copy_view *views[2] = {each, other};
  int64_t index[2][each->rank + other->rank + 2];
  int64_t row[2], step[2], count[2], length[2];
  for (int k = 0; k < 2; k++) {
    const copy_view *view = views[k];
    memset(index[k], 0, sizeof index[k]);
    row[k] = view->start;
    step[k] = view->rank > 0 ? view->stride[view->rank - 1] : 1;
    count[k] = view->rank > 0 ? view->size[view->rank - 1] : 1;
    length[k] = (count[k] - 1) * step[k];
  }
  for (;;) {
    /* A position p of `each` meets `other`'s p, or its p - 1 when `also_next`. */
    if (row[0] <= row[1] + length[1] + also_next && row[1] <= row[0] + length[0]) {
      if (progressions_meet(row[0], step[0], count[0], row[1], step[1], count[1]))
        return 1;
      if (also_next &&
          progressions_meet(row[0], step[0], count[0], row[1] + 1, step[1], count[1]))
        return 1;
    }
    /* The row that ends first moves on: rows of a nested view come in order, apart. */
    int k = row[0] + length[0] < row[1] + length[1] + also_next ? 0 : 1;
    const copy_view *view = views[k];
    int d = view->rank - 2;
    while (d >= 0 && index[k][d] + 1 == view->size[d]) {
      row[k] -= index[k][d] * view->stride[d];
      index[k][d--] = 0;
    }
    if (d < 0)
      return 0;
    index[k][d]++;
    row[k] += view->stride[d];
  }
}

/* Whether the two views `given` holds (the source's and the target's starts in bytes, then
 * the source's sizes and strides, then the target's) share an element, not being one view. */
static int copy_views_overlap(const int64_t *given, int64_t rank, int64_t bytes) {
  const int64_t *sizes[2] = {given + 2, given + 2 + 2 * rank};
  const int64_t *strides[2] = {given + 2 + rank, given + 2 + 3 * rank};
  int same = given[0] == given[1];
  for (int64_t d = 0; d < rank && same; d++)
    same = sizes[0][d] <= 1 || strides[0][d] == strides[1][d];
  if (same || bytes <= 0)
    return 0;
  /* Positions in elements from the source's start; the target's start may lie a part of
   * an element further (a memref.view at a shift of odd bytes). */
  int64_t apart = given[1] - given[0];
  int64_t whole = apart / bytes - (apart % bytes < 0);
  int also_next = apart - whole * bytes != 0;
  int64_t size[2][rank > 0 ? rank : 1], stride[2][rank > 0 ? rank : 1];
  copy_view view[2] = {{0, 0, size[0], stride[0]}, {whole, 0, size[1], stride[1]}};
  for (int k = 0; k < 2; k++)
    if (!normal_view(&view[k], sizes[k], strides[k], (int)rank))
      return 0;
  /* The byte ranges first: most views apart are told apart here. */
  if (view[0].start > view[1].start + view_span(&view[1]) + also_next ||
      view[0].start + view_span(&view[0]) < view[1].start)
    return 0;
  /* Then, where both views' strides nest (as those of subviews do), row against row;
   * else each element of the source is looked up in the target, by its strides where
   * they nest, else in the target's sorted positions; or, where only the source's nest and
   * the starts are whole elements apart, the other way round. */
  if (nested_view(&view[0]) && nested_view(&view[1]))
    return nested_views_meet(&view[0], &view[1], also_next);
  if (!nested_view(&view[1]) && nested_view(&view[0]) && !also_next)
    return views_meet(&view[1], &view[0], 0, NULL, 0);
  if (nested_view(&view[1]))
    return views_meet(&view[0], &view[1], also_next, NULL, 0);
  int64_t count = view_count(&view[1]);
  int64_t *sorted = malloc((size_t)count * sizeof *sorted);
  if (sorted == NULL)
    dhir_rt_fatal("out of memory checking a memref.copy of %lld elements for overlap",
                  (long long)count);
  view_positions(&view[1], sorted);
  qsort(sorted, (size_t)count, sizeof *sorted, compare_positions);
  int meet = views_meet(&view[0], &view[1], also_next, sorted, count);
  free(sorted);
  return meet;
}

/* What dhir_rt_copy_views and dhir_rt_copy_dim were told, per thread (a copy may run in
 * an OpenMP loop), in copy_views_overlap's order. */
static _Thread_local int64_t copy_asked[2 + 4 * DHIR_RT_COPY_RANKS];
static _Thread_local int64_t copy_rank, copy_bytes;

void dhir_rt_copy_views(int64_t rank, int64_t bytes, int64_t source, int64_t target) {
  if (rank < 0 || rank > DHIR_RT_COPY_RANKS)
    dhir_rt_fatal("a memref.copy of rank %lld: dhir checks copies of rank up to %d", (long long)rank,
                  DHIR_RT_COPY_RANKS);
  copy_rank = rank;
  copy_bytes = bytes;
  copy_asked[0] = source;
  copy_asked[1] = target;
}

void dhir_rt_copy_dim(int64_t dim, int64_t source_size, int64_t source_stride,
                      int64_t target_size, int64_t target_stride) {
  if (dim < 0 || dim >= copy_rank)
    dhir_rt_fatal("dhir_rt_copy_dim: dimension %lld of a rank-%lld copy", (long long)dim,
                  (long long)copy_rank);
  int64_t *words = copy_asked + 2;
  words[dim] = source_size;
  words[copy_rank + dim] = source_stride;
  words[2 * copy_rank + dim] = target_size;
  words[3 * copy_rank + dim] = target_stride;
}

int64_t dhir_rt_copy_overlaps(void) {
  return copy_views_overlap(copy_asked, copy_rank, copy_bytes);
}

/* A ranked memref descriptor, as MLIR's LLVM lowering lays it out. */
typedef struct {
  char *allocated;
  char *aligned;
  int64_t offset;
  int64_t shape[]; /* sizes[rank], then strides[rank], in elements */
} ranked_descriptor;

void memrefCopy(int64_t element_bytes, dhir_rt_unranked *source, dhir_rt_unranked *target) {
  int64_t rank = source->rank;
  const ranked_descriptor *from = source->descriptor, *to = target->descriptor;
  char *in = from->aligned + from->offset * element_bytes;
  char *out = to->aligned + to->offset * element_bytes;
  if (rank == 0) {
    memcpy(out, in, (size_t)element_bytes);
    return;
  }
  const int64_t *sizes = from->shape, *in_strides = from->shape + rank;
  const int64_t *out_strides = to->shape + rank;
  for (int64_t d = 0; d < rank; ++d)
    if (sizes[d] == 0)
      return;
  /* Rows along the last dimension, one memcpy each where both are contiguous there. */
  int64_t last = rank - 1, length = sizes[last];
  int contiguous = in_strides[last] == 1 && out_strides[last] == 1;
  int64_t index[rank > 1 ? rank - 1 : 1];
  memset(index, 0, sizeof index);
  for (;;) {
    if (contiguous) {
      memcpy(out, in, (size_t)(length * element_bytes));
    } else {
      for (int64_t k = 0; k < length; ++k)
        memcpy(out + k * out_strides[last] * element_bytes,
               in + k * in_strides[last] * element_bytes, (size_t)element_bytes);
    }
    int64_t d = last - 1;
    for (; d >= 0; --d) {
      in += in_strides[d] * element_bytes;
      out += out_strides[d] * element_bytes;
      if (++index[d] < sizes[d])
        break;
      in -= sizes[d] * in_strides[d] * element_bytes;
      out -= sizes[d] * out_strides[d] * element_bytes;
      index[d] = 0;
    }
    if (d < 0)
      return;
  }
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

/* --- crash reports ---------------------------------------------------------------------
 * mpirun kills the other ranks when one dies, and which death it then reports is a race
 * (often the SIGKILL it sent). So a rank that dies of a signal first writes which one, to
 * standard error and to its error file, then dies of it as before. Only async-signal-safe
 * calls here: the message and the path are built before any signal can arrive. */
static const int CRASH_SIGNALS[] = {SIGFPE, SIGSEGV, SIGBUS, SIGILL, SIGABRT};
static char crash_path[PATH_MAX];

static const char *signal_name(int number) {
  switch (number) {
  case SIGFPE: return "SIGFPE (arithmetic error, such as an integer division by zero)";
  case SIGSEGV: return "SIGSEGV (invalid memory access)";
  case SIGBUS: return "SIGBUS (invalid memory access)";
  case SIGILL: return "SIGILL (illegal instruction)";
  default: return "SIGABRT (aborted)";
  }
}

static void append(char *text, size_t size, const char *more) {
  size_t used = strlen(text);
  for (size_t k = 0; more[k] != '\0' && used + 1 < size; ++k)
    text[used++] = more[k];
  text[used] = '\0';
}

static void on_crash(int number) {
  char line[256] = "dhir: error on rank ";
  char digits[16];
  int length = 0;
  for (int value = world_rank < 0 ? 0 : world_rank; length == 0 || value > 0; value /= 10)
    digits[length++] = (char)('0' + value % 10);
  char rank[16];
  for (int k = 0; k < length; ++k)
    rank[k] = digits[length - 1 - k];
  rank[length] = '\0';
  append(line, sizeof line, rank);
  append(line, sizeof line, ": the rank died of ");
  append(line, sizeof line, signal_name(number));
  append(line, sizeof line, "\n");
  ssize_t ignored = write(STDERR_FILENO, line, strlen(line));
  if (crash_path[0] != '\0') {
    int file = open(crash_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (file >= 0) {
      ignored = write(file, line, strlen(line));
      close(file);
    }
  }
  (void)ignored;
  partial_trace("crash");
  signal(number, SIG_DFL);
  raise(number);
}

static void report_crashes(void) {
  const char *dir = getenv("DHIR_ERROR_DIR");
  if (dir == NULL ||
      snprintf(crash_path, sizeof crash_path, "%s/rank%d.err", dir, world_rank) >= (int)sizeof crash_path)
    crash_path[0] = '\0';
  for (size_t k = 0; k < sizeof CRASH_SIGNALS / sizeof CRASH_SIGNALS[0]; ++k)
    signal(CRASH_SIGNALS[k], on_crash);
}

/* Writes a failing check's numbers, formatted as printf does, to standard error and the
 * rank's error file, as one write each: lines of threads failing together stay whole, as a
 * crash's report. A line too long for the buffer is not written. */
static void __attribute__((format(printf, 1, 2))) report_check(const char *format, ...) {
  char line[256];
  va_list args;
  va_start(args, format);
  int length = vsnprintf(line, sizeof line, format, args);
  va_end(args);
  if (length < 0 || (size_t)length >= sizeof line)
    return;
  ssize_t ignored = write(STDERR_FILENO, line, (size_t)length);
  if (crash_path[0] != '\0') {
    int file = open(crash_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (file >= 0) {
      ignored = write(file, line, (size_t)length);
      close(file);
    }
  }
  (void)ignored;
}

void dhir_rt_out_of_bounds(int64_t dim, int64_t index, int64_t size) {
  report_check("dhir: out-of-bounds access on rank %d: index %lld of dimension %lld, "
               "whose size is %lld\n",
               world_rank, (long long)index, (long long)dim, (long long)size);
}

void dhir_rt_cast_size(int64_t dim, int64_t size, int64_t needed) {
  report_check("dhir: size mismatch on rank %d: dimension %lld of the cast's operand "
               "has %lld, where its type says %lld\n",
               world_rank, (long long)dim, (long long)size, (long long)needed);
}

void dhir_rt_cast_layout(int64_t dim, int64_t have, int64_t want) {
  if (dim < 0)
    report_check("dhir: layout mismatch on rank %d: the cast's operand has offset %lld, "
                 "where its type says %lld\n",
                 world_rank, (long long)have, (long long)want);
  else
    report_check("dhir: layout mismatch on rank %d: dimension %lld of the cast's operand "
                 "has stride %lld, where its type says %lld\n",
                 world_rank, (long long)dim, (long long)have, (long long)want);
}

void dhir_rt_subview_numbers(int64_t dim, int64_t offset, int64_t size, int64_t stride,
                             int64_t extent) {
  report_check("dhir: subview out of bounds on rank %d: dimension %lld has offset %lld, "
               "size %lld and stride %lld in a source of %lld\n",
               world_rank, (long long)dim, (long long)offset, (long long)size,
               (long long)stride, (long long)extent);
}

void dhir_rt_expand_sizes(int64_t dim, int64_t product, int64_t size) {
  report_check("dhir: size mismatch on rank %d: expand_shape's sizes for dimension %lld "
               "multiply to %lld, where its source has %lld\n",
               world_rank, (long long)dim, (long long)product, (long long)size);
}

void dhir_rt_loop_size(int64_t operand, int64_t dim, int64_t size, int64_t extent) {
  report_check("dhir: size mismatch on rank %d: dimension %lld of operand #%lld has "
               "%lld, where the loop along it runs %lld times\n",
               world_rank, (long long)dim, (long long)operand, (long long)size,
               (long long)extent);
}

/* Whether DHIR_RT_STATS asks for the counts. Checked at start-up too (dhir checks it
 * before the build: options.py), so that a misspelt value does not stop the run at its end. */
static int stats_wanted(void) {
  const char *flag = getenv("DHIR_RT_STATS");
  if (flag == NULL || flag[0] == '\0' || strcmp(flag, "0") == 0)
    return 0;
  if (strcmp(flag, "1") != 0)
    dhir_rt_fatal("DHIR_RT_STATS=%s: expected 1 (report) or 0", flag);
  return 1;
}

/* Collective. Both ends of a transfer must cut it alike, and mpirun need not pass the
 * environment on to every rank, so rank 0 decides for all. dhir checks the value before
 * the build (dhir/toolchain/options.py, message_chunk_bytes): keep the two in agreement. */
static void set_chunk_bytes(void) {
  const char *text = world_rank == 0 ? getenv("DHIR_MESSAGE_CHUNK_BYTES") : NULL;
  if (text != NULL && *text != '\0')
    chunk_bytes = dhir_rt_parse_int(text, 1, INT_MAX, "DHIR_MESSAGE_CHUNK_BYTES");
  check(MPI_Bcast(&chunk_bytes, 1, MPI_INT64_T, 0, MPI_COMM_WORLD), "MPI_Bcast");
}

/* Whether DHIR_IO in rank 0's environment has rank 0 do every rank's file I/O (see
 * every_rank). Checked at start-up too: a misspelt value must not pass unsaid in a program
 * that happens to read no file by rows. */
static int io_by_rank0(void) {
  const char *mode = world_rank == 0 ? getenv("DHIR_IO") : NULL;
  if (mode != NULL && *mode != '\0' && strcmp(mode, "rank0") != 0 && strcmp(mode, "each") != 0)
    dhir_rt_fatal("DHIR_IO is '%s'; it takes rank0 (rank 0 reads and writes for all ranks) "
                  "or each (every rank its own part, the default)", mode);
  return mode != NULL && strcmp(mode, "rank0") == 0;
}

/* --- where each rank is ----------------------------------------------------------------
 * A rank killed from outside (SIGKILL) runs no handler, so every rank keeps its state in a
 * small file mapped into its memory (MAP_SHARED): plain stores, no system call per task, and
 * the file keeps the last state when the process dies. The launcher reads the files after a
 * failure to name the rank that died and the task it was running. DHIR_STATE_DIR names
 * their directory; without it the state stays in this process's memory.
 * Layout of `<dir>/rank<R>.state` (native byte order, read by dhir/toolchain/failure.py):
 * the magic "DHIRST01", int64 rank, pid, phase, task, call, peer; the task table (text, one
 * "name<TAB>location" line per task id) from byte STATE_TABLE on. */
enum {
  PHASE_STARTING = 0,
  PHASE_TASK = 1,
  PHASE_BETWEEN = 2,
  PHASE_MPI = 3,
  PHASE_DONE = 4,
  PHASE_INPUTS = 5,
  PHASE_RESULTS = 6
};
/* What a rank in PHASE_MPI is in (failure.py keeps the same list). */
enum { CALL_RECV = 1, CALL_SEND, CALL_WAIT, CALL_BCAST, CALL_GATHER, CALL_BARRIER };
#define STATE_MAGIC "DHIRST01"
#define STATE_TABLE 4096

typedef struct {
  char magic[8];
  int64_t rank, pid, phase, task, call, peer;
} rank_state;

static rank_state in_memory = {{0}, -1, -1, PHASE_STARTING, -1, 0, -1};
/* Volatile: every store must reach the mapping, in order, even the last before a crash. */
static volatile rank_state *state = &in_memory;

void dhir_rt_task_enter(int64_t id) {
  state->task = id;
  state->phase = PHASE_TASK;
  if (tracing)
    trace_task(1, id);
}

void dhir_rt_task_leave(int64_t id) {
  state->phase = PHASE_BETWEEN;
  if (tracing)
    trace_task(0, id);
}

/* Leave then enter with nothing between: the state goes from one task to the next with no
 * moment between them (none runs anything), and the trace keeps both events as the two
 * calls would. */
void dhir_rt_task_switch(int64_t id) {
  state->task = id;
  state->phase = PHASE_TASK;
  if (tracing) {
    trace_task(0, id);
    trace_task(1, id);
  }
}

/* Around a blocking MPI call: `peer` is the other rank (-1 for a collective). */
static int64_t mpi_enter(int64_t call, int64_t peer) {
  int64_t before = state->phase;
  state->call = call;
  state->peer = peer;
  state->phase = PHASE_MPI;
  if (tracing)
    trace_mpi(1, call, peer);
  return before;
}

/* Around moving a rank's rows of the files (through rank 0, in pieces): a run slowed there
 * reads as such after a timeout, not as ranks that never started. */
static int64_t io_enter(int64_t phase) {
  int64_t before = state->phase;
  state->phase = phase;
  return before;
}

static void mpi_leave(int64_t before) {
  /* A rank past its first message is no longer starting, though it may run no task. */
  state->phase = before == PHASE_STARTING ? PHASE_BETWEEN : before;
  if (tracing)
    trace_mpi(0, state->call, state->peer);
}

static void write_all(int file, const char *text, size_t length, off_t at, const char *path) {
  while (length > 0) {
    ssize_t done = pwrite(file, text, length, at);
    if (done < 0 && errno == EINTR)
      continue;
    if (done <= 0)
      dhir_rt_fatal("cannot write %s: %s", path, strerror(errno));
    text += done;
    length -= (size_t)done;
    at += done;
  }
}

void dhir_rt_track(const char *table) {
  task_names = table;
  const char *dir = getenv("DHIR_STATE_DIR");
  if (dir == NULL || *dir == '\0')
    return;
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s/rank%d.state", dir, world_rank) >= (int)sizeof path)
    dhir_rt_fatal("DHIR_STATE_DIR is too long: %s", dir);
  int file = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  /* A node that does not see the launcher's directory (a node-local /tmp on a cluster):
   * the run goes on, the state stays in memory, and the launcher names this rank from
   * what the MPI reports. */
  if (file < 0 && errno == ENOENT)
    return;
  if (file < 0)
    dhir_rt_fatal("cannot create %s: %s", path, strerror(errno));
  if (ftruncate(file, STATE_TABLE) != 0)
    dhir_rt_fatal("cannot size %s: %s", path, strerror(errno));
  write_all(file, table, strlen(table), STATE_TABLE, path);
  void *page = mmap(NULL, STATE_TABLE, PROT_READ | PROT_WRITE, MAP_SHARED, file, 0);
  if (page == MAP_FAILED)
    dhir_rt_fatal("cannot map %s: %s", path, strerror(errno));
  close(file);
  volatile rank_state *mapped = page;
  mapped->rank = world_rank;
  mapped->pid = getpid();
  mapped->phase = state->phase;
  mapped->task = state->task;
  mapped->call = state->call;
  mapped->peer = state->peer;
  /* The magic last: the launcher trusts a file only once it is there. */
  for (size_t k = 0; k < sizeof mapped->magic; ++k)
    mapped->magic[k] = STATE_MAGIC[k];
  state = mapped;
}

/* A rank that exits before the end (exit() called from a task, say) runs no crash handler
 * and MPI need not say which rank it was; so it says so itself, like a crash. */
static void on_early_exit(int status, void *unused) {
  (void)unused;
  if (state->phase == PHASE_DONE || reported)
    return;
  char line[128];
  snprintf(line, sizeof line,
           "dhir: error on rank %d: the rank exited with status %d before the program ended\n",
           world_rank, status);
  fputs(line, stderr);
  if (crash_path[0] != '\0') {
    FILE *file = fopen(crash_path, "a");
    if (file != NULL) {
      fputs(line, file);
      fclose(file);
    }
  }
  /* MPICH's mpirun succeeds when every rank exits with 0, finalized or not: the run
     would pass with the results this rank never finished. */
  if (status == 0)
    _exit(1);
}

/* Which ranks share a node: MPI's shared-memory split, its lowest rank naming it. */
static void find_nodes(void) {
  MPI_Comm node;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL,
                            &node),
        "MPI_Comm_split_type");
  int first = world_rank;
  check(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, node), "MPI_Allreduce");
  check(MPI_Comm_free(&node), "MPI_Comm_free");
  node_of = malloc((size_t)world_size * sizeof *node_of);
  if (node_of == NULL)
    dhir_rt_fatal("out of host memory");
  check(MPI_Allgather(&first, 1, MPI_INT, node_of, 1, MPI_INT, MPI_COMM_WORLD),
        "MPI_Allgather");
}

int dhir_rt_same_node(int32_t rank) {
  return rank >= 0 && rank < world_size && node_of[rank] == node_of[world_rank];
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
  check(MPI_Comm_dup(MPI_COMM_WORLD, &device_comm), "MPI_Comm_dup");
  find_nodes();
  report_crashes();
  on_exit(on_early_exit, NULL);
#ifdef _OPENMP
  /* Start the OpenMP threads here (~2 ms on a 2-core VM) rather than in the first parallel
   * loop, where they would count as that task's time in profiles and schedule timers. */
  volatile int threads = 0;
#pragma omp parallel
  {
#pragma omp master
    threads = omp_get_num_threads();
  }
  (void)threads;
#endif
  if (expected_ranks > 0 && world_size != expected_ranks) {
    /* Rank 0 alone reports, so the message appears once; the others wait for its abort, and
     * abort themselves should it never come. */
    if (world_rank != 0)
      sleep(10);
    dhir_rt_fatal("this program was built for %d MPI ranks but was started on %d; "
                  "run it with mpirun -n %d (or rebuild it with dhir compile -n %d)",
                  expected_ranks, world_size, expected_ranks, world_size);
  }
  set_chunk_bytes();
  (void)io_by_rank0();
  (void)stats_wanted();
  start_trace();
}

/* --- task profiling --------------------------------------------------------------------
 * Nanoseconds and runs per task id, on this rank; ids are small and dense (a task's
 * position in the module), so a growing array holds them. */
typedef struct {
  int64_t total_ns;
  int64_t calls;
  int64_t started_ns;
} task_clock;
/* A growing array of clocks, indexed by a small dense id. */
typedef struct {
  task_clock *clocks;
  int64_t slots;
  int64_t first_size;
  const char *what; /* for errors: "task profiling: ... task id" */
  const char *id_name;
} clock_table;

static clock_table task_table = {NULL, 0, 64, "task profiling", "task"};

static int64_t now_ns(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

/* --- the trace (dhir run --trace) ------------------------------------------------------
 * With DHIR_TRACE_DIR set for rank 0 (which tells every rank at start), each rank keeps
 * every task, blocking MPI call, non-blocking send, input read and result write with its
 * start and end, in ns of CLOCK_MONOTONIC from a common origin (the end of a barrier at
 * start, as each host's lowest rank saw it: ranks on one host share it, ranks on other
 * hosts line up to within that barrier's skew; see shared_origin), and writes them
 * to <dir>/rank<R>.trace as it finalizes: a line "T id name<TAB>location" per task of the
 * table, a line "K id name" per kernel the rank's GPU ran, then "E kind begin end id peer
 * bytes tag" per event (kind: 0 a task, 1-6 the CALL_ kinds, 7 an isend, 8 an input read,
 * 9 a result write, 10 a kernel (id: its name's), 11 a copy on the GPU (peer: 0 host to
 * device, 1 device to host, 2 device to device), both timed on the GPU by the GPU
 * runtime, 12 a device message a non-blocking receive took (a peer copy's word back), at
 * the moment the wait for it saw it done: begin = end), and, in a partial trace only, a
 * last line "P why" ("a partial trace" below). dhir/toolchain/trace.py turns them into one
 * Chrome trace. Off, each hook costs one test of `tracing`. */
enum {
  TRACE_TASK = 0,
  TRACE_ISEND = 7,
  TRACE_READ = 8,
  TRACE_WRITE = 9,
  TRACE_KERNEL = 10,
  TRACE_COPY = 11,
  TRACE_TOOK = 12
};
typedef struct {
  int64_t kind, begin, end, id, peer, bytes, tag;
} trace_event;
static char trace_dir[PATH_MAX];
/* This rank's file in it, and the name it is written under until it is whole. */
static char trace_path[PATH_MAX], trace_temporary[PATH_MAX];
static int64_t trace_origin = 0;
static trace_event *trace_log = NULL;
static int64_t trace_used = 0, trace_room = 0;
static trace_event open_task, open_mpi;
/* Whether a task or MPI call is under way (a partial trace ends it where the run stopped),
 * and whether the log is being grown (a signal's partial trace then leaves its events out). */
static volatile sig_atomic_t task_open = 0, mpi_open = 0, trace_busy = 0;

static int64_t trace_now(void) { return now_ns() - trace_origin; }

/* `items` (`*room` of `size` bytes) with room for one more after the first `used`: twice
 * the room when full, `first` items at first; "`fail` N `things`" when memory runs out. */
static void *room_for_one(void *items, int64_t *room, int64_t used, size_t size, int64_t first,
                          const char *fail, const char *things) {
  if (used < *room)
    return items;
  int64_t more = *room ? 2 * *room : first;
  void *grown = realloc(items, (size_t)more * size);
  if (grown == NULL)
    dhir_rt_fatal("%s %lld %s", fail, (long long)more, things);
  *room = more;
  return grown;
}

static void trace_keep(trace_event event) {
  trace_busy = 1;
  trace_log = room_for_one(trace_log, &trace_room, trace_used, sizeof *trace_log, 4096,
                           "the trace: cannot keep", "events");
  trace_log[trace_used] = event;
  ++trace_used;
  trace_busy = 0;
}

static void trace_task(int entering, int64_t id) {
  if (entering) {
    open_task = (trace_event){TRACE_TASK, trace_now(), 0, id, -1, 0, -1};
    task_open = 1;
    return;
  }
  task_open = 0;
  open_task.end = trace_now();
  trace_keep(open_task);
}

static void trace_mpi(int begin, int64_t call, int64_t peer) {
  if (begin) {
    open_mpi = (trace_event){call, trace_now(), 0, -1, peer, 0, -1};
    mpi_open = 1;
    return;
  }
  mpi_open = 0;
  open_mpi.end = trace_now();
  trace_keep(open_mpi);
}

/* The size and tag of the MPI call under way. */
static void trace_size(int64_t bytes, int64_t tag) {
  open_mpi.bytes = bytes;
  open_mpi.tag = tag;
}

/* An event of `kind` that began at `begin` (trace_now) and ends now. */
static void trace_span(int64_t kind, int64_t begin, int64_t id, int64_t peer, int64_t bytes,
                       int64_t tag) {
  trace_keep((trace_event){kind, begin, trace_now(), id, peer, bytes, tag});
}

/* The GPU runtime's side (dhir_rt.h). */
static char **kernel_names = NULL;
static int64_t kernel_count = 0, kernel_room = 0;

int dhir_rt_tracing(void) { return tracing; }

int64_t dhir_rt_trace_clock(void) { return trace_now(); }

static int64_t kernel_id(const char *name) {
  for (int64_t k = 0; k < kernel_count; ++k)
    if (strcmp(kernel_names[k], name) == 0)
      return k;
  if (kernel_count == kernel_room) {
    kernel_room = kernel_room ? 2 * kernel_room : 16;
    kernel_names = realloc(kernel_names, (size_t)kernel_room * sizeof *kernel_names);
    if (kernel_names == NULL)
      dhir_rt_fatal("the trace: cannot keep %lld kernel names", (long long)kernel_room);
  }
  kernel_names[kernel_count] = strdup(name);
  if (kernel_names[kernel_count] == NULL)
    dhir_rt_fatal("the trace: cannot keep a kernel name");
  return kernel_count++;
}

void dhir_rt_trace_gpu(int64_t begin, int64_t end, const char *kernel, int64_t direction,
                       int64_t bytes) {
  if (!tracing)
    return;
  if (kernel != NULL)
    trace_keep((trace_event){TRACE_KERNEL, begin, end, kernel_id(kernel), -1, 0, -1});
  else
    trace_keep((trace_event){TRACE_COPY, begin, end, -1, direction, bytes, -1});
}

/* The trace's origin, after a barrier every rank passes: the lowest rank of each host reads
 * the clock and the host's other ranks take its reading, as they share its monotonic clock.
 * Each rank reading its own would put the time it took to leave the barrier (milliseconds,
 * on a busy host) between ranks, and receives would end before their sends began. */
static int64_t shared_origin(void) {
  MPI_Comm host;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL,
                            &host),
        "MPI_Comm_split_type");
  check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  int64_t origin = now_ns();
  check(MPI_Bcast(&origin, 1, MPI_INT64_T, 0, host), "MPI_Bcast");
  check(MPI_Comm_free(&host), "MPI_Comm_free");
  return origin;
}

/* Collective: rank 0's DHIR_TRACE_DIR decides for every rank. */
static void start_trace(void) {
  const char *dir = world_rank == 0 ? getenv("DHIR_TRACE_DIR") : NULL;
  int64_t on = dir != NULL && *dir != '\0';
  check(MPI_Bcast(&on, 1, MPI_INT64_T, 0, MPI_COMM_WORLD), "MPI_Bcast");
  if (!on)
    return;
  if (world_rank == 0 && snprintf(trace_dir, sizeof trace_dir, "%s", dir) >= (int)sizeof trace_dir)
    dhir_rt_fatal("DHIR_TRACE_DIR is too long: %s", dir);
  check(MPI_Bcast(trace_dir, sizeof trace_dir, MPI_CHAR, 0, MPI_COMM_WORLD), "MPI_Bcast");
  if (snprintf(trace_path, sizeof trace_path, "%s/rank%d.trace", trace_dir, world_rank) >=
          (int)sizeof trace_path ||
      snprintf(trace_temporary, sizeof trace_temporary, "%s/.rank%d.trace.tmp", trace_dir,
               world_rank) >= (int)sizeof trace_temporary)
    dhir_rt_fatal("DHIR_TRACE_DIR is too long: %s", trace_dir);
  trace_origin = shared_origin();
  tracing = 1;
  signal(SIGUSR1, on_stop); /* the launcher's word to write what was recorded (a timeout) */
}

/* --- a partial trace, of a run that fails ---------------------------------------------
 * When this rank reports an error, crashes, or is told to stop (SIGUSR1: the launcher on a
 * timeout), it writes what it recorded so far, the task or MPI call under way ended at that
 * moment, and a last line "P why". Only async-signal-safe calls (open, write, rename), into
 * a buffer of its own: it may run in a signal handler. The file is written under a
 * temporary name and renamed when whole, as the complete trace is: a rank killed while
 * writing leaves no file, never one cut short. */
static volatile sig_atomic_t partial_written = 0;

typedef struct {
  int file;
  size_t used;
  char bytes[65536];
} out_buffer;

static out_buffer partial_out;

static void out_flush(out_buffer *out) {
  size_t done = 0;
  while (done < out->used) {
    ssize_t wrote = write(out->file, out->bytes + done, out->used - done);
    if (wrote <= 0)
      break;
    done += (size_t)wrote;
  }
  out->used = 0;
}

static void out_text(out_buffer *out, const char *text, size_t length) {
  for (size_t k = 0; k < length; ++k) {
    if (out->used == sizeof out->bytes)
      out_flush(out);
    out->bytes[out->used++] = text[k];
  }
}

static void out_number(out_buffer *out, int64_t value) {
  char digits[24];
  int length = 0;
  uint64_t magnitude = value < 0 ? (uint64_t)0 - (uint64_t)value : (uint64_t)value;
  do {
    digits[length++] = (char)('0' + magnitude % 10);
    magnitude /= 10;
  } while (magnitude > 0);
  if (value < 0)
    out_text(out, "-", 1);
  while (length > 0)
    out_text(out, &digits[--length], 1);
}

static void out_event(out_buffer *out, const trace_event *e) {
  const int64_t fields[] = {e->kind, e->begin, e->end, e->id, e->peer, e->bytes, e->tag};
  out_text(out, "E", 1);
  for (size_t k = 0; k < sizeof fields / sizeof fields[0]; ++k) {
    out_text(out, " ", 1);
    out_number(out, fields[k]);
  }
  out_text(out, "\n", 1);
}

static void partial_trace(const char *why) {
  if (!tracing || partial_written || trace_path[0] == '\0')
    return;
  partial_written = 1;
  out_buffer *out = &partial_out;
  out->used = 0;
  out->file = open(trace_temporary, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (out->file < 0)
    return;
  int64_t id = 0;
  for (const char *line = task_names; *line != '\0'; ++id) {
    const char *end = strchr(line, '\n');
    size_t length = end != NULL ? (size_t)(end - line) : strlen(line);
    out_text(out, "T ", 2);
    out_number(out, id);
    out_text(out, " ", 1);
    out_text(out, line, length);
    out_text(out, "\n", 1);
    line += length + (end != NULL);
  }
  for (int64_t k = 0; k < kernel_count; ++k) {
    out_text(out, "K ", 2);
    out_number(out, k);
    out_text(out, " ", 1);
    out_text(out, kernel_names[k], strlen(kernel_names[k]));
    out_text(out, "\n", 1);
  }
  if (!trace_busy) /* else the log may be moving: its events are left out */
    for (int64_t k = 0; k < trace_used; ++k)
      out_event(out, &trace_log[k]);
  int64_t now = trace_now();
  if (task_open) {
    trace_event task = open_task;
    task.end = now;
    out_event(out, &task);
  }
  if (mpi_open) {
    trace_event call = open_mpi;
    call.end = now;
    out_event(out, &call);
  }
  out_text(out, "P ", 2);
  out_text(out, why, strlen(why));
  out_text(out, "\n", 1);
  out_flush(out);
  if (close(out->file) == 0)
    rename(trace_temporary, trace_path);
}

/* How long a stopped rank lingers after writing its partial trace. Dying at once would make
 * mpiexec kill the other ranks before they have written theirs; the launcher ends the run
 * itself (SIGTERM) once every file is there. Bounded: nobody else may ever end this rank. */
#define STOPPED_LINGER_S 5

static void on_stop(int number) {
  (void)number;
  partial_trace("stopped");
  struct timespec left = {STOPPED_LINGER_S, 0};
  while (nanosleep(&left, &left) != 0 && errno == EINTR)
    ;
  signal(SIGUSR1, SIG_DFL);
  raise(SIGUSR1);
}

static void write_trace(void) {
  if (!tracing)
    return;
  const char *path = trace_path;
  FILE *file = fopen(trace_temporary, "w");
  if (file == NULL)
    dhir_rt_fatal("cannot write the trace %s: %s", path, strerror(errno));
  int64_t id = 0;
  for (const char *line = task_names; *line != '\0'; ++id) {
    const char *end = strchr(line, '\n');
    size_t length = end != NULL ? (size_t)(end - line) : strlen(line);
    fprintf(file, "T %lld %.*s\n", (long long)id, (int)length, line);
    line += length + (end != NULL);
  }
  for (int64_t k = 0; k < kernel_count; ++k)
    fprintf(file, "K %lld %s\n", (long long)k, kernel_names[k]);
  for (int64_t k = 0; k < trace_used; ++k) {
    trace_event *e = &trace_log[k];
    fprintf(file, "E %lld %lld %lld %lld %lld %lld %lld\n", (long long)e->kind,
            (long long)e->begin, (long long)e->end, (long long)e->id, (long long)e->peer,
            (long long)e->bytes, (long long)e->tag);
  }
  if (fclose(file) != 0 || rename(trace_temporary, trace_path) != 0)
    dhir_rt_fatal("cannot write the trace %s: %s", path, strerror(errno));
  partial_written = 1; /* a later error must not replace the whole trace with a partial one */
}

static task_clock *clock_slot(clock_table *table, int64_t id) {
  if (id < 0)
    dhir_rt_fatal("%s: negative %s id %lld", table->what, table->id_name, (long long)id);
  if (id >= table->slots) {
    int64_t count = table->slots ? table->slots : table->first_size;
    while (count <= id)
      count *= 2;
    task_clock *grown = realloc(table->clocks, (size_t)count * sizeof *grown);
    if (grown == NULL)
      dhir_rt_fatal("%s: cannot allocate %lld entries", table->what, (long long)count);
    memset(grown + table->slots, 0, (size_t)(count - table->slots) * sizeof *grown);
    table->clocks = grown;
    table->slots = count;
  }
  return &table->clocks[id];
}

static task_clock *task_slot(int64_t id) { return clock_slot(&task_table, id); }

void dhir_rt_task_begin(int64_t id) { task_slot(id)->started_ns = now_ns(); }

void dhir_rt_task_end(int64_t id) {
  int64_t end = now_ns();
  task_clock *slot = task_slot(id);
  slot->total_ns += end - slot->started_ns;
  slot->calls += 1;
}

/* --- schedule timing ------------------------------------------------------------------
 * Per schedule id (a schedule's position in the module), this rank's total time from the
 * schedule's start to its end, and the runs. Every rank runs the host code around a
 * schedule, so the barrier at the start is collective: ranks start together, and the
 * slowest rank's time is the schedule's wall time (what a placement's makespan predicts). */
static clock_table schedule_table = {NULL, 0, 8, "schedule timing", "schedule"};

static task_clock *schedule_slot(int64_t id) { return clock_slot(&schedule_table, id); }

void dhir_rt_schedule_begin(int64_t id) {
  task_clock *slot = schedule_slot(id);
  check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  slot->started_ns = now_ns();
}

void dhir_rt_schedule_end(int64_t id) {
  int64_t end = now_ns();
  task_clock *slot = schedule_slot(id);
  slot->total_ns += end - slot->started_ns;
  slot->calls += 1;
}

/* The slowest rank's total per schedule, into `out` ({seconds, calls} pairs) on rank 0. */
static int64_t gather_schedules(int64_t **out) {
  int64_t count = schedule_table.slots;
  check(MPI_Allreduce(MPI_IN_PLACE, &count, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD),
        "MPI_Allreduce");
  size_t slots = count > 0 ? (size_t)count : 1;
  int64_t *mine = calloc(2 * slots, sizeof *mine), *all = calloc(2 * slots, sizeof *all);
  if (mine == NULL || all == NULL)
    dhir_rt_fatal("schedule timing: cannot allocate %lld entries", (long long)count);
  for (int64_t id = 0; id < count && id < schedule_table.slots; ++id) {
    mine[2 * id] = schedule_table.clocks[id].total_ns;
    mine[2 * id + 1] = schedule_table.clocks[id].calls;
  }
  check(MPI_Reduce(mine, all, (int)(2 * count), MPI_INT64_T, MPI_MAX, 0, MPI_COMM_WORLD),
        "MPI_Reduce");
  free(mine);
  *out = all;
  return count;
}

static void write_schedules(FILE *file, const int64_t *sums, int64_t count) {
  fprintf(file, ", \"schedules\": {");
  const char *separator = "";
  for (int64_t id = 0; id < count; ++id) {
    if (sums[2 * id + 1] == 0)
      continue;
    fprintf(file, "%s\"%lld\": {\"seconds\": %.9e, \"calls\": %lld}", separator,
            (long long)id, (double)sums[2 * id] * 1e-9, (long long)sums[2 * id + 1]);
    separator = ", ";
  }
  fprintf(file, "}");
}

static void write_profile_file(const char *path, const int64_t *sums, const int64_t *ranks,
                               int64_t count, const int64_t *schedules, int64_t schedule_count) {
  FILE *file = fopen(path, "w");
  if (file == NULL)
    dhir_rt_fatal("cannot create the task profile %s: %s", path, strerror(errno));
  fprintf(file, "{\"ranks\": %d, \"tasks\": {", world_size);
  const char *separator = "";
  for (int64_t id = 0; id < count; ++id) {
    if (sums[2 * id + 1] == 0)
      continue;
    fprintf(file, "%s\"%lld\": {\"seconds\": %.9e, \"calls\": %lld, \"rank\": %lld}",
            separator, (long long)id, (double)sums[2 * id] * 1e-9, (long long)sums[2 * id + 1],
            (long long)ranks[id]);
    separator = ", ";
  }
  fprintf(file, "}");
  write_schedules(file, schedules, schedule_count);
  fprintf(file, "}\n");
  if (fclose(file) != 0)
    dhir_rt_fatal("cannot write the task profile %s: %s", path, strerror(errno));
}

/* Collective. Rank 0, which writes the file, decides for all: mpirun need not pass
 * DHIR_PROFILE on to the other ranks. */
static void gather_profile(void) {
  const char *path = getenv("DHIR_PROFILE");
  int wanted = world_rank == 0 && path != NULL && *path != '\0';
  check(MPI_Bcast(&wanted, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast");
  if (!wanted)
    return;
  int64_t count = task_table.slots;
  check(MPI_Allreduce(MPI_IN_PLACE, &count, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD),
        "MPI_Allreduce");
  size_t slots = count > 0 ? (size_t)count : 1;
  int64_t *sums = calloc(2 * slots, sizeof *sums), *ranks = calloc(slots, sizeof *ranks);
  int64_t *all_sums = calloc(2 * slots, sizeof *all_sums);
  int64_t *all_ranks = calloc(slots, sizeof *all_ranks);
  if (sums == NULL || ranks == NULL || all_sums == NULL || all_ranks == NULL)
    dhir_rt_fatal("task profiling: cannot allocate %lld entries", (long long)count);
  for (int64_t id = 0; id < count; ++id) {
    task_clock *slot = id < task_table.slots ? &task_table.clocks[id] : NULL;
    sums[2 * id] = slot ? slot->total_ns : 0;
    sums[2 * id + 1] = slot ? slot->calls : 0;
    ranks[id] = slot && slot->calls ? world_rank : -1;
  }
  check(MPI_Reduce(sums, all_sums, (int)(2 * count), MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD),
        "MPI_Reduce");
  check(MPI_Reduce(ranks, all_ranks, (int)count, MPI_INT64_T, MPI_MAX, 0, MPI_COMM_WORLD),
        "MPI_Reduce");
  int64_t *schedules = NULL;
  int64_t schedule_count = gather_schedules(&schedules);
  if (world_rank == 0)
    write_profile_file(path, all_sums, all_ranks, count, schedules, schedule_count);
  free(schedules);
  free(sums);
  free(ranks);
  free(all_sums);
  free(all_ranks);
}

/* Bytes and messages this rank sent (a broadcast counts at its root, a gather at each rank
 * whose run it moves), printed at the end when DHIR_RT_STATS is set so that benchmarks can
 * show the traffic. */
static int64_t sent_bytes = 0, sent_messages = 0;
/* Bytes of the inputs that reached this rank: read from their files or broadcast to it. */
static int64_t input_bytes = 0;
/* Bytes and messages of files this rank sent where rank 0 does the others' file I/O (rank
 * 0 the inputs' rows, the others their results): apart from the program's messages. */
static int64_t io_sent_bytes = 0, io_sent_messages = 0;

static void count_sent(int64_t bytes) {
  sent_bytes += bytes;
  sent_messages += 1;
}

static void count_io_sent(int64_t bytes) {
  io_sent_bytes += bytes;
  io_sent_messages += 1;
}

static void print_stats(void) {
  if (!stats_wanted())
    return;
  fprintf(stderr, "dhir: rank %d sent %lld bytes in %lld messages, took %lld bytes of inputs\n",
          world_rank, (long long)sent_bytes, (long long)sent_messages, (long long)input_bytes);
  if (io_sent_messages > 0)
    fprintf(stderr, "dhir: files through rank 0: rank %d sent %lld bytes in %lld messages\n",
            world_rank, (long long)io_sent_bytes, (long long)io_sent_messages);
}

void dhir_rt_finalize(void) {
  state->phase = PHASE_DONE;
  print_stats();
  gather_profile();
  write_trace();
  check(MPI_Finalize(), "MPI_Finalize");
}

int32_t dhir_rt_comm_size(void) { return world_size; }

int64_t dhir_rt_threads(void) {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

int32_t dhir_rt_comm_rank(void) { return world_rank; }

/* Rank 0's `value` on every rank: a result of the user's code that host code called on
 * each (dhir-agree-calls), so that the ranks decide alike what comes next. */
int64_t dhir_rt_agree(int64_t value) {
  check(MPI_Bcast(&value, 1, MPI_INT64_T, 0, MPI_COMM_WORLD), "MPI_Bcast");
  return value;
}

void dhir_rt_barrier(void) {
  int64_t before = mpi_enter(CALL_BARRIER, -1);
  check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  mpi_leave(before);
}

/* `peer`, the other rank, is the `role` (root, destination, source) of the call. */
static char *message_buffer(const char *what, int64_t ptr, int64_t bytes, const char *role,
                            int32_t peer) {
  if (bytes < 0)
    dhir_rt_fatal("%s: negative size %lld bytes", what, (long long)bytes);
  if (peer < 0 || peer >= world_size)
    dhir_rt_fatal("%s: %s rank %d does not exist (the program runs on %d ranks)", what, role,
                  peer, world_size);
  char *data = (char *)(intptr_t)ptr;
  if (data == NULL && bytes > 0)
    dhir_rt_fatal("%s: null buffer", what);
  return data;
}

static int piece_at(int64_t done, int64_t bytes) {
  return (int)(bytes - done < chunk_bytes ? bytes - done : chunk_bytes);
}

void dhir_rt_send(int64_t ptr, int64_t bytes, int32_t dest, int32_t tag) {
  int64_t before = mpi_enter(CALL_SEND, dest);
  if (tracing)
    trace_size(bytes, tag);
  char *data = message_buffer("dhir_rt_send", ptr, bytes, "destination", dest);
  count_sent(bytes);
  for (int64_t done = 0; done < bytes; done += chunk_bytes)
    check(MPI_Send(data + done, piece_at(done, bytes), MPI_BYTE, dest, tag, MPI_COMM_WORLD),
          "MPI_Send");
  mpi_leave(before);
}

/* `bytes` from `source` into `into`, in pieces, on `comm`; `what` names the caller. */
static void receive(const char *what, char *into, int64_t bytes, int32_t source, int32_t tag,
                    MPI_Comm comm) {
  for (int64_t done = 0; done < bytes; done += chunk_bytes) {
    int piece = piece_at(done, bytes), got = -1;
    MPI_Status status;
    check(MPI_Recv(into + done, piece, MPI_BYTE, source, tag, comm, &status), "MPI_Recv");
    check(MPI_Get_count(&status, MPI_BYTE, &got), "MPI_Get_count");
    /* A shorter piece means the two ranks disagree on the buffer's size: never go on. */
    if (got != piece)
      dhir_rt_fatal("%s: expected %d bytes from rank %d (tag %d), got %d", what, piece, source,
                    tag, got);
  }
}

void dhir_rt_recv(int64_t ptr, int64_t bytes, int32_t source, int32_t tag) {
  int64_t before = mpi_enter(CALL_RECV, source);
  if (tracing)
    trace_size(bytes, tag);
  char *data = message_buffer("dhir_rt_recv", ptr, bytes, "source", source);
  receive("dhir_rt_recv", data, bytes, source, tag, MPI_COMM_WORLD);
  mpi_leave(before);
}

/* Not counted in the statistics: the harness broadcasts the inputs with it. */
static void broadcast(int64_t ptr, int64_t bytes, int32_t root) {
  char *data = message_buffer("dhir_rt_bcast", ptr, bytes, "root", root);
  for (int64_t done = 0; done < bytes; done += chunk_bytes)
    check(MPI_Bcast(data + done, piece_at(done, bytes), MPI_BYTE, root, MPI_COMM_WORLD),
          "MPI_Bcast");
}

void dhir_rt_bcast(int64_t ptr, int64_t bytes, int32_t root) {
  int64_t before = mpi_enter(CALL_BCAST, root);
  if (tracing)
    trace_size(bytes, -1);
  if (root == world_rank)
    count_sent(bytes);
  broadcast(ptr, bytes, root);
  mpi_leave(before);
}

/* A strided block: `count2` groups `stride2` bytes apart, each of `count` runs `stride`
 * bytes apart, each run `length` bytes. Described to MPI as nested hvector types, so
 * neither side packs; the runs and counts must fit MPI's int. */
static MPI_Datatype strided_type(const char *what, int64_t length, int64_t count, int64_t stride,
                                 int64_t count2, int64_t stride2) {
  if (length < 0 || count < 1 || count2 < 1 || length > INT_MAX || count > INT_MAX ||
      count2 > INT_MAX)
    dhir_rt_fatal("%s: a strided block of %lld x %lld runs of %lld bytes is out of range", what,
                  (long long)count2, (long long)count, (long long)length);
  MPI_Datatype run, rows, block;
  check(MPI_Type_contiguous((int)length, MPI_BYTE, &run), "MPI_Type_contiguous");
  check(MPI_Type_create_hvector((int)count, 1, (MPI_Aint)stride, run, &rows),
        "MPI_Type_create_hvector");
  check(MPI_Type_create_hvector((int)count2, 1, (MPI_Aint)stride2, rows, &block),
        "MPI_Type_create_hvector");
  check(MPI_Type_commit(&block), "MPI_Type_commit");
  MPI_Type_free(&run);
  MPI_Type_free(&rows);
  return block;
}

void dhir_rt_send_strided(int64_t ptr, int64_t length, int64_t count, int64_t stride,
                          int64_t count2, int64_t stride2, int32_t dest, int32_t tag) {
  int64_t before = mpi_enter(CALL_SEND, dest);
  if (tracing)
    trace_size(length * count * count2, tag);
  char *data = message_buffer("dhir_rt_send_strided", ptr, length, "destination", dest);
  MPI_Datatype block = strided_type("dhir_rt_send_strided", length, count, stride, count2,
                                    stride2);
  count_sent(length * count * count2);
  check(MPI_Send(data, 1, block, dest, tag, MPI_COMM_WORLD), "MPI_Send");
  MPI_Type_free(&block);
  mpi_leave(before);
}

void dhir_rt_recv_strided(int64_t ptr, int64_t length, int64_t count, int64_t stride,
                          int64_t count2, int64_t stride2, int32_t source, int32_t tag) {
  int64_t before = mpi_enter(CALL_RECV, source);
  if (tracing)
    trace_size(length * count * count2, tag);
  char *data = message_buffer("dhir_rt_recv_strided", ptr, length, "source", source);
  MPI_Datatype block = strided_type("dhir_rt_recv_strided", length, count, stride, count2,
                                    stride2);
  MPI_Status status;
  check(MPI_Recv(data, 1, block, source, tag, MPI_COMM_WORLD, &status), "MPI_Recv");
  int got = -1;
  check(MPI_Get_count(&status, block, &got), "MPI_Get_count");
  if (got != 1)
    dhir_rt_fatal("dhir_rt_recv_strided: the block from rank %d (tag %d) has another size",
                  source, tag);
  MPI_Type_free(&block);
  mpi_leave(before);
}

void dhir_rt_bcast_strided(int64_t ptr, int64_t length, int64_t count, int64_t stride,
                           int64_t count2, int64_t stride2, int32_t root) {
  int64_t before = mpi_enter(CALL_BCAST, root);
  if (tracing)
    trace_size(length * count * count2, -1);
  char *data = message_buffer("dhir_rt_bcast_strided", ptr, length, "root", root);
  MPI_Datatype block = strided_type("dhir_rt_bcast_strided", length, count, stride, count2,
                                    stride2);
  if (root == world_rank)
    count_sent(length * count * count2);
  check(MPI_Bcast(data, 1, block, root, MPI_COMM_WORLD), "MPI_Bcast");
  MPI_Type_free(&block);
  mpi_leave(before);
}

/* Sends in flight, by the slot the lowering gave each (docs/semantics.md): every block of
 * one transfer joins its slot; dhir_rt_wait completes them all. */
typedef struct {
  MPI_Request *requests;
  MPI_Datatype *types;
  int64_t count, capacity;
} send_slot;

static send_slot *send_slots = NULL;
static int64_t send_slot_count = 0;

static send_slot *slot_at(int64_t slot) {
  if (slot < 0)
    dhir_rt_fatal("request slot %lld is negative", (long long)slot);
  if (slot >= send_slot_count) {
    int64_t count = send_slot_count ? send_slot_count : 16;
    while (count <= slot)
      count *= 2;
    send_slot *grown = realloc(send_slots, (size_t)count * sizeof *grown);
    if (grown == NULL)
      dhir_rt_fatal("cannot allocate %lld request slots", (long long)count);
    memset(grown + send_slot_count, 0, (size_t)(count - send_slot_count) * sizeof *grown);
    send_slots = grown;
    send_slot_count = count;
  }
  return &send_slots[slot];
}

static MPI_Request *next_request(send_slot *slot, MPI_Datatype type) {
  if (slot->count == slot->capacity) {
    int64_t capacity = slot->capacity ? 2 * slot->capacity : 4;
    MPI_Request *requests = realloc(slot->requests, (size_t)capacity * sizeof *requests);
    MPI_Datatype *types = realloc(slot->types, (size_t)capacity * sizeof *types);
    if (requests == NULL || types == NULL)
      dhir_rt_fatal("cannot allocate %lld requests", (long long)capacity);
    slot->requests = requests;
    slot->types = types;
    slot->capacity = capacity;
  }
  slot->types[slot->count] = type;
  return &slot->requests[slot->count++];
}

void dhir_rt_isend(int64_t ptr, int64_t bytes, int32_t dest, int32_t tag, int64_t slot) {
  int64_t began = tracing ? trace_now() : 0;
  char *data = message_buffer("dhir_rt_isend", ptr, bytes, "destination", dest);
  send_slot *pending = slot_at(slot);
  count_sent(bytes);
  for (int64_t done = 0; done < bytes; done += chunk_bytes)
    check(MPI_Isend(data + done, piece_at(done, bytes), MPI_BYTE, dest, tag, MPI_COMM_WORLD,
                    next_request(pending, MPI_DATATYPE_NULL)),
          "MPI_Isend");
  if (tracing)
    trace_span(TRACE_ISEND, began, slot, dest, bytes, tag);
}

void dhir_rt_isend_strided(int64_t ptr, int64_t length, int64_t count, int64_t stride,
                           int64_t count2, int64_t stride2, int32_t dest, int32_t tag,
                           int64_t slot) {
  char *data = message_buffer("dhir_rt_isend_strided", ptr, length, "destination", dest);
  MPI_Datatype block = strided_type("dhir_rt_isend_strided", length, count, stride, count2,
                                    stride2);
  send_slot *pending = slot_at(slot);
  count_sent(length * count * count2);
  int64_t began = tracing ? trace_now() : 0;
  check(MPI_Isend(data, 1, block, dest, tag, MPI_COMM_WORLD, next_request(pending, block)),
        "MPI_Isend");
  if (tracing)
    trace_span(TRACE_ISEND, began, slot, dest, length * count * count2, tag);
}

void dhir_rt_wait(int64_t slot) {
  int64_t before = mpi_enter(CALL_WAIT, -1);
  send_slot *pending = slot_at(slot);
  if (pending->count > INT_MAX)
    dhir_rt_fatal("request slot %lld holds too many requests", (long long)slot);
  check(MPI_Waitall((int)pending->count, pending->requests, MPI_STATUSES_IGNORE), "MPI_Waitall");
  for (int64_t k = 0; k < pending->count; ++k)
    if (pending->types[k] != MPI_DATATYPE_NULL)
      MPI_Type_free(&pending->types[k]);
  pending->count = 0;
  mpi_leave(before);
}

/* --- messages between device buffers (dhir_gpu_rt.c) ---------------------------------- */

int dhir_rt_mpi_cuda_aware(void) {
#if defined(MPIX_GPU_SUPPORT_CUDA)
  int supported = 0;
  return MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &supported) == MPI_SUCCESS && supported;
#elif defined(OMPI_HAVE_MPI_EXT_CUDA) && OMPI_HAVE_MPI_EXT_CUDA
  return MPIX_Query_cuda_support();
#else
  return 0;
#endif
}

/* In the trace, device messages' tags are offset by this (dhir/toolchain/trace.py), so that
 * they are told from the program's messages between the same ranks with the same tag. */
#define DEVICE_TRACE_TAG ((int64_t)1 << 30)

typedef struct {
  int64_t key;
  MPI_Request request;
  /* Traced: the receive this request ends (its last piece), for the message's arrow;
   * source -1 on every other request. */
  int64_t source, bytes, tag;
} device_request;

static device_request *device_requests = NULL;
static int64_t device_request_count = 0, device_request_room = 0;

static MPI_Request *keyed_request(int64_t key) {
  device_requests = room_for_one(device_requests, &device_request_room, device_request_count,
                                 sizeof *device_requests, 16, "cannot allocate", "requests");
  device_request *entry = &device_requests[device_request_count++];
  *entry = (device_request){key, MPI_REQUEST_NULL, -1, 0, 0};
  return &entry->request;
}

void dhir_rt_device_isend(const void *data, int64_t bytes, int32_t dest, int32_t tag,
                          int64_t key) {
  int64_t began = tracing ? trace_now() : 0;
  char *from = message_buffer("dhir_rt_device_isend", (int64_t)(intptr_t)data, bytes,
                              "destination", dest);
  count_sent(bytes);
  for (int64_t done = 0; done < bytes; done += chunk_bytes)
    check(MPI_Isend(from + done, piece_at(done, bytes), MPI_BYTE, dest, tag, device_comm,
                    keyed_request(key)),
          "MPI_Isend");
  if (tracing)
    trace_span(TRACE_ISEND, began, -1, dest, bytes, DEVICE_TRACE_TAG + tag);
}

void dhir_rt_device_irecv(void *data, int64_t bytes, int32_t source, int32_t tag, int64_t key) {
  char *into = message_buffer("dhir_rt_device_irecv", (int64_t)(intptr_t)data, bytes, "source",
                              source);
  for (int64_t done = 0; done < bytes; done += chunk_bytes)
    check(MPI_Irecv(into + done, piece_at(done, bytes), MPI_BYTE, source, tag, device_comm,
                    keyed_request(key)),
          "MPI_Irecv");
  if (tracing && bytes > 0) {
    device_request *last = &device_requests[device_request_count - 1];
    last->source = source;
    last->bytes = bytes;
    last->tag = DEVICE_TRACE_TAG + tag;
  }
}

void dhir_rt_device_wait(int64_t key) {
  int64_t waiting = 0;
  for (int64_t k = 0; k < device_request_count; ++k)
    waiting += device_requests[k].key == key;
  if (waiting == 0)
    return;
  int64_t before = mpi_enter(CALL_WAIT, -1);
  int64_t kept = 0;
  for (int64_t k = 0; k < device_request_count; ++k) {
    if (device_requests[k].key == key) {
      device_request *entry = &device_requests[k];
      check(MPI_Wait(&entry->request, MPI_STATUS_IGNORE), "MPI_Wait");
      if (entry->source >= 0) { /* within the wait's slice, where its arrow ends */
        int64_t now = trace_now();
        trace_keep(
            (trace_event){TRACE_TOOK, now, now, -1, entry->source, entry->bytes, entry->tag});
      }
    } else
      device_requests[kept++] = device_requests[k];
  }
  device_request_count = kept;
  mpi_leave(before);
}

void dhir_rt_device_progress(void) {
  for (int64_t k = 0; k < device_request_count; ++k) {
    int done = 0;
    if (device_requests[k].request != MPI_REQUEST_NULL) /* done: a later wait returns at once */
      check(MPI_Test(&device_requests[k].request, &done, MPI_STATUS_IGNORE), "MPI_Test");
  }
}

void dhir_rt_device_recv(void *data, int64_t bytes, int32_t source, int32_t tag) {
  int64_t before = mpi_enter(CALL_RECV, source);
  if (tracing)
    trace_size(bytes, DEVICE_TRACE_TAG + tag);
  char *into = message_buffer("dhir_rt_device_recv", (int64_t)(intptr_t)data, bytes, "source",
                              source);
  receive("dhir_rt_device_recv", into, bytes, source, tag, device_comm);
  mpi_leave(before);
}

/* Every rank's run (offset, length in bytes) of a collective assembly, known to all; and
 * whether MPI's int counts and displacements hold them (else the runs go piece by piece). */
static int64_t *gather_runs(const char *what, int64_t bytes, int64_t offset, int64_t length,
                            int *fits) {
  if (offset < 0 || length < 0 || offset + length > bytes)
    dhir_rt_fatal("%s: run of %lld bytes at %lld lies outside the %lld-byte buffer", what,
                  (long long)length, (long long)offset, (long long)bytes);
  int64_t mine[2] = {offset, length};
  int64_t *runs = malloc(2 * (size_t)world_size * sizeof *runs);
  if (runs == NULL)
    dhir_rt_fatal("%s: cannot allocate %d runs", what, world_size);
  check(MPI_Allgather(mine, 2, MPI_INT64_T, runs, 2, MPI_INT64_T, MPI_COMM_WORLD),
        "MPI_Allgather");
  *fits = 1;
  for (int r = 0; r < world_size; ++r)
    if (runs[2 * r] + runs[2 * r + 1] > chunk_bytes)
      *fits = 0;
  return runs;
}

static void counts_of(const int64_t *runs, int *counts, int *displs) {
  for (int r = 0; r < world_size; ++r) {
    displs[r] = (int)runs[2 * r];
    counts[r] = (int)runs[2 * r + 1];
  }
}

void dhir_rt_allgatherv(int64_t ptr, int64_t bytes, int64_t offset, int64_t length) {
  int64_t before = mpi_enter(CALL_GATHER, -1);
  if (tracing)
    trace_size(length, -1);
  char *data = message_buffer("dhir_rt_allgatherv", ptr, bytes, "root", 0);
  int fits = 0;
  int64_t *runs = gather_runs("dhir_rt_allgatherv", bytes, offset, length, &fits);
  if (length > 0) /* a rank with no run takes part but sends nothing */
    count_sent(length);
  if (fits) {
    int *counts = malloc(2 * (size_t)world_size * sizeof *counts);
    if (counts == NULL)
      dhir_rt_fatal("dhir_rt_allgatherv: cannot allocate %d counts", world_size);
    counts_of(runs, counts, counts + world_size);
    check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, counts, counts + world_size,
                         MPI_BYTE, MPI_COMM_WORLD),
          "MPI_Allgatherv");
    free(counts);
  } else {
    for (int r = 0; r < world_size; ++r)
      if (runs[2 * r + 1] > 0)
        broadcast(ptr + runs[2 * r], runs[2 * r + 1], r);
  }
  free(runs);
  mpi_leave(before);
}

void dhir_rt_gatherv(int64_t ptr, int64_t bytes, int64_t offset, int64_t length, int32_t root) {
  int64_t before = mpi_enter(CALL_GATHER, root);
  if (tracing)
    trace_size(length, -1);
  char *data = message_buffer("dhir_rt_gatherv", ptr, bytes, "root", root);
  int fits = 0;
  int64_t *runs = gather_runs("dhir_rt_gatherv", bytes, offset, length, &fits);
  if (fits) {
    /* The root's own run stays in place, and a rank with none sends nothing: as the
     * messages of the other branch, which dhir_rt_send counts. */
    if (world_rank != root && length > 0)
      count_sent(length);
    int *counts = malloc(2 * (size_t)world_size * sizeof *counts);
    if (counts == NULL)
      dhir_rt_fatal("dhir_rt_gatherv: cannot allocate %d counts", world_size);
    counts_of(runs, counts, counts + world_size);
    if (world_rank == root)
      check(MPI_Gatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, counts, counts + world_size,
                        MPI_BYTE, root, MPI_COMM_WORLD),
            "MPI_Gatherv");
    else
      check(MPI_Gatherv(data + offset, (int)length, MPI_BYTE, NULL, NULL, NULL, MPI_BYTE, root,
                        MPI_COMM_WORLD),
            "MPI_Gatherv");
    free(counts);
  } else {
    for (int r = 0; r < world_size; ++r) {
      if (r == root || runs[2 * r + 1] == 0)
        continue;
      if (world_rank == r)
        dhir_rt_send(ptr + runs[2 * r], runs[2 * r + 1], root, 0);
      else if (world_rank == root)
        dhir_rt_recv(ptr + runs[2 * r], runs[2 * r + 1], r, 0);
    }
  }
  free(runs);
  mpi_leave(before);
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

void dhir_rt_expect_size(int64_t size, int64_t least, const char *what, const char *why) {
  if (size < least)
    dhir_rt_fatal("%s is %lld, but %s, out of bounds each time the program runs: give at "
                  "least %lld elements, or fix the program's loop bounds",
                  what, (long long)size, why, (long long)least);
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

int dhir_rt_parse_float_bits(const char *text, void *out, int64_t bytes, const char *what) {
  static const char prefix[] = "bits:0x";
  if (strncmp(text, prefix, sizeof prefix - 1) != 0)
    return 0;
  const char *digits = text + sizeof prefix - 1;
  /* Only the hex digits of the float's width: strtoull would take a sign, spaces, 0x. */
  int64_t count = 0;
  while (isxdigit((unsigned char)digits[count]))
    ++count;
  if (digits[count] != '\0' || count != 2 * bytes)
    dhir_rt_fatal("%s: '%s' is not bits:0x and the %d hex digits of a %d-bit float", what, text,
                  (int)(2 * bytes), (int)(8 * bytes));
  unsigned long long bits = strtoull(digits, NULL, 16);
  /* By width, not the low bytes of `bits`: right on either byte order. */
  if (bytes == 2) {
    uint16_t half = (uint16_t)bits;
    memcpy(out, &half, 2);
  } else if (bytes == 4) {
    uint32_t single = (uint32_t)bits;
    memcpy(out, &single, 4);
  } else {
    uint64_t whole = (uint64_t)bits;
    memcpy(out, &whole, 8);
  }
  return 1;
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

/* LLVM computes bf16 arithmetic in float and rounds each result with compiler-rt's
 * __truncsfbf2, which Debian's clang-22 does not ship (nor libgcc 12): round to nearest
 * even, NaN stays a quiet NaN. MLIR's emulation passes would elide the rounding between
 * ops (their casts carry `contract`), so the builtin is defined here instead. */
__bf16 __truncsfbf2(float value) {
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    uint16_t half = (value != value) ? (uint16_t)((bits >> 16) | 0x40)
                                     : (uint16_t)((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
    __bf16 result;
    memcpy(&result, &half, sizeof result);
    return result;
}

/* f64 to bf16 in one rounding (LLVM calls it for arith.truncf f64 to bf16): to float
 * rounding to odd, which keeps 16 more bits than bf16 and marks an inexact result in its
 * last bit, then to bf16 to nearest even. */
__bf16 __truncdfbf2(double value) {
    float near = (float)value;
    if (value != value || (double)near == value)
        return __truncsfbf2(near);
    uint32_t bits;
    memcpy(&bits, &near, sizeof bits);
    if ((value > 0 && near > value) || (value < 0 && near < value))
        bits -= 1; /* rounded away from zero: the float below, in magnitude */
    bits |= 1;
    float odd;
    memcpy(&odd, &bits, sizeof odd);
    return __truncsfbf2(odd);
}

/* Partitioned storage: see dhir_rt.h. Each rank reads and writes its own rows of the
 * files when every rank can open them; otherwise (files on a disk only rank 0 sees, or
 * DHIR_IO=rank0 in rank 0's environment) rank 0 reads each rank's rows and sends them, and
 * receives each rank's part of the results and writes it, in pieces of at most
 * IO_PIECE_BYTES (or DHIR_MESSAGE_CHUNK_BYTES where smaller), each packing as many of the
 * rank's runs as fit: no rank holds more than its own rows and one piece. */

#define IO_PIECE_BYTES ((int64_t)4 << 20)
#define IO_TAG 32000 /* after the entry's messages, which all completed before it returns */

static void read_all(int file, char *data, int64_t bytes, off_t at, const char *path) {
  for (int64_t done = 0; done < bytes;) {
    ssize_t got = pread(file, data + done, (size_t)(bytes - done), at + done);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      dhir_rt_fatal("cannot read %s: %s", path, got < 0 ? strerror(errno) : "file ended early");
    done += got;
  }
}

/* Whether every rank can do its own file I/O: `ok` is this rank's answer. */
static int every_rank(int ok) {
  if (io_by_rank0())
    ok = 0;
  int all = 0;
  check(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
  return all;
}

/* The buffer for one piece, made on first use. */
static char *io_buffer(void) {
  static char *buffer = NULL;
  if (buffer == NULL && (buffer = malloc((size_t)IO_PIECE_BYTES)) == NULL)
    dhir_rt_fatal("out of memory");
  return buffer;
}

/* The largest piece: IO_PIECE_BYTES, or DHIR_MESSAGE_CHUNK_BYTES where smaller (every rank
 * has rank 0's, so both ends cut alike). */
static int64_t io_step(void) {
  return chunk_bytes < IO_PIECE_BYTES ? chunk_bytes : IO_PIECE_BYTES;
}

static int io_piece(int64_t done, int64_t bytes) {
  return (int)(bytes - done < io_step() ? bytes - done : io_step());
}

/* One piece of file I/O through rank 0 from `source`, one message: it must be `bytes` long,
 * or the two ranks disagree on what they move. */
static void receive_piece(char *into, int bytes, int source) {
  MPI_Status status;
  int got = -1;
  check(MPI_Recv(into, bytes, MPI_BYTE, source, IO_TAG, MPI_COMM_WORLD, &status), "MPI_Recv");
  check(MPI_Get_count(&status, MPI_BYTE, &got), "MPI_Get_count");
  if (got != bytes)
    dhir_rt_fatal("file I/O through rank 0: expected %d bytes from rank %d, got %d", bytes,
                  source, got);
}

/* The input file, or -1 where it cannot be opened (fatal on rank 0, which must). */
static int open_input(int32_t index, const char *path, int64_t bytes, int must) {
  int file = open(path, O_RDONLY);
  if (file < 0 && !must)
    return -1;
  if (file < 0)
    dhir_rt_fatal("argument #%d: cannot open %s: %s", index, path, strerror(errno));
  struct stat info;
  if (fstat(file, &info) != 0)
    dhir_rt_fatal("argument #%d: cannot stat %s: %s", index, path, strerror(errno));
  if ((int64_t)info.st_size != bytes)
    dhir_rt_fatal("argument #%d: %s holds %lld bytes, the argument needs %lld", index, path,
                  (long long)info.st_size, (long long)bytes);
  return file;
}

/* A run of bytes moved between rank 0 and another rank: at `at` in the file, and at
 * `memory` on the other rank (rank 0 reads or writes the file instead). */
typedef struct {
  char *memory;
  int64_t at, length;
} io_run;

/* Moves `runs` between rank 0, which reads (`to_peer`) or writes `file`, and rank `peer`'s
 * memory, in pieces of at most io_step() bytes that pack the runs end to end: a message per
 * piece, not per run, so that a rank holding many rows apart (an interleaved placement's
 * every R-th row) takes few. Both ranks call it with the same runs' places and lengths. */
static void move_runs(const io_run *runs, int64_t count, int peer, int to_peer, int file,
                      const char *path) {
  int on_file = world_rank == 0, sending = on_file == to_peer, other = on_file ? peer : 0;
  int64_t total = 0, k = 0, into = 0; /* the next byte is `into` bytes into run `k` */
  for (int64_t r = 0; r < count; ++r)
    total += runs[r].length;
  char *buffer = total > 0 ? io_buffer() : NULL;
  for (int64_t moved = 0; moved < total; moved += io_step()) {
    int piece = io_piece(moved, total);
    if (!sending)
      receive_piece(buffer, piece, other);
    for (int64_t used = 0; used < piece;) {
      const io_run *run = &runs[k];
      int64_t n = run->length - into < piece - used ? run->length - into : piece - used;
      char *packed = buffer + used;
      if (on_file && sending)
        read_all(file, packed, n, (off_t)(run->at + into), path);
      else if (on_file)
        write_all(file, packed, (size_t)n, (off_t)(run->at + into), path);
      else if (sending)
        memcpy(packed, run->memory + into, (size_t)n);
      else
        memcpy(run->memory + into, packed, (size_t)n);
      used += n;
      into += n;
      if (into == run->length) {
        ++k;
        into = 0;
      }
    }
    if (sending) {
      count_io_sent(piece);
      check(MPI_Send(buffer, piece, MPI_BYTE, other, IO_TAG, MPI_COMM_WORLD), "MPI_Send");
    }
  }
}

/* Room for `count` runs, or fatal. */
static io_run *io_runs(int64_t count) {
  io_run *runs = malloc(sizeof *runs * (size_t)(count > 0 ? count : 1));
  if (runs == NULL)
    dhir_rt_fatal("out of memory for %lld runs of a file", (long long)count);
  return runs;
}

void *dhir_rt_load_arg(int32_t index, const char *path, int64_t bytes) {
  int64_t began = tracing ? trace_now() : 0;
  /* 64-byte alignment lets vectorized code use aligned loads; aligned_alloc needs a multiple. */
  size_t capacity = ((size_t)bytes + 63) / 64 * 64;
  char *data = aligned_alloc(64, capacity ? capacity : 64);
  if (data == NULL)
    dhir_rt_fatal("argument #%d: cannot allocate %lld bytes", index, (long long)bytes);
  if (world_rank == 0) {
    int file = open_input(index, path, bytes, 1);
    read_all(file, data, bytes, 0, path);
    close(file);
  }
  broadcast((int64_t)(intptr_t)data, bytes, 0);
  input_bytes += bytes;
  if (tracing)
    trace_span(TRACE_READ, began, index, -1, bytes, -1);
  return data;
}

/* The memory reserved for partitioned arguments' rows, for dhir_rt_held_part. */
typedef struct {
  uintptr_t start;
  int64_t bytes;
} reserved_part;
static reserved_part *reserved_parts = NULL;
static int64_t reserved_room = 0, reserved_count = 0;

void dhir_rt_held_part(uintptr_t *start, int64_t *bytes) {
  uintptr_t end = *start + (uintptr_t)*bytes;
  for (int64_t k = 0; k < reserved_count; ++k) {
    uintptr_t lo = reserved_parts[k].start, hi = lo + (uintptr_t)reserved_parts[k].bytes;
    if (lo >= end || hi <= *start)
      continue;
    lo = lo > *start ? lo : *start;
    hi = hi < end ? hi : end;
    *start = lo;
    *bytes = (int64_t)(hi - lo);
    return;
  }
}

static char *reserve_rows(int32_t index, int64_t row_bytes, const int64_t *ranges, int64_t count) {
  if (count == 0)
    return NULL;
  int64_t first = ranges[0], size = (ranges[2 * count - 1] - first) * row_bytes;
  if (size == 0)
    return NULL;
  /* Anonymous pages cost nothing until touched, so the rows between ranges take no
   * memory; mmap also gives page (so 64-byte) alignment. */
  char *data = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (data == MAP_FAILED)
    dhir_rt_fatal("argument #%d: cannot reserve %lld bytes for rows %lld..%lld: %s", index,
                  (long long)size, (long long)first, (long long)ranges[2 * count - 1] - 1,
                  strerror(errno));
  reserved_parts = room_for_one(reserved_parts, &reserved_room, reserved_count,
                                sizeof *reserved_parts, 8, "cannot keep", "reserved parts");
  reserved_parts[reserved_count++] = (reserved_part){(uintptr_t)data, size};
  return data;
}

/* Rank `peer`'s ranges of rows, read by rank 0 from `file` for it (`data`, where its
 * first range starts, on rank `peer` itself; unused on rank 0). */
static void move_rows(int file, const char *path, int64_t row_bytes, const int64_t *ranges,
                      int64_t count, int peer, char *data) {
  io_run *runs = io_runs(count);
  for (int64_t k = 0; k < count; ++k) {
    int64_t lo = ranges[2 * k], hi = ranges[2 * k + 1];
    char *memory = data != NULL ? data + (lo - ranges[0]) * row_bytes : NULL;
    runs[k] = (io_run){memory, lo * row_bytes, (hi - lo) * row_bytes};
  }
  move_runs(runs, count, peer, 1, file, path);
  free(runs);
}

/* Each partitioned argument's input file, for dhir_rt_shard_read_box. */
typedef struct {
  const char *path;
  int64_t bytes;
} input_file;

static input_file *input_files = NULL;
static int32_t input_file_count = 0;

static void remember_input(int32_t index, const char *path, int64_t bytes) {
  if (index >= input_file_count) {
    input_files = realloc(input_files, sizeof *input_files * (size_t)(index + 1));
    if (input_files == NULL)
      dhir_rt_fatal("out of memory");
    memset(input_files + input_file_count, 0,
           sizeof *input_files * (size_t)(index + 1 - input_file_count));
    input_file_count = index + 1;
  }
  input_files[index] = (input_file){path, bytes};
}

void *dhir_rt_load_rows(int32_t index, const char *path, int64_t bytes, int64_t row_bytes,
                        const int64_t *table, const int64_t *starts, void **aligned) {
  int64_t began = tracing ? trace_now() : 0, before = input_bytes;
  int64_t phase = io_enter(PHASE_INPUTS);
  remember_input(index, path, bytes);
  const int64_t *ranges = table + 2 * starts[world_rank];
  int64_t count = starts[world_rank + 1] - starts[world_rank];
  char *data = reserve_rows(index, row_bytes, ranges, count);
  int64_t first = count ? ranges[0] : 0;
  /* Row 0's place, never itself used: an integer difference, as it may lie before any
   * allocation. */
  *aligned = (void *)((uintptr_t)data - (uintptr_t)(first * row_bytes));
  int file = open_input(index, path, bytes, world_rank == 0);
  int shared = every_rank(file >= 0);
  for (int64_t k = 0; k < count; ++k) {
    int64_t lo = ranges[2 * k], hi = ranges[2 * k + 1], size = (hi - lo) * row_bytes;
    input_bytes += size;
    if (shared || world_rank == 0)
      read_all(file, data + (lo - first) * row_bytes, size, (off_t)(lo * row_bytes), path);
  }
  if (!shared && world_rank != 0)
    move_rows(file, path, row_bytes, ranges, count, world_rank, data);
  if (!shared && world_rank == 0)
    for (int dest = 1; dest < world_size; ++dest)
      move_rows(file, path, row_bytes, table + 2 * starts[dest], starts[dest + 1] - starts[dest],
                dest, NULL);
  if (file >= 0)
    close(file);
  if (tracing)
    trace_span(TRACE_READ, began, index, -1, input_bytes - before, -1);
  state->phase = phase;
  return data;
}

/* A run of memory this rank writes at `at` in the result file, kept until close when rank 0
 * writes for it. */
typedef struct {
  const char *data;
  int64_t at, length;
  int owned; /* a copy of the run, freed at close */
} pending_run;

typedef struct {
  int output;  /* -1 where rank 0 writes for this rank */
  int input;   /* rank 0 only: blocks no rank holds come from the input */
  int through_rank0;
  char input_path[PATH_MAX];
  char path[PATH_MAX]; /* the result file, as it is written: for messages */
  pending_run *runs;
  int64_t run_count, run_capacity;
} result_file;

static result_file *results = NULL;
static int32_t result_count = 0;

static result_file *result_at(int32_t index) {
  if (index < 0 || index >= result_count)
    dhir_rt_fatal("argument #%d has no open result file", index);
  return &results[index];
}

static void result_path(char *path, const char *dir, int32_t index, const char *suffix) {
  if (snprintf(path, PATH_MAX, "%s/arg%d.raw%s", dir, index, suffix) >= PATH_MAX)
    dhir_rt_fatal("output directory name too long: %s", dir);
}

void dhir_rt_save_arg(const char *dir, int32_t index, const void *data, int64_t bytes) {
  if (world_rank != 0)
    return;
  int64_t began = tracing ? trace_now() : 0;
  char path[PATH_MAX];
  result_path(path, dir, index, "");
  int file = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (file < 0)
    dhir_rt_fatal("cannot create %s: %s", path, strerror(errno));
  write_all(file, data, (size_t)bytes, 0, path);
  if (close(file) != 0)
    dhir_rt_fatal("cannot write %s: %s", path, strerror(errno));
  if (tracing)
    trace_span(TRACE_WRITE, began, index, -1, bytes, -1);
}

void dhir_rt_open_result(const char *dir, int32_t index, const char *input, int64_t bytes) {
  if (index >= result_count) {
    results = realloc(results, sizeof *results * (size_t)(index + 1));
    if (results == NULL)
      dhir_rt_fatal("out of memory");
    memset(results + result_count, 0, sizeof *results * (size_t)(index + 1 - result_count));
    for (int32_t k = result_count; k <= index; ++k)
      results[k].output = results[k].input = -1;
    result_count = index + 1;
  }
  result_file *result = &results[index];
  char *path = result->path;
  result_path(path, dir, index, ".partial");
  if (world_rank == 0) {
    int file = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (file < 0 || ftruncate(file, (off_t)bytes) != 0)
      dhir_rt_fatal("cannot create %s: %s", path, strerror(errno));
    close(file);
    result->input = open_input(index, input, bytes, 1);
    snprintf(result->input_path, PATH_MAX, "%s", input);
  }
  dhir_rt_barrier();
  result->output = open(path, O_WRONLY);
  if (world_rank == 0 && result->output < 0)
    dhir_rt_fatal("cannot open %s: %s", path, strerror(errno));
  result->through_rank0 = !every_rank(result->output >= 0);
  if (result->through_rank0 && world_rank != 0 && result->output >= 0) {
    close(result->output);
    result->output = -1;
  }
}

static void keep_run(result_file *result, const char *data, int64_t at, int64_t length,
                     int owned) {
  if (result->run_count == result->run_capacity) {
    result->run_capacity = result->run_capacity ? 2 * result->run_capacity : 16;
    result->runs = realloc(result->runs, sizeof *result->runs * (size_t)result->run_capacity);
    if (result->runs == NULL)
      dhir_rt_fatal("out of memory");
  }
  result->runs[result->run_count++] = (pending_run){data, at, length, owned};
}

/* The pieces a rank's runs' places go in: at least 8 bytes, so that the first holds their
 * count. */
static int64_t head_step(void) {
  return io_step() < 8 ? 8 : io_step();
}

/* A rank's kept runs as `heads` of 2 * count + 1 int64: their count, then each run's place
 * in the file and length; sent to rank 0 in pieces of head_step() bytes. */
static int64_t *send_heads(const result_file *result, const char *path) {
  int64_t count = result->run_count, head_bytes = (int64_t)sizeof(int64_t) * (2 * count + 1);
  int64_t *heads = malloc((size_t)head_bytes);
  if (heads == NULL)
    dhir_rt_fatal("out of memory for %lld runs of %s", (long long)count, path);
  heads[0] = count;
  for (int64_t k = 0; k < count; ++k) {
    heads[2 * k + 1] = result->runs[k].at;
    heads[2 * k + 2] = result->runs[k].length;
  }
  for (int64_t done = 0; done < head_bytes; done += head_step()) {
    int64_t left = head_bytes - done;
    int piece = (int)(left < head_step() ? left : head_step());
    count_io_sent(piece);
    check(MPI_Send((char *)heads + done, piece, MPI_BYTE, 0, IO_TAG, MPI_COMM_WORLD),
          "MPI_Send");
  }
  return heads;
}

/* Rank 0: the heads rank `source` sends (send_heads); the runs' count in `count`. */
static int64_t *receive_heads(int source, int64_t *count, const char *path) {
  char *first = io_buffer(); /* a piece at most; unused until move_runs */
  MPI_Status status;
  int got = -1;
  check(MPI_Recv(first, (int)head_step(), MPI_BYTE, source, IO_TAG, MPI_COMM_WORLD, &status),
        "MPI_Recv");
  check(MPI_Get_count(&status, MPI_BYTE, &got), "MPI_Get_count");
  if (got < 8)
    dhir_rt_fatal("file I/O through rank 0: %d bytes of run places from rank %d", got, source);
  memcpy(count, first, sizeof *count);
  if (*count < 0 || *count > (INT64_MAX / (int64_t)sizeof(int64_t) - 1) / 2)
    dhir_rt_fatal("file I/O through rank 0: rank %d sent a count of %lld runs", source,
                  (long long)*count);
  int64_t head_bytes = (int64_t)sizeof(int64_t) * (2 * *count + 1);
  int64_t *heads = malloc((size_t)head_bytes);
  if (heads == NULL)
    dhir_rt_fatal("out of memory for %lld runs of %s", (long long)*count, path);
  int piece = (int)(head_bytes < head_step() ? head_bytes : head_step());
  if (got != piece)
    dhir_rt_fatal("file I/O through rank 0: expected %d bytes from rank %d, got %d", piece,
                  source, got);
  memcpy(heads, first, (size_t)got);
  for (int64_t done = got; done < head_bytes; done += head_step()) {
    int64_t left = head_bytes - done;
    receive_piece((char *)heads + done, (int)(left < head_step() ? left : head_step()), source);
  }
  return heads;
}

/* Rank 0 writes every other rank's kept runs, rank by rank: each sends how many runs it
 * kept with their places and lengths (in pieces, the first holding the count: one message
 * for up to a quarter million runs), then their bytes packed (move_runs). */
static void write_for_ranks(result_file *result, const char *path) {
  for (int source = 1; source < world_size; ++source) {
    if (world_rank != 0 && world_rank != source)
      continue;
    int64_t count = result->run_count;
    int64_t *heads =
        world_rank != 0 ? send_heads(result, path) : receive_heads(source, &count, path);
    io_run *runs = io_runs(count);
    for (int64_t k = 0; k < count; ++k)
      runs[k] = (io_run){world_rank != 0 ? (char *)result->runs[k].data : NULL,
                         heads[2 * k + 1], heads[2 * k + 2]};
    move_runs(runs, count, source, 0, result->output, path);
    free(heads);
    free(runs);
  }
}

void dhir_rt_close_result(const char *dir, int32_t index) {
  int64_t began = tracing ? trace_now() : 0;
  result_file *result = result_at(index);
  char path[PATH_MAX], final[PATH_MAX];
  result_path(path, dir, index, ".partial");
  if (result->through_rank0) {
    int64_t phase = io_enter(PHASE_RESULTS);
    write_for_ranks(result, path);
    state->phase = phase;
  }
  if (result->output >= 0 && close(result->output) != 0)
    dhir_rt_fatal("cannot write %s: %s", path, strerror(errno));
  result->output = -1;
  if (result->input >= 0)
    close(result->input);
  for (int64_t k = 0; k < result->run_count; ++k)
    if (result->runs[k].owned)
      free((void *)result->runs[k].data);
  free(result->runs);
  /* Before the barrier: waiting there for the other ranks is no writing (the barrier
     has its own span), and took in a rank's whole wait for a slower rank's task. */
  if (tracing)
    trace_span(TRACE_WRITE, began, index, -1, 0, -1);
  dhir_rt_barrier(); /* every rank has written its part */
  result_path(final, dir, index, "");
  if (world_rank == 0 && rename(path, final) != 0)
    dhir_rt_fatal("cannot rename %s to %s: %s", path, final, strerror(errno));
}

/* Calls `run(offset)` for every run of a block. */
#define FOR_EACH_RUN(offset, count, stride, count2, stride2, run)                                  \
  for (int64_t outer = 0; outer < (count2); ++outer)                                               \
    for (int64_t inner = 0; inner < (count); ++inner)                                              \
      run((offset) + outer * (stride2) + inner * (stride))

/* Writes `length` bytes from `from` at `at` in the result file; where rank 0 writes for
 * this rank, keeps them (a copy where `from` may be gone by close). */
static void write_run(result_file *result, const char *from, int64_t at, int64_t length,
                      int copy) {
  if (result->output >= 0) {
    write_all(result->output, from, (size_t)length, (off_t)at, result->path);
  } else if (result->through_rank0) {
    char *kept = (char *)from;
    if (copy) {
      kept = malloc(length > 0 ? (size_t)length : 1);
      if (kept == NULL)
        dhir_rt_fatal("out of memory keeping %lld bytes of a result", (long long)length);
      memcpy(kept, from, (size_t)length);
    }
    keep_run(result, kept, at, length, copy);
  } else {
    dhir_rt_fatal("a result file is not open");
  }
}

void dhir_rt_write_part(int32_t index, int64_t ptr, int64_t offset, int64_t length,
                        int64_t count, int64_t stride, int64_t count2, int64_t stride2) {
  result_file *result = result_at(index);
  const char *data = (const char *)(intptr_t)ptr;
#define WRITE_RUN(at) write_run(result, data + (at), (at), length, 0)
  FOR_EACH_RUN(offset, count, stride, count2, stride2, WRITE_RUN);
#undef WRITE_RUN
}

static void copy_run(result_file *result, int64_t at, int64_t length) {
  char *buffer = io_buffer();
  for (int64_t done = 0; done < length; done += io_step()) {
    int piece = io_piece(done, length);
    read_all(result->input, buffer, piece, (off_t)(at + done), result->input_path);
    write_all(result->output, buffer, (size_t)piece, (off_t)(at + done), result->path);
  }
}

void dhir_rt_copy_part(int32_t index, int64_t offset, int64_t length, int64_t count,
                       int64_t stride, int64_t count2, int64_t stride2) {
  result_file *result = result_at(index);
  if (result->input < 0)
    dhir_rt_fatal("argument #%d: only rank 0 copies from the input", index);
#define COPY_RUN(at) copy_run(result, (at), length)
  FOR_EACH_RUN(offset, count, stride, count2, stride2, COPY_RUN);
#undef COPY_RUN
}

/* --- shard collectives ------------------------------------------------------------------ */

/* A group's communicator, made once per grid description and axes. */
enum { MAX_GRID_WORDS = 32, MAX_GROUPS = 64 };
static struct {
  int64_t words[MAX_GRID_WORDS];
  MPI_Comm comm;
} groups[MAX_GROUPS];
static int group_count = 0;

static int64_t grid_words(const int64_t *grid) {
  int64_t dims = grid[0];
  return 1 + dims + 1 + grid[1 + dims];
}

/* This rank's coordinate on grid axis `axis` (row-major over the grid). */
static int64_t grid_coordinate(const int64_t *grid, int64_t axis) {
  int64_t dims = grid[0], rest = world_rank;
  for (int64_t d = dims - 1; d > axis; --d)
    rest /= grid[1 + d];
  return rest % grid[1 + axis];
}

static MPI_Comm group_of(const int64_t *grid, const char *who) {
  int64_t words = grid_words(grid), dims = grid[0], size = 1;
  if (words > MAX_GRID_WORDS)
    dhir_rt_fatal("%s: a grid of %lld dimensions is too large", who, (long long)dims);
  for (int i = 0; i < group_count; ++i)
    if (memcmp(groups[i].words, grid, (size_t)words * sizeof *grid) == 0)
      return groups[i].comm;
  for (int64_t d = 0; d < dims; ++d)
    size *= grid[1 + d];
  if (size != world_size)
    dhir_rt_fatal("%s: the grid has %lld devices but the program runs on %d ranks", who,
                  (long long)size, world_size);
  if (group_count == MAX_GROUPS)
    dhir_rt_fatal("%s: more than %d device groups", who, MAX_GROUPS);
  const int64_t *axes = grid + 2 + dims;
  int64_t count = grid[1 + dims], color = 0, key = 0;
  for (int64_t d = 0; d < dims; ++d) {
    int in_group = 0;
    for (int64_t a = 0; a < count; ++a)
      in_group |= axes[a] == d;
    if (!in_group)
      color = color * grid[1 + d] + grid_coordinate(grid, d);
  }
  for (int64_t a = 0; a < count; ++a)
    key = key * grid[1 + axes[a]] + grid_coordinate(grid, axes[a]);
  MPI_Comm comm;
  check(MPI_Comm_split(MPI_COMM_WORLD, (int)color, (int)key, &comm), "MPI_Comm_split");
  memcpy(groups[group_count].words, grid, (size_t)words * sizeof *grid);
  groups[group_count++].comm = comm;
  return comm;
}

static int mpi_count(int64_t count, const char *who) {
  if (count < 0 || count > INT_MAX)
    dhir_rt_fatal("%s: %lld elements are more than one MPI call takes", who, (long long)count);
  return (int)count;
}

/* dhir-shard-collectives numbers types and reductions in this order. */
static MPI_Datatype shard_type(int64_t type) {
  MPI_Datatype types[] = {MPI_DOUBLE,   MPI_FLOAT,    MPI_INT64_T,  MPI_INT32_T,
                          MPI_INT16_T,  MPI_INT8_T,   MPI_UINT64_T, MPI_UINT32_T,
                          MPI_UINT16_T, MPI_UINT8_T};
  if (type < 0 || type >= (int64_t)(sizeof types / sizeof *types))
    dhir_rt_fatal("shard collective: unknown element type %lld", (long long)type);
  return types[type];
}

enum { REDUCE_SUM, REDUCE_MAX, REDUCE_MIN, REDUCE_PRODUCT, REDUCE_AND, REDUCE_OR, REDUCE_XOR,
       REDUCE_AVERAGE };

/* arith.maximumf and minimumf: NaN wins and +0.0 is above -0.0, where MPI_MAX and
 * MPI_MIN give either operand (the result then hung on the order of the devices). */
#define FLOAT_EXTREME(name, type, above)                                                  \
  static type name##_of(type a, type b) {                                                 \
    if (a != a)                                                                           \
      return a;                                                                           \
    if (b != b)                                                                           \
      return b;                                                                           \
    if (a == b)                                                                           \
      return (signbit(a) != 0) == (above) ? b : a;                                        \
    return (a > b) == (above) ? a : b;                                                    \
  }                                                                                       \
  static void name(void *in, void *inout, int *count, MPI_Datatype *datatype) {           \
    (void)datatype;                                                                       \
    for (int i = 0; i < *count; ++i)                                                      \
      ((type *)inout)[i] = name##_of(((type *)in)[i], ((type *)inout)[i]);               \
  }
FLOAT_EXTREME(max_f64, double, 1)
FLOAT_EXTREME(min_f64, double, 0)
FLOAT_EXTREME(max_f32, float, 1)
FLOAT_EXTREME(min_f32, float, 0)

/* The reduction `op` on elements of `type` (see shard_type). */
static MPI_Op shard_op(int64_t op, int64_t type) {
  MPI_Op ops[] = {MPI_SUM, MPI_MAX, MPI_MIN, MPI_PROD, MPI_BAND, MPI_BOR, MPI_BXOR, MPI_SUM};
  if (op < 0 || op > REDUCE_AVERAGE)
    dhir_rt_fatal("shard collective: unknown reduction %lld", (long long)op);
  if ((op != REDUCE_MAX && op != REDUCE_MIN) || type > 1)
    return ops[op];
  static MPI_Op extremes[2][2]; /* [max, min][f64, f32], made on first use */
  static MPI_User_function *const functions[2][2] = {{max_f64, max_f32}, {min_f64, min_f32}};
  MPI_Op *made = &extremes[op == REDUCE_MIN][type];
  if (*made == 0)
    check(MPI_Op_create(functions[op == REDUCE_MIN][type], 1, made), "MPI_Op_create");
  return *made;
}

/* An average is the sum divided by the group's size, in the element type. */
static void divide(void *data, int64_t count, int64_t type, int size) {
  for (int64_t i = 0; i < count; ++i)
    switch (type) {
    case 0: ((double *)data)[i] /= size; break;
    case 1: ((float *)data)[i] /= (float)size; break;
    case 2: ((int64_t *)data)[i] /= size; break;
    case 3: ((int32_t *)data)[i] /= size; break;
    case 4: ((int16_t *)data)[i] /= size; break;
    case 5: ((int8_t *)data)[i] /= size; break;
    case 6: ((uint64_t *)data)[i] /= (uint64_t)size; break;
    case 7: ((uint32_t *)data)[i] /= (uint32_t)size; break;
    case 8: ((uint16_t *)data)[i] /= (uint16_t)size; break;
    default: ((uint8_t *)data)[i] /= (uint8_t)size; break;
    }
}

static int group_index(MPI_Comm comm) {
  int index = 0;
  MPI_Comm_rank(comm, &index);
  return index;
}

static void *scratch(int64_t bytes, const char *who) {
  void *data = malloc(bytes > 0 ? (size_t)bytes : 1);
  if (data == NULL)
    dhir_rt_fatal("%s: cannot allocate %lld bytes", who, (long long)bytes);
  return data;
}

void dhir_rt_shard_all_reduce(int64_t grid, int64_t in, int64_t out, int64_t count,
                              int64_t type, int64_t op) {
  MPI_Comm comm = group_of((const int64_t *)grid, "shard.all_reduce");
  int64_t before = mpi_enter(CALL_GATHER, -1);
  check(MPI_Allreduce((void *)in, (void *)out, mpi_count(count, "shard.all_reduce"),
                      shard_type(type), shard_op(op, type), comm),
        "MPI_Allreduce");
  mpi_leave(before);
  int element = 0;
  MPI_Type_size(shard_type(type), &element);
  count_sent(count * element); /* what a reduction moves at least, once */
  if (op == REDUCE_AVERAGE) {
    int size = 0;
    MPI_Comm_size(comm, &size);
    divide((void *)out, count, type, size);
  }
}

void dhir_rt_shard_all_gather(int64_t grid, int64_t in, int64_t out, int64_t outer,
                              int64_t inner) {
  MPI_Comm comm = group_of((const int64_t *)grid, "shard.all_gather");
  int size = 0;
  MPI_Comm_size(comm, &size);
  int64_t block = outer * inner;
  char *gathered = outer == 1 ? (char *)out : scratch(block * size, "shard.all_gather");
  int64_t before = mpi_enter(CALL_GATHER, -1);
  check(MPI_Allgather((void *)in, mpi_count(block, "shard.all_gather"), MPI_BYTE, gathered,
                      (int)block, MPI_BYTE, comm),
        "MPI_Allgather");
  mpi_leave(before);
  count_sent(block * (size - 1));
  if (outer == 1)
    return;
  /* gathered holds each member's block whole; out interleaves them along the dimension. */
  for (int g = 0; g < size; ++g)
    for (int64_t o = 0; o < outer; ++o)
      memcpy((char *)out + (o * size + g) * inner, gathered + g * block + o * inner,
             (size_t)inner);
  free(gathered);
}

void dhir_rt_shard_all_slice(int64_t grid, int64_t in, int64_t out, int64_t outer,
                             int64_t inner) {
  MPI_Comm comm = group_of((const int64_t *)grid, "shard.all_slice");
  int size = 0, index = group_index(comm);
  MPI_Comm_size(comm, &size);
  for (int64_t o = 0; o < outer; ++o)
    memcpy((char *)out + o * inner, (const char *)in + (o * size + index) * inner,
           (size_t)inner);
}

void dhir_rt_shard_all_to_all(int64_t grid, int64_t in, int64_t out, int64_t outer_split,
                              int64_t inner_split, int64_t outer_concat, int64_t inner_concat) {
  MPI_Comm comm = group_of((const int64_t *)grid, "shard.all_to_all");
  int size = 0;
  MPI_Comm_size(comm, &size);
  int64_t chunk = outer_split * inner_split;
  char *sent = scratch(chunk * size, "shard.all_to_all");
  char *got = scratch(chunk * size, "shard.all_to_all");
  for (int j = 0; j < size; ++j)
    for (int64_t o = 0; o < outer_split; ++o)
      memcpy(sent + j * chunk + o * inner_split,
             (const char *)in + (o * size + j) * inner_split, (size_t)inner_split);
  int64_t before = mpi_enter(CALL_GATHER, -1);
  check(MPI_Alltoall(sent, mpi_count(chunk, "shard.all_to_all"), MPI_BYTE, got, (int)chunk,
                     MPI_BYTE, comm),
        "MPI_Alltoall");
  mpi_leave(before);
  count_sent(chunk * (size - 1));
  for (int j = 0; j < size; ++j)
    for (int64_t o = 0; o < outer_concat; ++o)
      memcpy((char *)out + (o * size + j) * inner_concat, got + j * chunk + o * inner_concat,
             (size_t)inner_concat);
  free(sent);
  free(got);
}

void dhir_rt_shard_broadcast(int64_t grid, int64_t in, int64_t out, int64_t bytes,
                             int64_t root) {
  MPI_Comm comm = group_of((const int64_t *)grid, "shard.broadcast");
  if (in != out)
    memcpy((void *)out, (const void *)in, (size_t)bytes);
  int64_t before = mpi_enter(CALL_BCAST, root);
  check(MPI_Bcast((void *)out, mpi_count(bytes, "shard.broadcast"), MPI_BYTE, (int)root, comm),
        "MPI_Bcast");
  mpi_leave(before);
  int size = 0;
  MPI_Comm_size(comm, &size);
  if (group_index(comm) == root)
    count_sent(bytes * (size - 1));
}

/* The world rank at this rank's coordinates with `axis` moved by `by`; -1 off the grid. */
static int moved_rank(const int64_t *grid, int64_t axis, int64_t by, int rotate) {
  int64_t size = grid[1 + axis], coordinate = grid_coordinate(grid, axis) + by, stride = 1;
  if (rotate)
    coordinate = ((coordinate % size) + size) % size;
  if (coordinate < 0 || coordinate >= size)
    return -1;
  for (int64_t d = grid[0] - 1; d > axis; --d)
    stride *= grid[1 + d];
  return (int)(world_rank + (coordinate - grid_coordinate(grid, axis)) * stride);
}

void dhir_rt_shard_shift(int64_t grid, int64_t in, int64_t out, int64_t bytes, int64_t axis,
                         int64_t offset, int64_t rotate) {
  const int64_t *words = (const int64_t *)grid;
  int to = moved_rank(words, axis, offset, (int)rotate);
  int from = moved_rank(words, axis, -offset, (int)rotate);
  /* Without rotation a rank that nothing reaches keeps its own data. */
  memcpy((void *)out, (const void *)in, (size_t)bytes);
  int64_t before = mpi_enter(CALL_RECV, from);
  check(MPI_Sendrecv((void *)in, mpi_count(bytes, "shard.shift"), MPI_BYTE,
                     to < 0 ? MPI_PROC_NULL : to, 0, (void *)out, (int)bytes, MPI_BYTE,
                     from < 0 ? MPI_PROC_NULL : from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
        "MPI_Sendrecv");
  mpi_leave(before);
  if (to >= 0)
    count_sent(bytes);
}

void dhir_rt_shard_send(int64_t grid, int64_t in, int64_t out, int64_t bytes, int64_t to) {
  MPI_Comm comm = group_of((const int64_t *)grid, "shard.send");
  int64_t before = mpi_enter(CALL_SEND, to);
  check(MPI_Send((void *)in, mpi_count(bytes, "shard.send"), MPI_BYTE, (int)to, 2, comm),
        "MPI_Send");
  mpi_leave(before);
  count_sent(bytes);
  memcpy((void *)out, (const void *)in, (size_t)bytes);
}

void dhir_rt_shard_recv(int64_t grid, int64_t in, int64_t out, int64_t bytes, int64_t from) {
  MPI_Comm comm = group_of((const int64_t *)grid, "shard.recv");
  (void)in;
  int64_t before = mpi_enter(CALL_RECV, from);
  check(MPI_Recv((void *)out, mpi_count(bytes, "shard.recv"), MPI_BYTE,
                 from < 0 ? MPI_ANY_SOURCE : (int)from, 2, comm, MPI_STATUS_IGNORE),
        "MPI_Recv");
  mpi_leave(before);
}

/* Copies `count` rows of `row` bytes, `stride` apart, between a block and a packed buffer. */
static void pack_rows(char *packed, char *block, int64_t count, int64_t row, int64_t stride,
                      int unpack) {
  for (int64_t i = 0; i < count; ++i)
    if (unpack)
      memcpy(block + i * stride, packed + i * row, (size_t)row);
    else
      memcpy(packed + i * row, block + i * stride, (size_t)row);
}

/* One dimension's halo exchange: rows [from, from + width) of the dimension go to `to_rank`,
 * rows [into, into + width) come from `from_rank`. */
static void halo_step(char *data, int64_t outer, int64_t extent, int64_t inner, int64_t from,
                      int64_t into, int64_t width, int to_rank, int from_rank) {
  if (width == 0)
    return;
  int64_t bytes = outer * width * inner;
  char *sent = scratch(bytes, "shard.update_halo"), *got = scratch(bytes, "shard.update_halo");
  pack_rows(sent, data + from * inner, outer, width * inner, extent * inner, 0);
  int64_t before = mpi_enter(CALL_RECV, from_rank);
  check(MPI_Sendrecv(sent, mpi_count(bytes, "shard.update_halo"), MPI_BYTE,
                     to_rank < 0 ? MPI_PROC_NULL : to_rank, 1, got, (int)bytes, MPI_BYTE,
                     from_rank < 0 ? MPI_PROC_NULL : from_rank, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE),
        "MPI_Sendrecv");
  mpi_leave(before);
  if (to_rank >= 0)
    count_sent(bytes);
  if (from_rank >= 0)
    pack_rows(got, data + into * inner, outer, width * inner, extent * inner, 1);
  free(sent);
  free(got);
}

void dhir_rt_shard_update_halo(int64_t grid, int64_t data, int64_t element) {
  const int64_t *words = (const int64_t *)grid;
  group_of(words, "shard.update_halo"); /* checks the grid against the ranks */
  const int64_t *layout = words + grid_words(words);
  int64_t dims = layout[0];
  const int64_t *size = layout + 1, *axis = layout + 1 + dims, *halo = layout + 1 + 2 * dims;
  for (int64_t d = 0, split = 0; d < dims; ++d) {
    if (axis[d] < 0)
      continue;
    int64_t outer = 1, inner = element, low = halo[2 * split], high = halo[2 * split + 1];
    for (int64_t e = 0; e < d; ++e)
      outer *= size[e];
    for (int64_t e = d + 1; e < dims; ++e)
      inner *= size[e];
    int lower = moved_rank(words, axis[d], -1, 0), upper = moved_rank(words, axis[d], 1, 0);
    int64_t extent = size[d];
    /* The upper neighbour's low halo takes my last core rows; mine comes from below. */
    halo_step((char *)data, outer, extent, inner, extent - high - low, 0, low, upper, lower);
    /* The lower neighbour's high halo takes my first core rows; mine comes from above. */
    halo_step((char *)data, outer, extent, inner, low, extent - high, high, lower, upper);
    ++split;
  }
}

/* Rank `rank`'s entry of a box (see dhir_rt.h): whether it writes, then its pieces. */
static const int64_t *box_entry(const int64_t *words, int rank) {
  return words + 4 + 2 * words[0] + rank * (1 + 3 * words[0] * words[3]);
}

/* Piece `p` of rank `rank`'s real shard: where it starts in the whole, in the shard's
 * buffer, and its sizes. */
static const int64_t *box_piece(const int64_t *words, int rank, int64_t p) {
  return box_entry(words, rank) + 1 + 3 * words[0] * p;
}

/* Piece `p` of rank `rank`'s real shard in runs: rows along its last dimension. */
static void box_runs(const int64_t *words, int rank, int64_t p, int64_t *runs, int64_t *run) {
  int64_t dims = words[0];
  const int64_t *extents = box_piece(words, rank, p) + 2 * dims;
  *run = words[1];
  *runs = 1;
  for (int64_t d = 0; d < dims; ++d)
    *(d == dims - 1 ? run : runs) *= extents[d];
}

/* Where run `r` of piece `p` of rank `rank`'s real shard lies, in bytes (row-major): in
 * the whole (`in_whole`), or in the rank's buffer of the shard's padded shape. */
static int64_t box_at(const int64_t *words, int rank, int64_t p, int64_t r, int in_whole) {
  int64_t dims = words[0], at = 0, scale = words[1];
  const int64_t *whole = words + 4, *shard = whole + dims;
  const int64_t *piece = box_piece(words, rank, p), *extents = piece + 2 * dims;
  for (int64_t d = dims - 1; d >= 0; --d) {
    int64_t i = 0;
    if (d < dims - 1) {
      i = r % extents[d];
      r /= extents[d];
    }
    at += (piece[(in_whole ? 0 : dims) + d] + i) * scale;
    scale *= in_whole ? whole[d] : shard[d];
  }
  return at;
}

/* `elements` elements of `size` bytes at `data` set to the padding: zeros, or with
 * `negative` the sign bit set as well (-0.0, which adding to a float sum leaves as it is;
 * little-endian). */
static void pad_shard(char *data, int64_t elements, int64_t size, int64_t negative) {
  memset(data, 0, (size_t)(elements * size));
  if (negative)
    for (int64_t e = 0; e < elements; ++e)
      data[e * size + size - 1] = (char)0x80;
}

/* The elements of rank `rank`'s real shard, and of its buffer. */
static void box_sizes(const int64_t *words, int rank, int64_t *real, int64_t *buffer) {
  int64_t dims = words[0];
  *real = 0;
  *buffer = 1;
  for (int64_t d = 0; d < dims; ++d)
    *buffer *= words[4 + dims + d];
  for (int64_t p = 0; p < words[3]; ++p) {
    int64_t runs = 0, run = 0;
    box_runs(words, rank, p, &runs, &run);
    *real += runs * run / words[1];
  }
}

void dhir_rt_shard_write_box(int64_t box, int64_t data, int64_t index) {
  const int64_t *words = (const int64_t *)box;
  if (!box_entry(words, world_rank)[0])
    return; /* another rank writes the same shard */
  int64_t began = tracing ? trace_now() : 0, bytes = 0;
  result_file *result = result_at((int32_t)index);
  for (int64_t p = 0; p < words[3]; ++p) {
    int64_t runs = 0, run = 0;
    box_runs(words, world_rank, p, &runs, &run);
    for (int64_t r = 0; r < runs; ++r)
      write_run(result, (const char *)(intptr_t)data + box_at(words, world_rank, p, r, 0),
                box_at(words, world_rank, p, r, 1), run, 1);
    bytes += runs * run;
  }
  if (tracing)
    trace_span(TRACE_WRITE, began, (int32_t)index, -1, bytes, -1);
}

/* A read where other ranks cannot open the input: rank 0 reads rank `peer`'s runs of its
 * real shard and sends them (`shard`, its buffer, on rank `peer`; unused on rank 0). */
static void move_shard(const int64_t *words, int peer, char *shard, int file, const char *path) {
  int64_t count = 0, runs = 0, run = 0;
  for (int64_t p = 0; p < words[3]; ++p) {
    box_runs(words, peer, p, &runs, &run);
    count += runs;
  }
  io_run *moved = io_runs(count), *next = moved;
  for (int64_t p = 0; p < words[3]; ++p) {
    box_runs(words, peer, p, &runs, &run);
    for (int64_t r = 0; r < runs; ++r)
      *next++ = (io_run){shard != NULL ? shard + box_at(words, peer, p, r, 0) : NULL,
                         box_at(words, peer, p, r, 1), run};
  }
  move_runs(moved, count, peer, 1, file, path);
  free(moved);
}

void dhir_rt_shard_read_box(int64_t box, int64_t data, int64_t index) {
  const int64_t *words = (const int64_t *)box;
  if (index < 0 || index >= input_file_count || input_files[index].path == NULL)
    dhir_rt_fatal("argument #%lld has no input file to read a shard from", (long long)index);
  const input_file *input = &input_files[index];
  int64_t began = tracing ? trace_now() : 0, real = 0, elements = 0;
  int file = open_input((int32_t)index, input->path, input->bytes, world_rank == 0);
  int shared = every_rank(file >= 0);
  char *shard = (char *)(intptr_t)data;
  box_sizes(words, world_rank, &real, &elements);
  if (real != elements)
    pad_shard(shard, elements, words[1], words[2]);
  for (int64_t p = 0; p < words[3] && (shared || world_rank == 0); ++p) {
    int64_t runs = 0, run = 0;
    box_runs(words, world_rank, p, &runs, &run);
    for (int64_t r = 0; r < runs; ++r)
      read_all(file, shard + box_at(words, world_rank, p, r, 0), run,
               (off_t)box_at(words, world_rank, p, r, 1), input->path);
  }
  input_bytes += real * words[1];
  if (!shared && world_rank != 0)
    move_shard(words, world_rank, shard, file, input->path);
  if (!shared && world_rank == 0)
    for (int dest = 1; dest < world_size; ++dest)
      move_shard(words, dest, NULL, file, input->path);
  if (file >= 0)
    close(file);
  if (tracing)
    trace_span(TRACE_READ, began, (int32_t)index, -1, real * words[1], -1);
}
