"""dhir: run one MLIR program across a cluster of CPUs and GPUs.

The API below is loaded when first used, so that importing one of dhir's modules loads
only what that module needs.
"""

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dhir.api import run_pipeline
    from dhir.ir.diagnostics import DhirError
    from dhir.ir.text import parse_file, parse_string, print_module
    from dhir.runner import run

_MODULE_OF = {
    "DhirError": "dhir.ir.diagnostics",
    "parse_file": "dhir.ir.text",
    "parse_string": "dhir.ir.text",
    "print_module": "dhir.ir.text",
    "run": "dhir.runner",
    "run_pipeline": "dhir.api",
}
__all__ = ["DhirError", "parse_file", "parse_string", "print_module", "run", "run_pipeline"]


def __getattr__(name: str) -> object:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'dhir' has no attribute '{name}'")
    return getattr(import_module(module), name)
