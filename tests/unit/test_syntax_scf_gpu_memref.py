"""MLIR 22's custom syntax for scf.parallel/reduce, the gpu ops and the memref ops
xDSL 0.74 reads only generically: parse -> print -> parse, both forms, errors."""

import shutil
import subprocess
from io import StringIO

import pytest
from roundtrip import assert_read_as_mlir_says
from xdsl.dialects import gpu as xgpu
from xdsl.dialects import memref as xmemref
from xdsl.dialects import scf as xscf
from xdsl.dialects.builtin import DYNAMIC_INDEX, MemRefType, ModuleOp, StringAttr, f32
from xdsl.ir import Block, Operation, Region
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError, VerifyException

from dhir import DhirError
from dhir.api import parse_string, print_module
from dhir.context import make_context
from dhir.dialects import gpu, memref, scf

# One context: xDSL makes a new class per unregistered attribute (#nvvm.target here)
# in each context, and attributes of different classes never compare equal.
CTX = make_context(allow_unregistered=True)


def parse(text: str, verify: bool = True) -> ModuleOp:
    module = Parser(CTX, text).parse_module()
    if verify:
        module.verify()
    return module


def show(op: Operation, generic: bool = False) -> str:
    out = StringIO()
    Printer(stream=out, print_generic_format=generic).print_op(op)
    return out.getvalue()


def in_func(args: str, body: str, name: str = "f") -> str:
    return f"func.func @{name}({args}) {{\n{body}\n  func.return\n}}"


def lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


KERNELS = """
gpu.module @kernels {
  gpu.func @k(%a: f32 {dhir.note}, %b: i32) kernel attributes {gpu.known_block_size = array<i32: 64, 1, 1>} {
    %t = gpu.thread_id x
    %u = gpu.block_id y upper_bound 16
    %v = gpu.block_dim z
    %w = gpu.grid_dim x
    %g = gpu.global_id y
    %l = gpu.lane_id
    %l2 = gpu.lane_id upper_bound 32
    %n = gpu.num_subgroups : index
    %s = gpu.subgroup_id upper_bound 4 : index
    %z = gpu.subgroup_size : index
    gpu.barrier
    gpu.return
  }
  gpu.func @h(%a: f32) -> (f32 {llvm.x}, f32) {
    gpu.return %a, %a : f32, f32
  }
  gpu.func @wg(%a: f32) workgroup(%w : memref<8xf32, #gpu.address_space<workgroup>>) private(%p : memref<1xf32, #gpu.address_space<private>>) kernel {
    gpu.return
  }
}
gpu.module @targeted [#nvvm.target<chip = "sm_90">] attributes {note} {
}
"""

HOST = in_func(
    "%m: memref<?xf32>, %n: index, %f: f32, %i: i32, %u: memref<*xf32>",
    """\
  %c1 = arith.constant 1 : index
  gpu.launch_func @kernels::@k blocks in (%c1, %c1, %c1) threads in (%n, %c1, %c1) args(%f : f32, %i : i32)
  gpu.launch_func @kernels::@k blocks in (%i, %i, %i) threads in (%i, %i, %i) : i32 dynamic_shared_memory_size %i args(%f : f32, %i : i32) {note}
  gpu.launch_func @kernels::@k clusters in (%c1, %c1, %c1) blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%f : f32, %i : i32)
  %t0 = gpu.wait async
  %t1 = gpu.launch_func async [%t0] @kernels::@k blocks in (%c1, %c1, %c1) threads in (%n, %c1, %c1) args(%f : f32, %i : i32)
  %d, %t2 = gpu.alloc async [%t1] (%n) : memref<?xf32>
  %e = gpu.alloc host_shared () : memref<4xf32>
  %t3 = gpu.memcpy async [%t2] %d, %m : memref<?xf32>, memref<?xf32>
  gpu.memcpy %d, %m : memref<?xf32>, memref<?xf32> {note}
  %t4 = gpu.dealloc async [%t3] %d : memref<?xf32>
  gpu.dealloc %e : memref<4xf32>
  gpu.wait [%t4, %t0]
  gpu.wait
  gpu.host_register %u : memref<*xf32>
  gpu.host_unregister %u : memref<*xf32>
  gpu.set_default_device %i
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %n, %sy = %c1, %sz = %c1) {
    %v = memref.load %m[%tx] : memref<?xf32>
    %r = gpu.all_reduce minnumf %v uniform {
    } : (f32) -> f32
    %r2 = gpu.all_reduce %v {
    ^bb0(%x: f32, %y: f32):
      %s = arith.addf %x, %y : f32
      gpu.yield %s : f32
    } : (f32) -> f32
    gpu.terminator
  }
  %t5 = gpu.launch async [%t0] clusters(%cx, %cy, %cz) in (%csx = %c1, %csy = %c1, %csz = %c1) blocks(%bx_1, %by_1, %bz_1) in (%gx_1 = %c1, %gy_1 = %c1, %gz_1 = %c1) threads(%tx_1, %ty_1, %tz_1) in (%sx_1 = %n, %sy_1 = %c1, %sz_1 = %c1) dynamic_shared_memory_size %i module(@mod) function(@fn) workgroup(%w : memref<4xf32, #gpu.address_space<workgroup>>) {
    gpu.terminator
  } {note = 1 : i32}""",
    "host",
)

GPU = "builtin.module attributes {gpu.container_module} {" + KERNELS + HOST + "\n}"

MEMREF = """
memref.global "private" constant @c : memref<2xf32> = dense<[1.000000e+00, 2.000000e+00]>
memref.global @g : memref<4xi32> = uninitialized
memref.global "private" @h : memref<3xf64> = dense<0.000000e+00> {alignment = 64 : i64}
memref.global @ext : memref<2xf32>
""" + in_func(
    "%a: memref<4xf32>, %b: memref<4xf32>, %i: index, %v: f32, %n: index, %m: memref<2x3x4xf32>",
    """\
  memref.copy %a, %b : memref<4xf32> to memref<4xf32>
  %tr = memref.transpose %m (d0, d1, d2) -> (d2, d0, d1) : memref<2x3x4xf32> to memref<4x2x3xf32, strided<[1, 12, 4]>>
  %c = memref.cast %a : memref<4xf32> to memref<?xf32>
  %u = memref.cast %a : memref<4xf32> to memref<*xf32>
  %s = memref.memory_space_cast %a : memref<4xf32> to memref<4xf32, 1 : i64>
  %r = memref.rank %a : memref<4xf32>
  %ru = memref.rank %u : memref<*xf32>
  %p = memref.extract_aligned_pointer_as_index %a : memref<4xf32> -> index
  %x = memref.atomic_rmw maximumf %v, %a[%i] {note} : (f32, memref<4xf32>) -> f32
  %g = memref.get_global @c : memref<2xf32>
  memref.alloca_scope {
    %t = memref.alloca() : memref<4xf32>
  }
  %y = memref.alloca_scope -> (index) {
    memref.alloca_scope.return %n : index
  }""",
    "mem",
)

SCF = in_func(
    "%lb: index, %ub: index, %st: index, %m: memref<?xf32>, %f: f32, %k: i32",
    """\
  scf.parallel (%i, %j) = (%lb, %lb) to (%ub, %ub) step (%st, %st) {
    memref.store %f, %m[%i] : memref<?xf32>
    scf.reduce
  } {note}
  %r = scf.parallel (%i_1) = (%lb) to (%ub) step (%st) init (%f) -> f32 {
    %v = memref.load %m[%i_1] : memref<?xf32>
    scf.reduce(%v : f32) {
    ^bb0(%a: f32, %b: f32):
      %s = arith.addf %a, %b : f32
      scf.reduce.return %s : f32
    }
  }
  %q, %p = scf.parallel (%i_2) = (%lb) to (%ub) step (%st) init (%f, %k) -> (f32, i32) {
    scf.reduce(%f, %k : f32, i32) {
    ^bb0(%a_1: f32, %b_1: f32):
      scf.reduce.return %a_1 : f32
    }, {
    ^bb0(%a_2: i32, %b_2: i32):
      scf.reduce.return %b_2 : i32
    }
  }""",
    "loops",
)

SAMPLES = {"gpu": GPU, "memref": MEMREF, "scf": SCF}


@pytest.mark.parametrize("name", SAMPLES)
def test_custom_syntax_prints_as_written(name: str) -> None:
    printed = show(parse(SAMPLES[name]))
    assert set(lines(SAMPLES[name])) - {"}"} <= set(lines(printed))


@pytest.mark.parametrize("name", SAMPLES)
def test_round_trip_custom_and_generic(name: str) -> None:
    module = parse(SAMPLES[name])
    text = show(module)
    again = parse(text)
    assert show(again) == text
    assert again.is_structurally_equivalent(module)
    from_generic = parse(show(module, generic=True))
    assert show(from_generic) == text
    assert from_generic.is_structurally_equivalent(module)


def test_ops_are_dhir_subclasses_of_xdsl_ops() -> None:
    module = parse("\n".join(SAMPLES.values()))
    by_name = {op.name: op for op in module.walk()}
    pairs = [
        (gpu.LaunchOp, xgpu.LaunchOp),
        (gpu.FuncOp, xgpu.FuncOp),
        (gpu.ThreadIdOp, xgpu.ThreadIdOp),
        (gpu.MemcpyOp, xgpu.MemcpyOp),
        (memref.CopyOp, xmemref.CopyOp),
        (memref.GlobalOp, xmemref.GlobalOp),
        (scf.ParallelOp, xscf.ParallelOp),
        (scf.ReduceOp, xscf.ReduceOp),
    ]
    for ours, theirs in pairs:
        op = by_name[ours.name]
        assert type(op) is ours and isinstance(op, theirs)


def test_parallel_terminator_is_implicit() -> None:
    text = in_func(
        "%n: index, %m: memref<?xf32>, %f: f32",
        "  scf.parallel (%i) = (%n) to (%n) step (%n) {\n"
        "    memref.store %f, %m[%i] : memref<?xf32>\n  }",
    )
    loop = next(op for op in parse(text).walk() if isinstance(op, scf.ParallelOp))
    assert isinstance(loop.body.block.last_op, scf.ReduceOp)
    assert "\n  scf.reduce\n}" in show(loop)


def test_alloca_scope_return_is_implicit_without_results() -> None:
    text = in_func("", "  memref.alloca_scope {\n  }")
    scope = next(op for op in parse(text).walk() if isinstance(op, memref.AllocaScopeOp))
    assert isinstance(scope.scope.block.last_op, memref.AllocaScopeReturnOp)
    assert "alloca_scope.return" not in show(scope)


def test_gpu_func_kernel_is_the_mlir_attribute() -> None:
    module = parse("gpu.module @m {\n gpu.func @k() kernel {\n gpu.return\n }\n}")
    func = next(op for op in module.walk() if isinstance(op, gpu.FuncOp))
    assert func.kernel is not None and "gpu.kernel" in func.attributes
    assert "kernel" not in func.properties
    assert "gpu.kernel" in show(module, generic=True)


def test_gpu_func_constructor_sets_the_attribute() -> None:
    func = gpu.FuncOp("k", ([f32], []), kernel=True)
    func.body.block.add_op(gpu.ReturnOp([]))
    # xDSL 0.74's constructor types the name a SymbolRefAttr; the op holds a StringAttr.
    module = gpu.ModuleOp.create(
        properties={"sym_name": StringAttr("m")}, regions=[Region(Block([func]))]
    )
    module.verify()
    assert "gpu.func @k(%0: f32) kernel {" in show(module)


def test_memcpy_and_dealloc_have_no_segment_sizes() -> None:
    module = parse(GPU)
    for op in module.walk():
        if isinstance(op, gpu.MemcpyOp | gpu.DeallocOp):
            assert "operandSegmentSizes" not in op.attributes | op.properties


MALFORMED = [
    # scf
    "scf.parallel (%i) = (%n) to (%n) {\n}",
    "scf.parallel (%i) = (%n) to (%n) step (%n) init (%f) {\n}",
    "scf.parallel (%i) = (%n) to (%n) step (%n) init (%f) -> (f32, f32) {\n}",
    "scf.parallel (%i) (%n) to (%n) step (%n) {\n}",
    "scf.parallel (%i) = (%n) to (%n) step (%n) {\n  scf.reduce(%f f32)\n}",
    "scf.parallel (%i) = (%n) to (%n) step (%n) {\n  scf.reduce(%f : f32) {\n  }, \n}",
    # gpu
    "%t = gpu.thread_id w",
    "%t = gpu.thread_id x upper_bound",
    "%t = gpu.wait async [%f]",
    "%a = gpu.alloc (%n : memref<?xf32>",
    "gpu.memcpy %m, %m : memref<?xf32>",
    "gpu.dealloc %m",
    "gpu.launch_func @k blocks in (%n, %n) threads in (%n, %n, %n)",
    "gpu.launch_func %n blocks in (%n, %n, %n) threads in (%n, %n, %n)",
    "gpu.launch_func @k blocks in (%n, %n, %n) threads in (%n, %n, %n) args(%f)",
    "gpu.launch blocks(%a, %b) in (%x = %n, %y = %n) threads(%c, %d, %e) in "
    "(%u = %n, %v = %n, %w = %n) {\n gpu.terminator\n}",
    "gpu.launch blocks(%a, %b, %c) in (%x = %n, %y = %n, %z = %n) {\n}",
    "gpu.launch blocks(%a, %b, %c) in (%x = %n, %y = %n, %z = %n) threads(%d, %e, %g)"
    " in (%u = %n, %v = %n, %w = %n) module(%n) {\n gpu.terminator\n}",
    "%r = gpu.all_reduce sum %f {\n} : (f32) -> f32",
    "%r = gpu.all_reduce add %f {\n} : (f32, f32) -> f32",
    "gpu.module @m [ {\n}",
    # memref
    "memref.copy %m, %m : memref<?xf32>",
    "%c = memref.cast %m : memref<?xf32>",
    "%x = memref.atomic_rmw plus %f, %m[%n] : (f32, memref<?xf32>) -> f32",
    "%x = memref.atomic_rmw addf %f, %m[%n] : (memref<?xf32>) -> f32",
    "memref.alloca_scope -> {\n}",
]

GLOBALS_MALFORMED = [
    "memref.global @g : i32",
    "memref.global @g : memref<2xf32> = dense<[1.0]>",
    "memref.global private @g : memref<2xf32>",
    "memref.global @g memref<2xf32>",
    "gpu.module @m {\n gpu.func @k(f32) {\n gpu.return\n }\n}",
    "gpu.module @m {\n gpu.func @k(%a: f32) -> {\n gpu.return\n }\n}",
    "gpu.module @m {\n gpu.func @k() workgroup(%w) {\n gpu.return\n }\n}",
]


@pytest.mark.parametrize("body", MALFORMED, ids=[f"op{i}" for i in range(len(MALFORMED))])
def test_malformed_ops_raise_parse_error(body: str) -> None:
    text = in_func("%n: index, %f: f32, %m: memref<?xf32>", "  " + body)
    with pytest.raises(ParseError):
        parse(text, verify=False)


@pytest.mark.parametrize(
    "text", GLOBALS_MALFORMED, ids=[f"top{i}" for i in range(len(GLOBALS_MALFORMED))]
)
def test_malformed_top_level_ops_raise_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse(text, verify=False)


@pytest.mark.parametrize("cut", range(5, 100, 7))
def test_truncated_input_raises_parse_error(cut: int) -> None:
    for sample in SAMPLES.values():
        body = sample[sample.index("func.func") :]
        with pytest.raises(ParseError):
            parse(body[: len(body) * cut // 100], verify=False)


INVALID = [
    # a kernel returns nothing
    "gpu.module @m {\n gpu.func @k() -> f32 kernel {\n %c = arith.constant 1.0 : f32\n"
    " gpu.return %c : f32\n }\n}",
    # memcpy between different types
    in_func(
        "%a: memref<4xf32>, %b: memref<?xf32>",
        "  gpu.memcpy %a, %b : memref<4xf32>, memref<?xf32>",
    ),
    # unknown atomic_rmw kind
    in_func(
        "%v: f32, %a: memref<4xf32>, %i: index",
        '  %x = "memref.atomic_rmw"(%v, %a, %i) <{kind = 99 : i64}> : '
        "(f32, memref<4xf32>, index) -> f32",
    ),
    # alignment is not a power of two
    "memref.global @g : memref<2xf32> = uninitialized {alignment = 3 : i64}",
    # a load with too few indices (xDSL itself raises a bare Exception)
    in_func("%m: memref<4x4xf32>, %i: index", "  %x = memref.load %m[%i] : memref<4x4xf32>"),
    # a transpose whose map is not a permutation
    in_func(
        "%m: memref<4x8xf32>",
        "  %t = memref.transpose %m (d0, d1) -> (d0, d0) : memref<4x8xf32> to memref<4x4xf32>",
    ),
    # a transpose whose result type keeps the source's strides
    in_func(
        "%m: memref<4x8xf32>",
        "  %t = memref.transpose %m (d0, d1) -> (d1, d0) : memref<4x8xf32> to memref<8x4xf32>",
    ),
    # a launch body without its 12 index arguments
    in_func(
        "%n: index",
        '  "gpu.launch"(%n, %n, %n, %n, %n, %n) <{operandSegmentSizes = '
        "array<i32: 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0>}> ({\n"
        '  ^bb0(%a: index):\n    "gpu.terminator"() : () -> ()\n'
        "  }) : (index, index, index, index, index, index) -> ()",
    ),
]


@pytest.mark.parametrize("text", INVALID, ids=[f"bad{i}" for i in range(len(INVALID))])
def test_invalid_ir_fails_verification_and_still_prints(text: str) -> None:
    module = parse(text, verify=False)
    with pytest.raises(VerifyException):
        module.verify()
    show(module)  # diagnostics print invalid IR: must not crash


def _mlir_opt(text: str, generic: bool) -> str:
    mlir_opt = shutil.which("mlir-opt-22")
    assert mlir_opt is not None
    args = [mlir_opt, "--allow-unregistered-dialect"]
    if generic:
        args.append("--mlir-print-op-generic")
    done = subprocess.run(args, input=text, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.mlir
@pytest.mark.parametrize("name", SAMPLES)
@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
def test_mlir_opt_reads_ours_and_we_read_its(name: str, generic: bool) -> None:
    module = parse(SAMPLES[name])
    back = parse(_mlir_opt(show(module), generic))
    assert back.is_structurally_equivalent(module)


def test_memref_constructors_build_dhir_classes() -> None:
    block = Block(arg_types=[MemRefType(f32, [4])])
    source = block.args[0]
    ops = [
        memref.CastOp(source, MemRefType(f32, [DYNAMIC_INDEX])),
        memref.RankOp(source),
        memref.ExtractAlignedPointerAsIndexOp(source),
    ]
    for op in ops:
        op.verify()
    assert [show(op).split(" = ")[1].split(" %")[0] for op in ops] == [
        "memref.cast",
        "memref.rank",
        "memref.extract_aligned_pointer_as_index",
    ]


# memref.expand_shape / collapse_shape: (source type, result type, op, valid as MLIR 22 says).
_MAP = "affine_map<(d0, d1) -> (d0 * 4 + d1)>"
_OFFSET_MAP = "affine_map<(d0, d1) -> (d0 * 8 + d1 + 3)>"
_SYMBOL_MAP = "affine_map<(d0, d1)[s0] -> (d0 * 4 + d1 + s0)>"
_TRANSPOSED_MAP = "affine_map<(d0, d1) -> (d0 + d1 * 4)>"
_MOD_MAP = "affine_map<(d0, d1) -> (d0 mod 4 + d1)>"
_IDENTITY_MAP = "affine_map<(d0, d1) -> (d0, d1)>"

RESHAPES = [
    ("memref<?xf64>", "memref<?x?xf64>", "expand [[0, 1]] [%m, %n]", True),
    ("memref<12xf64>", "memref<?x?xf64>", "expand [[0, 1]] [%m, %n]", False),
    ("memref<12xf64>", "memref<3x5xf64>", "expand [[0, 1]] [3, 5]", False),
    ("memref<?xf64>", "memref<3x4xf64>", "expand [[0, 1]] [3, 4]", False),
    ("memref<12xf64>", "memref<3x4xf64>", "expand [[0, 1]] [3, 5]", False),
    ("memref<12xf64>", "memref<3x4xf64>", "expand [[0], [1]] [3, 4]", False),
    ("memref<12xf64>", "memref<3x4xf64, strided<[8, 1]>>", "expand [[0, 1]] [3, 4]", False),
    ("memref<3x4xf64, strided<[8, 1], offset: 2>>",
     "memref<3x2x2xf64, strided<[8, 2, 1], offset: 2>>", "expand [[0], [1, 2]] [3, 2, 2]", True),
    ("memref<3x4xf64, strided<[8, 1], offset: 2>>",
     "memref<3x2x2xf64, strided<[8, 2, 1]>>", "expand [[0], [1, 2]] [3, 2, 2]", False),
    ("memref<f64>", "memref<1x1xf64>", "expand [] [1, 1]", True),
    ("memref<?x?xf64>", "memref<?xf64>", "collapse [[0, 1]]", True),
    ("memref<?x?xf64>", "memref<12xf64>", "collapse [[0, 1]]", False),
    ("memref<3x4xf64>", "memref<?xf64>", "collapse [[0, 1]]", False),
    ("memref<3x4xf64>", "memref<13xf64>", "collapse [[0, 1]]", False),
    ("memref<3x4xf64, strided<[8, 1]>>", "memref<12xf64>", "collapse [[0, 1]]", False),
    ("memref<3x2x2xf64, strided<[8, 2, 1], offset: 2>>",
     "memref<3x4xf64, strided<[8, 1], offset: 2>>", "collapse [[0], [1, 2]]", True),
    ("memref<3x1x4xf64, strided<[4, 7, 1]>>", "memref<12xf64, strided<[1]>>",
     "collapse [[0, 1, 2]]", True),
    ("memref<?x4xf64, strided<[4, 1], offset: ?>>", "memref<?xf64, strided<[1], offset: ?>>",
     "collapse [[0, 1]]", True),
    ("memref<?x?xf64, strided<[?, 1], offset: ?>>", "memref<?xf64, strided<[1], offset: ?>>",
     "collapse [[0, 1]]", False),
    ("memref<1x1xf64>", "memref<f64>", "collapse []", True),
    ("memref<1x2xf64>", "memref<f64>", "collapse []", False),
    # The result's layout is written as MLIR builds it: none from an identity map.
    ("memref<4x4xf64, strided<[4, 1]>>", "memref<16xf64>", "collapse [[0, 1]]", False),
    ("memref<4x4xf64, strided<[4, 1]>>", "memref<16xf64, strided<[1]>>", "collapse [[0, 1]]",
     True),
    ("memref<4x4xf64>", "memref<16xf64, strided<[1]>>", "collapse [[0, 1]]", False),
    ("memref<16xf64, strided<[1]>>", "memref<4x4xf64>", "expand [[0, 1]] [4, 4]", True),
    ("memref<16xf64>", "memref<4x4xf64, strided<[4, 1]>>", "expand [[0, 1]] [4, 4]", False),
    # A layout map MLIR reads strides and an offset from; the result is written strided
    # (none for the identity map, which MLIR drops).
    (f"memref<4x4xf64, {_MAP}>", "memref<16xf64, strided<[1]>>", "collapse [[0, 1]]", True),
    (f"memref<4x4xf64, {_MAP}>", "memref<16xf64>", "collapse [[0, 1]]", False),
    (f"memref<4x4xf64, {_OFFSET_MAP}>", "memref<4x4xf64, strided<[8, 1], offset: 3>>",
     "collapse [[0], [1]]", True),
    (f"memref<4x4xf64, {_OFFSET_MAP}>", "memref<16xf64, strided<[1], offset: 3>>",
     "collapse [[0, 1]]", False),
    (f"memref<4x4xf64, {_OFFSET_MAP}>", f"memref<4x4xf64, {_OFFSET_MAP}>",
     "collapse [[0], [1]]", False),
    (f"memref<4x4xf64, {_SYMBOL_MAP}>", "memref<16xf64, strided<[1], offset: ?>>",
     "collapse [[0, 1]]", True),
    (f"memref<4x4xf64, {_MOD_MAP}>", "memref<16xf64>", "collapse [[0, 1]]", False),
    (f"memref<4x4xf64, {_IDENTITY_MAP}>", "memref<16xf64>", "collapse [[0, 1]]", True),
    (f"memref<4x4xf64, {_IDENTITY_MAP}>", "memref<16xf64, strided<[1]>>", "collapse [[0, 1]]",
     False),
    (f"memref<4x4xf64, {_MAP}>", "memref<4x2x2xf64, strided<[4, 2, 1]>>",
     "expand [[0], [1, 2]] [4, 2, 2]", True),
    (f"memref<4x4xf64, {_MAP}>", "memref<4x2x2xf64>", "expand [[0], [1, 2]] [4, 2, 2]", False),
    (f"memref<4x4xf64, {_OFFSET_MAP}>", "memref<4x2x2xf64, strided<[8, 2, 1], offset: 3>>",
     "expand [[0], [1, 2]] [4, 2, 2]", True),
    (f"memref<4x4xf64, {_OFFSET_MAP}>", "memref<4x2x2xf64, strided<[4, 2, 1], offset: 3>>",
     "expand [[0], [1, 2]] [4, 2, 2]", False),
    (f"memref<4x4xf64, {_TRANSPOSED_MAP}>", "memref<4x2x2xf64, strided<[1, 8, 4]>>",
     "expand [[0], [1, 2]] [4, 2, 2]", True),
    (f"memref<4x4xf64, {_MOD_MAP}>", "memref<4x2x2xf64, strided<[4, 2, 1]>>",
     "expand [[0], [1, 2]] [4, 2, 2]", False),
    (f"memref<4x4xf64, {_IDENTITY_MAP}>", "memref<4x2x2xf64>", "expand [[0], [1, 2]] [4, 2, 2]",
     True),
    # A rank-0 source: MLIR gives the dimensions of size 1 stride 1.
    ("memref<f64, strided<[], offset: ?>>", "memref<1x1xf64, strided<[1, 1], offset: ?>>",
     "expand [] [1, 1]", True),
    ("memref<f64, strided<[], offset: 3>>", "memref<1xf64, strided<[?], offset: 3>>",
     "expand [] [1]", False),
]  # fmt: skip


def _reshape(source: str, result: str, op: str) -> str:
    kind, rest = op.split(" ", 1)
    if kind == "expand":
        groups, shape = rest.rsplit(" [", 1)
        text = f"memref.expand_shape %a {groups} output_shape [{shape} : {source} into {result}"
    else:
        text = f"memref.collapse_shape %a {rest} : {source} into {result}"
    return (
        f"func.func @f(%a: {source}, %m: index, %n: index) -> {result} {{\n"
        f"  %b = {text}\n  func.return %b : {result}\n}}"
    )


@pytest.mark.parametrize("source, result, op, valid", RESHAPES)
def test_reshapes_are_verified_as_mlir_does(source: str, result: str, op: str, valid: bool) -> None:
    """xDSL 0.74 checked none of these; the interpreter ran the invalid ones."""
    _verifies_as_said(_reshape(source, result, op), valid)


def _verifies_as_said(text: str, valid: bool) -> None:
    module = parse(text, verify=False)
    if valid:
        module.verify()
    else:
        with pytest.raises(VerifyException):
            module.verify()


def _mlir_opt_says(text: str, valid: bool) -> None:
    mlir_opt = shutil.which("mlir-opt-22")
    assert mlir_opt is not None
    done = subprocess.run([mlir_opt], input=text, capture_output=True, text=True, check=False)
    assert (done.returncode == 0) == valid, done.stderr


@pytest.mark.mlir
@pytest.mark.parametrize("source, result, op, valid", RESHAPES)
def test_mlir_opt_agrees_on_the_reshapes(source: str, result: str, op: str, valid: bool) -> None:
    _mlir_opt_says(_reshape(source, result, op), valid)


# memref.subview of memref<8x8xf32>: (offsets, sizes, strides, result type, valid as MLIR 22 says).
SUBVIEWS = [
    ("0, 0", "8, 8", "1, 1", "memref<8x8xf32>", True),
    ("0, 0", "1, 8", "1, 1", "memref<8xf32>", True),
    ("%i, 0", "1, 8", "1, 1", "memref<8xf32, strided<[1], offset: ?>>", True),
    ("0, %i", "8, 1", "1, 1", "memref<8xf32, strided<[8], offset: ?>>", True),
    ("0, 0", "1, 1", "1, 1", "memref<1xf32, strided<[8]>>", True),
    ("0, 0", "1, 1", "1, 1", "memref<f32>", True),
    ("0, 0", "1, 1", "1, 1", "memref<1x1xf32>", False),
    ("1, 2", "2, 3", "1, 2", "memref<2x3xf32, strided<[8, 2], offset: 10>>", True),
    ("1, 2", "2, 3", "1, 1", "memref<2x3xf32, strided<[8, 1], offset: 11>>", False),
    ("1, 2", "2, 3", "1, 1", "memref<2x3xf32, strided<[?, ?], offset: ?>>", False),
    ("1, 2", "2, 3", "1, 1", "memref<3x2xf32, strided<[8, 1], offset: 10>>", False),
    ("%i, %i", "2, 2", "%i, 1", "memref<2x2xf32, strided<[?, 1], offset: ?>>", True),
    ("6, 0", "3, 8", "1, 1", "memref<3x8xf32, strided<[8, 1], offset: 48>>", False),
    ("7, 0", "0, 8", "1, 1", "memref<0x8xf32, strided<[8, 1], offset: 56>>", True),
    ("8, 0", "0, 8", "1, 1", "memref<0x8xf32, strided<[8, 1], offset: 64>>", False),
    ("0, 2", "4, 4", "2, 2", "memref<4x4xf32, strided<[16, 2], offset: 2>>", False),
    # A stride of 0, and a result in another memory space.
    ("0, 0", "2, 2", "1, 0", "memref<2x2xf32, strided<[8, 0]>>", True),
    ("0, 0", "2, 2", "1, 1", "memref<2x2xf32, strided<[8, 1]>, 1>", False),
]  # fmt: skip

# Subviews MLIR 22 checks beyond "dimensions of size 1 dropped": (source, offsets, sizes,
# strides, result, valid). Where more dimensions have size 1 than are dropped, it drops,
# from the outermost, those whose stride occurs more often in the view than in the result
# (the order of the kept ones then matters); a product with a static 0 is 0, also with a
# stride known only at run time (an identity layout's offset is 0 whatever its sizes).
REDUCING_SUBVIEWS = [
    ("memref<4x4x4xf32>", "0, 0, 0", "1, 4, 1", "1, 1, 16", "memref<4x1xf32, strided<[4, 16]>>",
     True),
    ("memref<4x4x4xf32>", "0, 0, 0", "1, 4, 1", "1, 1, 16", "memref<1x4xf32, strided<[16, 4]>>",
     False),
    ("memref<4x4x4xf32>", "0, 0, 0", "1, 1, 1", "1, 1, 16",
     "memref<1x1xf32, strided<[4, 16]>>", True),
    ("memref<4x4x4xf32>", "0, 0, 0", "1, 1, 1", "1, 1, 16",
     "memref<1x1xf32, strided<[16, 4]>>", False),
    ("memref<?x?xf32>", "0, 0", "1, 1", "1, 1", "memref<1xf32, strided<[1]>>", True),
    ("memref<?x?xf32>", "0, 0", "1, 1", "1, 1", "memref<1xf32, strided<[1], offset: ?>>", False),
    ("memref<?x?xf32>", "0, 0", "2, 2", "0, 1", "memref<2x2xf32, strided<[0, 1]>>", True),
    ("memref<?x?xf32>", "0, 0", "2, 2", "1, 0", "memref<2x2xf32, strided<[?, 0]>>", True),
]  # fmt: skip


@pytest.mark.parametrize("source, offsets, sizes, strides, result, valid", REDUCING_SUBVIEWS)
def test_rank_reducing_subviews_are_verified_as_mlir_does(
    source: str, offsets: str, sizes: str, strides: str, result: str, valid: bool
) -> None:
    """dhir took any choice of dimensions of size 1 to drop, and a static 0 times a
    run-time stride for unknown: it accepted what mlir-opt-22 then refused, and refused
    what it accepts."""
    _verifies_as_said(_subview(offsets, sizes, strides, result, source), valid)


@pytest.mark.mlir
@pytest.mark.parametrize("source, offsets, sizes, strides, result, valid", REDUCING_SUBVIEWS)
def test_mlir_opt_agrees_on_the_rank_reducing_subviews(
    source: str, offsets: str, sizes: str, strides: str, result: str, valid: bool
) -> None:
    _mlir_opt_says(_subview(offsets, sizes, strides, result, source), valid)


def _subview(
    offsets: str, sizes: str, strides: str, result: str, source: str = "memref<8x8xf32>"
) -> str:
    return (
        f"func.func @f(%a: {source}, %i: index) {{\n"
        f"  %s = memref.subview %a[{offsets}] [{sizes}] [{strides}] : {source} to {result}\n"
        "  func.return\n}"
    )


# Subviews of a source with a layout map: (map, offsets, sizes, strides, result, valid as
# MLIR 22 says). MLIR reads the source's strides and offset from the map and wants the
# result type to be the view's, as of a strided source; a map it reads none from it
# refuses.
MAP_SUBVIEWS = [
    (_MAP, "1, 1", "2, 2", "1, 1", "memref<2x2xf32, strided<[4, 1], offset: 5>>", True),
    (_MAP, "1, 1", "2, 2", "1, 1", "memref<2x2xf32, strided<[4, 1], offset: 4>>", False),
    (_MAP, "1, 1", "2, 2", "1, 1", "memref<2x2xf32, strided<[8, 1], offset: 5>>", False),
    (_MAP, "0, 0", "2, 4", "1, 1", "memref<2x4xf32>", True),
    (_MAP, "1, 1", "2, 2", "1, 1",
     "memref<2x2xf32, affine_map<(d0, d1) -> (d0 * 4 + d1 + 5)>>", True),
    (_MAP, "1, 1", "2, 2", "1, 1",
     "memref<2x2xf32, affine_map<(d0, d1) -> (d0 * 4 + d1 + 4)>>", False),
    (_MAP, "%i, 1", "2, 2", "1, 1", "memref<2x2xf32, strided<[4, 1], offset: ?>>", True),
    (_MAP, "%i, 1", "2, 2", "1, 1", "memref<2x2xf32, strided<[4, 1], offset: 5>>", False),
    (_MAP, "1, 0", "1, 4", "1, 1", "memref<4xf32, strided<[1], offset: 4>>", True),
    (_MAP, "3, 3", "2, 2", "1, 1", "memref<2x2xf32, strided<[4, 1], offset: 15>>", False),
    (_SYMBOL_MAP, "1, 1", "2, 2", "1, 1", "memref<2x2xf32, strided<[4, 1], offset: ?>>", True),
    (_SYMBOL_MAP, "1, 1", "2, 2", "1, 1", "memref<2x2xf32, strided<[4, 1], offset: 5>>",
     False),
    (_OFFSET_MAP, "1, 1", "2, 2", "1, 1", "memref<2x2xf32, strided<[8, 1], offset: 12>>", True),
    (_OFFSET_MAP, "1, 1", "2, 2", "1, 1", "memref<2x2xf32, strided<[8, 1], offset: 9>>", False),
    (_TRANSPOSED_MAP, "1, 0", "2, 2", "1, 1", "memref<2x2xf32, strided<[1, 4], offset: 1>>",
     True),
    (_TRANSPOSED_MAP, "1, 0", "2, 2", "1, 1", "memref<2x2xf32, strided<[4, 1], offset: 1>>",
     False),
    (_MOD_MAP, "1, 1", "2, 2", "1, 1", "memref<2x2xf32, strided<[4, 1], offset: 5>>", False),
    (_IDENTITY_MAP, "1, 1", "2, 2", "1, 1", "memref<2x2xf32, strided<[4, 1], offset: 5>>",
     True),
    (_IDENTITY_MAP, "1, 1", "2, 2", "1, 1", "memref<2x2xf32, strided<[4, 1], offset: 4>>",
     False),
]  # fmt: skip


@pytest.mark.parametrize("layout, offsets, sizes, strides, result, valid", MAP_SUBVIEWS)
def test_subviews_of_layout_maps_are_verified_as_mlir_does(
    layout: str, offsets: str, sizes: str, strides: str, result: str, valid: bool
) -> None:
    """dhir checked only the rank of a subview of a layout map: a wrong result offset
    ran in the interpreter at the view's true offset, natively at the type's."""
    text = _subview(offsets, sizes, strides, result, f"memref<4x4xf32, {layout}>")
    _verifies_as_said(text, valid)


@pytest.mark.mlir
@pytest.mark.parametrize("layout, offsets, sizes, strides, result, valid", MAP_SUBVIEWS)
def test_mlir_opt_agrees_on_the_subviews_of_layout_maps(
    layout: str, offsets: str, sizes: str, strides: str, result: str, valid: bool
) -> None:
    _mlir_opt_says(_subview(offsets, sizes, strides, result, f"memref<4x4xf32, {layout}>"), valid)


@pytest.mark.parametrize("offsets, sizes, strides, result, valid", SUBVIEWS)
def test_subviews_are_verified_as_mlir_does(
    offsets: str, sizes: str, strides: str, result: str, valid: bool
) -> None:
    """xDSL 0.74 checked neither the bounds nor the result type."""
    _verifies_as_said(_subview(offsets, sizes, strides, result), valid)


@pytest.mark.mlir
@pytest.mark.parametrize("offsets, sizes, strides, result, valid", SUBVIEWS)
def test_mlir_opt_agrees_on_the_subviews(
    offsets: str, sizes: str, strides: str, result: str, valid: bool
) -> None:
    _mlir_opt_says(_subview(offsets, sizes, strides, result), valid)


# memref.reinterpret_cast of memref<16xf32>: (offset, sizes, strides, result type, valid
# as MLIR 22 says).
REINTERPRET_CASTS = [
    ("0", "4, 4", "4, 1", "memref<4x4xf32>", True),
    ("%i", "4, 4", "4, 1", "memref<4x4xf32>", False),
    ("%i", "4, 4", "4, 1", "memref<4x4xf32, strided<[4, 1], offset: ?>>", True),
    ("2", "4, 4", "4, 1", "memref<4x4xf32>", False),
    ("0", "4, 4", "%i, 1", "memref<4x4xf32>", False),
    ("0", "4, 4", "%i, 1", "memref<4x4xf32, strided<[?, 1]>>", True),
    ("0", "4, 4", "8, 1", "memref<4x4xf32>", False),
    ("0", "4, 4", "8, 1", "memref<4x4xf32, strided<[?, ?], offset: ?>>", True),
    ("0", "%i, 4", "4, 1", "memref<?x4xf32>", True),
    ("0", "4, 4", "4, 1", "memref<?x4xf32>", True),
    ("0", "%i, 4", "4, 1", "memref<4x4xf32>", False),
    ("0", "%i, %i", "%i, 1", "memref<?x?xf32>", True),
    ("0", "%i, %i", "4, 1", "memref<?x?xf32>", True),
    ("0", "-1, 4", "4, 1", "memref<?x4xf32>", False),
    ("-2", "4, 4", "4, 1", "memref<4x4xf32, strided<[4, 1], offset: -2>>", False),
    ("0", "4, 4", "-4, 1", "memref<4x4xf32, strided<[-4, 1]>>", True),
    ("0", "4, 4", "4, 1", "memref<4x4xf32, affine_map<(d0, d1) -> (d0 * 4 + d1)>>", True),
    ("1", "4, 4", "4, 1", "memref<4x4xf32, affine_map<(d0, d1) -> (d0 * 4 + d1)>>", False),
    ("%i", "4, 4", "4, 1", "memref<4x4xf32, affine_map<(d0, d1)[s0] -> (d0 * 4 + d1 + s0)>>",
     True),
    ("0", "4, 4", "4, 1", "memref<4x4xf32, affine_map<(d0, d1) -> (d1, d0)>>", False),
    ("0", "4, 4", "4, 1", "memref<4x4xf32, affine_map<(d0, d1) -> (d0 mod 4 + d1)>>", False),
    ("0", "4, 4", "4, 1", "memref<4x4xi32>", False),
    ("0", "4, 4", "4, 1", "memref<4x4xf32, 1>", False),
    ("%i", "", "", "memref<f32, strided<[], offset: ?>>", True),
    ("%i", "", "", "memref<f32>", False),
    ("0, 0", "4", "1", "memref<4xf32>", False),
    ("0", "4, 4", "1, 1", "memref<4xf32>", False),
    ("0", "0, 4", "4, 1", "memref<0x4xf32>", True),
]  # fmt: skip


def _reinterpret_cast(
    offset: str, sizes: str, strides: str, result: str, source: str = "memref<16xf32>"
) -> str:
    return (
        f"func.func @f(%a: {source}, %i: index) {{\n"
        f"  %r = memref.reinterpret_cast %a to offset: [{offset}], sizes: [{sizes}], "
        f"strides: [{strides}] : {source} to {result}\n"
        "  func.return\n}"
    )


# memref.reinterpret_cast of an unranked memref<*xf32>, which MLIR 22 takes (xDSL 0.74's
# operand type refused it at parse).
UNRANKED_REINTERPRET_CASTS = [
    ("0", "4, 4", "4, 1", "memref<4x4xf32>", True),
    ("%i", "%i", "1", "memref<?xf32, strided<[1], offset: ?>>", True),
    ("1", "4", "1", "memref<4xf32>", False),
    ("0", "4", "1", "memref<4xi32>", False),
    ("0", "4", "1", "memref<4xf32, 1>", False),
]


@pytest.mark.parametrize("offset, sizes, strides, result, valid", UNRANKED_REINTERPRET_CASTS)
def test_reinterpret_casts_of_unranked_memrefs_are_verified_as_mlir_does(
    offset: str, sizes: str, strides: str, result: str, valid: bool
) -> None:
    text = _reinterpret_cast(offset, sizes, strides, result, "memref<*xf32>")
    _verifies_as_said(text, valid)
    assert "memref<*xf32> to" in str(parse(text, verify=False))


@pytest.mark.mlir
@pytest.mark.parametrize("offset, sizes, strides, result, valid", UNRANKED_REINTERPRET_CASTS)
def test_mlir_opt_agrees_on_the_reinterpret_casts_of_unranked_memrefs(
    offset: str, sizes: str, strides: str, result: str, valid: bool
) -> None:
    _mlir_opt_says(_reinterpret_cast(offset, sizes, strides, result, "memref<*xf32>"), valid)


@pytest.mark.parametrize("offset, sizes, strides, result, valid", REINTERPRET_CASTS)
def test_reinterpret_casts_are_verified_as_mlir_does(
    offset: str, sizes: str, strides: str, result: str, valid: bool
) -> None:
    """xDSL 0.74 checked only the sizes (refusing a dynamic result size MLIR accepts); a
    run-time offset into an identity layout failed in mlir-opt, at the build file."""
    _verifies_as_said(_reinterpret_cast(offset, sizes, strides, result), valid)


@pytest.mark.mlir
@pytest.mark.parametrize("offset, sizes, strides, result, valid", REINTERPRET_CASTS)
def test_mlir_opt_agrees_on_the_reinterpret_casts(
    offset: str, sizes: str, strides: str, result: str, valid: bool
) -> None:
    _mlir_opt_says(_reinterpret_cast(offset, sizes, strides, result), valid)


def test_a_run_time_offset_into_an_identity_layout_is_refused_at_its_line() -> None:
    text = _reinterpret_cast("%i", "4, 4", "4, 1", "memref<4x4xf32>")
    with pytest.raises(DhirError) as error:
        parse_string(text)
    message = str(error.value)
    assert ":2:8: error: the result type has offset 0" in message
    assert "memref<4x4xf32, strided<[4, 1], offset: ?>>" in message


# memref.cast: (source type, result type, valid as MLIR 22 says).
CASTS = [
    ("memref<4xf32, strided<[1], offset: ?>>", "memref<4xf32>", True),
    ("memref<4xf32>", "memref<4xf32, strided<[1], offset: ?>>", True),
    ("memref<4xf32, strided<[1], offset: 2>>", "memref<4xf32>", False),
    ("memref<4xf32, strided<[2]>>", "memref<4xf32>", False),
    ("memref<4xf32, strided<[?]>>", "memref<4xf32>", True),
    ("memref<4xf32>", "memref<5xf32>", False),
    ("memref<4xf32>", "memref<?xf32>", True),
    ("memref<4xf32>", "memref<4xi32>", False),
    ("memref<4xf32>", "memref<4x1xf32>", False),
    ("memref<4xf32>", "memref<*xf32>", True),
    ("memref<*xf32>", "memref<4xf32>", True),
    ("memref<*xf32>", "memref<*xf32>", False),
    ("memref<*xf32>", "memref<4xi32>", False),
    ("memref<4xf32>", "memref<4xf32, 1>", False),
    ("memref<?x4xf32, strided<[?, 1], offset: ?>>", "memref<3x4xf32, strided<[4, 1], offset: 8>>",
     True),
    ("memref<?x4xf32, strided<[?, 2], offset: ?>>", "memref<3x4xf32>", False),
    ("memref<4x4xf32, affine_map<(d0, d1) -> (d0 * 4 + d1)>>", "memref<4x4xf32>", True),
    ("memref<4x4xf32, affine_map<(d0, d1) -> (d0 * 8 + d1)>>", "memref<4x4xf32>", False),
    # Outside a dimension of size 0 an identity layout's strides are unknown, as outside
    # a run-time size: [?, 1] here.
    ("memref<3x0xf64>", "memref<3x0xf64, strided<[7, 1]>>", True),
    ("memref<3x0xf64>", "memref<3x0xf64, strided<[7, 2]>>", False),
    ("memref<0x3xf64>", "memref<0x3xf64, strided<[7, 1]>>", False),
]  # fmt: skip


# memref.transpose (d0, d1) -> (d1, d0): (source type, result type, valid as MLIR 22 says).
TRANSPOSES = [
    ("memref<3x4xf64>", "memref<4x3xf64, strided<[1, 4]>>", True),
    ("memref<3x4xf64>", "memref<4x3xf64>", False),
    ("memref<3x0xf64>", "memref<0x3xf64, strided<[1, ?]>>", True),
    ("memref<3x0xf64>", "memref<0x3xf64, strided<[1, 0]>>", False),
    ("memref<0x3xf64>", "memref<3x0xf64, strided<[1, 3]>>", True),
    ("memref<0x3xf64>", "memref<3x0xf64, strided<[1, ?]>>", False),
    ("memref<?x4xf64>", "memref<4x?xf64, strided<[1, 4]>>", True),
    ("memref<3x?xf64>", "memref<?x3xf64, strided<[1, ?]>>", True),
    ("memref<3x0xf64, strided<[5, 1]>>", "memref<0x3xf64, strided<[1, 5]>>", True),
]  # fmt: skip


def _transpose(source: str, result: str) -> str:
    return (
        f"func.func @f(%a: {source}) {{\n"
        f"  %r = memref.transpose %a (d0, d1) -> (d1, d0) : {source} to {result}\n"
        "  func.return\n}"
    )


@pytest.mark.parametrize("source, result, valid", TRANSPOSES)
def test_transposes_are_verified_as_mlir_does(source: str, result: str, valid: bool) -> None:
    """dhir took `memref<3x0xf64>`'s strides for [0, 1], MLIR 22 for [?, 1]: dhir accepted
    a transpose mlir-opt-22 then refused, and refused the one it accepts."""
    _verifies_as_said(_transpose(source, result), valid)


@pytest.mark.mlir
@pytest.mark.parametrize("source, result, valid", TRANSPOSES)
def test_mlir_opt_agrees_on_the_transposes(source: str, result: str, valid: bool) -> None:
    _mlir_opt_says(_transpose(source, result), valid)


def _cast(source: str, result: str) -> str:
    return (
        f"func.func @f(%a: {source}) {{\n"
        f"  %r = memref.cast %a : {source} to {result}\n"
        "  func.return\n}"
    )


@pytest.mark.parametrize("source, result, valid", CASTS)
def test_casts_are_verified_as_mlir_does(source: str, result: str, valid: bool) -> None:
    """xDSL 0.74 checked neither type: mlir-opt-22 refused the invalid casts later."""
    _verifies_as_said(_cast(source, result), valid)


@pytest.mark.mlir
@pytest.mark.parametrize("source, result, valid", CASTS)
def test_mlir_opt_agrees_on_the_casts(source: str, result: str, valid: bool) -> None:
    _mlir_opt_says(_cast(source, result), valid)


def test_an_empty_block_in_a_body_of_several_is_an_error() -> None:
    # Only single-block regions were checked; the interpreter ran this, mlir-opt refused it.
    text = in_func("%c: i1", "  cf.cond_br %c, ^a, ^b\n^a:\n  func.return\n^b:")
    with pytest.raises(DhirError, match="<string>:1:.*has an empty block"):
        parse_string(text.removesuffix("\n  func.return\n}") + "\n}")


def test_an_index_switch_as_mlir_prints_it_reads_back() -> None:
    """MLIR leaves out the scf.yield of regions that yield nothing."""
    text = in_func(
        "%k: index, %m: memref<1xi32>",
        "  scf.index_switch %k\n  case 2 {\n    %c0 = arith.constant 0 : index\n"
        "    %x = arith.constant 5 : i32\n    memref.store %x, %m[%c0] : memref<1xi32>\n"
        "  }\n  default {\n  }",
    )
    module = parse_string(text)
    (switch,) = [op for op in module.walk() if isinstance(op, scf.IndexSwitchOp)]
    assert [len(list(r.block.ops)) for r in switch.regions] == [1, 4]  # default first


# memref.alloc and memref.alloca: (operands, type, valid as MLIR 22 says). MLIR wants one
# symbol operand per run-time stride or offset of the layout (per symbol of a layout map).
ALLOCATIONS = [
    ("alloc(%n)[%n]", "memref<4x?xf32, strided<[?, 1]>>", True),
    ("alloc(%n)", "memref<4x?xf32, strided<[?, 1]>>", False),
    ("alloc()[%n, %n]", "memref<4xf32, strided<[?], offset: ?>>", True),
    ("alloc()[%n]", "memref<4xf32, strided<[?], offset: ?>>", False),
    ("alloca()[%n]", "memref<4xf32, affine_map<(d0)[s0] -> (d0 + s0)>>", True),
    ("alloca()", "memref<4xf32, affine_map<(d0)[s0] -> (d0 + s0)>>", False),
    ("alloc()", "memref<4xf32, strided<[2], offset: 3>>", True),
    ("alloc()[%n]", "memref<4xf32>", False),
]  # fmt: skip


def _allocation(operands: str, kind: str) -> str:
    return in_func("%n: index", f"  %m = memref.{operands} : {kind}")


@pytest.mark.parametrize("operands, kind, valid", ALLOCATIONS)
def test_allocations_take_a_symbol_per_run_time_layout_value(
    operands: str, kind: str, valid: bool
) -> None:
    """xDSL 0.74 checked no symbol count: dhir took what mlir-opt-22 then refused."""
    text = _allocation(operands, kind)
    assert_read_as_mlir_says(text, valid, r"<string>:2:\d+: .*symbol operand")


@pytest.mark.mlir
@pytest.mark.parametrize("operands, kind, valid", ALLOCATIONS)
def test_mlir_opt_agrees_on_the_allocations(operands: str, kind: str, valid: bool) -> None:
    _mlir_opt_says(_allocation(operands, kind), valid)


# Ops on memrefs xDSL 0.74 took and mlir-opt-22 refuses (or both take): (arguments, body,
# valid as MLIR 22 says).
MEMORY_OPS = [
    # vector.load and vector.store need an innermost stride of a static 1.
    ("%a: memref<8xf32, strided<[2]>>",
     "%v = vector.load %a[%c0] : memref<8xf32, strided<[2]>>, vector<4xf32>", False),
    ("%a: memref<8xf32, strided<[?]>>",
     "%v = vector.load %a[%c0] : memref<8xf32, strided<[?]>>, vector<4xf32>", False),
    ("%a: memref<4x?xf32, strided<[?, 1], offset: ?>>",
     "%v = vector.load %a[%c0, %c0] : memref<4x?xf32, strided<[?, 1], offset: ?>>, vector<4xf32>",
     True),
    ("%a: memref<f32>", "%v = vector.load %a[] : memref<f32>, vector<f32>", True),
    ("%a: memref<8xf32, strided<[2]>>, %v: vector<4xf32>",
     "vector.store %v, %a[%c0] : memref<8xf32, strided<[2]>>, vector<4xf32>", False),
    # atomic_rmw: the kind says float or integer.
    ("%a: memref<8xi32>, %v: i32",
     "%r = memref.atomic_rmw addf %v, %a[%c0] : (i32, memref<8xi32>) -> i32", False),
    ("%a: memref<8xf32>, %v: f32",
     "%r = memref.atomic_rmw addi %v, %a[%c0] : (f32, memref<8xf32>) -> f32", False),
    ("%a: memref<8xf32>, %v: f32",
     "%r = memref.atomic_rmw assign %v, %a[%c0] : (f32, memref<8xf32>) -> f32", True),
    # assume_alignment: a power of 2.
    ("%a: memref<8xf32>", "%b = memref.assume_alignment %a, 16 : memref<8xf32>", True),
    ("%a: memref<8xf32>", "%b = memref.assume_alignment %a, 12 : memref<8xf32>", False),
]  # fmt: skip


def _memory_op(args: str, body: str) -> str:
    return in_func(args, f"  %c0 = arith.constant 0 : index\n  {body}")


@pytest.mark.parametrize("args, body, valid", MEMORY_OPS)
def test_memory_ops_are_verified_as_mlir_does(args: str, body: str, valid: bool) -> None:
    """dhir took the invalid ones; the native build then failed in mlir-opt-22."""
    text = _memory_op(args, body)
    assert_read_as_mlir_says(text, valid, r"<string>:3:\d+: ")


@pytest.mark.mlir
@pytest.mark.parametrize("args, body, valid", MEMORY_OPS)
def test_mlir_opt_agrees_on_the_memory_ops(args: str, body: str, valid: bool) -> None:
    _mlir_opt_says(_memory_op(args, body), valid)


# Memref types of a function's argument: (type, valid as MLIR 22's parser says). xDSL
# takes any element type and any layout.
MEMREF_TYPES = [
    ("memref<4x4xf32, strided<[1]>>", False),
    ("memref<4xf32, affine_map<(d0, d1) -> (d0 + d1)>>", False),
    ("memref<4xtensor<2xf32>>", False),
    ("memref<4xnone>", False),
    ("memref<4x!llvm.ptr>", False),
    ("memref<*xtensor<2xf32>>", False),
    ("memref<4xcomplex<f32>>", True),
    ("memref<4xvector<2x2xf32>>", True),
    ("memref<4xf32, strided<[-3], offset: 9>>", True),
    ("memref<4xf32, affine_map<(d0) -> (d0, d0)>>", True),
]  # fmt: skip


@pytest.mark.parametrize("kind, valid", MEMREF_TYPES)
def test_memref_types_are_checked_as_mlir_does(kind: str, valid: bool) -> None:
    """dhir took the invalid ones, which mlir-opt-22 then refused at dhir's text."""
    text = in_func(f"%a: {kind}", "")
    assert_read_as_mlir_says(text, valid, r"<string>:1:\d+: .*func.func'?: memref")


@pytest.mark.mlir
@pytest.mark.parametrize("kind, valid", MEMREF_TYPES)
def test_mlir_opt_agrees_on_the_memref_types(kind: str, valid: bool) -> None:
    _mlir_opt_says(in_func(f"%a: {kind}", ""), valid)


# memref.get_global and memref.dim: (body, valid as MLIR 22 says), beside a global @g of
# memref<4xf32>.
GLOBAL_AND_DIM = [
    ("%v = memref.get_global @g : memref<4xf32>", True),
    ("%v = memref.get_global @h : memref<4xf32>", False),
    ("%v = memref.get_global @g : memref<8xf32>", False),
    ("%a = memref.alloca() : memref<f32>\n  %d = memref.dim %a, %c0 : memref<f32>", False),
    ("%a = memref.alloca() : memref<2xf32>\n  %d = memref.dim %a, %c0 : memref<2xf32>", True),
]  # fmt: skip


def _global_and_dim(body: str) -> str:
    text = in_func("", f"  %c0 = arith.constant 0 : index\n  {body}")
    return 'memref.global "private" @g : memref<4xf32> = dense<1.0>\n' + text


@pytest.mark.parametrize("body, valid", GLOBAL_AND_DIM)
def test_global_references_and_dims_are_verified_as_mlir_does(body: str, valid: bool) -> None:
    """xDSL 0.74 checked neither: dhir took a missing or mistyped global, and the dim of a
    rank-0 memref, which mlir-opt-22 then refused."""
    assert_read_as_mlir_says(
        _global_and_dim(body), valid, r"<string>:[345]:\d+: error: .memref\.(get_global|dim)"
    )


@pytest.mark.mlir
@pytest.mark.parametrize("body, valid", GLOBAL_AND_DIM)
def test_mlir_opt_agrees_on_the_global_references_and_dims(body: str, valid: bool) -> None:
    _mlir_opt_says(_global_and_dim(body), valid)


@pytest.mark.mlir
def test_mlir_opt_reads_more_than_100_i1_elements_as_dhir_prints_them() -> None:
    # xDSL printed them as the hex of a byte per element, where MLIR reads packed bits:
    # mlir-opt stopped the native build ("elements hex data size is invalid").
    bits = [(k * 7) % 3 == 0 for k in range(202)]
    words = ", ".join("true" if bit else "false" for bit in bits)
    rows = f"[{', '.join('true' if b else 'false' for b in bits[:101])}], " + (
        f"[{', '.join('true' if b else 'false' for b in bits[101:])}]"
    )
    text = f'memref.global "private" constant @g : memref<202xi1> = dense<[{words}]>\n' + in_func(
        "", f"  %c = arith.constant dense<[{rows}]> : tensor<2x101xi1>"
    )
    printed = _mlir_opt(print_module(parse_string(text)), generic=False)  # asserts it read it
    assert "tensor<2x101xi1>" in printed
