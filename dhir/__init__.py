"""dhir: run one MLIR program across a cluster of CPUs and GPUs."""

from dhir.api import run_pipeline
from dhir.ir.diagnostics import DhirError
from dhir.ir.text import parse_file, parse_string, print_module
from dhir.run import run

__all__ = ["DhirError", "parse_file", "parse_string", "print_module", "run", "run_pipeline"]
