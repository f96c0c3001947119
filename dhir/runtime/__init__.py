"""dhir's C runtime (`dhir_rt.c`), shipped as package data and compiled with each program."""

from pathlib import Path

RUNTIME_DIR = Path(__file__).resolve().parent
RUNTIME_SOURCE = RUNTIME_DIR / "dhir_rt.c"
RUNTIME_HEADER = RUNTIME_DIR / "dhir_rt.h"
GPU_RUNTIME_SOURCE = RUNTIME_DIR / "dhir_gpu_rt.c"  # linked into programs with GPU tasks
