"""What a `dhir compile` process spends outside the build: the modules it loads, and the
end of the process."""

import subprocess
import sys

_LOADED = """
import sys
import dhir.backends.native, dhir.cli.commands, dhir.runner
print(sorted(m for m in sys.modules if m.startswith(("dhir.backends.interp", "xdsl.interp"))))
"""

# Garbage in a cycle, made after `main` returned: the collection Python runs as it shuts
# down would free it (and say so).
_AT_EXIT = """
import os
from dhir.cli.main import main
try:
    main(["--version"])
except SystemExit:
    pass

class Cycle:
    def __del__(self):
        os.write(1, b"collected")

garbage = Cycle()
garbage.own = garbage
del garbage
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


def test_the_command_line_skips_the_collection_at_exit() -> None:
    assert "collected" not in _run(_AT_EXIT)
