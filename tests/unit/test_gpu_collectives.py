"""`gpu.all_reduce`, `gpu.subgroup_reduce` and `gpu.shuffle` in the interpreter
(dhir.backends.interp.collectives): the threads of a block, or the lanes of a subgroup,
meet at the op, and its result is combined in the order of MLIR 22's NVVM lowering
(a butterfly of xor shuffles in each warp of 32 lanes, then across the warps' first
lanes), which a NumPy emulation below computes independently. The interpreter used to
refuse every one of these ops ("is not supported by the interpreter")."""

import shutil
from pathlib import Path

import numpy as np
import pytest
from xdsl.context import Context

import dhir
from dhir import DhirError
from dhir.dialects import gpu
from dhir.ir.diagnostics import error_at
from dhir.ir.pass_failure import PassFailedAt
from dhir.ir.text import parse_string
from dhir.transforms.mlir22_workarounds import Mlir22WorkaroundsPass

# One gpu.launch over %x: thread (tx, ty, tz) of block bx reads element `i`, its place in
# the launch (x fastest), runs BODY on %v (and %lane) and stores %r (and %ok) at `i`.
PROGRAM = """func.func @main(%x: memref<NxT>, %out: memref<NxT>, %okay: memref<Nxi32>) {
  dhir.schedule %x, %out, %okay {
    %gpu = dhir.target {arch = "sm_90"}
    %t = dhir.task %gpu, %x, %out, %okay {
      %c1 = arith.constant 1 : index
      %grid = arith.constant G : index
      %sx = arith.constant SX : index
      %sy = arith.constant SY : index
      %sz = arith.constant SZ : index
      gpu.launch blocks(%bx, %by, %bz) in (%gx = %grid, %gy = %c1, %gz = %c1)
          threads(%tx, %ty, %tz) in (%nx = %sx, %ny = %sy, %nz = %sz) {
        %i = affine.apply affine_map<(b, x, y, z) -> (b * (SX * SY * SZ) + (z * SY + y) * SX + x)>(%bx, %tx, %ty, %tz)
        %v = memref.load %x[%i] : memref<NxT>
        %lane = gpu.lane_id
        %lane32 = arith.index_cast %lane : index to i32
        %one = arith.constant 1 : i32
BODY
        memref.store %r, %out[%i] : memref<NxT>
        %ok32 = arith.extui %ok : i1 to i32
        memref.store %ok32, %okay[%i] : memref<Nxi32>
        gpu.terminator
      }
    }
  }
  return
}
"""
TRUE = "        %ok = arith.constant true\n"


def _program(body: str, type_: str, grid: int, block: tuple[int, int, int]) -> str:
    n = grid * block[0] * block[1] * block[2]
    src = PROGRAM.replace("BODY", body.rstrip("\n")).replace("SX * SY * SZ", str(n // grid))
    for key, value in (("SX", block[0]), ("SY", block[1]), ("SZ", block[2])):
        src = src.replace(key, str(value))
    return src.replace("NxT", f"{n}x{type_}").replace("Nx", f"{n}x").replace("G ", f"{grid} ")


def _run(
    body: str, x: np.ndarray, grid: int, block: tuple[int, int, int], type_: str = "f32"
) -> tuple[np.ndarray, np.ndarray]:
    src = _program(body, type_, grid, block)
    outputs = dhir.run(
        parse_string(src, "p.mlir"),
        x,
        np.zeros_like(x),
        np.zeros(x.size, np.int32),
        backend="interp",
    )
    return outputs[1], outputs[2]


def _error(body: str, x: np.ndarray, grid: int, block: tuple[int, int, int]) -> str:
    with pytest.raises(DhirError) as caught:
        _run(body, x, grid, block)
    return str(caught.value)


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


# --- the lowering's order, in NumPy --------------------------------------------------


def _butterfly(values: np.ndarray, offsets: list[int], combine: np.ufunc) -> np.ndarray:
    """Every lane after xor shuffles at `offsets`: lane k combines its own value with
    lane k ^ offset's where that lane exists, else keeps its own."""
    lanes = np.arange(values.size)
    for offset in offsets:
        partner = lanes ^ offset
        valid = partner < values.size
        values = np.where(valid, combine(values, values[np.where(valid, partner, lanes)]), values)
    return values


def _block_reduce(block: np.ndarray, combine: np.ufunc) -> np.generic:
    offsets = [1, 2, 4, 8, 16]
    firsts = np.array(
        [_butterfly(block[s : s + 32], offsets, combine)[0] for s in range(0, block.size, 32)]
    )
    return _butterfly(firsts, offsets, combine)[0]


def _all_reduce(x: np.ndarray, grid: int, combine: np.ufunc) -> np.ndarray:
    blocks = x.reshape(grid, -1)
    return np.repeat([_block_reduce(b, combine) for b in blocks], blocks.shape[1]).astype(x.dtype)


# --- gpu.all_reduce ------------------------------------------------------------------

SUM = "        %r = gpu.all_reduce add %v uniform {\n        } : (f32) -> f32\n" + TRUE


@pytest.mark.parametrize(
    ("grid", "block"),
    [(2, (32, 1, 1)), (1, (96, 1, 1)), (2, (8, 4, 3)), (1, (40, 1, 1)), (3, (200, 1, 1))],
)
def test_a_block_sum_equals_the_butterfly_bit_for_bit(
    grid: int, block: tuple[int, int, int]
) -> None:
    """Whole warps, 3 warps (the second stage's butterfly over 3 lanes), a 3-D block, a
    last warp of 8 lanes, 7 warps of which the last has 8 lanes."""
    n = grid * block[0] * block[1] * block[2]
    x = np.random.default_rng(n + 1).standard_normal(n).astype(np.float32) * np.float32(1e4)
    x[::3] /= np.float32(1e4)
    got, _ = _run(SUM, x, grid, block)
    want = _all_reduce(x, grid, np.add)
    _same_bits(got, want)
    # The order matters for these inputs: summed in sequence they round otherwise.
    in_sequence = np.array([np.add.accumulate(b)[-1] for b in x.reshape(grid, -1)])
    assert not np.array_equal(in_sequence, want.reshape(grid, -1)[:, 0])


@pytest.mark.parametrize(
    ("operation", "combine"),
    [
        ("add", np.add),
        ("mul", np.multiply),
        ("maxsi", np.maximum),
        ("minsi", np.minimum),
        ("and", np.bitwise_and),
        ("or", np.bitwise_or),
        ("xor", np.bitwise_xor),
    ],
)
def test_integer_all_reduces_are_exact(operation: str, combine: np.ufunc) -> None:
    """i32 wraps around (add and mul overflow here), as the GPU's 32-bit lanes do."""
    x = np.random.default_rng(3).integers(-(2**31), 2**31, 64 * 3).astype(np.int32)
    if operation == "mul":
        x = x | 1  # odd: the product does not become 0
    body = f"        %r = gpu.all_reduce {operation} %v uniform {{\n        }} : (i32) -> i32\n"
    got, _ = _run(body + TRUE, x, 3, (64, 1, 1), "i32")
    with np.errstate(over="ignore"):
        want = np.repeat([combine.reduce(b) for b in x.reshape(3, -1)], 64).astype(np.int32)
    np.testing.assert_array_equal(got, want)


def test_an_all_reduce_with_a_region_combines_its_own_value_first() -> None:
    """The region gets (own value, partner's), as the lowering passes them: with a
    subtraction, which is not commutative, lane 0's result is the butterfly's."""
    body = (
        """        %r = gpu.all_reduce %v uniform {
        ^bb0(%a: f32, %b: f32):
          %d = arith.subf %a, %b : f32
          gpu.yield %d : f32
        } : (f32) -> f32
"""
        + TRUE
    )
    x = np.random.default_rng(4).standard_normal(64).astype(np.float32)
    got, _ = _run(body, x, 1, (64, 1, 1))
    _same_bits(got, _all_reduce(x, 1, np.subtract))


def test_an_all_reduce_that_only_some_threads_reach_is_refused() -> None:
    body = (
        """        %c16 = arith.constant 16 : index
        %low = arith.cmpi ult, %tx, %c16 : index
        %r = scf.if %low -> (f32) {
          %s = gpu.all_reduce add %v uniform {
          } : (f32) -> f32
          scf.yield %s : f32
        } else {
          scf.yield %v : f32
        }
"""
        + TRUE
    )
    message = _error(body, np.ones(32, np.float32), 1, (32, 1, 1))
    assert message.startswith(
        "p.mlir:20:16: error: 'gpu.all_reduce' is reached by thread (0, 0, 0) of block "
        "(0, 0, 0) but not by thread (16, 0, 0) of that block, which returns from the kernel. "
        "Every thread of a block must reach each gpu.all_reduce together"
    ), message


# --- gpu.shuffle ---------------------------------------------------------------------


def _shuffle(mode: str, offset: int, width: int = 32) -> str:
    return (
        f"        %off = arith.constant {offset} : i32\n"
        f"        %w = arith.constant {width} : i32\n"
        f"        %r, %ok = gpu.shuffle {mode} %v, %off, %w : f32\n"
    )


@pytest.mark.parametrize(
    ("mode", "offset", "source"),
    [
        ("xor", 5, lambda k: k ^ 5),
        ("down", 3, lambda k: k + 3),
        ("up", 2, lambda k: k - 2),
        ("idx", 7, lambda k: np.full_like(k, 7)),
        ("idx", 31, lambda k: np.full_like(k, 31)),
    ],
)
def test_a_shuffle_gives_another_lane_s_value_or_its_own_and_false(
    mode: str, offset: int, source: object
) -> None:
    x = np.arange(64, dtype=np.float32) + np.float32(0.5)
    got, ok = _run(_shuffle(mode, offset), x, 1, (64, 1, 1))
    lanes = np.arange(64) % 32
    src = source(lanes)  # type: ignore[operator]
    valid = (src >= 0) & (src < 32)
    want = np.where(valid, x[(np.arange(64) - lanes) + np.clip(src, 0, 31)], x)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(ok, valid.astype(np.int32))


NARROW = """        %c16 = arith.constant 16 : i32
        %low = arith.cmpi ult, %lane32, %c16 : i32
        %r, %ok = scf.if %low -> (f32, i1) {
          %off = arith.constant 4 : i32
          %s, %k = gpu.shuffle MODE %v, %off, %c16 : f32
          scf.yield %s, %k : f32, i1
        } else {
          %f = arith.constant false
          scf.yield %v, %f : f32, i1
        }
"""


@pytest.mark.parametrize(("mode", "source"), [("down", 4), ("up", -4)])
def test_a_narrow_shuffle_in_its_lanes_only(mode: str, source: int) -> None:
    """Width 16, run by lanes 0-15 only (the others skip it): down by 4 is valid below
    lane 12, up by 4 from lane 4 (MLIR 22's own lowering of up made every lane invalid
    there; dhir-mlir22-workarounds lowers it as defined)."""
    x = np.arange(32, dtype=np.float32)
    got, ok = _run(NARROW.replace("MODE", mode), x, 1, (32, 1, 1))
    lanes = np.arange(32)
    valid = (lanes < 16) & (lanes + source >= 0) & (lanes + source < 16)
    np.testing.assert_array_equal(got, np.where(valid, x + source, x))
    np.testing.assert_array_equal(ok, valid.astype(np.int32))


# A block reduction as CUDA programs write it: each warp sums its lanes with shuffles
# down, lane 0 of each puts its sum in workgroup memory, and after a barrier warp 0 alone
# (the other warps skip it) sums those; thread 0 stores the block's sum. (The sums are
# written out twice: a kernel calling a function of the program does not build natively.)
WARP_SUM = """func.func @main(%x: memref<128xf32>, %out: memref<1xf32>) {
  dhir.schedule %x, %out {
    %gpu = dhir.target {arch = "sm_90"}
    %t = dhir.task %gpu, %x, %out {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %c32 = arith.constant 32 : index
      %c128 = arith.constant 128 : index
      %c5 = arith.constant 5 : index
      %c16 = arith.constant 16 : i32
      %w = arith.constant 32 : i32
      gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
          threads(%tx, %ty, %tz) in (%nx = %c128, %ny = %c1, %nz = %c1)
          workgroup(%partial : memref<4xf32, #gpu.address_space<workgroup>>) {
        %v = memref.load %x[%tx] : memref<128xf32>
        %s = scf.for %ia = %c0 to %c5 step %c1 iter_args(%acca = %v) -> (f32) {
          %i32a = arith.index_cast %ia : index to i32
          %offa = arith.shrui %c16, %i32a : i32
          %oa, %oka = gpu.shuffle down %acca, %offa, %w : f32
          %na = arith.addf %acca, %oa : f32
          scf.yield %na : f32
        }
        %lane = gpu.lane_id
        %warp = arith.divui %tx, %c32 : index
        %first = arith.cmpi eq, %lane, %c0 : index
        scf.if %first {
          memref.store %s, %partial[%warp] : memref<4xf32, #gpu.address_space<workgroup>>
        }
        gpu.barrier
        %zero = arith.cmpi eq, %warp, %c0 : index
        scf.if %zero {
          %in = arith.cmpi ult, %lane, %c4 : index
          %p = scf.if %in -> (f32) {
            %q = memref.load %partial[%lane] : memref<4xf32, #gpu.address_space<workgroup>>
            scf.yield %q : f32
          } else {
            %z = arith.constant 0.0 : f32
            scf.yield %z : f32
          }
          %total = scf.for %ib = %c0 to %c5 step %c1 iter_args(%accb = %p) -> (f32) {
            %i32b = arith.index_cast %ib : index to i32
            %offb = arith.shrui %c16, %i32b : i32
            %ob, %okb = gpu.shuffle down %accb, %offb, %w : f32
            %nb = arith.addf %accb, %ob : f32
            scf.yield %nb : f32
          }
          %t0 = arith.cmpi eq, %tx, %c0 : index
          scf.if %t0 {
            memref.store %total, %out[%c0] : memref<1xf32>
          }
        }
        gpu.terminator
      }
    }
  }
  return
}
"""


def _warp_sum(values: np.ndarray) -> np.float32:
    """Lane 0 after shuffles down by 16, 8, 4, 2, 1, each lane adding what it got (its
    own value again where the source is past lane 31)."""
    lanes = np.arange(32)
    for offset in (16, 8, 4, 2, 1):
        source = lanes + offset
        values = values + np.where(source < 32, values[np.minimum(source, 31)], values)
    return values[0]


def test_a_warp_shuffle_block_sum_with_warps_apart_equals_numpy() -> None:
    x = np.random.default_rng(5).standard_normal(128).astype(np.float32)
    got = dhir.run(parse_string(WARP_SUM), x, np.zeros(1, np.float32), backend="interp")
    partial = np.array([_warp_sum(w) for w in x.reshape(4, 32)] + [0] * 28, np.float32)
    _same_bits(got[1], np.array([_warp_sum(partial)], np.float32))


# Every mode of shuffle in a row, each lane adding up what it got: for a real GPU against
# the interpreter (tests/gpu_check.py).
SHUFFLES = """        %o5 = arith.constant 5 : i32
        %w32 = arith.constant 32 : i32
        %sa, %ka = gpu.shuffle xor %v, %o5, %w32 : f32
        %sb, %kb = gpu.shuffle down %sa, %o5, %w32 : f32
        %sc, %kc = gpu.shuffle up %sb, %o5, %w32 : f32
        %sd, %kd = gpu.shuffle idx %sc, %lane32, %w32 : f32
        %ab = arith.addf %sa, %sb : f32
        %abc = arith.addf %ab, %sc : f32
        %r = arith.addf %abc, %sd : f32
        %ok = arith.andi %kb, %kc : i1
"""


def test_shuffles_of_every_mode_in_a_row_equal_numpy() -> None:
    """The last, idx at each lane's own number, gives each lane its own value."""
    x = np.random.default_rng(10).standard_normal(64).astype(np.float32)
    got, ok = _run(SHUFFLES, x, 1, (64, 1, 1))
    k = np.arange(64) % 32
    base = np.arange(64) - k
    a = x[base + (k ^ 5)]
    b = np.where(k + 5 < 32, a[base + np.minimum(k + 5, 31)], a)
    c = np.where(k >= 5, b[base + np.maximum(k - 5, 0)], b)
    _same_bits(got, ((a + b) + c) + c)
    np.testing.assert_array_equal(ok, ((k + 5 < 32) & (k >= 5)).astype(np.int32))


SHUFFLE_REFUSED = {
    "lane 5 returns first": (
        """        %c5 = arith.constant 5 : i32
        %early = arith.cmpi eq, %lane32, %c5 : i32
        %r, %ok = scf.if %early -> (f32, i1) {
          %f = arith.constant false
          scf.yield %v, %f : f32, i1
        } else {
          %off = arith.constant 1 : i32
          %w = arith.constant 32 : i32
          %s, %k = gpu.shuffle xor %v, %off, %w : f32
          scf.yield %s, %k : f32, i1
        }
""",
        "p.mlir:25:20: error: 'gpu.shuffle' is reached by thread (0, 0, 0) of block (0, 0, 0) "
        "but not by thread (5, 0, 0) of that block, which returns from the kernel. The first "
        "32 lanes of a subgroup must reach each gpu.shuffle together",
    ),
    "lanes past the width run it": (
        _shuffle("xor", 1, 16),
        "p.mlir:19:19: error: 'gpu.shuffle' runs in lane 16 with width 16: MLIR 22's lowering "
        "leaves the lanes from the width out of the shuffle",
    ),
    "width 0": (_shuffle("xor", 1, 0), "p.mlir:19:19: error: 'gpu.shuffle' has width 0"),
    "offset 33": (_shuffle("down", 33), "p.mlir:19:19: error: 'gpu.shuffle' has offset 33"),
    "widths that differ": (
        """        %c16 = arith.constant 16 : i32
        %c32 = arith.constant 32 : i32
        %low = arith.cmpi ult, %lane32, %c16 : i32
        %w = arith.select %low, %c32, %c16 : i32
        %r, %ok = gpu.shuffle xor %v, %one, %w : f32
""",
        "p.mlir:21:19: error: 'gpu.shuffle' has widths [16, 32] in one subgroup",
    ),
    "a warp of 8 lanes": (
        _shuffle("xor", 1),
        "p.mlir:19:19: error: 'gpu.shuffle' is reached by thread (32, 0, 0) of block (0, 0, 0), "
        "in a subgroup of 8 threads (the block's last), but it takes 32 lanes",
    ),
}


@pytest.mark.parametrize("case", SHUFFLE_REFUSED)
def test_a_shuffle_the_lowering_leaves_undefined_is_refused(case: str) -> None:
    body, expected = SHUFFLE_REFUSED[case]
    threads = 40 if case == "a warp of 8 lanes" else 32
    message = _error(body, np.ones(threads, np.float32), 1, (threads, 1, 1))
    assert message.startswith(expected), message


# --- gpu.subgroup_reduce -------------------------------------------------------------


@pytest.mark.parametrize(
    ("cluster", "offsets"),
    [("", [1, 2, 4, 8, 16]), (" cluster(size = 4, stride = 2)", [2, 4])],
)
def test_a_subgroup_reduce_equals_the_butterfly(cluster: str, offsets: list[int]) -> None:
    body = f"        %r = gpu.subgroup_reduce add %v uniform{cluster} : (f32) -> f32\n" + TRUE
    x = np.random.default_rng(6).standard_normal(64).astype(np.float32) * np.float32(1e3)
    got, _ = _run(body, x, 1, (64, 1, 1))
    want = np.concatenate([_butterfly(w, offsets, np.add) for w in x.reshape(2, 32)])
    _same_bits(got, want)


def test_a_subgroup_reduce_of_vectors_goes_lane_by_lane() -> None:
    body = (
        """        %b = vector.broadcast %v : f32 to vector<2xf32>
        %m = gpu.subgroup_reduce maxnumf %b : (vector<2xf32>) -> vector<2xf32>
        %c0 = arith.constant 0 : index
        %r = vector.extract %m[%c0] : f32 from vector<2xf32>
"""
        + TRUE
    )
    x = np.random.default_rng(7).standard_normal(32).astype(np.float32)
    got, _ = _run(body, x, 1, (32, 1, 1))
    np.testing.assert_array_equal(got, np.full(32, x.max(), np.float32))


# --- natively ------------------------------------------------------------------------


@pytest.mark.mlir
@pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")
def test_a_block_sum_and_a_warp_sum_are_built_and_launched_natively(
    fake_driver: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Against the fake CUDA driver, which runs no kernel: the kernels with all_reduce
    and shuffles build and are launched with their grid and blocks."""
    log = tmp_path / "cuda.log"
    monkeypatch.setenv("LD_LIBRARY_PATH", str(fake_driver))
    monkeypatch.setenv("FAKE_CUDA_LOG", str(log))
    monkeypatch.delenv("DHIR_CUDA_DRIVER", raising=False)
    x = np.ones(64, np.float32)
    dhir.run(parse_string(_program(SUM, "f32", 2, (32, 1, 1))), x, x, np.zeros(64, np.int32))
    dhir.run(parse_string(WARP_SUM), np.ones(128, np.float32), np.zeros(1, np.float32))
    for body in (SHUFFLES, NARROW.replace("MODE", "up")):
        dhir.run(parse_string(_program(body, "f32", 2, (32, 1, 1))), x, x, np.zeros(64, np.int32))
    launches = [line for line in log.read_text().splitlines() if line.startswith("cuLaunch")]
    assert launches == [
        "cuLaunchKernel task0_kernel0 grid=2x1x1 block=32x1x1",
        "cuLaunchKernel task0_kernel0 grid=1x1x1 block=128x1x1",
        *["cuLaunchKernel task0_kernel0 grid=2x1x1 block=32x1x1"] * 2,
    ]


# --- what native code runs: dhir-mlir22-workarounds ------------------------------------

SUBGROUP_IDS = """        %sid = gpu.subgroup_id : index
        %ns = gpu.num_subgroups : index
        %sgs = gpu.subgroup_size : index
        %a = arith.muli %sid, %ns : index
        %b = arith.addi %a, %sgs : index
        %bi = arith.index_cast %b : index to i32
        %bf = arith.sitofp %bi : i32 to f32
"""


@pytest.mark.parametrize(
    ("body", "type_"),
    [
        ("%r0 = gpu.subgroup_reduce add %v uniform : (f32) -> f32", "f32"),
        ("%r0 = gpu.subgroup_reduce mul %v cluster(size = 4, stride = 2) : (f32) -> f32", "f32"),
        ("%r0 = gpu.subgroup_reduce maxsi %v cluster(size = 16) : (i32) -> i32", "i32"),
        (
            "%r0 = gpu.subgroup_reduce minnumf %v cluster(size = 8, stride = 4) : (f64) -> f64",
            "f64",
        ),
    ],
)
def test_the_native_rewrite_of_subgroup_ops_gives_the_interpreter_s_bits(
    body: str, type_: str
) -> None:
    """convert-gpu-to-nvvm lowers no gpu.subgroup_reduce, subgroup_id, num_subgroups nor
    subgroup_size (mlir-opt-22: "failed to legalize"); dhir-mlir22-workarounds makes them
    shuffles and arith: the program it makes runs in the interpreter as the original."""
    add = "arith.addf" if type_.startswith("f") else "arith.addi"
    cast = "%bf" if type_ == "f32" else ("%bd" if type_ == "f64" else "%bi")
    src = _program(
        f"        {body}\n{SUBGROUP_IDS}        %bd = arith.extf %bf : f32 to f64\n"
        f"        %r = {add} %r0, {cast} : {type_}\n" + TRUE,
        type_,
        2,
        (16, 4, 1),
    )
    rng = np.random.default_rng(9)
    if type_ == "i32":
        x = rng.integers(-1000, 1000, 128).astype(np.int32)
    else:
        x = (rng.standard_normal(128) * 100).astype(np.dtype(type_.replace("f", "float")))
    inputs = [x, np.zeros_like(x), np.zeros(128, np.int32)]
    original = parse_string(src, "p.mlir")
    rewritten = parse_string(src, "p.mlir")
    Mlir22WorkaroundsPass().apply(Context(), rewritten)
    left = {op.name for op in rewritten.walk() if op.name.startswith("gpu.")}
    assert not left & {"gpu.subgroup_reduce", "gpu.subgroup_id", "gpu.num_subgroups"}
    want = dhir.run(original, *inputs, backend="interp")
    got = dhir.run(rewritten, *inputs, backend="interp")
    _same_bits(got[1], want[1])


@pytest.mark.parametrize(
    "body", [SHUFFLES, NARROW.replace("MODE", "up"), NARROW.replace("MODE", "down")]
)
def test_the_native_rewrite_of_shuffles_up_gives_the_interpreter_s_bits(body: str) -> None:
    src = _program(body, "f32", 2, (32, 1, 1))
    x = np.random.default_rng(11).standard_normal(64).astype(np.float32)
    inputs = [x, np.zeros_like(x), np.zeros(64, np.int32)]
    rewritten = parse_string(src, "p.mlir")
    Mlir22WorkaroundsPass().apply(Context(), rewritten)
    modes = {str(op.mode.data) for op in rewritten.walk() if isinstance(op, gpu.ShuffleOp)}
    assert "up" not in modes
    want = dhir.run(parse_string(src, "p.mlir"), *inputs, backend="interp")
    got = dhir.run(rewritten, *inputs, backend="interp")
    for mine, theirs in zip(got[1:], want[1:], strict=True):
        _same_bits(mine, theirs)


NATIVELY_REFUSED = {
    "an all_reduce without uniform": (
        "        %r = gpu.all_reduce add %v {\n        } : (f32) -> f32\n" + TRUE,
        "f32",
        "p.mlir:17:14: error: 'gpu.all_reduce' cannot be built for an NVIDIA GPU without `uniform`",
    ),
    "a shuffle of f16": (
        "        %h = arith.truncf %v : f32 to f16\n"
        "        %w = arith.constant 32 : i32\n"
        "        %s, %ok = gpu.shuffle xor %h, %one, %w : f16\n"
        "        %r = arith.extf %s : f16 to f32\n",
        "f32",
        "p.mlir:19:19: error: 'gpu.shuffle' cannot be built for an NVIDIA GPU on values of "
        "type f16",
    ),
}


@pytest.mark.parametrize("case", NATIVELY_REFUSED)
def test_what_mlir_22_cannot_lower_is_refused_at_the_op(case: str) -> None:
    """mlir-opt-22 stopped at the printed program's line ("failed to legalize", or
    nvvm.shfl.sync refusing f16); the interpreter runs both."""
    body, type_, expected = NATIVELY_REFUSED[case]
    module = parse_string(_program(body, type_, 1, (32, 1, 1)), "p.mlir")
    with pytest.raises(PassFailedAt) as caught:
        Mlir22WorkaroundsPass().apply(Context(), module)
    message = str(error_at(caught.value.op, str(caught.value)))
    assert message.startswith(expected), message
    x = np.ones(32, np.float32)
    dhir.run(module, x, x, np.zeros(32, np.int32), backend="interp")


@pytest.mark.mlir
@pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")
def test_subgroup_ops_are_built_and_launched_natively(
    fake_driver: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "cuda.log"
    monkeypatch.setenv("LD_LIBRARY_PATH", str(fake_driver))
    monkeypatch.setenv("FAKE_CUDA_LOG", str(log))
    monkeypatch.delenv("DHIR_CUDA_DRIVER", raising=False)
    body = (
        "        %r0 = gpu.subgroup_reduce add %v uniform : (f32) -> f32\n"
        + SUBGROUP_IDS
        + "        %r = arith.addf %r0, %bf : f32\n"
        + TRUE
    )
    x = np.ones(128, np.float32)
    dhir.run(parse_string(_program(body, "f32", 2, (16, 4, 1))), x, x, np.zeros(128, np.int32))
    launches = [line for line in log.read_text().splitlines() if line.startswith("cuLaunch")]
    assert launches == ["cuLaunchKernel task0_kernel0 grid=2x1x1 block=16x4x1"]
