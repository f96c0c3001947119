"""`dhir compile` of a program it must refuse before building, for tests of the checks
`dhir run` and `dhir compile` share."""

import subprocess
import sys
from pathlib import Path


def compile_refusal(folder: Path, text: str) -> str:
    """What `dhir compile` writes to stderr for `text`, saved as p.mlir in `folder`, after
    checking that it exited 1 and made no executable."""
    program = folder / "p.mlir"
    program.write_text(text)
    exe = folder / "p.exe"
    result = subprocess.run(
        [sys.executable, "-m", "dhir", "compile", str(program), "-q", "-o", str(exe)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert not exe.exists()
    return result.stderr
