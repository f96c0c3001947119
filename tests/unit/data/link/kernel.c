#include <stdint.h>
/* A 2-D strided memref as MLIR passes it through llvm.emit_c_interface. */
struct view2d { double *allocated, *aligned; int64_t offset, sizes[2], strides[2]; };

void _mlir_ciface_scale_rows(struct view2d *v, double factor) {
  for (int64_t i = 0; i < v->sizes[0]; ++i)
    for (int64_t j = 0; j < v->sizes[1]; ++j)
      v->aligned[v->offset + i * v->strides[0] + j * v->strides[1]] *= factor;
}

void add_one(int64_t data, int64_t n) {  /* a bare pointer, as BLAS takes one */
  double *x = (double *)(intptr_t)data;
  for (int64_t i = 0; i < n; ++i) x[i] += 1.0;
}

/* A memref without llvm.emit_c_interface: its descriptor's fields, one argument each. */
double sum_plain(double *allocated, double *aligned, int64_t offset, int64_t size,
                 int64_t stride) {
  double sum = 0.0;
  for (int64_t i = 0; i < size; ++i) sum += aligned[offset + i * stride];
  return sum;
}

int32_t twice(int32_t x) { return 2 * x; }
