"""What the CPU and GPU calibrations share: running one step of a measurement program,
reading its result lines, and turning times into a description's values."""

import re
import subprocess
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Result:
    """One measurement: its amount (bytes, flops), the median seconds of its trials, and
    how far the middle half of the trials spread over that median (None: not reported)."""

    amount: float
    seconds: float
    spread: float | None = None


# Trials spreading more than this over their median make a figure noisy.
NOISY_SPREAD = 0.25


def noisy(result: Result) -> str:
    """A warning line for a noisy result, else empty."""
    if result.spread is None or result.spread <= NOISY_SPREAD:
        return ""
    return (
        f"  noisy: the middle half of the trials spread over {result.spread:.0%} of their "
        "median; rerun on an idle machine (and without --quick) for a steadier figure"
    )


def results(output: str, name: str) -> list[Result]:
    """The `name amount seconds threads [spread]` lines of the output."""
    rows = []
    for line in output.splitlines():
        words = line.split()
        if len(words) in (4, 5) and words[0] == name:
            amount, seconds = float(words[1]), float(words[2])
            spread = float(words[4]) if len(words) == 5 else None
            if seconds > 0:
                rows.append(Result(amount, seconds, spread))
    if not rows:
        tail = "\n".join(output.strip().splitlines()[-10:])
        raise DhirError(
            [Diagnostic(f"calibration step '{name}' printed no result; its output:\n{tail}")]
        )
    return rows
