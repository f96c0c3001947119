"""dhir-time-tiles: time loops of row statements run in skewed bands, on one rank or on
several (a block of rows each, halos once a band), bit for bit what the interpreter (the
sequential oracle) computes; what it leaves, and why."""

from dataclasses import dataclass, replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dhir
from dhir import parse_string, print_module
from dhir.backends.native import compile_native
from dhir.toolchain.build import Timing
from dhir.toolchain.options import RunOptions
from dhir.transforms.time_tiles import time_tiles

ROWS, COLS, DEPTH = 9, 5, 3


@dataclass(frozen=True)
class Sweep:
    """`dst[i, j] = sum of c * src[i + offset, j]` for rows [lo, hi), or, with `row`
    set, for that one row with reads of the constant rows `row + offset`."""

    dst: int
    # (array, row offset) or (array, row offset, column offset)
    reads: tuple[tuple[int, int] | tuple[int, int, int], ...]
    lo: int
    hi: int
    row: int | None = None
    forcing: bool = False  # also adds F[t]: a read-only array indexed by the time
    weighted: bool = False  # also scales by W[j]: a read-only array indexed by the column
    # The columns it writes: heat-3d's and jacobi-2d's sweeps leave each row's edges, which
    # later sweeps still read.
    cols: tuple[int, int] = (0, COLS)
    # In a program of planes (`Program.depth`), the last subscripts it writes.
    planes: tuple[int, int] = (0, DEPTH)


def _shifted(index: str, offset: int, fixed: int | None = None) -> str:
    """An affine subscript: `index` plus `offset`, or the constant row `fixed` plus it."""
    if fixed is not None:
        return str(fixed + offset)
    return f"{index} + {offset}" if offset >= 0 else f"{index} - {-offset}"


def _read(read: tuple[int, int] | tuple[int, int, int]) -> tuple[int, int, int]:
    """(array, row offset, column offset)."""
    return (read[0], read[1], read[2] if len(read) == 3 else 0)


@dataclass(frozen=True)
class Program:
    arrays: int
    steps: int
    sweeps: tuple[Sweep, ...]
    depth: bool = False  # rows of planes (heat-3d's arrays) rather than of columns
    # Loops written with affine.for (the time loop too), accesses with affine.load and
    # affine.store: what PolyBench's programs hold.
    affine: bool = False
    # Each sweep over rows without forcing or weights written as a linalg.generic over
    # views of the arrays shifted by its reads' offsets (its own element: the output's).
    generic: bool = False
    rows: int = ROWS  # the arrays' rows (tests/unit/test_optimizer_fuzz.py varies them)

    def text(self) -> str:
        rows = self.rows
        kind = f"memref<{rows}x{COLS}x{DEPTH}xf64>" if self.depth else f"memref<{rows}x{COLS}xf64>"
        names = [f"%M{a}" for a in range(self.arrays)]
        args = (
            ", ".join(f"{n}: {kind}" for n in names)
            + f", %F: memref<{self.steps + 1}xf64>, %W: memref<{COLS}xf64>"
        )
        lines = [
            f"func.func @main({args}) {{",
            "  %c0 = arith.constant 0 : index",
            "  %c1 = arith.constant 1 : index",
            f"  %steps = arith.constant {self.steps} : index",
            f"  affine.for %t = 0 to {self.steps} {{"
            if self.affine
            else "  scf.for %t = %c0 to %steps step %c1 {",
            f"    dhir.schedule {', '.join(names)}, %F, %W {{",
            '      %cpu = dhir.target {kind = "cpu"}',
        ]
        for s, sweep in enumerate(self.sweeps):
            lines += self._task(s, sweep, names, kind)
        lines += ["    }", "  }", "  return", "}"]
        return "\n".join(lines)

    def _task(self, s: int, sweep: Sweep, names: list[str], kind: str) -> list[str]:
        used = sorted({sweep.dst, *(_read(r)[0] for r in sweep.reads)})
        listed = ", ".join([*(names[a] for a in used), "%F", "%W"])
        # A view of no rows may start past the last one, which MLIR 22 refuses (an
        # offset must lie in its dimension): empty sweeps stay loops.
        empty = sweep.lo >= sweep.hi or sweep.cols[0] >= sweep.cols[1]
        empty = empty or (self.depth and sweep.planes[0] >= sweep.planes[1])
        if self.generic and sweep.row is None and not (sweep.forcing or sweep.weighted or empty):
            return [
                f"      %s{s} = dhir.task %cpu, {listed} {{",
                *self._generic(sweep, names, kind),
                "      }",
            ]
        pad = "          " if sweep.row is None else "        "
        row = "%i" if sweep.row is None else "%row"
        plane = ", %d" if self.depth else ""
        body = [f"{pad}  %acc0 = arith.constant 0.5 : f64"]
        for n, read in enumerate(sweep.reads):
            array, offset, column = _read(read)
            if self.affine:
                at = _shifted(row, offset, sweep.row)
                body += [
                    f"{pad}  %x{n} = affine.load {names[array]}[{at}, "
                    f"{_shifted('%j', column)}{plane}] : {kind}",
                    f"{pad}  %w{n} = arith.constant {0.25 + 0.125 * n} : f64",
                    f"{pad}  %p{n} = arith.mulf %x{n}, %w{n} : f64",
                    f"{pad}  %acc{n + 1} = arith.addf %acc{n}, %p{n} : f64",
                ]
                continue
            body += [
                f"{pad}  %o{n} = arith.constant {offset} : index",
                f"{pad}  %r{n} = arith.addi {row}, %o{n} : index",
                f"{pad}  %q{n} = arith.constant {column} : index",
                f"{pad}  %j{n} = arith.addi %j, %q{n} : index",
                f"{pad}  %x{n} = memref.load {names[array]}[%r{n}, %j{n}{plane}] : {kind}",
                f"{pad}  %w{n} = arith.constant {0.25 + 0.125 * n} : f64",
                f"{pad}  %p{n} = arith.mulf %x{n}, %w{n} : f64",
                f"{pad}  %acc{n + 1} = arith.addf %acc{n}, %p{n} : f64",
            ]
        total = f"%acc{len(sweep.reads)}"
        if sweep.forcing:
            body += [
                f"{pad}  %f = memref.load %F[%t] : memref<{self.steps + 1}xf64>",
                f"{pad}  %forced = arith.addf {total}, %f : f64",
            ]
            total = "%forced"
        if sweep.weighted:
            body += [
                f"{pad}  %wj = memref.load %W[%j] : memref<{COLS}xf64>",
                f"{pad}  %weighted = arith.mulf {total}, %wj : f64",
            ]
            total = "%weighted"
        body.append(f"{pad}  memref.store {total}, {names[sweep.dst]}[{row}, %j{plane}] : {kind}")
        if self.affine:
            body[-1] = body[-1].replace("memref.store", "affine.store")
            body[-1] = body[-1].replace("[%row,", f"[{sweep.row},")
            body = [line.replace("memref.load", "affine.load") for line in body]
        if self.depth:
            body = [self._for(pad, "%d", sweep.planes, "%d_lo", "%d_hi"), *body, f"{pad}}}"]
        columns = [self._for(pad, "%j", sweep.cols, "%c_lo", "%c_hi"), *body, f"{pad}}}"]
        head = [
            f"      %s{s} = dhir.task %cpu, {listed} {{",
            "        %k0 = arith.constant 0 : index",
            "        %k1 = arith.constant 1 : index",
            f"        %c_lo = arith.constant {sweep.cols[0]} : index",
            f"        %c_hi = arith.constant {sweep.cols[1]} : index",
            f"        %d_lo = arith.constant {sweep.planes[0]} : index",
            f"        %d_hi = arith.constant {sweep.planes[1]} : index",
        ]
        if sweep.row is not None:
            return [
                *head,
                f"        %row = arith.constant {sweep.row} : index",
                *columns,
                "      }",
            ]
        return [
            *head,
            f"        %lo = arith.constant {sweep.lo} : index",
            f"        %hi = arith.constant {sweep.hi} : index",
            self._for("        ", "%i", (sweep.lo, sweep.hi), "%lo", "%hi"),
            *columns,
            "        }",
            "      }",
        ]

    def _generic(self, sweep: Sweep, names: list[str], kind: str) -> list[str]:
        """`sweep` as a linalg.generic over views (`Program.generic`)."""
        starts = [sweep.lo, sweep.cols[0], *([sweep.planes[0]] if self.depth else [])]
        ends = [sweep.hi, sweep.cols[1], *([sweep.planes[1]] if self.depth else [])]
        sizes = [end - start for start, end in zip(starts, ends)]
        strides = [COLS * DEPTH, DEPTH, 1] if self.depth else [COLS, 1]
        lines: list[str] = []

        def view(name: str, array: int, shift: tuple[int, ...]) -> str:
            at = [start + by for start, by in zip(starts, shift)]
            offset = sum(a * stride for a, stride in zip(at, strides))
            shape = "x".join(str(n) for n in sizes)
            layout = f"strided<[{', '.join(map(str, strides))}], offset: {offset}>"
            lines.append(
                f"        {name} = memref.subview {names[array]}[{', '.join(map(str, at))}] "
                f"[{', '.join(map(str, sizes))}] [{', '.join(['1'] * len(sizes))}] : "
                f"{kind} to memref<{shape}xf64, {layout}>"
            )
            return f"{name} : memref<{shape}xf64, {layout}>"

        out = view("%out", sweep.dst, (0,) * len(sizes))
        ins, args, body = [], [], ["          %acc0 = arith.constant 0.5 : f64"]
        for n, read in enumerate(sweep.reads):
            array, offset, column = _read(read)
            if (array, offset, column) == (sweep.dst, 0, 0):
                arg = "%own"
            else:
                ins.append(view(f"%v{n}", array, (offset, column, 0)[: len(sizes)]))
                arg = f"%g{n}"
                args.append(f"{arg}: f64")
            body += [
                f"          %w{n} = arith.constant {0.25 + 0.125 * n} : f64",
                f"          %p{n} = arith.mulf {arg}, %w{n} : f64",
                f"          %acc{n + 1} = arith.addf %acc{n}, %p{n} : f64",
            ]
        identity = f"affine_map<({', '.join(f'd{k}' for k in range(len(sizes)))}) -> "
        identity += f"({', '.join(f'd{k}' for k in range(len(sizes)))})>"
        parallel = ", ".join(['"parallel"'] * len(sizes))
        values = ", ".join(v.split(" : ")[0] for v in ins)
        types = ", ".join(v.split(" : ")[1] for v in ins)
        return [
            *lines,
            f"        linalg.generic {{indexing_maps = [{', '.join([identity] * (len(ins) + 1))}], "
            f"iterator_types = [{parallel}]}}",
            f"            ins({values} : {types}) outs({out}) {{",
            f"        ^bb0({', '.join([*args, '%own: f64'])}):",
            *body,
            f"          linalg.yield %acc{len(sweep.reads)} : f64",
            "        }",
        ]

    def _for(self, pad: str, iv: str, bounds: tuple[int, int], lo: str, hi: str) -> str:
        if self.affine:
            return f"{pad}affine.for {iv} = {bounds[0]} to {bounds[1]} {{"
        return f"{pad}scf.for {iv} = {lo} to {hi} step %k1 {{"

    def inputs(self, seed: int) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        shape = (self.rows, COLS, DEPTH) if self.depth else (self.rows, COLS)
        return [rng.standard_normal(shape) for _ in range(self.arrays)] + [
            rng.standard_normal(self.steps + 1),
            rng.standard_normal(COLS),
        ]


@st.composite
def sweeps(draw: st.DrawFn, arrays: int) -> Sweep:
    dst = draw(st.integers(0, arrays - 1))
    others = [a for a in range(arrays) if a != dst]
    cols = draw(st.sampled_from([(0, COLS), (1, COLS - 1), (0, COLS - 2)]))
    # Column offsets that stay within the array from every column written.
    columns = st.integers(-cols[0], min(1, COLS - cols[1]))
    reads: list[tuple[int, int] | tuple[int, int, int]] = draw(
        st.lists(
            st.tuples(st.sampled_from(others), st.integers(-2, 2), columns),
            min_size=1,
            max_size=4,
        )
    )
    if draw(st.booleans()):
        reads.append((dst, 0, 0))  # its own element, before it is written
    forcing, weighted = draw(st.booleans()), draw(st.booleans())
    planes = draw(st.sampled_from([(0, DEPTH), (1, DEPTH - 1)]))
    if draw(st.integers(0, 4)) == 0:  # one fixed row (fdtd-2d's ey[0][j] = fict[t])
        row = draw(st.integers(2, ROWS - 3))
        return Sweep(dst, tuple(reads), row, row + 1, row, forcing, weighted, cols, planes)
    lo = draw(st.integers(2, ROWS - 2))
    hi = draw(st.integers(lo, ROWS - 2))
    return Sweep(dst, tuple(reads), lo, hi, None, forcing, weighted, cols, planes)


@st.composite
def programs(draw: st.DrawFn) -> Program:
    arrays = draw(st.integers(2, 3))
    count = draw(st.integers(1, 3))
    cut: list[Sweep] = []
    for sweep in (draw(sweeps(arrays)) for _ in range(count)):
        if sweep.row is None and sweep.hi - sweep.lo >= 2 and draw(st.booleans()):
            # Row blocks of one sweep, as tasks cut for ranks: they share a stage.
            at = draw(st.integers(sweep.lo + 1, sweep.hi - 1))
            cut += [replace(sweep, hi=at), replace(sweep, lo=at)]
        else:
            cut.append(sweep)
    steps, depth = draw(st.integers(0, 7)), draw(st.booleans())
    return Program(arrays, steps, tuple(cut), depth, draw(st.booleans()), draw(st.booleans()))


def _as_written(
    text: str, run: str, inputs: list[np.ndarray], backend: str, ranks: int = 1
) -> None:
    """`run` on `backend` and `ranks` gives bit for bit what the interpreter computes
    from `text`."""
    want = dhir.run(text, *inputs, backend="interp", ranks=1)
    got = dhir.run(run, *inputs, backend=backend, ranks=ranks)
    for expected, actual in zip(want, got, strict=True):
        np.testing.assert_array_equal(actual, expected)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=programs(), band=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_bands_equal_the_interpreter(program: Program, band: int, seed: int) -> None:
    """Random sweeps (1-3 statements over 2-3 arrays, row offsets -2..2, partial row
    ranges, fixed rows, a time-indexed forcing array, a column-indexed weight; loops
    written with scf, affine or linalg.generic over views) in bands of 1-4 steps: bit for
    bit what the interpreter computes from the loop as written."""
    text = program.text()
    module = parse_string(text)
    (decision,) = time_tiles(module, band if band > 1 else 0)
    assert decision.done, decision.text
    _as_written(text, print_module(module), program.inputs(seed), "native")


JACOBI = Program(
    2, 5, (Sweep(1, ((0, -1), (0, 0), (0, 1)), 1, 8), Sweep(0, ((1, -1), (1, 1)), 1, 8))
)


def _left(text: str) -> str:
    (decision,) = time_tiles(parse_string(text), 2)
    assert not decision.done
    return decision.text


def test_affine_time_loops_are_banded_as_their_scf_forms() -> None:
    """jacobi-2d written with affine.for (the time loop too), affine.load and
    affine.store: made scf first, banded as the scf form is, and bit for bit what the
    interpreter computes from it, natively on one rank and two."""
    written = replace(JACOBI, affine=True)
    module = parse_string(written.text())
    (decision,) = time_tiles(module, 2)
    assert decision.done and "time loop of 2 row statements" in decision.text
    assert "affine." not in print_module(module)
    _as_written(written.text(), print_module(module), JACOBI.inputs(2), "native")
    for ranks in (1, 2):
        _as_written(written.text(), written.text(), JACOBI.inputs(2), "native", ranks)


def test_generic_sweeps_over_views_are_banded_as_their_loops() -> None:
    """jacobi-2d's sweeps written as linalg.generic over views shifted to the neighbours:
    written as their loops over the arrays, banded as the loops are, and bit for bit what
    the interpreter computes from the generic form, on one rank and two."""
    written = replace(JACOBI, generic=True)
    module = parse_string(written.text())
    (decision,) = time_tiles(module, 2)
    assert decision.done and "time loop of 2 row statements" in decision.text
    assert "linalg.generic" not in print_module(module)
    assert "memref.subview" not in print_module(module)
    _as_written(written.text(), print_module(module), JACOBI.inputs(3), "native")
    for ranks in (1, 2):
        _as_written(written.text(), written.text(), JACOBI.inputs(3), "native", ranks)


def test_a_time_tiled_generic_sweep_is_built_as_its_scf_form() -> None:
    """The linalg.generic sweeps made OpenMP look wanted; once time-tiled they are loops,
    and the program is built as the scf form is: the same executable, byte for byte,
    without OpenMP threads (which it started and then left idle)."""
    built = []
    for program in (JACOBI, replace(JACOBI, generic=True)):
        timing = Timing()
        exe, _ = compile_native(parse_string(program.text()), "main", RunOptions(), timing)
        assert any("time loop of 2 row statements" in note for note in timing.notes)
        built.append(exe.read_bytes())
    assert b"__kmpc_" not in built[1]
    assert built[1] == built[0]


def test_time_tiled_sweeps_say_what_the_optimizer_did_as_their_scf_form_does() -> None:
    """The bands of a sweep written as linalg.generic or affine.for held their bounds'
    constants in each row's loop, so the optimizer found no nest there and --timing said
    nothing of it; it now says what it says of the scf form's bands."""
    notes = []
    for program in (JACOBI, replace(JACOBI, generic=True), replace(JACOBI, affine=True)):
        timing = Timing()
        compile_native(parse_string(program.text()), "main", RunOptions(), timing)
        notes.append([note for note in timing.notes if note.startswith("optimizer")])
    assert notes[0], "the scf form's bands must say what the optimizer did"
    assert notes[1] == notes[0] and notes[2] == notes[0], notes


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        ('["parallel", "parallel"]', '["parallel", "reduction"]', "has a reduction dimension"),
        (
            "%v1 = memref.subview %M0[1, 0] [7, 5] [1, 1]",
            "%v1 = memref.subview %M0[1, 0] [7, 5] [1, 1]",
            None,
        ),
    ],
)
def test_a_generic_that_is_no_sweep_of_rows_says_why_its_loop_is_left(
    old: str, new: str, why: str | None
) -> None:
    text = replace(JACOBI, generic=True).text()
    assert old in text
    text = text.replace(old, new, 1)
    if why is None:  # the output views the array an input views
        text = text.replace("%out = memref.subview %M1[1, 0]", "%out = memref.subview %M0[1, 0]", 1)
        why = "writes an array that an input may share"
    module = parse_string(text)
    (decision,) = time_tiles(module, 2)
    assert not decision.done and why in decision.text, decision.text
    assert print_module(module) == print_module(parse_string(text))


def test_an_affine_time_loop_holding_an_affine_parallel_is_left_whole() -> None:
    text = replace(JACOBI, affine=True).text()
    text = text.replace("affine.for %j = 0 to 5 {", "affine.parallel (%j) = (0) to (5) {", 1)
    module = parse_string(text)
    assert "holds affine.parallel" in _left(text)
    (decision,) = time_tiles(module, 2)
    assert print_module(module) == print_module(parse_string(text))


def test_the_native_backend_keeps_results_on_any_rank_count() -> None:
    for ranks in (1, 2):
        _as_written(JACOBI.text(), JACOBI.text(), JACOBI.inputs(1), "native", ranks)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    program=programs(),
    band=st.integers(2, 4),
    ranks=st.integers(2, 4),
    seed=st.integers(0, 2**16),
)
def test_bands_on_several_ranks_equal_the_interpreter(
    program: Program, band: int, ranks: int, seed: int
) -> None:
    """The same random sweeps cut into a block of rows per rank, each computing ghost
    rows from its own copies: what the rewritten program means (the interpreter runs its
    tasks in program order) is bit for bit the loop as written."""
    text = program.text()
    module = parse_string(text)
    (decision,) = time_tiles(module, band, ranks)
    if not decision.done:
        assert "too thin" in decision.text or "fewer than its" in decision.text
        return
    _as_written(text, print_module(module), program.inputs(seed), "interp")


def test_bands_on_several_ranks_keep_the_edges_no_sweep_writes() -> None:
    """JACOBI with its first sweep leaving each row's first and last columns, which the
    second reads (PolyBench's jacobi-2d and heat-3d read the edges of what they leave):
    in the ghost rows too they must come from the arrays, though the band computes the
    rest of those rows before it reads them."""
    first, second = JACOBI.sweeps
    edges = Program(JACOBI.arrays, JACOBI.steps, (replace(first, cols=(1, COLS - 1)), second))
    text = edges.text()
    for ranks, band in ((2, 2), (3, 2), (2, 3)):
        module = parse_string(text)
        (decision,) = time_tiles(module, band, ranks)
        assert decision.done, decision.text
        _as_written(text, print_module(module), edges.inputs(ranks), "interp")


FORCED = Program(
    3,
    7,
    (
        Sweep(1, ((0, -1), (0, 1), (2, 0)), 1, 5),
        Sweep(1, ((0, -1), (0, 1), (2, 0)), 5, 8),
        Sweep(2, ((1, 0),), 4, 5, 4, True),
        Sweep(0, ((1, -2), (1, 1), (2, 0)), 2, 7),
    ),
)


def test_bands_on_several_ranks_run_natively() -> None:
    """Built and run on 2 and 3 ranks: each rank's tasks, the halos between them and the
    results written from each rank's rows equal the interpreter's, bit for bit."""
    for program, ranks in ((JACOBI, 2), (FORCED, 3)):
        module = parse_string(program.text())
        (decision,) = time_tiles(module, 2, ranks)
        assert decision.done, decision.text
        _as_written(program.text(), print_module(module), program.inputs(ranks), "native", ranks)


def _jacobi_sent_on_two_ranks() -> list[int]:
    """The bytes each rank sends running JACOBI natively on 2 ranks in bands of 2 steps."""
    from dhir.runner import run_module
    from dhir.toolchain.build import Timing
    from dhir.toolchain.options import RunOptions

    module = parse_string(JACOBI.text())
    (decision,) = time_tiles(module, 2, 2)
    assert decision.done
    timing = Timing()
    inputs = JACOBI.inputs(3)
    run_module(module, "main", inputs, "native", RunOptions(ranks=2), timing=timing)
    return [int(line.split()[4]) for line in timing.notes if line.startswith("dhir: rank")]


def test_ranks_send_only_halos_once_a_band() -> None:
    """JACOBI on 2 ranks in bands of 2 steps (5 steps: 3 bands): each rank sends the
    other at most its 4 edge rows of both arrays once a band (the first band's come from
    the input file), and nothing else: no copy travels after the loop (they are freed,
    and no rank needs them; they would add 9 rows of both), and each rank writes its
    rows of the results itself."""
    sent = _jacobi_sent_on_two_ranks()
    row_bytes = COLS * 8
    assert len(sent) == 2 and all(0 < n <= 3 * 2 * 4 * row_bytes for n in sent), sent


def test_ranks_send_halos_of_only_what_a_band_reads_before_computing() -> None:
    """JACOBI's second array is rewritten each step before the first reads it, but for
    rows 0 and 8, which no sweep writes: a band reads only its first array's ghost rows
    from before the band, so only those travel: at most its 4 edge rows once a band
    (3 bands), half of what both arrays' halos were."""
    sent = _jacobi_sent_on_two_ranks()
    row_bytes = COLS * 8
    assert len(sent) == 2 and all(0 < n <= 3 * 4 * row_bytes for n in sent), sent


def test_a_band_refreshes_what_a_stage_reads_before_a_later_one_writes_it() -> None:
    """M2 is read by the second sweep and written by the third: each band's first step
    reads it as the previous band left it, so its ghost rows travel like M0's."""
    program = Program(
        3,
        6,
        (
            Sweep(0, ((1, 0),), 1, 8),
            Sweep(1, ((2, -1), (2, 1)), 1, 8),
            Sweep(2, ((0, 0),), 1, 8),
        ),
    )
    for ranks, band in ((2, 2), (2, 3), (3, 2)):
        module = parse_string(program.text())
        (decision,) = time_tiles(module, band, ranks)
        assert decision.done, decision.text
        _as_written(program.text(), print_module(module), program.inputs(1), "interp")


# Rows -2 and -1 of the first sweep have no columns (j < i + 1): the program touches no
# row outside the arrays, though its row loop starts at -2.
ROWS_FROM_MINUS_TWO = """
func.func @main(%A: memref<13x12xf64>, %B: memref<13x12xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %steps = arith.constant 5 : index
  scf.for %t = %c0 to %steps step %c1 {
    dhir.schedule %A, %B {
      %cpu = dhir.target {kind = "cpu"}
      %s0 = dhir.task %cpu, %A, %B {
        %k0 = arith.constant 0 : index
        %k1 = arith.constant 1 : index
        %lo = arith.constant -2 : index
        %hi = arith.constant 11 : index
        scf.for %i = %lo to %hi step %k1 {
          %jh = arith.addi %i, %k1 : index
          scf.for %j = %k0 to %jh step %k1 {
            %ip = arith.addi %i, %k1 : index
            %a = memref.load %A[%i, %j] : memref<13x12xf64>
            %b = memref.load %A[%ip, %j] : memref<13x12xf64>
            %s = arith.addf %a, %b : f64
            memref.store %s, %B[%i, %j] : memref<13x12xf64>
          }
        }
      }
      %s1 = dhir.task %cpu, %A, %B {
        %k0 = arith.constant 0 : index
        %k1 = arith.constant 1 : index
        %k12 = arith.constant 12 : index
        %lo = arith.constant 1 : index
        %hi = arith.constant 12 : index
        %h = arith.constant 0.5 : f64
        scf.for %i = %lo to %hi step %k1 {
          scf.for %j = %k0 to %k12 step %k1 {
            %im = arith.subi %i, %k1 : index
            %a = memref.load %B[%im, %j] : memref<13x12xf64>
            %b = memref.load %B[%i, %j] : memref<13x12xf64>
            %s = arith.addf %a, %b : f64
            %m = arith.mulf %s, %h : f64
            memref.store %m, %A[%i, %j] : memref<13x12xf64>
          }
        }
      }
    }
  }
  return
}
"""


def test_bands_on_several_ranks_of_a_row_loop_starting_before_the_arrays() -> None:
    """The first rank's block starts at row -2: it gives back only the rows the arrays
    have (a view of rows from -2 on was invalid IR)."""
    rng = np.random.default_rng(2)
    inputs = [rng.standard_normal((13, 12)) for _ in range(2)]
    for ranks, band in ((2, 2), (3, 2), (2, 3)):
        module = parse_string(ROWS_FROM_MINUS_TWO)
        (decision,) = time_tiles(module, band, ranks)
        assert decision.done, decision.text
        _as_written(ROWS_FROM_MINUS_TWO, print_module(module), inputs, "interp")


def test_reports_the_blocks_and_leaves_thin_ones() -> None:
    (decision,) = time_tiles(parse_string(JACOBI.text()), 2, 2)
    assert "bands of 2 steps on 2 ranks" in decision.text
    assert "halos of 4 rows once a band" in decision.text
    (decision,) = time_tiles(parse_string(JACOBI.text()), 2, 8)
    assert not decision.done, decision.text
    leaves = "its statements run on 7 rows, fewer than its 8 ranks: a block of rows each"
    assert leaves in decision.text, decision.text
    # It said "blocks of 0 rows on 8 ranks are too thin for bands of two steps".
    assert "0 rows" not in decision.text
    (decision,) = time_tiles(parse_string(JACOBI.text()), 0, 2)
    assert not decision.done and "its sweeps run from cache, halos every step" in decision.text


def test_bands_on_several_ranks_take_the_length_sending_fewest_halo_rows() -> None:
    """A last band of fewer steps still sends a whole halo, and the first sends none:
    of the lengths within a quarter below the longest, each made as short as its number
    of bands allows, the one whose bands after the first cover the fewest steps, the
    longest of those that tie (9 steps under 8: 2 bands of 5, not 6; 9 under 5: 2 bands
    of 5, one halo of 5 steps' rows, where counting the first halo too took 3 bands of
    3, which send two of 3; 13 under 4: 4 bands of 4, not 5 of 3, both 12 steps' rows)."""
    from dhir.transforms.time_tiles import (
        _Band,  # pyright: ignore[reportPrivateUsage]
        _caches,  # pyright: ignore[reportPrivateUsage]
        _time_loops,  # pyright: ignore[reportPrivateUsage]
    )

    cases = (
        *((500, 6, 5), (12, 6, 6), (9, 4, 3), (7, 4, 4), (10, 2, 2), (9, 8, 5), (10, 8, 5)),
        *((9, 5, 5), (13, 4, 4), (19, 7, 7)),
    )
    for steps, longest, chosen in cases:
        module = parse_string(replace(JACOBI, steps=steps).text())
        ((loop, schedule),) = _time_loops(module)
        band = _Band.of(loop, schedule, 2, 1, _caches(module))
        assert band._fewest_halo_rows(longest) == chosen, (steps, longest)  # pyright: ignore[reportPrivateUsage]


# JACOBI on 41 rows: blocks of 20 rows on 2 ranks, room for halos of up to 10 steps.
TALL = replace(
    JACOBI,
    rows=41,
    sweeps=(Sweep(1, ((0, -1), (0, 0), (0, 1)), 1, 40), Sweep(0, ((1, -1), (1, 1)), 1, 40)),
)


def test_bands_on_several_ranks_as_even_as_their_count_allows() -> None:
    """9 steps in bands of at most 4 are 3 bands: of 3 steps each, not 4, 4 and 1. Every
    band after the first sends the same halo message, so the last band's 1 step sent
    halos of 4 steps' rows too (8 rows of the first array, 640 bytes a rank over the
    loop; the second needs none): now 6 rows, 480 bytes, and the result is still the
    interpreter's, bit for bit."""
    from dhir.runner import run_module

    nine = replace(TALL, steps=9)
    module = parse_string(nine.text())
    (decision,) = time_tiles(module, 4, 2)
    assert decision.done and "bands of 3 steps on 2 ranks" in decision.text, decision.text
    assert "halos of 6 rows once a band" in decision.text, decision.text
    timing, inputs = Timing(), nine.inputs(3)
    got = run_module(module, "main", inputs, "native", RunOptions(ranks=2), timing=timing)
    sent = [int(line.split()[4]) for line in timing.notes if line.startswith("dhir: rank")]
    assert sent == [2 * 6 * COLS * 8] * 2, sent  # the first band's halo: from the input
    want = dhir.run(nine.text(), *inputs, backend="interp", ranks=1)
    for expected, actual in zip(want, got, strict=True):
        np.testing.assert_array_equal(actual, expected)


def _sent_by_rank(program: Program, band: int, ranks: int) -> list[tuple[int, int]]:
    """The bytes and messages each rank sends running `program` natively in bands of
    `band` steps on `ranks` ranks, whose results are the interpreter's, bit for bit."""
    from dhir.runner import run_module

    module = parse_string(program.text())
    (decision,) = time_tiles(module, band, ranks)
    assert decision.done, decision.text
    timing, inputs = Timing(), program.inputs(ranks)
    got = run_module(module, "main", inputs, "native", RunOptions(ranks=ranks), timing=timing)
    want = dhir.run(program.text(), *inputs, backend="interp", ranks=1)
    for expected, actual in zip(want, got, strict=True):
        np.testing.assert_array_equal(actual, expected)
    lines = [line.split() for line in timing.notes if line.startswith("dhir: rank")]
    return [(int(words[4]), int(words[7])) for words in lines]


def test_the_first_band_takes_its_halo_from_the_input() -> None:
    """Each rank reads its block's rows and its first band's ghost rows from the input
    (dhir.bands): only the bands after the first send halos. 6 steps in bands of 3 sent
    2 halos of 6 rows (240 bytes each) to each neighbour, the first the rows the
    receiver had read; now 1. A loop of one band sends none."""
    six = replace(TALL, steps=6)
    halo = 6 * COLS * 8
    assert _sent_by_rank(six, 3, 2) == [(halo, 1)] * 2
    assert _sent_by_rank(six, 3, 3) == [(halo, 1), (2 * halo, 2), (halo, 1)]
    assert _sent_by_rank(replace(TALL, steps=3), 3, 2) == [(0, 0)] * 2


def test_the_halo_rows_a_band_length_counts_are_those_the_ranks_send() -> None:
    """What the band choice counts (`_halo_rows_sent`, in steps' rows) is what the ranks
    send: 9 steps in bands of 3 send 2 halos of 6 rows (2 rows a step), in bands of 5
    one of 10, to each neighbour."""
    from dhir.transforms.time_tiles import _halo_rows_sent  # pyright: ignore[reportPrivateUsage]

    nine = replace(TALL, steps=9)
    for steps, halos in ((3, 2), (5, 1)):
        assert _halo_rows_sent(9, steps) == halos * steps
        assert _sent_by_rank(nine, steps, 2) == [(halos * 2 * steps * COLS * 8, halos)] * 2


def test_bands_of_one_step_asked_for_say_so() -> None:
    """steps=1 leaves the loop as written: it said "not even two steps' rows fit the
    core's caches", which no cache decided."""
    for ranks in (1, 2):
        (decision,) = time_tiles(parse_string(JACOBI.text()), 1, ranks)
        assert not decision.done, decision.text
        assert "steps=1 asks for bands of one step" in decision.text, decision.text
        assert "caches" not in decision.text, decision.text


def test_bands_fit_the_caches_of_the_machine_description() -> None:
    """Bands hold as many steps as fit half the core's cache of the CPU the description
    attached to the module names (JACOBI: 2 stages of 2 rows of 5 f64 a step, 160 bytes),
    not this machine's."""
    from dhir.machine.description import Node, System
    from dhir.machine.detect import detect
    from dhir.machine.dlti import attach

    here = detect()
    for cache, steps in ((1280, 4), (2560, 8)):
        cpu = replace(here.devices[0], core_cache_bytes=cache, llc_bytes=64 << 20)
        system = System((Node(here.nodes[0].name, (cpu,)),), here.network, here.intra_node)
        module = parse_string(replace(JACOBI, steps=20).text())  # more steps than a band
        attach(module, system)
        (decision,) = time_tiles(module)
        assert f"bands of {steps} steps" in decision.text, decision.text


def test_leaves_tasks_placed_by_hand_on_several_ranks() -> None:
    task = "%W {\n        %k0"
    text = JACOBI.text().replace(task, task.replace("{", "attributes {dhir.rank = 1 : i64} {"), 1)
    assert "dhir.rank" in text
    (decision,) = time_tiles(parse_string(text), 2, 2)
    assert not decision.done and "placed by hand" in decision.text


def test_reports_the_band() -> None:
    (decision,) = time_tiles(parse_string(JACOBI.text()), 3)
    assert "2 row statements (2 stages a step) run in skewed bands of 3 steps" in decision.text
    assert "(rows 1 apart per stage)" in decision.text


def test_row_blocks_of_one_sweep_share_a_stage() -> None:
    halves = Program(
        2,
        4,
        (
            Sweep(1, ((0, -1), (0, 1)), 1, 4),
            Sweep(1, ((0, -1), (0, 1)), 4, 8),
            Sweep(0, ((1, 0),), 1, 8),
        ),
    )
    (decision,) = time_tiles(parse_string(halves.text()), 2)
    assert "3 row statements (2 stages a step)" in decision.text
    _as_written(halves.text(), halves.text(), halves.inputs(2), "native")


def test_leaves_a_sweep_reading_other_rows_of_what_it_writes() -> None:
    seidel = Program(2, 3, (Sweep(0, ((0, -1), (1, 0)), 1, 8),))
    assert "other rows of a memref it writes" in _left(seidel.text())


def test_leaves_a_sweep_storing_to_rows_its_loop_does_not_give() -> None:
    text = JACOBI.text().replace(
        "memref.store %acc3, %M1[%i, %j]", "memref.store %acc3, %M1[%r0, %j]"
    )
    assert "row index varies inside a task without a row loop" in _left(text)


def test_leaves_a_written_memref_read_at_a_row_that_does_not_follow() -> None:
    text = JACOBI.text().replace(
        "%x0 = memref.load %M0[%r0, %j0]", "%x0 = memref.load %M0[%k0, %j0]"
    )
    assert "does not follow its own" in _left(text)


def test_bands_a_sweep_weighted_by_a_read_only_array_of_columns() -> None:
    """heat-like sweeps scaled by W[j] (a read-only 1-D array indexed by the column, not
    the row): banded on one and on two ranks, bit for bit the loop as written."""
    weighted = replace(JACOBI, sweeps=tuple(replace(s, weighted=True) for s in JACOBI.sweeps))
    text = weighted.text()
    for ranks in (1, 2):
        module = parse_string(text)
        (decision,) = time_tiles(module, 2, ranks)
        assert decision.done, decision.text
        _as_written(text, print_module(module), weighted.inputs(3), "native", ranks)


def test_leaves_a_task_holding_other_ops() -> None:
    text = JACOBI.text().replace(
        "%k0 = arith.constant 0 : index",
        "%k0 = arith.constant 0 : index\n        memref.store %acc0x, %F[%k0] : memref<6xf64>\n"
        "        %acc0x = arith.constant 0.0 : f64",
        1,
    )
    text = text.replace(
        "memref.store %acc0x, %F[%k0] : memref<6xf64>\n        %acc0x = arith.constant 0.0 : f64",
        "%acc0x = arith.constant 0.0 : f64\n        memref.store %acc0x, %F[%k0] : memref<6xf64>",
    )
    assert "touches memory outside its row loop" in _left(text)


def test_leaves_a_time_loop_counting_in_i32() -> None:
    """The bands count steps in index values; a counter of another type is left."""
    text = JACOBI.text().replace(
        "  scf.for %t = %c0 to %steps step %c1 {",
        "  %z0 = arith.constant 0 : i32\n  %z1 = arith.constant 1 : i32\n"
        "  %zn = arith.constant 5 : i32\n  scf.for %t = %z0 to %zn step %z1 : i32 {",
    )
    assert "its counter is an i32, not an index" in _left(text)
    _as_written(text, text, JACOBI.inputs(4), "native")


def test_leaves_a_row_loop_carrying_values() -> None:
    """A value carried from row to row orders the rows, which the bands reorder."""
    text = JACOBI.text().replace(
        "        scf.for %i = %lo to %hi step %k1 {\n",
        "        %r = scf.for %i = %lo to %hi step %k1 iter_args(%carried = %k0) -> (index) {\n",
        1,
    )
    text = text.replace(
        "          }\n        }\n      }",
        "          }\n          scf.yield %carried : index\n        }\n      }",
        1,
    )
    assert "carries values from row to row" in _left(text)


def test_an_empty_row_loop_anywhere_leaves_the_blocks_in_the_array() -> None:
    """A statement of no rows (here from row -4 to -4) has no say in where the blocks
    are: they stay within the array's rows."""
    empty = Program(JACOBI.arrays, JACOBI.steps, (*JACOBI.sweeps, Sweep(1, ((0, 0),), -4, -4)))
    text = empty.text()
    for ranks, band in ((2, 2), (3, 2)):
        module = parse_string(text)
        (decision,) = time_tiles(module, band, ranks)
        assert decision.done, decision.text
        _as_written(text, print_module(module), empty.inputs(ranks), "interp")


def test_reports_the_band_a_shorter_loop_runs() -> None:
    """A loop of 9 steps in bands of 15 runs one band of 9: it said "bands of 15 steps"."""
    nine = replace(JACOBI, steps=9).text()
    (decision,) = time_tiles(parse_string(nine), 15)
    assert decision.done and "run in skewed bands of 9 steps (rows" in decision.text
    (decision,) = time_tiles(parse_string(nine), 4)
    assert "run in skewed bands of 4 steps (rows" in decision.text
    (decision,) = time_tiles(parse_string(nine), 15, 2)
    assert decision.done and "bands of 9 steps on 2 ranks" in decision.text, decision.text


def test_says_what_fastmath_allows_rather_than_exact() -> None:
    """Under --fast-math contract a sweep's multiply and add may become one FMA: the line
    said "exact" on one rank and on two; it says what the flags allow, as the
    optimizer's does, and "exact" still where no flag is set."""
    from dhir.transforms.fast_math import relax

    for ranks in (1, 2):
        module = parse_string(JACOBI.text())
        relax(module, "contract")
        (decision,) = time_tiles(module, 2, ranks)
        assert decision.done and not decision.text.endswith("exact"), decision.text
        assert "contract: a multiply and an add may become one FMA" in decision.text
        (decision,) = time_tiles(parse_string(JACOBI.text()), 2, ranks)
        assert decision.text.endswith(", exact"), decision.text


def test_a_shorter_loop_on_several_ranks_sends_halos_of_its_steps() -> None:
    """A loop of 9 steps in bands of 15 runs one band of 9: its ghost rows need reach
    only 9 steps' rows (18), not 15's (30, as it said and sent), and the result is still
    the interpreter's."""
    nine = replace(JACOBI, steps=9)
    module = parse_string(nine.text())
    (decision,) = time_tiles(module, 15, 2)
    assert decision.done and "with halos of 18 rows once a band" in decision.text, decision.text
    _as_written(nine.text(), print_module(module), nine.inputs(2), "interp")
