"""The optimizer's lines in `--timing`: a nest in the pieces of a split task once, and a
text many nests share on one line (a schedule of 10,000 tasks prints a few lines)."""

from pathlib import Path

import pytest

from dhir import parse_string
from dhir.api import run_pipeline
from dhir.ir.diagnostics import REPORT_ENV, SourceLoc
from dhir.transforms.optimize_bodies import Decision, decision_lines, optimize_bodies

EXAMPLES = Path(__file__).parents[2] / "examples"


def test_a_nest_in_each_piece_of_a_split_task_is_one_line() -> None:
    path = EXAMPLES / "plain_gemm.mlir"
    module = parse_string(path.read_text(), "plain_gemm.mlir")
    run_pipeline(module, "dhir-codedrop,dhir-split{ranks=2}")
    decisions = optimize_bodies(module, 512)
    assert len(decisions) == 2  # one per piece
    assert decision_lines(decisions) == [
        "plain_gemm.mlir:9:5: nest (k innermost) blocked 4 rows x 32 columns (4 vectors of "
        "8 x f64) in registers, column blocks outer, exact (in 2 tasks)"
    ]


def test_a_text_many_nests_share_takes_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    left = [Decision(SourceLoc("p.mlir", k, 3), False, "left as written: why") for k in range(10)]
    done = [Decision(SourceLoc("p.mlir", 20, 5), True, "nest blocked")]
    monkeypatch.delenv(REPORT_ENV, raising=False)
    assert decision_lines([*left, *done]) == [
        "left as written: why (10 nests: p.mlir:0:3, p.mlir:1:3, p.mlir:2:3 and 7 more "
        f"places; {REPORT_ENV}=all lists each)",
        "p.mlir:20:5: nest blocked",
    ]
    monkeypatch.setenv(REPORT_ENV, "all")
    assert decision_lines([*left, *done]) == [d.line() for d in [*left, *done]]
