/* memrefCopy alone, as libmlir_c_runner_utils.so.22.1 for the lent GPU machine
 * (scripts/gpu_machine.sh, tests/gpu_check.py): a program whose memref.copy moves strided
 * memrefs (the stencils' halo copies) calls memrefCopy from MLIR's runner utils, and
 * LLVM 22's library needs libMLIR.so (107 MB), which that machine lacks and the device
 * tool cannot carry. Only memrefCopy is defined: a program calling anything else of the
 * runner utils stops at load with the missing name.
 *
 * The arguments are MLIR's unranked memref descriptors: the rank, then a ranked
 * descriptor {allocated, aligned, offset, sizes[rank], strides[rank]}, strides and
 * offset in elements of elem_size bytes. */
#include <stdint.h>
#include <string.h>

typedef struct {
  int64_t rank;
  void *descriptor;
} Unranked;

typedef struct {
  char *allocated;
  char *aligned;
  int64_t offset;
  int64_t sizes_and_strides[];
} Ranked;

void memrefCopy(int64_t elem_size, Unranked *source, Unranked *target) {
  int64_t rank = source->rank;
  Ranked *from = source->descriptor, *to = target->descriptor;
  const int64_t *sizes = from->sizes_and_strides;
  const int64_t *from_strides = from->sizes_and_strides + rank;
  const int64_t *to_strides = to->sizes_and_strides + rank;
  for (int64_t d = 0; d < rank; d++)
    if (sizes[d] == 0)
      return;
  char *src = from->aligned + from->offset * elem_size;
  char *dst = to->aligned + to->offset * elem_size;
  if (rank == 0) {
    memcpy(dst, src, elem_size);
    return;
  }
  /* Rows whose elements lie next to each other at both ends go in one memcpy. */
  int64_t last = rank - 1, block = elem_size;
  if (from_strides[last] == 1 && to_strides[last] == 1) {
    block = sizes[last] * elem_size;
    last--;
  }
  if (last < 0) {
    memcpy(dst, src, block);
    return;
  }
  int64_t index[rank];
  memset(index, 0, sizeof index);
  for (;;) {
    memcpy(dst, src, block);
    /* The next element (or row) in row-major order: the last index moves fastest. */
    int64_t d = last;
    for (; d >= 0; d--) {
      index[d]++;
      src += from_strides[d] * elem_size;
      dst += to_strides[d] * elem_size;
      if (index[d] < sizes[d])
        break;
      src -= from_strides[d] * sizes[d] * elem_size;
      dst -= to_strides[d] * sizes[d] * elem_size;
      index[d] = 0;
    }
    if (d < 0)
      return;
  }
}
