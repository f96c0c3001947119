"""Validity sets under placements that interleave rows over the ranks: they stay exact
(checked element by element against a plain model) and small (cut into slabs), and the
programs run natively as the interpreter runs them."""

import random
import re
import shutil
from collections.abc import Iterator

import islpy as isl
import numpy as np
import pytest
from test_messages import MPIS
from xdsl.dialects.builtin import MemRefType, f64
from xdsl.ir import Block as IRBlock
from xdsl.ir import SSAValue

import dhir
from dhir.analysis.validity import (
    COALESCE_PIECES,
    SLAB_PIECES,
    Block,
    Box,
    Validity,
    blocks_of,
    everything,
    merge_blocks,
)
from dhir.ir.text import parse_string

needs_mlir = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")

Point = tuple[int, ...]


def _memref(shape: tuple[int, ...]) -> SSAValue:
    return IRBlock(arg_types=[MemRefType(f64, shape)]).args[0]


def _points(s: isl.Set) -> set[Point]:
    found: set[Point] = set()
    dims = s.dim(isl.dim_type.set)

    def add(point: isl.Point) -> None:
        found.add(
            tuple(
                int(point.get_coordinate_val(isl.dim_type.set, d).to_python()) for d in range(dims)
            )
        )

    s.foreach_point(add)
    return found


def _box(box: Box) -> set[Point]:
    ranges = [range(a, b) for a, b in zip(box.lo, box.hi, strict=True)]
    out: set[Point] = {()}
    for r in ranges:
        out = {(*p, x) for p in out for x in r}
    return out


def _offsets(block: Block) -> Iterator[int]:
    for g in range(block.count2):
        for c in range(block.count):
            start = block.offset + g * block.stride2 + c * block.stride
            yield from range(start, start + block.length)


def _linear(point: Point, shape: tuple[int, ...]) -> int:
    offset = 0
    for x, extent in zip(point, shape, strict=True):
        offset = offset * extent + x
    return offset


def _random_box(rng: random.Random, shape: tuple[int, ...]) -> Box:
    """Mostly single rows (as interleaved row tasks write), sometimes row blocks or
    parts of rows."""
    rows, cols = shape
    row = rng.randrange(rows)
    kind = rng.random()
    if kind < 0.6:
        return Box((row, 0), (row + 1, cols))
    if kind < 0.8:
        return Box((row, 0), (min(rows, row + rng.randint(1, 5)), cols))
    lo = rng.randrange(cols)
    return Box((row, lo), (row + 1, rng.randint(lo + 1, cols)))


@pytest.mark.parametrize("ranks", [2, 3, 4])
@pytest.mark.parametrize("seed", range(3))
def test_interleaved_validity_matches_a_model_element_by_element(ranks: int, seed: int) -> None:
    rng = random.Random(seed)
    shape = (48, 3)
    memref = _memref(shape)
    state = Validity([memref], ranks)
    every = _points(everything(memref.type))
    model = [set(every) for _ in range(ranks)]
    for step in range(160):
        # Mostly round-robin, sometimes a random rank: rows interleave over the ranks.
        rank = step % ranks if rng.random() < 0.8 else rng.randrange(ranks)
        reads = [_random_box(rng, shape) for _ in range(rng.randint(0, 2))]
        write = _random_box(rng, shape)
        read_set = isl.Set("{ [x0, x1] : false }")
        for box in reads:
            read_set = read_set | box.as_set()
        musts = write.as_set() if rng.random() < 0.7 else isl.Set("{ [x0, x1] : false }")
        transfers = state.run_task(memref, rank, read_set, write.as_set(), musts)
        needed = set().union(*(_box(b) for b in reads)) | (_box(write) - _points(musts))
        for transfer in transfers:
            assert transfer.dest == rank and transfer.boxes is not None
            assert transfer.blocks is not None
            sent = set().union(*(_box(b) for b in transfer.boxes))
            assert sent <= model[transfer.source], "a rank sends only what it holds"
            offsets = {o for b in transfer.blocks for o in _offsets(b)}
            assert {_linear(p, shape) for p in sent} <= offsets
            model[rank] |= sent
        assert needed <= model[rank], "the task has all it needs"
        for other in range(ranks):
            if other == rank:
                model[other] |= _box(write)
            else:
                model[other] -= _box(write)
        slabs = state.held[memref]
        for r in range(ranks):
            assert _points(slabs.whole(r)) == model[r]
    _check_writes(state, memref, shape, model)
    _check_assemble(state.copy(), memref, model)


def _check_writes(
    state: Validity, memref: SSAValue, shape: tuple[int, ...], model: list[set[Point]]
) -> None:
    plan, copies = state.writes(memref)
    linear = [{_linear(p, shape) for p in held} for held in model]
    chosen: set[int] = set()
    for rank, blocks in plan:
        offsets = {o for b in blocks for o in _offsets(b)}
        assert offsets <= linear[rank], "a rank writes only what it holds"
        chosen |= offsets
    held = set().union(*linear)
    assert held <= chosen
    copied = {o for b in copies for o in _offsets(b)}
    assert copied == set(range(int(np.prod(shape)))) - held


def _check_assemble(state: Validity, memref: SSAValue, model: list[set[Point]]) -> None:
    every = set().union(*model)
    stale = set().union(*(every - held for held in model))
    delivered: set[Point] = set()
    for transfer in state.assemble(memref, None):
        assert transfer.boxes is not None
        sent = set().union(*(_box(b) for b in transfer.boxes))
        assert sent <= model[transfer.source]
        delivered |= sent
    assert stale <= delivered
    assert state.everywhere(memref)


@pytest.mark.parametrize(("ranks", "above"), [(2, False), (4, True)])
def test_interleaved_rows_keep_every_isl_operation_small(
    monkeypatch: pytest.MonkeyPatch, ranks: int, above: bool
) -> None:
    """Round-robin row writes over 1,000 rows (each task reading the row above, with
    `above`): no coalesce or subtraction sees a set of more than a few dozen pieces (on
    whole sets, one would see a piece per row, and take time growing with their square
    at every task)."""
    largest = [0]
    coalesce, subtract = isl.Set.coalesce, isl.Set.__sub__

    def counted_coalesce(self: isl.Set) -> isl.Set:
        largest[0] = max(largest[0], self.n_basic_set())
        return coalesce(self)

    def counted_subtract(self: isl.Set, other: isl.Set) -> isl.Set:
        largest[0] = max(largest[0], self.n_basic_set())
        return subtract(self, other)

    rows = 1000
    memref = _memref((rows, 4))
    state = Validity([memref], ranks)
    monkeypatch.setattr(isl.Set, "coalesce", counted_coalesce)
    monkeypatch.setattr(isl.Set, "__sub__", counted_subtract)
    for row in range(rows):
        write = Box((row, 0), (row + 1, 4)).as_set()
        reads = Box((max(row - 1, 0), 0), (row + 1, 4)).as_set() if above else write
        state.run_task(memref, row % ranks, reads, write, write)
    monkeypatch.undo()
    assert largest[0] <= COALESCE_PIECES
    slabs = state.held[memref]
    assert all(s.n_basic_set() <= SLAB_PIECES for sets in slabs.sets for s in sets)
    for rank in range(ranks):
        mine = {r for r in range(rows) if r % ranks == rank}
        if above:  # and the row above each of its rows, which it received
            mine |= {r - 1 for r in mine if r > 0}
        assert {p[0] for p in _points(slabs.whole(rank))} == mine


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
@pytest.mark.parametrize("rows", [1, 7, 1000])
def test_interleaved_rows_are_one_write_per_rank(ranks: int, rows: int) -> None:
    """Round-robin rows: each rank writes its every R-th row as one strided block (one
    runtime call), not a block per row, which made a 2,000-row program's lowering and
    build spend seconds on 2,000 calls."""
    memref = _memref((rows, 4))
    state = Validity([memref], ranks)
    for row in range(rows):
        write = Box((row, 0), (row + 1, 4)).as_set()
        state.run_task(memref, row % ranks, write, write, write)
    plan, copies = state.writes(memref)
    assert copies == []
    assert [rank for rank, _ in plan] == list(range(min(ranks, rows)))
    for rank, blocks in plan:
        mine = range(rank, rows, ranks)
        if ranks == 1:  # every row: one run
            assert blocks == [Block(0, rows * 4)]
        elif len(mine) == 1:
            assert blocks == [Block(rank * 4, 4)]
        else:
            assert blocks == [Block(rank * 4, 4, len(mine), ranks * 4)]


def _random_blocks(rng: random.Random, shape: tuple[int, ...]) -> list[Block]:
    """Blocks of random boxes of a buffer of `shape`, no two sharing an element, as
    `Validity.writes` chooses them: rows, row blocks, parts of rows and of planes."""
    taken: set[Point] = set()
    blocks: list[Block] = []
    full = everything(MemRefType(f64, shape))
    for _ in range(rng.randint(0, 12)):
        lo = tuple(rng.randrange(n) for n in shape)
        hi = tuple(
            rng.choice([a + 1, n, rng.randint(a + 1, n)]) for a, n in zip(lo, shape, strict=True)
        )
        box = Box(lo, hi)
        if _box(box) & taken:
            continue
        taken |= _box(box)
        blocks += blocks_of(box, shape, box.as_set() if rng.random() < 0.5 else full)
    return blocks


@pytest.mark.parametrize("shape", [(40,), (12, 5), (6, 4, 3), (3, 3, 2, 4)])
@pytest.mark.parametrize("seed", range(40))
def test_merged_blocks_write_exactly_the_same_elements(shape: tuple[int, ...], seed: int) -> None:
    rng = random.Random(seed)
    blocks = _random_blocks(rng, shape)
    # Also evenly spaced copies of one block, as interleaved placements leave them.
    if blocks and rng.random() < 0.5:
        first = blocks[0]
        step = max(o for o in _offsets(first)) - first.offset + 1 + rng.randint(0, 3)
        blocks = [
            first,
            *(
                Block(
                    first.offset + k * step,
                    first.length,
                    first.count,
                    first.stride,
                    first.count2,
                    first.stride2,
                )
                for k in range(1, rng.randint(2, 5))
            ),
        ]
    merged = merge_blocks(rng.sample(blocks, len(blocks)))
    before = sorted(o for b in blocks for o in _offsets(b))
    after = sorted(o for b in merged for o in _offsets(b))
    assert after == before
    assert len(merged) <= len(blocks)


def test_merging_joins_runs_rows_and_planes() -> None:
    rows = [Block(k * 10, 4) for k in (0, 1, 2, 3)]
    assert merge_blocks(rows) == [Block(0, 4, 4, 10)]
    assert merge_blocks([Block(0, 4), Block(4, 6), Block(10, 2)]) == [Block(0, 12)]
    planes = [Block(k * 100, 4, 3, 10) for k in (2, 0, 1)]
    assert merge_blocks(planes) == [Block(0, 4, 3, 10, 3, 100)]
    # Not evenly spaced, or of other lengths: kept apart, never widened.
    assert merge_blocks([Block(0, 4), Block(10, 4), Block(25, 4)]) == [
        Block(0, 4, 2, 10),
        Block(25, 4),
    ]
    assert merge_blocks([Block(0, 4), Block(10, 3)]) == [Block(0, 4), Block(10, 3)]


def _rows_program(rows: int) -> str:
    """Task k adds row k-1 of `b` to row k of `a` and writes row k of `b`: under
    round-robin placement every task needs a row its neighbour rank wrote."""
    t = f"memref<{rows}x3xf64>"
    tasks = []
    for k in range(rows):
        above = max(k - 1, 0)
        tasks.append(f"""
    %t{k} = dhir.task %cpu, %a, %b {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      %i = arith.constant {k} : index
      %up = arith.constant {above} : index
      %two = arith.constant 2.0 : f64
      scf.for %j = %c0 to %c3 step %c1 {{
        %x = memref.load %a[%i, %j] : {t}
        %y = memref.load %b[%up, %j] : {t}
        %s = arith.addf %x, %y : f64
        %d = arith.mulf %s, %two : f64
        memref.store %s, %a[%i, %j] : {t}
        memref.store %d, %b[%i, %j] : {t}
      }}
    }}""")
    return f"""
func.func @main(%a: {t}, %b: {t}) {{
  dhir.schedule %a, %b {{
    %cpu = dhir.target {{kind = "cpu"}}{"".join(tasks)}
  }}
  return
}}
"""


@needs_mlir
@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("mpi", MPIS)
def test_round_robin_rows_run_natively_as_the_interpreter_does(ranks: int, mpi: str) -> None:
    rows = 40  # enough rows for a rank's valid set to be cut into slabs
    text = _rows_program(rows)
    a = np.arange(rows * 3, dtype=np.float64).reshape(rows, 3)
    b = np.full((rows, 3), 0.5)
    expected = dhir.run(text, a.copy(), b.copy(), backend="interp")
    got = dhir.run(
        text, a.copy(), b.copy(), backend="native", ranks=ranks, mpi=mpi, placement="round-robin"
    )
    for want, have in zip(expected, got, strict=True):
        np.testing.assert_array_equal(have, want)


def _interleaved(rows: int, ranks: int, end: str) -> str:
    """Task k, on rank k mod `ranks`, doubles row k of %a. `end`: "gather", %a only
    needs to reach rank 0 (it is held whole: a first schedule lists it too); "host",
    host code reads it afterwards, so every rank needs all of it."""
    t = f"memref<{rows}x3xf64>"
    tasks = "".join(
        f"""
    %t{k} = dhir.task %cpu, %a attributes {{dhir.rank = {k % ranks} : i64}} {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      %i = arith.constant {k} : index
      %two = arith.constant 2.0 : f64
      scf.for %j = %c0 to %c3 step %c1 {{
        %x = memref.load %a[%i, %j] : {t}
        %d = arith.mulf %x, %two : f64
        memref.store %d, %a[%i, %j] : {t}
      }}
    }}"""
        for k in range(rows)
    )
    first, after = "", ""
    if end == "gather":
        first = f"""
  dhir.schedule %a {{
    %cpu = dhir.target {{kind = "cpu"}}
    %r = dhir.task %cpu, %a attributes {{dhir.rank = 0 : i64}} {{
      %c0 = arith.constant 0 : index
      %x = memref.load %a[%c0, %c0] : {t}
    }}
  }}"""
    else:
        after = f"""
  %z = arith.constant 1 : index
  %o = arith.constant 0 : index
  %seen = memref.load %a[%z, %z] : {t}
  memref.store %seen, %out[%o] : memref<1xf64>"""
    return f"""
func.func @main(%a: {t}, %out: memref<1xf64>) {{{first}
  dhir.schedule %a {{
    %cpu = dhir.target {{kind = "cpu"}}{tasks}
  }}{after}
  return
}}
"""


@pytest.mark.parametrize("ranks", [2, 3, 4])
@pytest.mark.parametrize("end", ["gather", "host"])
def test_interleaved_rows_are_assembled_in_one_message_per_rank(ranks: int, end: str) -> None:
    """Every R-th row, assembled at the end of the schedule (to rank 0, or to every
    rank), goes as one strided message per rank, not a message per row."""
    from dhir.api import run_pipeline

    module = parse_string(_interleaved(40, ranks, end))
    run_pipeline(module, f"dhir-lower-to-mpi{{ranks={ranks}}}")
    text = str(module)
    calls = {
        name: len(re.findall(rf"func\.call @{name}(_strided)?\(", text))
        for name in ("dhir_rt_send", "dhir_rt_recv", "dhir_rt_bcast")
    }
    if end == "gather":  # each rank but 0 sends its rows to rank 0
        assert calls == {"dhir_rt_send": ranks - 1, "dhir_rt_recv": ranks - 1, "dhir_rt_bcast": 0}
    else:  # each rank broadcasts its rows
        assert calls == {"dhir_rt_send": 0, "dhir_rt_recv": 0, "dhir_rt_bcast": ranks}


@needs_mlir
@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 3, 4])
@pytest.mark.parametrize("end", ["gather", "host"])
@pytest.mark.parametrize("mpi", MPIS)
def test_interleaved_rows_assembled_strided_equal_the_interpreter(
    ranks: int, end: str, mpi: str
) -> None:
    rows = 24
    text = _interleaved(rows, ranks, end)
    a = np.arange(rows * 3, dtype=np.float64).reshape(rows, 3) / 7
    out = np.zeros(1)
    expected = dhir.run(text, a.copy(), out.copy(), backend="interp")
    got = dhir.run(text, a.copy(), out.copy(), backend="native", ranks=ranks, mpi=mpi)
    for want, have in zip(expected, got, strict=True):
        np.testing.assert_array_equal(have, want)
