"""xDSL's cf dialect, which dhir takes as it is (no shadow): the rest of dhir
reaches it through this module, as it reaches every dialect through dhir.dialects."""

# isort: off
from xdsl.dialects.cf import (
    AssertOp as AssertOp,
    SwitchOp as SwitchOp,
)
# isort: on
