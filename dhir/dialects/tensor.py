"""xDSL's tensor dialect, which dhir takes as it is (no shadow): the rest of dhir reaches
it through this module, as it reaches every dialect through dhir.dialects."""

# isort: off
from xdsl.dialects.tensor import (
    CastOp as CastOp,
    EmptyOp as EmptyOp,
    ExtractSliceOp as ExtractSliceOp,
    InsertSliceOp as InsertSliceOp,
    PadOp as PadOp,
    SplatOp as SplatOp,
)
# isort: on
