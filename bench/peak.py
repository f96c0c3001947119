"""One core's f64 peak, measured: bench/c/fma_peak.c built for this CPU."""

import subprocess
import tempfile
from functools import cache
from pathlib import Path

from dhir.toolchain.tools import find_llvm_tools

SOURCE = Path(__file__).parent / "c" / "fma_peak.c"


@cache
def core_f64_peak() -> tuple[float, float]:
    """(with FMA, with multiplies and adds rounded apart) GFLOP/s of one core, f64: exact
    code may only reach the second."""
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "fma_peak"
        clang = str(find_llvm_tools().clang)
        flags = ["-O2", "-march=native", "-ffp-contract=off"]
        subprocess.run([clang, *flags, "-o", str(exe), str(SOURCE)], check=True)
        out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    fused, apart, _ = out.split()
    return float(fused), float(apart)
