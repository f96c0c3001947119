"""What the CPU and GPU calibrations share: running one step of a measurement program,
reading its result lines, and turning times into a description's values."""

import re
import subprocess
from pathlib import Path

from dhir.ir.diagnostics import DhirError, Diagnostic

STEP_TIMEOUT_S = 180.0
_RUNTIME_PREFIX = re.compile(r"dhir: error on rank -?\d+: ")


def fit_link(small: int, small_s: float, large: int, large_s: float) -> tuple[float, float]:
    """(latency in us, bandwidth in GB/s) of the line through both one-way times, so that
    Link.time gives both back; the large message's average rate if noise tilts the line."""
    slope = (large_s - small_s) / (large - small)
    bandwidth = 1.0 / slope if slope > 0 else large / large_s
    return small_s * 1e6, bandwidth / 1e9


def significant(value: float) -> float:
    """Four significant digits: more than the measurements repeat to."""
    return float(f"{value:.4g}")


def run_step(exe: Path, args: list[str], env: dict[str, str]) -> str:
    """The standard output of one calibration step, `exe args` (the step's name first);
    a DhirError with its standard error if it fails or takes too long."""
    try:
        result = subprocess.run(
            [str(exe), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=STEP_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise DhirError(
            [Diagnostic(f"calibration step '{args[0]}' took over {STEP_TIMEOUT_S:g} s")]
        ) from None
    if result.returncode != 0:
        # Without MPI started, the runtime's errors say "rank -1": noise here.
        stderr = _RUNTIME_PREFIX.sub("", result.stderr.strip())
        raise DhirError(
            [
                Diagnostic(
                    f"calibration step '{args[0]}' failed (exit status {result.returncode}):\n"
                    f"{stderr}"
                )
            ]
        )
    return result.stdout


def results(output: str, name: str) -> list[tuple[float, float]]:
    """(amount, seconds) from the `name amount seconds threads` lines of the output."""
    rows = []
    for line in output.splitlines():
        words = line.split()
        if len(words) == 4 and words[0] == name:
            amount, seconds = float(words[1]), float(words[2])
            if seconds > 0:
                rows.append((amount, seconds))
    if not rows:
        tail = "\n".join(output.strip().splitlines()[-10:])
        raise DhirError(
            [Diagnostic(f"calibration step '{name}' printed no result; its output:\n{tail}")]
        )
    return rows
