"""Messages between ranks carry any element type and any size, whole.

Each program writes data on one rank and reads it on another, so that the native run
is right only if the messages (point-to-point and broadcast) arrived complete."""

import shutil

import numpy as np
import pytest
from test_toolchain import DTYPES

import dhir
from dhir.toolchain import options
from dhir.toolchain.options import message_chunk_bytes

MPIS = ("mpich", "openmpi")
needs_mpi = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


# %b = %a on rank 0; %c = %b on rank 1 (a message 0 -> 1); %c back to rank 0 at the end
# (1 -> 0); then %b again on rank 0, and %d = %c on rank 1 read by host code afterwards, so
# that %d is broadcast. An odd shape catches byte counts off by a partial element.
COPIES = """
func.func @main(%a: memref<3x5xT>, %b: memref<3x5xT>, %c: memref<3x5xT>, %d: memref<3x5xT>) {
  dhir.schedule %a, %b, %c, %d {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %a, %b {
      COPY(%a, %b)
    }
    %t1 = dhir.task %cpu, %b, %c {
      COPY(%b, %c)
    }
    %t2 = dhir.task %cpu, %a {
    }
    %t3 = dhir.task %cpu, %c, %d {
      COPY(%c, %d)
    }
  }
  %i = arith.constant 0 : index
  %x = memref.load %d[%i, %i] : memref<3x5xT>
  memref.store %x, %a[%i, %i] : memref<3x5xT>
  return
}
"""

LOOP = """%c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      %c5 = arith.constant 5 : index
      scf.for %i = %c0 to %c3 step %c1 {
        scf.for %j = %c0 to %c5 step %c1 {
          %v = memref.load FROM[%i, %j] : memref<3x5xT>
          memref.store %v, TO[%i, %j] : memref<3x5xT>
        }
      }"""


def _copies(element: str) -> str:
    text = COPIES
    for source, target in (("%a", "%b"), ("%b", "%c"), ("%c", "%d")):
        loop = LOOP.replace("FROM", source).replace("TO", target)
        text = text.replace(f"COPY({source}, {target})", loop)
    return text.replace("xT>", f"x{element}>")


def _values(dtype: type, rng: np.random.Generator) -> np.ndarray:
    if dtype is np.bool_:
        return rng.integers(0, 2, (3, 5)).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, (3, 5), endpoint=True, dtype=dtype)
    return (rng.standard_normal((3, 5)) * 100).astype(dtype)


@needs_mpi
@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("element", sorted(DTYPES))
def test_every_element_type_moves_between_ranks(element: str, mpi: str) -> None:
    program = _copies(element)
    dtype = DTYPES[element]
    a = _values(dtype, np.random.default_rng(len(element)))
    zeros = np.zeros((3, 5), dtype)
    inputs = [a, zeros, zeros, zeros]
    oracle = dhir.run(program, *inputs, backend="interp")
    native = dhir.run(program, *inputs, backend="native", ranks=2, mpi=mpi, placement="round-robin")
    assert not np.array_equal(oracle[2], zeros)  # the copies did write
    for got, want in zip(native, oracle, strict=True):
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


# bf16 cannot be an entry argument (NumPy has no bf16): the data comes in as i16 bit
# patterns, becomes bf16 in a buffer of the host code, moves between ranks as bf16 and
# goes out as i16 again.
BF16 = """
func.func @main(%a: memref<7xi16>, %c: memref<7xi16>) {
  %b = memref.alloc() : memref<7xbf16>
  dhir.schedule %a, %b, %c {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %a, %b {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant 7 : index
      scf.for %i = %c0 to %n step %c1 {
        %v = memref.load %a[%i] : memref<7xi16>
        %w = arith.bitcast %v : i16 to bf16
        memref.store %w, %b[%i] : memref<7xbf16>
      }
    }
    %t1 = dhir.task %cpu, %b, %c {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant 7 : index
      scf.for %i = %c0 to %n step %c1 {
        %v = memref.load %b[%i] : memref<7xbf16>
        %w = arith.bitcast %v : bf16 to i16
        memref.store %w, %c[%i] : memref<7xi16>
      }
    }
  }
  memref.dealloc %b : memref<7xbf16>
  return
}
"""


@needs_mpi
@pytest.mark.parametrize("mpi", MPIS)
def test_bf16_moves_between_ranks(mpi: str) -> None:
    a = np.random.default_rng(5).integers(-(2**15), 2**15, 7, dtype=np.int16)
    zeros = np.zeros(7, np.int16)
    native = dhir.run(BF16, a, zeros, backend="native", ranks=2, mpi=mpi, placement="round-robin")
    np.testing.assert_array_equal(native[1], a)


@needs_mpi
@pytest.mark.parametrize("mpi", MPIS)
def test_messages_in_small_pieces(mpi: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runtime cuts messages into pieces of DHIR_MESSAGE_CHUNK_BYTES: 7 bytes split
    the 120-byte buffers into 17 pieces and one of 1, and each f64 across two pieces."""
    monkeypatch.setenv("DHIR_MESSAGE_CHUNK_BYTES", "7")
    program = _copies("f64")
    a = _values(np.float64, np.random.default_rng(2))
    zeros = np.zeros((3, 5), np.float64)
    oracle = dhir.run(program, a, zeros, zeros, zeros, backend="interp")
    native = dhir.run(
        program, a, zeros, zeros, zeros, backend="native", ranks=2, mpi=mpi, placement="round-robin"
    )
    for got, want in zip(native, oracle, strict=True):
        assert got.tobytes() == want.tobytes()


@needs_mpi
def test_a_bad_piece_size_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DHIR_MESSAGE_CHUNK_BYTES", "0")
    zeros = np.zeros((3, 5), np.float64)
    with pytest.raises(dhir.DhirError, match=r"DHIR_MESSAGE_CHUNK_BYTES: '0' is not an integer"):
        dhir.run(_copies("f64"), zeros, zeros, zeros, zeros, backend="native", ranks=2)


@needs_mpi
def test_a_bad_stats_flag_is_refused_before_the_build(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DHIR_RT_STATS", "garbage")
    zeros = np.zeros((3, 5), np.float64)
    with pytest.raises(dhir.DhirError, match=r"DHIR_RT_STATS is 'garbage'; it takes 1") as caught:
        dhir.run(_copies("f64"), zeros, zeros, zeros, zeros, backend="native", ranks=2)
    assert "failed on 2 ranks" not in str(caught.value)


@needs_mpi
def test_the_runtime_refuses_a_bad_stats_flag_as_it_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An executable run by hand checks DHIR_RT_STATS again, as it starts (the check
    before the build is let through here): no task runs."""
    for where in ("dhir.toolchain.launch", "dhir.backends.native"):
        monkeypatch.setattr(f"{where}.check_runtime_environment", lambda: None)
    monkeypatch.setenv("DHIR_RT_STATS", "2")
    zeros = np.zeros((3, 5), np.float64)
    with pytest.raises(dhir.DhirError) as caught:
        dhir.run(_copies("f64"), zeros, zeros, zeros, zeros, backend="native", ranks=2)
    message = str(caught.value)
    assert "DHIR_RT_STATS=2: expected 1" in message and "after its last task" not in message


@needs_mpi
def test_the_piece_size_is_read_as_the_runtime_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """dhir refuses a bad DHIR_MESSAGE_CHUNK_BYTES before the build (message_chunk_bytes):
    here that check is let through, so that rank 0 reads each value as it starts, and
    takes or refuses the same values."""
    monkeypatch.setattr(options, "message_chunk_bytes", lambda _text: 1)
    zeros = np.zeros((3, 5), np.float64)
    program = _copies("f64")
    for text in ("0x10", "010", " 9", "9 ", "08", "1_000", "0o7"):
        monkeypatch.setenv("DHIR_MESSAGE_CHUNK_BYTES", text)
        try:
            dhir.run(program, zeros, zeros, zeros, zeros, ranks=2)
            taken = True
        except dhir.DhirError as error:
            assert f"DHIR_MESSAGE_CHUNK_BYTES: '{text}' is not an integer" in str(error)
            taken = False
        assert taken == (message_chunk_bytes(text) is not None), text


# 2^31 + 16 bytes: more than an MPI int count holds. Rank 1 writes 42 at both ends, in the
# middle and at 2^31; rank 0 reads them, after a send (the task on rank 0 reads %big) or a
# broadcast (host code reads %big after the schedule). %big is no entry argument, so that
# no file of its size is written or read, and the sender's untouched pages are never
# made resident.
LARGE = 2**31 + 16
BIG = f"""
func.func @main(%out: memref<4xi8>) {{
  %big = memref.alloc() : memref<{LARGE}xi8>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %mid = arith.constant {2**30 + 8} : index
  %at = arith.constant {2**31} : index
  %end = arith.constant {LARGE - 1} : index
  dhir.schedule %big, %out {{
    %cpu = dhir.target {{kind = "cpu"}}
    %t0 = dhir.task %cpu, %out {{
    }}
    %t1 = dhir.task %cpu, %big {{
      %v = arith.constant 42 : i8
      memref.store %v, %big[%c0] : memref<{LARGE}xi8>
      memref.store %v, %big[%mid] : memref<{LARGE}xi8>
      memref.store %v, %big[%at] : memref<{LARGE}xi8>
      memref.store %v, %big[%end] : memref<{LARGE}xi8>
    }}
    READ
  }}
  AFTER
  memref.dealloc %big : memref<{LARGE}xi8>
  return
}}
"""
READ_BIG = f"""%x0 = memref.load %big[%c0] : memref<{LARGE}xi8>
    %x1 = memref.load %big[%mid] : memref<{LARGE}xi8>
    %x2 = memref.load %big[%at] : memref<{LARGE}xi8>
    %x3 = memref.load %big[%end] : memref<{LARGE}xi8>
    memref.store %x0, %out[%c0] : memref<4xi8>
    memref.store %x1, %out[%c1] : memref<4xi8>
    memref.store %x2, %out[%c2] : memref<4xi8>
    memref.store %x3, %out[%c3] : memref<4xi8>"""


@needs_mpi
@pytest.mark.slow
@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("kind", ["send", "broadcast"])
def test_messages_over_2_gib(kind: str, mpi: str) -> None:
    if kind == "send":  # a task on rank 0 reads %big
        read = f"%t2 = dhir.task %cpu, %big, %out {{\n    {READ_BIG}\n    }}"
        program = BIG.replace("READ", read).replace("AFTER", "")
    else:  # host code reads %big: the schedule ends with a broadcast from rank 1
        program = BIG.replace("READ", "").replace("AFTER", READ_BIG)
    (out,) = dhir.run(
        program, np.zeros(4, np.int8), backend="native", ranks=2, mpi=mpi, placement="round-robin"
    )
    np.testing.assert_array_equal(out, np.full(4, 42, np.int8))


UNSENDABLE = """
func.func @main(%out: memref<1xf32>) {
  %b = memref.alloc() : memref<4xf80>
  dhir.schedule %b, %out {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %b {
      %c0 = arith.constant 0 : index
      %one = arith.constant 1.0 : f32
      %v = arith.extf %one : f32 to f80
      memref.store %v, %b[%c0] : memref<4xf80>
    }
    %t1 = dhir.task %cpu, %b, %out {
      %c0 = arith.constant 0 : index
      %v = memref.load %b[%c0] : memref<4xf80>
      %w = arith.truncf %v : f80 to f32
      memref.store %w, %out[%c0] : memref<1xf32>
    }
  }
  return
}
"""


@needs_mpi
def test_an_element_type_of_unknown_size_is_a_located_error() -> None:
    with pytest.raises(
        dhir.DhirError, match=r"<string>:\d+:\d+: .*cannot send elements of type f80"
    ):
        dhir.run(
            UNSENDABLE, np.zeros(1, np.float32), backend="native", ranks=2, placement="round-robin"
        )


ZERO_D = """
func.func @main(%a: memref<1xi32>, %out: memref<1xi32>) {
  %s = memref.alloc() : memref<i32>
  dhir.schedule %a, %s, %out {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %a, %s {
      %c0 = arith.constant 0 : index
      %v = memref.load %a[%c0] : memref<1xi32>
      memref.store %v, %s[] : memref<i32>
    }
    %t1 = dhir.task %cpu, %s, %out {
      %c0 = arith.constant 0 : index
      %v = memref.load %s[] : memref<i32>
      memref.store %v, %out[%c0] : memref<1xi32>
    }
  }
  memref.dealloc %s : memref<i32>
  return
}
"""


@needs_mpi
@pytest.mark.parametrize("mpi", MPIS)
def test_a_0d_memref_moves_between_ranks(mpi: str) -> None:
    inputs = [np.array([1234567], np.int32), np.zeros(1, np.int32)]
    oracle = dhir.run(ZERO_D, *inputs, backend="interp")
    native = dhir.run(ZERO_D, *inputs, backend="native", ranks=2, mpi=mpi, placement="round-robin")
    assert native[1].tobytes() == oracle[1].tobytes() == inputs[0].tobytes()


# A time loop of a task on rank 0 (A from B) and one on rank 1 (B from A): in every
# iteration rank 1 needs the A rank 0 just wrote, even the first; rank 0 needs the B of
# the iteration before, except in the first, which reads the input's.
PIPELINE = """
func.func @main(%A: memref<8x4xf64>, %B: memref<8x4xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %steps = arith.constant 3 : index
  scf.for %t = %c0 to %steps step %c1 {
    dhir.schedule %A, %B {
      %cpu = dhir.target {kind = "cpu"}
      %s0 = dhir.task %cpu, %A, %B attributes {dhir.rank = 0 : i64} {
        %k0 = arith.constant 0 : index
        %k1 = arith.constant 1 : index
        %k4 = arith.constant 4 : index
        %h = arith.constant 0.5 : f64
        scf.for %i = %k0 to %k4 step %k1 {
          scf.for %j = %k0 to %k4 step %k1 {
            %b = memref.load %B[%i, %j] : memref<8x4xf64>
            %a = arith.addf %b, %h : f64
            memref.store %a, %A[%i, %j] : memref<8x4xf64>
          }
        }
      }
      %s1 = dhir.task %cpu, %A, %B attributes {dhir.rank = 1 : i64} {
        %k0 = arith.constant 0 : index
        %k1 = arith.constant 1 : index
        %k4 = arith.constant 4 : index
        %k3 = arith.constant 3.0 : f64
        scf.for %i = %k0 to %k4 step %k1 {
          scf.for %j = %k0 to %k4 step %k1 {
            %a = memref.load %A[%i, %j] : memref<8x4xf64>
            %b = arith.mulf %a, %k3 : f64
            memref.store %b, %B[%i, %j] : memref<8x4xf64>
          }
        }
      }
    }
  }
  return
}
"""


@needs_mpi
def test_a_time_loops_first_iteration_skips_only_what_the_input_gave() -> None:
    """Rank 0 sends A in each of the 3 iterations; rank 1 sends B to rank 0 in the last
    2 only (the first's B is the input's, which every rank read), and the results are
    the interpreter's, bit for bit."""
    from dhir import parse_string
    from dhir.runner import run_module
    from dhir.toolchain.build import Timing
    from dhir.toolchain.options import RunOptions

    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((8, 4)) for _ in range(2)]
    timing = Timing()
    module = parse_string(PIPELINE)
    got = run_module(module, "main", inputs, "native", RunOptions(ranks=2), timing=timing)
    want = dhir.run(PIPELINE, *inputs, backend="interp", ranks=1)
    for expected, actual in zip(want, got, strict=True):
        np.testing.assert_array_equal(actual, expected)
    lines = [line.split() for line in timing.notes if line.startswith("dhir: rank")]
    block = 4 * 4 * 8  # rows 0-3 of one array
    assert [(int(w[4]), int(w[7])) for w in lines] == [(3 * block, 3), (2 * block, 2)], lines


def _ring(ranks: int, loop: str) -> str:
    """A time loop of 3 steps around a ring of tasks, task k on rank k copying (scaled)
    rows 0-3 of the array before its own (%X0 from the last): each step, rank k + 1
    needs what rank k just wrote, and rank 0 what the last rank wrote a step before,
    except in the first step, which reads the input. `loop`: "for", "counted" (an
    scf.while counting in index), "flagged" (an scf.while counting in f64, which only a
    flag tells at its first step) or "do" (the schedule in the before region)."""
    kind = "memref<8x4xf64>"
    names = [f"%X{k}" for k in range(ranks)]
    tasks: list[str] = []
    for k in range(ranks):
        source, target = names[k - 1], names[k]
        tasks += [
            f"      %s{k} = dhir.task %cpu, {source}, {target} attributes {{dhir.rank = {k} : i64}} {{",
            "        %k0 = arith.constant 0 : index",
            "        %k1 = arith.constant 1 : index",
            "        %k4 = arith.constant 4 : index",
            f"        %h = arith.constant {1.5 + k} : f64",
            "        scf.for %i = %k0 to %k4 step %k1 {",
            "          scf.for %j = %k0 to %k4 step %k1 {",
            f"            %a = memref.load {source}[%i, %j] : {kind}",
            "            %b = arith.mulf %a, %h : f64",
            f"            memref.store %b, {target}[%i, %j] : {kind}",
            "          }",
            "        }",
            "      }",
        ]
    schedule = [
        f"    dhir.schedule {', '.join(names)} {{",
        '      %cpu = dhir.target {kind = "cpu"}',
    ]
    schedule += [*tasks, "    }"]
    head, tail = {
        "for": (["  scf.for %t = %c0 to %steps step %c1 {"], ["  }"]),
        "counted": (
            [
                "  %r = scf.while (%t = %c0) : (index) -> index {",
                "    %go = arith.cmpi slt, %t, %steps : index",
                "    scf.condition(%go) %t : index",
                "  } do {",
                "  ^bb0(%u: index):",
            ],
            ["    %n = arith.addi %u, %c1 : index", "    scf.yield %n : index", "  }"],
        ),
        "flagged": (
            [
                "  %r = scf.while (%x = %zero) : (f64) -> f64 {",
                "    %go = arith.cmpf olt, %x, %three : f64",
                "    scf.condition(%go) %x : f64",
                "  } do {",
                "  ^bb0(%y: f64):",
            ],
            ["    %n = arith.addf %y, %one : f64", "    scf.yield %n : f64", "  }"],
        ),
        "do": (
            ["  %r = scf.while (%t = %c0) : (index) -> index {"],
            [
                "    %n = arith.addi %t, %c1 : index",
                "    %go = arith.cmpi slt, %n, %steps : index",
                "    scf.condition(%go) %n : index",
                "  } do {",
                "  ^bb0(%u: index):",
                "    scf.yield %u : index",
                "  }",
            ],
        ),
    }[loop]
    return "\n".join(
        [
            f"func.func @main({', '.join(f'{n}: {kind}' for n in names)}) {{",
            "  %c0 = arith.constant 0 : index",
            "  %c1 = arith.constant 1 : index",
            "  %steps = arith.constant 3 : index",
            "  %zero = arith.constant 0.0 : f64",
            "  %one = arith.constant 1.0 : f64",
            "  %three = arith.constant 3.0 : f64",
            *head,
            *schedule,
            *tail,
            "  return",
            "}",
        ]
    )


@needs_mpi
@pytest.mark.parametrize("loop", ["for", "counted", "flagged", "do"])
@pytest.mark.parametrize("ranks", [2, 3])
def test_a_while_time_loops_first_step_skips_what_the_input_gave(loop: str, ranks: int) -> None:
    """Each rank sends its rows every step, but the last rank, whose first step's rows
    rank 0 read from the input: an scf.while time loop skips that message too (it sent
    3 on every rank), guarded by its counter or, where it counts in f64, a flag it is
    made to carry; the results are the interpreter's, bit for bit."""
    from dhir import parse_string
    from dhir.runner import run_module
    from dhir.toolchain.build import Timing
    from dhir.toolchain.options import RunOptions

    text = _ring(ranks, loop)
    rng = np.random.default_rng(ranks)
    inputs = [rng.standard_normal((8, 4)) for _ in range(ranks)]
    timing = Timing()
    got = run_module(
        parse_string(text), "main", inputs, "native", RunOptions(ranks=ranks), timing=timing
    )
    want = dhir.run(text, *inputs, backend="interp", ranks=1)
    for expected, actual in zip(want, got, strict=True):
        np.testing.assert_array_equal(actual, expected)
    lines = [line.split() for line in timing.notes if line.startswith("dhir: rank")]
    block = 4 * 4 * 8  # rows 0-3 of one array
    sent = [(3 * block, 3)] * (ranks - 1) + [(2 * block, 2)]
    assert [(int(w[4]), int(w[7])) for w in lines] == sent, lines


def _residual(ranks: int, loop: str, size: int = 1) -> str:
    """`_ring` in an scf.while whose condition loads %C[size - 1] (a residual, here a
    count the last rank's task adds 1 to, in each of %C's `size` elements, each step)
    rather than testing its counter; `loop`: "counted" (the condition in the before
    region, the schedule in the after one) or "do" (both in the before region, the load
    after the schedule)."""
    text = _ring(ranks, loop)
    kind = f"memref<{size}xf64>"
    text = text.replace("func.func @main(", f"func.func @main(%C: {kind}, ")
    text = text.replace("dhir.schedule ", "dhir.schedule %C, ")
    task = [
        f"      %cc = dhir.task %cpu, %C attributes {{dhir.rank = {ranks - 1} : i64}} {{",
        "        %z = arith.constant 0 : index",
        "        %e = arith.constant 1 : index",
        f"        %size = arith.constant {size} : index",
        "        %o = arith.constant 1.0 : f64",
        "        scf.for %q = %z to %size step %e {",
        f"          %v = memref.load %C[%q] : {kind}",
        "          %w = arith.addf %v, %o : f64",
        f"          memref.store %w, %C[%q] : {kind}",
        "        }",
        "      }",
    ]
    lines = text.split("\n")
    end = max(i for i, line in enumerate(lines) if line == "    }")  # the schedule's
    lines[end:end] = task
    counter = "%t" if loop == "counted" else "%n"
    test = f"    %go = arith.cmpi slt, {counter}, %steps : index"
    last = f"    %last = arith.constant {size - 1} : index\n"
    load = f"    %cv = memref.load %C[%last] : {kind}\n"
    residual = f"{last}{load}    %go = arith.cmpf olt, %cv, %three : f64"
    return "\n".join(lines).replace(test, residual)


def test_a_while_testing_a_residual_keeps_its_data_distributed() -> None:
    """A condition loading a memref of the schedule no longer makes the loop no time
    loop: the steady state holds that memref whole on every rank, and the others apart."""
    from dhir import parse_string
    from dhir.dialects.dhir import ScheduleOp
    from dhir.transforms.lower_to_mpi import loop_entry_state

    module = parse_string(_residual(2, "counted"))
    schedule = next(op for op in module.walk() if isinstance(op, ScheduleOp))
    kept = loop_entry_state(schedule, 2)
    assert kept is not None
    _, start = kept
    count, _, last = schedule.args
    assert start.everywhere(count)
    assert not start.everywhere(last)  # rows 0-3 only on the rank that wrote them


@needs_mpi
@pytest.mark.parametrize("loop", ["counted", "do"])
@pytest.mark.parametrize("ranks", [2, 3])
@pytest.mark.parametrize("size", [1, 8])
def test_a_while_testing_a_residual_skips_what_the_input_gave(
    loop: str, ranks: int, size: int
) -> None:
    """The ring again, in an scf.while whose condition loads %C[0], which the last rank's
    task counts up: each step's end brings %C[0] to every rank (8 bytes), and the arrays
    stay apart between steps, so the first step skips what the input gave, as a counted
    loop does. The arrays were assembled at every step's end before (2 ranks: 408 bytes
    in 6 messages from rank 1; 3 ranks: 768 in 6 from ranks 0 and 1, 408 in 6 from rank
    2). Of a %C of 8 elements only the one loaded goes to each rank at a step's end (it
    went whole: on 2 ranks 448 bytes in 5 messages from the last rank, now 336 in 6).
    The results are the interpreter's, bit for bit."""
    from dhir import parse_string
    from dhir.runner import run_module
    from dhir.toolchain.build import Timing
    from dhir.toolchain.options import RunOptions

    text = _residual(ranks, loop, size)
    rng = np.random.default_rng(ranks)
    inputs = [np.zeros(size), *(rng.standard_normal((8, 4)) for _ in range(ranks))]
    timing = Timing()
    got = run_module(
        parse_string(text), "main", inputs, "native", RunOptions(ranks=ranks), timing=timing
    )
    want = dhir.run(text, *inputs, backend="interp", ranks=1)
    for expected, actual in zip(want, got, strict=True):
        np.testing.assert_array_equal(actual, expected)
    assert got[0][-1] == 3.0
    lines = [line.split() for line in timing.notes if line.startswith("dhir: rank")]
    block = 4 * 4 * 8  # rows 0-3 of one array
    # Each step's %C[size - 1], from the last rank: one message (a send, a broadcast, or
    # for the whole %C on 3 ranks an MPI_Allgatherv); for 8 elements, after the loop
    # the other 7 to rank 0, which writes the results.
    shared = (8, 1)
    after = (0, 0) if size == 1 else (7 * 8, 1)
    last = (2 * block + 3 * shared[0] + after[0], 2 + 3 * shared[1] + after[1])
    sent = [(3 * block, 3)] * (ranks - 1) + [last]
    assert [(int(w[4]), int(w[7])) for w in lines] == sent, lines


def _sent(text: str, inputs: list[np.ndarray], ranks: int) -> list[tuple[int, int]]:
    """The bytes and messages each rank sends running `text` natively on `ranks` ranks,
    whose results are the interpreter's, bit for bit."""
    from dhir import parse_string
    from dhir.runner import run_module
    from dhir.toolchain.build import Timing
    from dhir.toolchain.options import RunOptions

    timing = Timing()
    options = RunOptions(ranks=ranks)
    got = run_module(parse_string(text), "main", inputs, "native", options, timing=timing)
    want = dhir.run(text, *inputs, backend="interp", ranks=1)
    for expected, actual in zip(want, got, strict=True):
        np.testing.assert_array_equal(actual, expected)
    lines = [line.split() for line in timing.notes if line.startswith("dhir: rank")]
    return [(int(w[4]), int(w[7])) for w in lines]


def _predicted_step(text: str, ranks: int) -> list[tuple[int, int]]:
    """The bytes and messages each rank sends in one step of the time loop around
    `text`'s schedule, as the placement's replay has it (dhir.placement.as_built) for
    the ranks its tasks name."""
    from dhir import parse_string
    from dhir.dialects.dhir import ScheduleOp
    from dhir.ir.tasks import rank_of
    from dhir.placement.as_built import as_built_timeline
    from dhir.placement.from_ir import machine_for, task_graph

    module = parse_string(text)
    schedule = next(op for op in module.walk() if isinstance(op, ScheduleOp))
    devices, costs = machine_for(module, ranks)
    graph = task_graph(schedule, devices, costs)
    tasks = list(schedule.tasks())
    names = graph.tasks[: len(tasks)]
    placed = {name: f"rank{rank_of(task)}" for name, task in zip(names, tasks, strict=True)}
    timeline = as_built_timeline(schedule, graph, placed, devices, costs)
    sent = [(0, 0)] * ranks
    for message in timeline.transfers + timeline.spreads:
        rank = int(placed[message.source].removeprefix("rank"))
        sent[rank] = (sent[rank][0] + message.nbytes, sent[rank][1] + 1)
    return sent


@needs_mpi
@pytest.mark.parametrize("loop", ["for", "counted", "do"])
@pytest.mark.parametrize("ranks", [2, 3])
def test_the_replay_predicts_what_a_time_loops_step_sends(loop: str, ranks: int) -> None:
    """What a step of a time loop sends, the run of 4 steps less the run of 3 (the first
    step and the sends after the loop alike in both), is what the placement's replay
    charges a step: each rank's rows to the next rank, the last rank's also to rank 0
    (written a step before), and for an scf.while testing %C[7], the 8 bytes of it
    from the last rank. The replay charged every array's broadcast at every step's end
    of the scf.while (2 ranks: 128 bytes of its messages, and 264 broadcast), and no
    row written a step before, in either loop."""
    rng = np.random.default_rng(ranks)
    arrays = [rng.standard_normal((8, 4)) for _ in range(ranks)]
    if loop == "for":
        text = _ring(ranks, loop)
        longer = text.replace("%steps = arith.constant 3", "%steps = arith.constant 4")
        runs = [(text, arrays), (longer, arrays)]
    else:
        text = longer = _residual(ranks, loop, 8)
        runs = [(text, [np.zeros(8), *arrays]), (text, [np.full(8, -1.0), *arrays])]
    three, four = (_sent(program, inputs, ranks) for program, inputs in runs)
    step = [(b - a, m - n) for (a, n), (b, m) in zip(three, four, strict=True)]
    assert _predicted_step(longer, ranks) == step, (three, four)
