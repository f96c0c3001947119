"""Round trips between dhir and mlir-opt-22: the yardstick for dhir's syntax is that
MLIR 22 reads what dhir prints as the same IR it reads from the original text."""

import shutil
import subprocess
from io import StringIO

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.printer import Printer

from dhir import DhirError, parse_string
from dhir.context import make_context
from dhir.ir.parser import LocatedParser

CTX = make_context(allow_unregistered=True)


def parse(text: str) -> ModuleOp:
    module = LocatedParser(CTX, text, "<test>").parse_module()
    module.verify()
    return module


def show(module: ModuleOp, generic: bool = False) -> str:
    out = StringIO()
    Printer(stream=out, print_generic_format=generic).print_op(module)
    return out.getvalue()


def mlir_opt(text: str, generic: bool = True) -> str:
    mlir_opt = shutil.which("mlir-opt-22")
    assert mlir_opt is not None
    args = [mlir_opt, "--allow-unregistered-dialect", "--mlir-print-op-generic" if generic else ""]
    done = subprocess.run([a for a in args if a], input=text, capture_output=True, text=True)
    assert done.returncode == 0, f"mlir-opt-22 refused:\n{text}\n{done.stderr}"
    return done.stdout


def assert_same_as_mlir(text: str) -> None:
    """dhir's custom and generic forms of `text` and of mlir-opt-22's generic form of it
    all mean, to mlir-opt-22, the IR `text` means."""
    expected = mlir_opt(text)
    for source in (text, expected):
        module = parse(source)
        for generic in (False, True):
            assert mlir_opt(show(module, generic)) == expected, show(module, generic)


def assert_read_as_mlir_says(text: str, valid: bool, error: str, name: str = "<string>") -> None:
    """dhir reads `text` where MLIR 22 does (`valid`), and otherwise refuses it with a
    diagnostic matching `error`."""
    if valid:
        parse_string(text, name)
    else:
        with pytest.raises(DhirError, match=error):
            parse_string(text, name)
