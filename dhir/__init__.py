"""dhir: run one MLIR program across a cluster of CPUs and GPUs.

The API below is loaded when first used, so that importing one of dhir's modules loads
only what that module needs.
"""

from typing import TYPE_CHECKING

from dhir.lazy import lazy_names

if TYPE_CHECKING:
    from dhir.api import run_pipeline
    from dhir.ir.diagnostics import DhirError
    from dhir.ir.text import parse_file, parse_string, print_module
    from dhir.runner import run
    from dhir.version import __version__

_MODULE_OF = {
    "DhirError": "dhir.ir.diagnostics",
    "parse_file": "dhir.ir.text",
    "parse_string": "dhir.ir.text",
    "print_module": "dhir.ir.text",
    "run": "dhir.runner",
    "run_pipeline": "dhir.api",
    "__version__": "dhir.version",
}
__all__ = [
    "__version__",
    "DhirError",
    "parse_file",
    "parse_string",
    "print_module",
    "run",
    "run_pipeline",
]


__getattr__ = lazy_names(__name__, _MODULE_OF)
