"""What a `dhir compile` process spends outside the build: the modules it loads."""

import subprocess
import sys

_LOADED = """
import sys
import dhir.backends.native, dhir.cli.commands, dhir.runner
print(sorted(m for m in sys.modules if m.startswith(("dhir.backends.interp", "xdsl.interp"))))
"""


def _run(script: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_native_builds_load_no_interpreter() -> None:
    # The interpreter and xDSL's interpreters under it were a fifth of the imports.
    assert _run(_LOADED).split() == ["[]"]
