"""dhir's printer (dhir.api.print_module) writes exactly what xDSL's Printer writes, in
both forms, with and without locations: it only takes a shorter way to the stream."""

from io import StringIO
from pathlib import Path

import pytest
from xdsl.printer import Printer

from dhir.api import parse_string, print_module

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.mlir"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
@pytest.mark.parametrize("generic", [False, True])
@pytest.mark.parametrize("debuginfo", [False, True])
def test_same_text_as_xdsls_printer(path: Path, generic: bool, debuginfo: bool) -> None:
    module = parse_string(path.read_text(), str(path))
    out = StringIO()
    Printer(stream=out, print_generic_format=generic, print_debuginfo=debuginfo).print_op(module)
    out.write("\n")
    assert print_module(module, generic=generic, debuginfo=debuginfo) == out.getvalue()
