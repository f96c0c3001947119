/* The user's own C kernel for examples/link/rows.mlir: each row of a view made to sum to
   one. MLIR passes the view through llvm.emit_c_interface as a pointer to its descriptor
   (docs/commands.md, "Calling your own code"). */
#include <stdint.h>

struct view2d {
  double *allocated, *aligned;
  int64_t offset, sizes[2], strides[2];
};

void _mlir_ciface_normalize_rows(struct view2d *v) {
  for (int64_t i = 0; i < v->sizes[0]; ++i) {
    double *row = v->aligned + v->offset + i * v->strides[0];
    double sum = 0.0;
    for (int64_t j = 0; j < v->sizes[1]; ++j) sum += row[j * v->strides[1]];
    for (int64_t j = 0; j < v->sizes[1]; ++j) row[j * v->strides[1]] /= sum;
  }
}
