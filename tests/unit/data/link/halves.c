/* bf16 and f16 memrefs to C (tests/unit/test_link.py): their elements by their bits. */
#include <stdint.h>
struct d1 { uint16_t *allocated, *aligned; int64_t offset, sizes[1], strides[1]; };
/* Each element's bits copied out, then the element negated in place. */
void _mlir_ciface_negate_bits(struct d1 *x, struct d1 *out) {
  for (int64_t i = 0; i < x->sizes[0]; ++i) {
    uint16_t *e = &x->aligned[x->offset + i * x->strides[0]];
    out->aligned[out->offset + i * out->strides[0]] = *e;
    *e ^= 0x8000;
  }
}

void _mlir_ciface_negate_half(struct d1 *x, struct d1 *out) { _mlir_ciface_negate_bits(x, out); }
