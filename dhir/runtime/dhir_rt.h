/* dhir's C runtime: what compiled dhir programs and their generated `main` call.
 * Compiled with the chosen MPI's own include flags, so one source serves MPICH and OpenMPI. */
#ifndef DHIR_RT_H
#define DHIR_RT_H

#include <stdint.h>

/* Called by lowered programs (plain C ABI; pointers travel as i64). */
/* Messages of any size, as bytes in pieces MPI's int counts can hold; both ends of a
 * send/recv pair must name the same size and tag. */
void dhir_rt_bcast(int64_t ptr, int64_t bytes, int32_t root);
void dhir_rt_send(int64_t ptr, int64_t bytes, int32_t dest, int32_t tag);
void dhir_rt_recv(int64_t ptr, int64_t bytes, int32_t source, int32_t tag);
/* The same for a strided block (see dhir_rt.c): both sides name the same layout. */
void dhir_rt_send_strided(int64_t ptr, int64_t length, int64_t count, int64_t stride,
                          int64_t count2, int64_t stride2, int32_t dest, int32_t tag);
void dhir_rt_recv_strided(int64_t ptr, int64_t length, int64_t count, int64_t stride,
                          int64_t count2, int64_t stride2, int32_t source, int32_t tag);
/* Non-blocking sends: each joins request slot `slot`; dhir_rt_wait(slot) completes them. */
void dhir_rt_isend(int64_t ptr, int64_t bytes, int32_t dest, int32_t tag, int64_t slot);
void dhir_rt_isend_strided(int64_t ptr, int64_t length, int64_t count, int64_t stride,
                           int64_t count2, int64_t stride2, int32_t dest, int32_t tag,
                           int64_t slot);
void dhir_rt_wait(int64_t slot);
/* Assembly with one collective: every rank gives its own run (offset and length in bytes
 * within the buffer, length 0 for none); all ranks (or `root`) receive every run. */
void dhir_rt_allgatherv(int64_t ptr, int64_t bytes, int64_t offset, int64_t length);
void dhir_rt_gatherv(int64_t ptr, int64_t bytes, int64_t offset, int64_t length, int32_t root);
void dhir_rt_bcast_strided(int64_t ptr, int64_t length, int64_t count, int64_t stride,
                           int64_t count2, int64_t stride2, int32_t root);
int32_t dhir_rt_comm_size(void);
/* The threads a rank's parallel loops share: OpenMP's count, 1 in a build without it. */
int64_t dhir_rt_threads(void);
int32_t dhir_rt_comm_rank(void);
/* Rank 0's `value` on every rank (dhir-agree-calls). */
int64_t dhir_rt_agree(int64_t value);
void dhir_rt_barrier(void);
/* Task profiling (dhir-instrument): time per task id on the rank that runs it. When the
 * environment variable DHIR_PROFILE names a file, rank 0 writes every rank's sums there
 * at finalize. */
void dhir_rt_task_begin(int64_t id);
void dhir_rt_task_end(int64_t id);
/* Schedule timing (dhir-instrument): around each schedule, on every rank. Begin is a barrier,
 * so that ranks start together; rank 0 writes the slowest rank's time per schedule id under
 * "schedules" in the same file. */
void dhir_rt_schedule_begin(int64_t id);
void dhir_rt_schedule_end(int64_t id);

/* Where each rank is, for the launcher to report when a rank dies (see dhir_rt.c):
 * dhir-track-tasks calls these at the start and end of every task body; `id` is the
 * task's position in dhir.ir.tasks.task_ids order. */
void dhir_rt_task_enter(int64_t id);
void dhir_rt_task_leave(int64_t id);
/* Leave the task under way and enter task `id`, as the two calls above would: the lowering
 * calls it where nothing runs between two tasks (dhir-lower-to-mpi). */
void dhir_rt_task_switch(int64_t id);
/* Called by the harness after dhir_rt_init: `table` names the tasks, one line per id
 * ("name<TAB>location"), written to this rank's state file. */
void dhir_rt_track(const char *table);

/* For the GPU runtime (dhir_gpu_rt.c): whether this run keeps a trace (dhir run --trace),
 * its clock (ns from the ranks' common origin), and an event of the rank's GPU from `begin`
 * to `end` on that clock: the kernel named `kernel`, or (NULL) a copy of `bytes` in
 * `direction` (0 host to device, 1 device to host, 2 device to device). */
int dhir_rt_tracing(void);
int64_t dhir_rt_trace_clock(void);
void dhir_rt_trace_gpu(int64_t begin, int64_t end, const char *kernel, int64_t direction,
                       int64_t bytes);

/* For the GPU runtime: messages between GPU tasks' buffers on two ranks, on a communicator
 * of their own (so that their tags never meet the program's), in pieces like the others.
 * `data` may be device memory where the MPI is CUDA-aware (dhir_rt_mpi_cuda_aware). A
 * non-blocking call joins the requests of `key`; dhir_rt_device_wait(key) completes all of
 * them. dhir_rt_same_node(rank): whether `rank` shares this rank's node (its memory). */
int dhir_rt_mpi_cuda_aware(void);
int dhir_rt_same_node(int32_t rank);
void dhir_rt_device_isend(const void *data, int64_t bytes, int32_t dest, int32_t tag,
                          int64_t key);
void dhir_rt_device_irecv(void *data, int64_t bytes, int32_t source, int32_t tag, int64_t key);
void dhir_rt_device_wait(int64_t key);
/* Lets MPI move the pending ones on (their receivers may be waiting), waiting for none. */
void dhir_rt_device_progress(void);
void dhir_rt_device_recv(void *data, int64_t bytes, int32_t source, int32_t tag);

/* For the GPU runtime's page-locking: [*start, *start + *bytes) cut down to the part this
 * rank reserved for the rows it holds of a partitioned argument, where it overlaps one
 * (the rest of such an argument's range is no memory of this process); else unchanged. */
void dhir_rt_held_part(uintptr_t *start, int64_t *bytes);

/* Prints `dhir: error on rank R: ...` and aborts every rank. */
_Noreturn void dhir_rt_fatal(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* Called before a loop whose step, known only at run time, is 0 or less (dhir-loop-steps):
 * MLIR leaves such a loop undefined. `line` and `column` are the loop's, 0 when unknown. */
_Noreturn void dhir_rt_bad_step(int64_t step, int64_t line, int64_t column);

/* Called before an scf.for whose counter would step past its type's largest value after
 * its last iteration, `last` (dhir-loop-steps): MLIR leaves that undefined, and native code
 * wraps the counter around below the upper bound and runs on. */
_Noreturn void dhir_rt_counter_overflow(int64_t last, int64_t step, int64_t line,
                                        int64_t column);

/* Called before a host memref.alloc or memref.alloca of a negative run-time size, or of
 * more bytes than the largest signed 64-bit number (dhir-alloc-sizes): MLIR's lowering
 * multiplies the sizes without a check. `line` and `column` are the op's, 0 when unknown. */
_Noreturn void dhir_rt_alloc_too_large(int64_t line, int64_t column);
/* Called after a host memref.alloc of `bytes` (not 0) for which malloc returned NULL
 * (dhir-alloc-sizes): the lowering stores through the null pointer otherwise. */
_Noreturn void dhir_rt_alloc_failed(int64_t line, int64_t column, int64_t bytes);

/* Called before a loop whose bounds take 64-bit index arithmetic in it that dhir's analysis
 * takes as exact past 64 bits, where it wraps (dhir-wrap-checks). */
_Noreturn void dhir_rt_index_wraps(int64_t line, int64_t column);
/* The same, before the region of an scf.if or affine.if runs (dhir-wrap-checks). */
_Noreturn void dhir_rt_branch_index_wraps(int64_t line, int64_t column);

/* An access is about to run out of its memref (dhir-bounds-checks): writes its dimension's
 * index and size, which the failed check that stops the rank right after does not say.
 * Thread-safe: a parallel loop's iterations may call it. */
void dhir_rt_out_of_bounds(int64_t dim, int64_t index, int64_t size);

/* A memref.cast is about to give a dimension of run-time size `size` the static size
 * `needed` of its type, which it does not have (dhir-cast-sizes): writes the numbers, which
 * the failed check that stops the rank right after does not say. Thread-safe. */
void dhir_rt_cast_size(int64_t dim, int64_t size, int64_t needed);
/* The same for a linalg op whose operand `operand` has `size` in dimension `dim`, where the
 * loop that runs along it runs `extent` times, from another operand (dhir-linalg-sizes). */
void dhir_rt_loop_size(int64_t operand, int64_t dim, int64_t size, int64_t extent);
/* What a failed check of dhir-cast-checks found, written before its assert stops the rank:
   a memref.cast's offset (dim -1) or stride along dim; a subview's numbers along dim and
   its source's extent there; an expand_shape's group product (held in 64 bits) and its
   source's size along dim. */
void dhir_rt_cast_layout(int64_t dim, int64_t have, int64_t want);
void dhir_rt_subview_numbers(int64_t dim, int64_t offset, int64_t size, int64_t stride,
                             int64_t extent);
void dhir_rt_expand_sizes(int64_t dim, int64_t product, int64_t size);

/* Whether the views of a memref.copy share an element (dhir-copy-checks): first the copy's
 * rank, the size of its elements and the addresses of the source's and the target's first
 * elements, then each dimension's size and stride (in elements) of the source and of the
 * target; dhir_rt_copy_overlaps then answers 1 when they share an element, not being the
 * same view, else 0. Kept per thread, for copies in OpenMP loops. */
#define DHIR_RT_COPY_RANKS 64
void dhir_rt_copy_views(int64_t rank, int64_t bytes, int64_t source, int64_t target);
void dhir_rt_copy_dim(int64_t dim, int64_t source_size, int64_t source_stride,
                      int64_t target_size, int64_t target_stride);
int64_t dhir_rt_copy_overlaps(void);

/* memref.copy between memrefs of other layouts than the identity, as MLIR's lowering
 * calls it: the element's size in bytes, then the source's and the target's unranked
 * descriptors. Defined here, not taken from MLIR's runner utils: Debian's build of those
 * loads libMLIR and libLLVM, about 74 MB resident in every rank and its start-up. */
typedef struct {
  int64_t rank;
  void *descriptor; /* allocated and aligned pointers, offset, sizes[rank], strides[rank] */
} dhir_rt_unranked;
void memrefCopy(int64_t element_bytes, dhir_rt_unranked *source, dhir_rt_unranked *target);

/* Used by the generated harness. */
void dhir_rt_init(int *argc, char ***argv, int32_t expected_ranks);
void dhir_rt_finalize(void);
void dhir_rt_expect_argc(int argc, int expected, const char *usage);
int64_t dhir_rt_parse_int(const char *text, int64_t low, int64_t high, const char *what);
/* Stops the run when a dimension of dynamic size given on the command line holds fewer than
 * `least` elements, which the access `why` names: native code checks no access. */
void dhir_rt_expect_size(int64_t size, int64_t least, const char *what, const char *why);
double dhir_rt_parse_float(const char *text, const char *what);
/* A float argument given as `bits:0x` and its exact bits (hex, 2 digits a byte): 1, with
   them in `out` (`bytes` wide); 0, leaving `out`, for any other word. strtod reads every NaN
   as one, so a NaN's payload, and whether it signals, travel so. */
int dhir_rt_parse_float_bits(const char *text, void *out, int64_t bytes, const char *what);
int64_t dhir_rt_layout(int32_t rank, const int64_t *sizes, int64_t *strides, int64_t element_bytes);
void *dhir_rt_load_arg(int32_t index, const char *path, int64_t bytes);
void dhir_rt_save_arg(const char *dir, int32_t index, const void *data, int64_t bytes);

/* Partitioned storage (docs/semantics.md): each rank reserves the rows of argument `index`
 * (rows of `row_bytes`) from the start of its first range to the end of its last one and
 * fills its ranges from the file at `path`, which holds `bytes` bytes; rows between ranges
 * take no memory. Rank R's ranges are the lo, hi pairs of `table` from pair starts[R] to
 * starts[R + 1]. Returns the reserved block (NULL for no ranges) and sets `*aligned` to
 * where row 0 would be, the descriptor's aligned pointer: the entry adds global offsets
 * back to it. Every rank reads its own rows where every rank can open the file; else rank
 * 0 reads and sends them. */
void *dhir_rt_load_rows(int32_t index, const char *path, int64_t bytes, int64_t row_bytes,
                        const int64_t *table, const int64_t *starts, void **aligned);
/* The result file of a partitioned argument: every rank calls open before the entry and
 * close after; the file is `DIR/argK.raw` only once every rank has written its part
 * (itself where every rank can open the file, else rank 0 for it, at close). */
void dhir_rt_open_result(const char *dir, int32_t index, const char *input, int64_t bytes);
void dhir_rt_close_result(const char *dir, int32_t index);
/* Called by lowered programs: write a block (offset, run length, count, stride, count2,
 * stride2, all in bytes from the array's start) of this rank's memory at `ptr` (the
 * array's aligned pointer) to the result file, at the same offsets; copy a block from the
 * input file to the result file. */
void dhir_rt_write_part(int32_t index, int64_t ptr, int64_t offset, int64_t length,
                        int64_t count, int64_t stride, int64_t count2, int64_t stride2);
void dhir_rt_copy_part(int32_t index, int64_t offset, int64_t length, int64_t count,
                       int64_t stride, int64_t count2, int64_t stride2);

/* Shard collectives (dhir-shard-collectives): every rank of a grid calls them alike.
 * `grid` points to the grid's description, int64 words: the dimension count D, the D
 * sizes, the count A of the grid axes the op works over and those A axes, in order. A
 * group is the ranks that differ only on those axes; a rank's index in its group is
 * row-major over them. Buffers are addresses of whole, contiguous arrays; "outer" counts
 * and "inner" sizes (bytes) cut an array around one dimension: outer = the product of the
 * sizes before it, inner = its size times the product of those after, times the element
 * size. `type` and `op` number MPI's types and reductions as dhir-shard-collectives does. */
void dhir_rt_shard_all_reduce(int64_t grid, int64_t in, int64_t out, int64_t count,
                              int64_t type, int64_t op);
void dhir_rt_shard_all_gather(int64_t grid, int64_t in, int64_t out, int64_t outer,
                              int64_t inner);
void dhir_rt_shard_all_slice(int64_t grid, int64_t in, int64_t out, int64_t outer,
                             int64_t inner);
void dhir_rt_shard_all_to_all(int64_t grid, int64_t in, int64_t out, int64_t outer_split,
                              int64_t inner_split, int64_t outer_concat, int64_t inner_concat);
void dhir_rt_shard_broadcast(int64_t grid, int64_t in, int64_t out, int64_t bytes,
                             int64_t root);
void dhir_rt_shard_shift(int64_t grid, int64_t in, int64_t out, int64_t bytes, int64_t axis,
                         int64_t offset, int64_t rotate);
/* Blocking point-to-point messages between members of a group (tag 2): a send of `in`
 * to the member `to` (its result is `in`, copied to `out`), a receive into `out` from the
 * member `from` (-1: any). The program orders them so that they meet. */
void dhir_rt_shard_send(int64_t grid, int64_t in, int64_t out, int64_t bytes, int64_t to);
void dhir_rt_shard_recv(int64_t grid, int64_t in, int64_t out, int64_t bytes, int64_t from);
/* Fills the halos of this rank's block at `data` (elements of `element` bytes) from its
 * neighbours' blocks. The grid's words (with no axes) are followed by the block's: its
 * dimension count D, its D sizes, per dimension the grid axis it is split over (-1:
 * none), and per split dimension its low and high halo widths. The low halo takes the
 * lower neighbour's last rows before its high halo; the high halo the upper neighbour's
 * first rows after its low halo. */
void dhir_rt_shard_update_halo(int64_t grid, int64_t data, int64_t element);
/* Writes this rank's shard `data` (contiguous) of a result into argument `index`'s result
 * file (open_result), where the shard lies in the whole. `box` points to int64 words: the
 * dimension count D, the element's bytes, whether padding is -0.0 (floats) rather than
 * zeros, the pieces P of each rank's entry, the D sizes of the whole, the D sizes of the
 * shard's buffer, then per rank whether it writes (1; 0 where another rank holds the same
 * shard) and P pieces of its real part, each the D coordinates it starts at in the whole,
 * the D it starts at in the buffer and its D sizes (all sizes 0: no piece). The rest of
 * the buffer is padding, which is never written (dhir.toolchain.shard_padding). */
void dhir_rt_shard_write_box(int64_t box, int64_t data, int64_t index);
/* Reads this rank's shard of argument `index` from its input file (load_rows) into `data`
 * (every rank calls it alike; rank 0 reads for the ranks that cannot open the file); a
 * buffer with padding is padded first. */
void dhir_rt_shard_read_box(int64_t box, int64_t data, int64_t index);

#endif
