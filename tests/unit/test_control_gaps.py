"""Control flow at the edges of what MLIR 22 defines: scf.for counters that overflow their
type, reductions OpenMP cannot take, cf.switch, memref.alloca_scope around loops and
`scf.for unsigned`. Native results must equal the interpreter's bit for bit; what MLIR
leaves undefined is a located error in the interpreter."""

import re
import shutil

import numpy as np
import pytest

import dhir
from dhir import DhirError

needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


def interp(src: str, *inputs: object) -> list[np.ndarray]:
    return dhir.run(dhir.parse_string(src, "prog.mlir"), *inputs, backend="interp")


def native(src: str, *inputs: object) -> list[np.ndarray]:
    return dhir.run(dhir.parse_string(src, "prog.mlir"), *inputs, backend="native", ranks=1)


def interp_error(src: str, *inputs: object) -> str:
    with pytest.raises(DhirError) as caught:
        interp(src, *inputs)
    return str(caught.value)


def same_as_native(src: str, *inputs: object) -> list[np.ndarray]:
    """The interpreter's results, after checking that native gives the same bits."""
    want = interp(src, *[np.copy(x) for x in inputs])
    got = native(src, *[np.copy(x) for x in inputs])
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes(), (g, w)
    return want


def task(args: str, body: str) -> str:
    """`func.func @main(args)` running `body` in one CPU task on every memref argument."""
    names = ", ".join(re.findall(r"%\w+(?=:)", args))
    return (
        f"func.func @main({args}) {{\n  dhir.schedule {names} {{\n"
        f'    %cpu = dhir.target {{kind = "cpu"}}\n    %t = dhir.task %cpu, {names} {{\n'
        f"{body}\n    }}\n  }}\n  return\n}}\n"
    )


# --- scf.for counters that overflow their type ---------------------------------------------


def _count_trips(lower: int, upper: int, step: int, type_: str = "i8") -> str:
    return task(
        "%o: memref<1xi32>",
        f"""      %c0 = arith.constant 0 : index
      %z = arith.constant 0 : i32
      %one = arith.constant 1 : i32
      %lo = arith.constant {lower} : {type_}
      %hi = arith.constant {upper} : {type_}
      %st = arith.constant {step} : {type_}
      %n = scf.for %i = %lo to %hi step %st iter_args(%k = %z) -> (i32) : {type_} {{
        %k1 = arith.addi %k, %one : i32
        scf.yield %k1 : i32
      }}
      memref.store %n, %o[%c0] : memref<1xi32>""",
    )


@pytest.mark.parametrize(
    ("lower", "upper", "step", "type_"),
    [(-128, 127, 31, "i8"), (100, 127, 31, "i8"), (0, 32767, 16384, "i16")],
)
def test_for_counter_overflow_is_a_located_error(
    lower: int, upper: int, step: int, type_: str
) -> None:
    message = interp_error(_count_trips(lower, upper, step, type_), np.zeros(1, np.int32))
    assert re.match(r"prog.mlir:\d+:\d+: error: 'scf.for' counter overflows its type", message)


@needs_llvm
@pytest.mark.parametrize(
    ("lower", "upper", "step", "trips"),
    [(-128, 127, 1, 255), (-128, 127, 85, 3), (-128, 100, 31, 8), (5, -5, 3, 0)],
)
def test_for_counters_up_to_the_top_of_their_type_run(
    lower: int, upper: int, step: int, trips: int
) -> None:
    (got,) = same_as_native(_count_trips(lower, upper, step), np.zeros(1, np.int32))
    assert got[0] == trips


# A counter past 2**63 - 1 wrapped natively to -2**63, below the upper bound: the loop ran
# on until the rank faulted (SIGSEGV) or forever, where the interpreter stops at the loop.
_RUN_TIME_COUNT = """func.func @main(%o: memref<1xi32>, %lo: index, %hi: index, %st: index) {
  dhir.schedule %o {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %o {
      %c0 = arith.constant 0 : index
      %z = arith.constant 0 : i32
      %one = arith.constant 1 : i32
      %n = scf.for %i = %lo to %hi step %st iter_args(%k = %z) -> (i32) {
        %k1 = arith.addi %k, %one : i32
        scf.yield %k1 : i32
      }
      memref.store %n, %o[%c0] : memref<1xi32>
    }
  }
  return
}
"""


@needs_llvm
@pytest.mark.parametrize(
    ("src", "bounds"),
    [
        (_count_trips(-128, 127, 31), ()),
        (_RUN_TIME_COUNT, (2**62, 2**63 - 1, 2**62)),
        (_RUN_TIME_COUNT, (2**63 - 8, 2**63 - 1, 5)),
    ],
)
def test_native_code_stops_at_a_counter_that_overflows(src: str, bounds: tuple[int, ...]) -> None:
    with pytest.raises(DhirError, match="counter overflows its type"):
        native(src, np.zeros(1, np.int32), *bounds)


@needs_llvm
def test_a_run_time_counter_up_to_the_top_runs() -> None:
    got = same_as_native(_RUN_TIME_COUNT, np.zeros(1, np.int32), 2**63 - 9, 2**63 - 1, 4)
    assert got[0][0] == 2


# scf.parallel ran 2 iterations in the interpreter from 2**63 - 8 to 2**63 - 1 step 5 (no
# counter check); natively, left parallel (a reduction of i16, OpenMP) it ran 2 too, and
# made a nest of scf.for (one of i17, which LLVM's atomics refuse) it stopped with no
# location. The nest checks a dimension when those outside it run.
def _run_time_parallel(kind: str) -> str:
    return f"""func.func @main(%o: memref<1xi32>, %lo: index, %hi: index, %st: index,
                 %lo2: index, %hi2: index) {{
  dhir.schedule %o {{
    %cpu = dhir.target {{kind = "cpu"}}
    %t = dhir.task %cpu, %o {{
      %c0 = arith.constant 0 : index
      %z = arith.constant 0 : {kind}
      %one = arith.constant 1 : {kind}
      %n = scf.parallel (%i, %j) = (%lo2, %lo) to (%hi2, %hi) step (%st, %st) init (%z) -> {kind} {{
        scf.reduce(%one : {kind}) {{
        ^bb0(%a: {kind}, %b: {kind}):
          %s = arith.addi %a, %b : {kind}
          scf.reduce.return %s : {kind}
        }}
      }}
      %w = arith.extsi %n : {kind} to i32
      memref.store %w, %o[%c0] : memref<1xi32>
    }}
  }}
  return
}}
"""


_OVERFLOWS = (2**63 - 8, 2**63 - 1, 5)
_REDUCED = ["i16", "i17"]  # left parallel (OpenMP), made a nest of scf.for


@pytest.mark.parametrize("kind", _REDUCED)
@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=needs_llvm)])
def test_a_parallel_counter_that_overflows_stops_at_the_loop(backend: str, kind: str) -> None:
    run = interp if backend == "interp" else native
    with pytest.raises(DhirError) as caught:
        run(_run_time_parallel(kind), np.zeros(1, np.int32), *_OVERFLOWS, 0, 1)
    where = "prog.mlir:9:12: error: 'scf.parallel'" if backend == "interp" else "line 9, column 12"
    assert where in str(caught.value) and "counter overflows its type" in str(caught.value)


@needs_llvm
@pytest.mark.parametrize("kind", _REDUCED)
@pytest.mark.parametrize(("lo2", "hi2", "trips"), [(0, 0, 0), (5, 1, 0), (0, 1, 2)])
def test_a_parallel_loop_checks_the_dimensions_it_reaches(
    lo2: int, hi2: int, trips: int, kind: str
) -> None:
    """An empty outer dimension runs nothing; a counter that reaches the top of index and
    stops there runs."""
    bounds = (2**63 - 9, 2**63 - 1, 4) if trips else _OVERFLOWS
    zeros = np.zeros(1, np.int32)
    got, *_ = same_as_native(_run_time_parallel(kind), zeros, *bounds, lo2, hi2)
    assert got[0] == trips


# --- allocations of run-time sizes whose bytes overflow ---------------------------------------

_ALLOC = """func.func @main(%o: memref<1xf64>, %n: index) {
  dhir.schedule %o, %n {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %o {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      %b = memref.alloc(%n) : memref<?x2xf64>
      %v = arith.constant 7.0 : f64
      memref.store %v, %b[%c3, %c1] : memref<?x2xf64>
      %w = memref.load %b[%c3, %c1] : memref<?x2xf64>
      memref.store %w, %o[%c0] : memref<1xf64>
      memref.dealloc %b : memref<?x2xf64>
    }
  }
  return
}
"""

# 16 * (2**60 + 1) wraps to 16 bytes in 64 bits: without the check, native code stored
# past them and exited 0.
WRAPPING_SIZES = [2**60 + 1, 2**62, -3]


@pytest.mark.parametrize("size", WRAPPING_SIZES)
def test_interpreter_refuses_an_allocation_past_64_bits(size: int) -> None:
    message = interp_error(_ALLOC, np.zeros(1), size)
    assert re.match(r"prog.mlir:8:12: error: 'memref.alloc' allocates", message), message


@needs_llvm
@pytest.mark.parametrize("size", WRAPPING_SIZES)
def test_native_code_stops_at_an_allocation_past_64_bits(size: int) -> None:
    with pytest.raises(
        DhirError, match="the allocation at line 8, column 12: a size is negative"
    ) as caught:
        native(_ALLOC, np.zeros(1), size)
    # The runtime's report names the op's line and column: the error leads with them.
    assert str(caught.value).startswith("prog.mlir:8:12: error: the allocation: a size is negative")


@needs_llvm
def test_an_allocation_of_run_time_size_runs() -> None:
    assert same_as_native(_ALLOC, np.zeros(1), 4)[0][0] == 7.0


_FILLED = """\
func.func @main(%o: memref<1xf64>, %n: index) {
  dhir.schedule %o, %n {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %o {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %b = memref.alloc(%n) : memref<?xf64>
      %v = arith.constant 7.0 : f64
      scf.for %i = %c0 to %n step %c1 {
        memref.store %v, %b[%i] : memref<?xf64>
      }
      %w = memref.load %b[%c0] : memref<?xf64>
      memref.store %w, %o[%c0] : memref<1xf64>
      memref.dealloc %b : memref<?xf64>
    }
  }
  return
}
"""


@needs_llvm
def test_native_code_stops_at_an_allocation_malloc_cannot_give() -> None:
    """512 PiB, past any address space: the rank stored through malloc's NULL and died of
    SIGSEGV, naming nothing."""
    with pytest.raises(DhirError) as caught:
        native(_FILLED, np.zeros(1), 2**56)
    message = str(caught.value)
    assert "SIGSEGV" not in message
    assert "the allocation at line 7, column 12 of 512 PiB failed: malloc gave no memory" in message
    assert message.startswith("prog.mlir:7:12: error: the allocation of 512 PiB failed: malloc")


# --- reductions OpenMP's atomics cannot take -------------------------------------------------

_SCF_REDUCE = """      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c100 = arith.constant 100 : index
      %init = arith.constant {init}
      %all = scf.parallel (%i) = (%c0) to (%c100) step (%c1) init (%init) -> {type_} {{
        %v = memref.load %a[%i] : memref<100xi32>
        %z = arith.constant 0 : i32
        {element}
        scf.reduce(%e : {type_}) {{
        ^bb0(%l: {type_}, %r: {type_}):
          %x = arith.{combine} %l, %r : {type_}
          scf.reduce.return %x : {type_}
        }}
      }}
      %b = {to_i8} %all : {type_} to i8
      memref.store %b, %o[%c0] : memref<1xi8>"""

_AFFINE_REDUCE = """      %all = affine.parallel (%i) = (0) to (100) reduce ("andi") -> (i1) {
        %v = affine.load %a[%i] : memref<100xi32>
        %z = arith.constant 0 : i32
        %e = arith.cmpi sge, %v, %z : i32
        affine.yield %e : i1
      }
      %b = arith.extui %all : i1 to i8
      affine.store %b, %o[0] : memref<1xi8>"""

_NONNEGATIVE = "%e = arith.cmpi sge, %v, %z : i32"
REDUCTIONS = {
    "scf-i1-andi": _SCF_REDUCE.format(
        init="true", type_="i1", element=_NONNEGATIVE, combine="andi", to_i8="arith.extui"
    ),
    "scf-i17-addi": _SCF_REDUCE.format(
        init="5 : i17",
        type_="i17",
        element="%e = arith.trunci %v : i32 to i17",
        combine="addi",
        to_i8="arith.trunci",
    ),
    "affine-i1-andi": _AFFINE_REDUCE,
}


@needs_llvm
@pytest.mark.parametrize("body", REDUCTIONS.values(), ids=REDUCTIONS.keys())
@pytest.mark.parametrize("shift", [0, 3])
def test_reductions_on_odd_widths_build_and_equal_the_interpreter(body: str, shift: int) -> None:
    src = task("%a: memref<100xi32>, %o: memref<1xi8>", body)
    a = (np.arange(100, dtype=np.int32) * 37 % 91 - shift) * 1000
    same_as_native(src, a, np.zeros(1, np.int8))


# --- cf.switch -----------------------------------------------------------------------------


def _switch_program(type_: str, cases: list[int]) -> str:
    """@pick(x, y) branches on x: case k of `cases` returns 10 * k + y (the first case
    forwards y twice, the second nothing), the default 1000 + y."""
    arms, blocks = [], []
    for k, value in enumerate(cases):
        if k == 0:
            arms.append(f"{value}: ^c{k}(%y, %y : i32, i32)")
            blocks.append(f"^c{k}(%p: i32, %q: i32):\n  %r{k} = arith.addi %p, %q : i32")
            blocks[-1] += f"\n  %s{k} = arith.subi %r{k}, %y : i32"
        elif k == 1:
            arms.append(f"{value}: ^c{k}")
            blocks.append(f"^c{k}:\n  %s{k} = arith.addi %y, %y : i32")
            blocks[-1] += f"\n  %s{k}b = arith.subi %s{k}, %y : i32"
        else:
            arms.append(f"{value}: ^c{k}(%y : i32)")
            blocks.append(f"^c{k}(%p{k}: i32):\n  %s{k} = arith.addi %p{k}, %y : i32")
            blocks[-1] += f"\n  %s{k}b = arith.subi %s{k}, %y : i32"
    returns = []
    for k, block in enumerate(blocks):
        last = f"%s{k}" if k == 0 else f"%s{k}b"
        returns.append(
            f"{block}\n  %t{k} = arith.constant {10 * k} : i32\n"
            f"  %u{k} = arith.addi {last}, %t{k} : i32\n  return %u{k} : i32"
        )
    pick = (
        f"func.func private @pick(%x: {type_}, %y: i32) -> i32 {{\n"
        f"  cf.switch %x : {type_}, [\n    default: ^d(%y : i32),\n    "
        + ",\n    ".join(arms)
        + "\n  ]\n"
        + "\n".join(returns)
        + "\n^d(%w: i32):\n  %k = arith.constant 1000 : i32\n"
        "  %v = arith.addi %w, %k : i32\n  return %v : i32\n}\n"
    )
    narrow = (
        f"%x = arith.trunci %x64 : i64 to {type_}"
        if type_ != "i64"
        else "%x = arith.addi %x64, %x64 : i64"
    )
    body = f"""      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      scf.for %i = %c0 to %c8 step %c1 {{
        %x64 = memref.load %in[%i] : memref<8xi64>
        {narrow}
        %y = arith.constant 7 : i32
        %r = func.call @pick(%x, %y) : ({type_}, i32) -> i32
        memref.store %r, %out[%i] : memref<8xi32>
      }}"""
    return pick + task("%in: memref<8xi64>, %out: memref<8xi32>", body)


SWITCHES = {
    "i1": ("i1", [0, -1]),
    "i8": ("i8", [0, -5, 127, -128]),
    "i32": ("i32", [-1, 0, 100, -2**31]),
    "i64": ("i64", [2, -2**63, 2**62]),
}  # fmt: skip


@pytest.mark.parametrize(("type_", "cases"), SWITCHES.values(), ids=SWITCHES.keys())
def test_switch_runs_in_the_interpreter(type_: str, cases: list[int]) -> None:
    # i64 doubles its input (so that the int64 array can reach -2**63 and 2**62 itself).
    inputs = np.array([0, 1, -1, 255, -5, 100, 2**61, -(2**62)], np.int64)
    _, out = interp(_switch_program(type_, cases), inputs, np.zeros(8, np.int32))
    width = int(type_[1:])
    flags = [x * 2 if width == 64 else x for x in inputs.tolist()]
    flags = [(f + 2 ** (width - 1)) % 2**width - 2 ** (width - 1) for f in flags]
    normal = [(c + 2 ** (width - 1)) % 2**width - 2 ** (width - 1) for c in cases]
    want = [10 * normal.index(f) + 7 if f in normal else 1007 for f in flags]
    assert out.tolist() == want


@needs_llvm
@pytest.mark.parametrize(("type_", "cases"), SWITCHES.values(), ids=SWITCHES.keys())
def test_switch_equals_native(type_: str, cases: list[int]) -> None:
    inputs = np.array([0, 1, -1, 255, -5, 100, 2**61, -(2**62)], np.int64)
    same_as_native(_switch_program(type_, cases), inputs, np.zeros(8, np.int32))


def test_switch_on_index_is_a_located_error() -> None:
    src = (
        _switch_program("i8", [1])
        .replace(": i8, [", ": index, [")
        .replace("%x: i8, %y", "%x: index, %y")
    )
    src = src.replace("arith.trunci %x64 : i64 to i8", "arith.index_cast %x64 : i64 to index")
    src = src.replace("(i8, i32) -> i32", "(index, i32) -> i32")
    message = interp_error(src, np.zeros(8, np.int64), np.zeros(8, np.int32))
    # Refused when read, as mlir-opt-22 refuses it (the native build failed inside it).
    assert re.match(r"prog.mlir:\d+:\d+: error: 'cf.switch' takes a signless integer", message)


# --- memref.alloca_scope around loops ------------------------------------------------------

# Each of n sweeps takes 32 KiB of stack in its scope: without the scope giving it back,
# 2,000 sweeps overflow an 8 MiB stack.
_SCOPED_SWEEPS = """      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      scf.for %k = %c0 to %n step %c1 {
        memref.alloca_scope {
          %tmp = memref.alloca() : memref<4096xi64>
          scf.for %i = %c0 to %c64 step %c1 {
            %v = memref.load %a[%i] : memref<64xi64>
            %j = arith.muli %i, %k : index
            %jj = arith.remui %j, %c64 : index
            memref.store %v, %tmp[%jj] : memref<4096xi64>
          }
          scf.for %i = %c0 to %c64 step %c1 {
            %j = arith.muli %i, %k : index
            %jj = arith.remui %j, %c64 : index
            %v = memref.load %tmp[%jj] : memref<4096xi64>
            %w = memref.load %a[%i] : memref<64xi64>
            %x = arith.xori %v, %w : i64
            %y = arith.addi %x, %w : i64
            memref.store %y, %a[%i] : memref<64xi64>
          }
        }
      }"""


def _scoped_sweeps(a: list[int], n: int) -> list[int]:
    for k in range(n):
        tmp = [0] * 64
        for i in range(64):
            tmp[i * k % 64] = a[i]
        a = [((tmp[i * k % 64] ^ a[i]) + a[i]) % 2**64 for i in range(64)]
    return [x - 2**64 if x >= 2**63 else x for x in a]


@needs_llvm
def test_alloca_scope_around_loops_builds_and_gives_its_stack_back() -> None:
    src = task("%a: memref<64xi64>, %n: index", _SCOPED_SWEEPS).replace(
        "dhir.task %cpu, %a, %n", "dhir.task %cpu, %a"
    )
    a = np.arange(64, dtype=np.int64) * 7919 + 3
    same_as_native(src, a, 3)
    got, _ = native(src, np.copy(a), 2000)
    assert got.tolist() == _scoped_sweeps(a.tolist(), 2000)


# --- scf.for unsigned ----------------------------------------------------------------------

_UNSIGNED_BODY = """      %c0 = arith.constant 0 : index
      %z = arith.constant 0 : i32
      %lb = arith.constant 0 : i8
      %ub = arith.constant 200 : i8
      %st = arith.constant 50 : i8
      {loop}
        %e = arith.extui %i : i8 to i32
        %s = arith.addi %n, %e : i32
        scf.yield %s : i32
      {end}
      memref.store %r, %o[%c0] : memref<1xi32>"""
UNSIGNED_LOOPS = {
    "custom": (
        "%r = scf.for unsigned %i = %lb to %ub step %st iter_args(%n = %z) -> (i32) : i8 {",
        "}",
        "prog.mlir:10:20: ",
    ),
    # MLIR would take the attribute as the loop's own and compare unsigned.
    "attribute": (
        '%r = "scf.for"(%lb, %ub, %st, %z) ({\n      ^bb0(%i: i8, %n: i32):',
        "}) {unsignedCmp} : (i8, i8, i8, i32) -> i32",
        "prog.mlir:10:12: ",
    ),
}


@pytest.mark.parametrize(("loop", "end", "where"), UNSIGNED_LOOPS.values(), ids=UNSIGNED_LOOPS)
def test_unsigned_for_is_a_located_error(loop: str, end: str, where: str) -> None:
    src = task("%o: memref<1xi32>", _UNSIGNED_BODY.format(loop=loop, end=end))
    with pytest.raises(DhirError) as caught:
        dhir.parse_string(src, "prog.mlir")
    message = str(caught.value)
    assert message.startswith(f"{where}error: 'scf.for unsigned' (unsignedCmp) is not"), message


# --- constant steps of 0 or less ------------------------------------------------------------

# Each loop stores 7 at its counter in %o (memref<16xi32>); the step is the constant %st.
_STEP_LOOPS = {
    "for": ("scf.for %i = %lo to %hi step %st {", "}", "index"),
    "for_i8": (
        "scf.for %k = %lo to %hi step %st : i8 {\n        %i = arith.index_cast %k : i8 to index",
        "}",
        "i8",
    ),
    "parallel": ("scf.parallel (%i) = (%lo) to (%hi) step (%st) {", "}", "index"),
    "forall": ("scf.forall (%i) = (%lo) to (%hi) step (%st) {", "}", "index"),
}


def _stepped(kind: str, low: int, high: int, step: str) -> str:
    head, end, type_ = _STEP_LOOPS[kind]
    body = f"""      %z = arith.constant 7 : i32
      %lo = arith.constant {low} : {type_}
      %hi = arith.constant {high} : {type_}
      %st = arith.constant {step} : {type_}
      {head}
        memref.store %z, %o[%i] : memref<16xi32>
      {end}"""
    return task("%o: memref<16xi32>", body)


@pytest.mark.parametrize(
    ("kind", "low", "high", "step", "shown"),
    [
        # Counting down from above the bound: native code ran it zero times, exit 0.
        ("for", 15, -1, "-1", "-1"),
        # From below the bound: native code stepped down until memory faulted.
        ("for", 0, 8, "-1", "-1"),
        ("for", 0, 8, "0", "0"),
        ("for_i8", 15, -1, "255", "-1"),  # an i8 loop reads its step signed
        ("parallel", 0, 8, "-2", "-2"),  # mlir-opt-22 refused this only when building
        ("forall", 0, 8, "0", "0"),
    ],
)
def test_constant_step_not_positive_is_a_located_error(
    kind: str, low: int, high: int, step: str, shown: str
) -> None:
    """Both backends parse the program alike: the step is refused at the loop, before the
    interpreter runs it or native code is built."""
    with pytest.raises(DhirError) as caught:
        dhir.parse_string(_stepped(kind, low, high, step), "prog.mlir")
    message = str(caught.value)
    name = {"for_i8": "for"}.get(kind, kind)
    assert message.startswith(
        f"prog.mlir:9:7: error: 'scf.{name}' has the constant step {shown}; MLIR 22 leaves"
    ), message


def test_run_time_step_not_positive_is_an_interpreter_error() -> None:
    """A step known only when the loop runs is the interpreter's to refuse."""
    src = task(
        "%o: memref<16xi32>, %s: memref<1xindex>",
        """      %c0 = arith.constant 0 : index
      %c8 = arith.constant 8 : index
      %z = arith.constant 7 : i32
      %st = memref.load %s[%c0] : memref<1xindex>
      scf.for %i = %c0 to %c8 step %st {
        memref.store %z, %o[%i] : memref<16xi32>
      }""",
    )
    message = interp_error(src, np.zeros(16, np.int32), np.array([-1], np.int64))
    assert re.match(r"prog.mlir:\d+:\d+: error: 'scf.for' has step -1; steps must be", message)


_RUN_TIME_STEPS = {
    # Counting down from above the bound: native code ran it zero times, exit 0.
    "for down": ("index", "scf.for %i = %c15 to %cm1 step %st {", "-1"),
    "for i32": (
        "i32",
        "scf.for %j = %c0i to %c8i step %st : i32 {\n"
        "        %i = arith.index_cast %j : i32 to index",
        "0",
    ),
    "parallel": ("index", "scf.parallel (%i) = (%c0) to (%c8) step (%st) {", "-2"),
}


@needs_llvm
@pytest.mark.parametrize("case", sorted(_RUN_TIME_STEPS))
def test_run_time_step_not_positive_stops_native_code_at_the_loop(case: str) -> None:
    """dhir-loop-steps: a step read when the loop runs, 0 or less, stops the rank, naming
    the loop's line, as the interpreter stops; a positive one runs as written."""
    kind, head, bad = _RUN_TIME_STEPS[case]
    element = np.int32 if kind == "i32" else np.int64
    src = task(
        f"%o: memref<16xi32>, %s: memref<1x{kind}>",
        f"""      %c0 = arith.constant 0 : index
      %c8 = arith.constant 8 : index
      %c15 = arith.constant 15 : index
      %cm1 = arith.constant -1 : index
      %c0i = arith.constant 0 : i32
      %c8i = arith.constant 8 : i32
      %z = arith.constant 7 : i32
      %st = memref.load %s[%c0] : memref<1x{kind}>
      {head}
        memref.store %z, %o[%i] : memref<16xi32>
      }}""",
    )
    zeros = np.zeros(16, np.int32)
    with pytest.raises(DhirError) as caught:
        native(src, zeros, np.array([int(bad)], element))
    line = src.splitlines().index(f"      {head.splitlines()[0]}") + 1
    assert f"the loop at line {line}, column 7 has step {bad}; MLIR leaves" in str(caught.value)
    if case != "for down":
        same_as_native(src, zeros, np.array([3], element))


# --- counters of scf.forall, affine.for and affine.parallel --------------------------------

# From 2**62 to 2**63 - 1 step 2**62 the interpreter ran one iteration of each and exited 0;
# natively the scf.forall and (built with --no-optimize) the affine.for ran on forever, and
# the affine.parallel on OpenMP ran once. Each dimension is checked when those outside it
# run, as in a nest of loops; the affine bounds are a max and a min of several results.
_COUNTED = {
    "scf.forall": "scf.forall (%j, %i) = (%lo2, %lo) to (%hi2, %hi) step (%c1, %st) {",
    "affine.for": (
        "affine.for %j = %lo2 to %hi2 {\n"
        "      affine.for %i = max affine_map<()[s0, s1] -> (s0, s1 - 8)>()[%lo, %hi]"
        " to min affine_map<()[s0] -> (s0, 9223372036854775807)>()[%hi]"
        " step 4611686018427387904 {"
    ),
    "affine.parallel": (
        "affine.parallel (%j, %i) = (%lo2, max(%lo, %hi - 8))"
        " to (%hi2, min(%hi, 9223372036854775807)) step (1, 4611686018427387904) {"
    ),
}


def _counted(kind: str) -> str:
    close = "}\n      }" if kind == "affine.for" else "}"
    return f"""func.func @main(%o: memref<1xi32>, %lo: index, %hi: index, %st: index,
                 %lo2: index, %hi2: index) {{
  dhir.schedule %o {{
    %cpu = dhir.target {{kind = "cpu"}}
    %t = dhir.task %cpu, %o {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %one = arith.constant 1 : i32
      {_COUNTED[kind]}
        %r = memref.atomic_rmw addi %one, %o[%c0] : (i32, memref<1xi32>) -> i32
      {close}
    }}
  }}
  return
}}
"""


def _run_counted(backend: str, kind: str, *bounds: int) -> list[np.ndarray]:
    program = dhir.parse_string(_counted(kind), "prog.mlir")
    inputs = (np.zeros(1, np.int32), *bounds)
    if backend == "interp":
        return dhir.run(program, *inputs, backend="interp")
    # plain: the affine loops as written, not made scf by dhir-optimize-bodies
    return dhir.run(program, *inputs, backend="native", optimize=backend == "native")


_PAST_TOP = (2**62, 2**63 - 1, 2**62)
_BACKENDS = [
    "interp",
    pytest.param("native", marks=needs_llvm),
    pytest.param("plain", marks=needs_llvm),
]


@pytest.mark.parametrize("kind", list(_COUNTED))
@pytest.mark.parametrize("backend", _BACKENDS)
def test_counters_of_other_loops_that_overflow_stop_at_the_loop(backend: str, kind: str) -> None:
    with pytest.raises(DhirError) as caught:
        _run_counted(backend, kind, *_PAST_TOP, 0, 1)
    line = 10 if kind == "affine.for" else 9
    column = _counted(kind).splitlines()[line - 1].index(kind) + 1
    where = f"prog.mlir:{line}:{column}: error: '{kind}'"
    if backend != "interp":
        where = f"the loop at line {line}, column {column}"
    assert where in str(caught.value) and "counter overflows its type" in str(caught.value)


@pytest.mark.parametrize("kind", list(_COUNTED))
@pytest.mark.parametrize("backend", _BACKENDS)
@pytest.mark.parametrize(("outer", "trips"), [((0, 0), 0), ((3, 1), 0), ((0, 3), 3)])
def test_counters_of_other_loops_up_to_the_top_run(
    backend: str, kind: str, outer: tuple[int, int], trips: int
) -> None:
    """An empty outer dimension runs nothing; a counter that stops below the top of index
    runs: scf.forall from 2**63 - 9 step 4 twice, the affine loops (step 2**62) from the
    greater of 0 and 2**62 - 8 once."""
    bounds = (2**63 - 9, 2**63 - 1, 4) if kind == "scf.forall" else (0, 2**62, 1)
    if kind == "scf.forall":
        trips *= 2
    got, *_ = _run_counted(backend, kind, *bounds, *outer)
    assert got[0] == trips


# An affine bound past the largest index wraps, as --lower-affine computes it with arith
# ops that wrap: natively `0 to %hi + 10` at %hi = 2**63 - 8 ran no iteration, where the
# interpreter took the bound as 2**63 + 2 and stopped at a counter overflow.
_WRAPPED = {
    "affine.for": "affine.for %i = 0 to affine_map<()[s0] -> (s0 + 10)>()[%hi] step 3 {",
    "affine.parallel": "affine.parallel (%i) = (0) to (%hi + 10) step (3) {",
}


@pytest.mark.parametrize("kind", list(_WRAPPED))
@pytest.mark.parametrize("backend", ["interp", pytest.param("plain", marks=needs_llvm)])
def test_affine_bounds_wrap_as_lowered(backend: str, kind: str) -> None:
    src = _RUN_TIME_COUNT.replace("%lo: index, %hi: index, %st: index", "%hi: index").replace(
        """%n = scf.for %i = %lo to %hi step %st iter_args(%k = %z) -> (i32) {
        %k1 = arith.addi %k, %one : i32
        scf.yield %k1 : i32
      }
      memref.store %n, %o[%c0] : memref<1xi32>""",
        f"""{_WRAPPED[kind]}
        %r = memref.atomic_rmw addi %one, %o[%c0] : (i32, memref<1xi32>) -> i32
      }}""",
    )
    program = dhir.parse_string(src, "prog.mlir")
    inputs = (np.full(1, 5, np.int32), 2**63 - 8)
    if backend == "interp":
        got, *_ = dhir.run(program, *inputs, backend="interp")
    else:
        got, *_ = dhir.run(program, *inputs, backend="native", optimize=False)
    assert got[0] == 5
