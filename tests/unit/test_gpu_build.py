"""Compiling GPU tasks (no GPU needed): both body forms, chips sm_80 and sm_90, PTX and
fatbin; the binaries embedded in the program must name the chip."""

import re
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st
from xdsl.passes import PassPipeline

import dhir
from dhir import DhirError
from dhir.backends.native import compile_native
from dhir.dialects import func
from dhir.dialects import gpu as dgpu
from dhir.machine.detect import default_chip
from dhir.toolchain import gpu as gpu_toolchain
from dhir.toolchain.gpu import CudaTools, choose_format, find_cuda_tools, gpu_build
from dhir.toolchain.options import RunOptions
from dhir.toolchain.tools import find_llvm_tools
from dhir.transforms.gpu_kernels import GpuKernelsPass

pytestmark = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")
EXAMPLES = Path(__file__).parents[2] / "examples"
HAS_FATBIN = choose_format(("sm_90",), find_cuda_tools()) == "fatbin"

LOOPS = """
func.func @main(%a: memref<1000xf32>, %m: memref<64x48xf32>, %s: f32) {
  dhir.schedule %a, %m, %s {
    %gpu = dhir.target {arch = "ARCH"}
    %t0 = dhir.task %gpu, %a attributes {name = "scale"} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant 1000 : index
      scf.parallel (%i) = (%c0) to (%n) step (%c1) {
        %x = memref.load %a[%i] : memref<1000xf32>
        %y = arith.mulf %x, %s : f32
        memref.store %y, %a[%i] : memref<1000xf32>
      }
    }
    %t1 = dhir.task %gpu, %m {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %r = arith.constant 64 : index
      %c = arith.constant 48 : index
      scf.parallel (%i, %j) = (%c0, %c0) to (%r, %c) step (%c1, %c1) {
        %x = memref.load %m[%i, %j] : memref<64x48xf32>
        %y = math.exp %x : f32
        memref.store %y, %m[%i, %j] : memref<64x48xf32>
      }
    }
    %t2 = dhir.task %gpu, %a {
      linalg.fill ins(%s : f32) outs(%a : memref<1000xf32>)
    }
    %t3 = dhir.task %gpu, %a {
      "affine.parallel"() <{lowerBoundsGroups = dense<1> : tensor<1xi32>, lowerBoundsMap = affine_map<() -> (0)>, reductions = [], steps = [1], upperBoundsGroups = dense<1> : tensor<1xi32>, upperBoundsMap = affine_map<() -> (1000)>}> ({
      ^bb0(%i: index):
        %x = affine.load %a[%i] : memref<1000xf32>
        %y = arith.addf %x, %x : f32
        affine.store %y, %a[%i] : memref<1000xf32>
        affine.yield
      }) : () -> ()
    }
  }
  return
}
"""


def _proposal(arch: str) -> str:
    return (EXAMPLES / "proposal.mlir").read_text().replace('"sm_90"', f'"{arch}"')


def _build(text: str, ranks: int = 2) -> Path:
    module = dhir.parse_string(text)
    exe, _ = compile_native(module, "main", RunOptions(ranks=ranks, placement="round-robin"))
    return exe.parent


def _unescape(text: str) -> bytes:
    out = bytearray()
    i = 0
    while i < len(text):
        if text[i] == "\\" and text[i + 1] in '\\"':
            out.append(ord(text[i + 1]))
            i += 2
        elif text[i] == "\\":
            out.append(int(text[i + 1 : i + 3], 16))
            i += 3
        else:
            out.append(ord(text[i]))
            i += 1
    return bytes(out)


def _binaries(build: Path) -> dict[str, tuple[str, bytes]]:
    """gpu.binary name -> (target chip, object bytes), from the lowered module."""
    text = (build / "program.llvm.mlir").read_text()
    pattern = re.compile(
        r'gpu\.binary @(\w+)\s*\[#gpu\.object<#nvvm\.target<[^>]*chip = "(sm_\w+)"[^>]*>'
        r'(?:, properties = \{[^}]*\})?, (?:assembly = )?"((?:[^"\\]|\\.)*)"',
        re.S,
    )
    return {m.group(1): (m.group(2), _unescape(m.group(3))) for m in pattern.finditer(text)}


def _fatbin_archs(blob: bytes) -> list[int]:
    magic, _, header, size = struct.unpack_from("<IHHQ", blob, 0)
    assert magic == 0xBA55ED50
    archs, at = [], header
    while at < header + size:
        entry_header, payload = (
            struct.unpack_from("<I", blob, at + 4)[0],
            struct.unpack_from("<Q", blob, at + 8)[0],
        )
        archs.append(struct.unpack_from("<I", blob, at + 28)[0])
        at += entry_header + payload
    return archs


def _names_chip(blob: bytes, chip: str) -> bool:
    number = int(chip.removeprefix("sm_"))
    if blob.startswith(struct.pack("<I", 0xBA55ED50)):
        return set(_fatbin_archs(blob)) == {number}
    return f".target {chip}".encode() in blob


@pytest.fixture(params=["isa", "fatbin"])
def gpu_format(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "fatbin" and not HAS_FATBIN:
        pytest.skip("no CUDA toolkit (ptxas, fatbinary, libdevice): pip install 'dhir[cuda]'")
    monkeypatch.setenv("DHIR_GPU_FORMAT", request.param)
    return request.param


@pytest.mark.parametrize("chip", ["sm_80", "sm_90"])
def test_explicit_launch_builds_for_the_chip(chip: str, gpu_format: str) -> None:
    binaries = _binaries(_build(_proposal(chip)))
    assert list(binaries) == [f"dhir_{chip}"]
    target, blob = binaries[f"dhir_{chip}"]
    assert target == chip and _names_chip(blob, chip)
    if gpu_format == "isa":
        assert re.search(rb"\.version \d+\.\d+", blob)
        assert b".entry task0_kernel0" in blob or b".entry\ttask0_kernel0" in blob


@pytest.mark.parametrize("chip", ["sm_80", "sm_90"])
def test_loops_build_for_the_chip(chip: str, gpu_format: str) -> None:
    text = LOOPS.replace("ARCH", chip)
    if not find_cuda_tools().libdevice:  # math.exp needs libdevice (see the test below)
        text = text.replace("math.exp %x", "arith.addf %x, %x")
    binaries = _binaries(_build(text))
    target, blob = binaries[f"dhir_{chip}"]
    assert target == chip and _names_chip(blob, chip)
    if gpu_format == "isa":
        # libdevice's expf is linked into the PTX, not left for the driver to resolve
        assert not re.search(rb"\.extern \.func[^;]*__nv_", blob)


def test_two_chips_give_two_binaries(gpu_format: str) -> None:
    text = _proposal("sm_90").replace(
        "%task3 = dhir.task %gpu,",
        '%g80 = dhir.target {arch = "sm_80"}\n    %task3 = dhir.task %g80,',
    )
    text = text.replace(
        "  }\n  return",
        "    %task4 = dhir.task %gpu, %a {\n" + _COPY_KERNEL + "    }\n  }\n  return",
    )
    binaries = _binaries(_build(text))
    assert {name: chip for name, (chip, _) in binaries.items()} == {
        "dhir_sm_80": "sm_80",
        "dhir_sm_90": "sm_90",
    }
    for chip, blob in binaries.values():
        assert _names_chip(blob, chip)


_COPY_KERNEL = """      %c1 = arith.constant 1 : index
      %c20 = arith.constant 20 : index
      gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
                 threads(%tx, %ty, %tz) in (%sx = %c20, %sy = %c1, %sz = %c1) {
        %v = memref.load %a[%tx] : memref<20xi32>
        %w = arith.addi %v, %v : i32
        memref.store %w, %a[%tx] : memref<20xi32>
        gpu.terminator
      }
"""


def _launches(text: str) -> list[dgpu.LaunchOp]:
    module = dhir.parse_string(text)
    dhir.run_pipeline(module, PassPipeline((GpuKernelsPass(str(find_llvm_tools().mlir_opt)),)))
    assert gpu_build(module) is not None
    return [op for op in module.walk() if isinstance(op, dgpu.LaunchOp)]


def _constant(value: object) -> int | None:
    owner = getattr(value, "owner", None)
    attr = getattr(owner, "value", None)
    return getattr(attr, "value", None) and attr.value.data  # type: ignore[union-attr]


def test_loops_become_tiled_kernels_named_by_task_and_chip() -> None:
    launches = _launches(LOOPS.replace("ARCH", "sm_90"))
    assert len(launches) == 4  # scf.parallel 1-D and 2-D, linalg.fill, affine.parallel
    threads = [
        tuple(_constant(v) for v in (op.blockSizeX, op.blockSizeY, op.blockSizeZ))
        for op in launches
    ]
    # Never one thread per block: 256 threads for 1-D loops, 32 x 8 for the 2-D one.
    assert threads == [(256, 1, 1), (32, 8, 1), (256, 1, 1), (256, 1, 1)]
    names = [(op.properties["module"], op.properties["function"]) for op in launches]
    assert [str(m) for m, _ in names] == ["@dhir_sm_90"] * 4
    assert str(names[0][1]) == "@scale0_kernel0"


def test_short_loop_still_gets_a_block_of_threads() -> None:
    text = LOOPS.replace("ARCH", "sm_90").replace("1000", "7")
    launch = _launches(text)[0]
    assert _constant(launch.blockSizeX) == 256 and _constant(launch.gridSizeX) == 1


def test_two_dimensional_loops_give_thread_x_the_contiguous_dimension() -> None:
    launch = _launches(LOOPS.replace("ARCH", "sm_90"))[1]
    store = next(op for op in launch.walk() if op.name == "memref.store")
    column = store.operands[-1]  # %m[row, column]: the contiguous index
    thread_x = launch.body.block.args[3]
    assert thread_x in column.owner.operands  # type: ignore[union-attr]
    # grid: 48 columns / 32 = 2 blocks in x, 64 rows / 8 = 8 blocks in y
    assert (_constant(launch.gridSizeX), _constant(launch.gridSizeY)) == (2, 8)


CONTIGUOUS_X = {
    "linalg": "linalg.matmul ins(%a, %b : memref<64x16xf32>, memref<16x48xf32>)\n"
    "                    outs(%m : memref<64x48xf32>)",
    "affine.parallel": """"affine.parallel"() <{lowerBoundsGroups = dense<1> : tensor<2xi32>,
          lowerBoundsMap = affine_map<() -> (0, 0)>, reductions = [], steps = [1, 1],
          upperBoundsGroups = dense<1> : tensor<2xi32>,
          upperBoundsMap = affine_map<() -> (64, 48)>}> ({
      ^bb0(%i: index, %j: index):
        %x = affine.load %m[%i, %j] : memref<64x48xf32>
        %y = arith.addf %x, %x : f32
        affine.store %y, %m[%i, %j] : memref<64x48xf32>
        affine.yield
      }) : () -> ()""",
    "in a host loop": """%c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %r = arith.constant 64 : index
      %c = arith.constant 48 : index
      scf.for %t = %c0 to %c1 step %c1 {
        scf.parallel (%i, %j) = (%c0, %c0) to (%r, %c) step (%c1, %c1) {
          %x = memref.load %m[%i, %j] : memref<64x48xf32>
          %y = arith.addf %x, %x : f32
          memref.store %y, %m[%i, %j] : memref<64x48xf32>
        }
      }""",
}


@pytest.mark.parametrize("form", sorted(CONTIGUOUS_X))
def test_every_loop_form_gives_thread_x_the_contiguous_dimension(form: str) -> None:
    """Only scf.parallel at the top of a task's body had its dimensions reversed: a
    linalg op, an affine.parallel and a loop in a host loop gave thread x the rows, so
    neighbouring threads touched elements a row apart (grid 2 x 6: 64 rows / 32, 48
    columns / 8)."""
    text = f"""func.func @main(%a: memref<64x16xf32>, %b: memref<16x48xf32>,
                %m: memref<64x48xf32>) {{
  dhir.schedule %a, %b, %m {{
    %gpu = dhir.target {{arch = "sm_90"}}
    %t = dhir.task %gpu, %a, %b, %m {{
      {CONTIGUOUS_X[form]}
    }}
  }}
  return
}}"""
    (launch,) = _launches(text)
    store = [op for op in launch.walk() if op.name in ("memref.store", "affine.store")][-1]
    column = store.operands[-1]  # %m[row, column]: the contiguous index
    thread_x = launch.body.block.args[3]
    assert thread_x in column.owner.operands  # type: ignore[union-attr]
    # grid: 48 columns / 32 = 2 blocks in x, 64 rows / 8 = 8 blocks in y
    assert (_constant(launch.gridSizeX), _constant(launch.gridSizeY)) == (2, 8)


BAD_BODIES = {
    "reduction": (
        """%c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c20 = arith.constant 20 : index
      %z = arith.constant 0 : i32
      %s = scf.parallel (%i) = (%c0) to (%c20) step (%c1) init (%z) -> i32 {
        %v = memref.load %a[%i] : memref<20xi32>
        scf.reduce(%v : i32) {
        ^bb0(%l: i32, %r: i32):
          %t = arith.addi %l, %r : i32
          scf.reduce.return %t : i32
        }
      }
      memref.store %s, %a[%c0] : memref<20xi32>""",
        "reduces .init/scf.reduce., which dhir cannot map to the GPU",
    ),
    "host access": (
        """%c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c20 = arith.constant 20 : index
      %v = memref.load %a[%c0] : memref<20xi32>
      scf.parallel (%i) = (%c0) to (%c20) step (%c1) {
        memref.store %v, %a[%i] : memref<20xi32>
      }""",
        "uses %a in 'memref.load' outside a kernel",
    ),
    "no parallel work": (
        """%c0 = arith.constant 0 : index""",
        "has no parallel loop",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_BODIES))
def test_bad_gpu_bodies_are_clear_errors(case: str) -> None:
    body, message = BAD_BODIES[case]
    text = f"""func.func @main(%a: memref<20xi32>) {{
  dhir.schedule %a {{
    %gpu = dhir.target {{arch = "sm_90"}}
    %t = dhir.task %gpu, %a attributes {{name = "bad"}} {{
      {body}
    }}
  }}
  return
}}"""
    module = dhir.parse_string(text, "bad.mlir")
    with pytest.raises(DhirError, match=message) as error:
        compile_native(module, "main", RunOptions(ranks=1, placement="round-robin"))
    assert 'GPU task "bad"' in str(error.value) and "bad.mlir:" in str(error.value)


def test_mixing_loops_and_launch_is_an_error() -> None:
    text = _proposal("sm_90").replace(
        "      gpu.launch blocks",
        "      scf.parallel (%i) = (%c1) to (%c20) step (%c1) {\n"
        "        %q = memref.load %a[%i] : memref<20xi32>\n"
        "        memref.store %q, %a[%i] : memref<20xi32>\n      }\n      gpu.launch blocks",
    )
    with pytest.raises(DhirError, match="mixes parallel loops with an explicit gpu.launch"):
        compile_native(
            dhir.parse_string(text), "main", RunOptions(ranks=2, placement="round-robin")
        )


def test_chip_llvm_cannot_target_is_an_error() -> None:
    with pytest.raises(DhirError, match='LLVM 22 cannot generate code for "sm_80a"'):
        compile_native(dhir.parse_string(_proposal("sm_80a")), "main", RunOptions(ranks=1))


def test_math_without_libdevice_asks_for_the_cuda_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gpu_toolchain, "find_cuda_tools", lambda: CudaTools(None, None, None))
    monkeypatch.delenv("DHIR_GPU_FORMAT", raising=False)
    with pytest.raises(DhirError, match=r"libdevice.*pip install 'dhir\[cuda\]'"):
        _build(LOOPS.replace("ARCH", "sm_90"))


def test_format_choice() -> None:
    none = CudaTools(None, None, None)
    assert choose_format(("sm_90",), none) == "isa"
    tools = find_cuda_tools()
    if tools.ptxas is not None and tools.libdevice and tools.fatbinary is not None:
        assert choose_format(("sm_90",), tools) == "fatbin"


def test_forced_fatbin_without_ptxas_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DHIR_GPU_FORMAT", "fatbin")
    with pytest.raises(DhirError, match=r"pip install 'dhir\[cuda\]'"):
        choose_format(("sm_90",), CudaTools(None, None, None))


def test_the_cuda_tools_are_keyed_by_their_files(tmp_path: Path) -> None:
    """ptxas was keyed by its path alone: upgraded in place (a CUDA wheel, a toolkit in
    /usr/local/cuda), the build cache reused the cubins the old one assembled."""
    home = tmp_path / "cuda"
    (home / "bin").mkdir(parents=True)
    (home / "nvvm" / "libdevice").mkdir(parents=True)
    files = [home / "bin" / "ptxas", home / "bin" / "fatbinary"]
    files.append(home / "nvvm" / "libdevice" / "libdevice.10.bc")
    for path in files:
        path.write_text("1\n")
    build = gpu_toolchain.GpuBuild(("sm_90",), "fatbin", CudaTools(*files[:2], home))
    keys = {str(build.key())}
    for path in files:
        path.write_text("2.0\n")  # the same place, another version
        keys.add(str(build.key()))
    assert len(keys) == 4


def test_default_chip_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    default_chip.cache_clear()
    monkeypatch.setenv("DHIR_GPU_CHIP", "sm_86")
    try:
        launches = _launches(_proposal("sm_90").replace('{arch = "sm_90"}', '{kind = "gpu"}'))
        assert str(launches[0].properties["module"]) == "@dhir_sm_86"
    finally:
        default_chip.cache_clear()


def test_default_chip_without_a_gpu_is_sm_80(monkeypatch: pytest.MonkeyPatch) -> None:
    default_chip.cache_clear()
    monkeypatch.delenv("DHIR_GPU_CHIP", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    try:
        assert default_chip() == "sm_80"
    finally:
        default_chip.cache_clear()


def _bounded_loops(dims: list[tuple[int, int, int]], side: int) -> str:
    """A GPU task whose scf.parallel runs over `dims` (lower bound, upper bound, step each)
    and stores a number made of its indices at [(i - lower bound) / step, ...]: every
    iteration writes an element of its own."""
    rank = len(dims)
    shape = "x".join([str(side)] * rank)
    ivs = [f"%i{d}" for d in range(rank)]
    lines = [
        f"func.func @main(%out: memref<{shape}xi64>) {{",
        "  dhir.schedule %out {",
        '    %gpu = dhir.target {arch = "sm_90"}',
        "    %t = dhir.task %gpu, %out {",
    ]
    for d, (lb, ub, step) in enumerate(dims):
        lines += [
            f"      %lb{d} = arith.constant {lb} : index",
            f"      %ub{d} = arith.constant {ub} : index",
            f"      %st{d} = arith.constant {step} : index",
        ]
    bounds = [", ".join(f"%{name}{d}" for d in range(rank)) for name in ("lb", "ub", "st")]
    lines.append(f"      scf.parallel ({', '.join(ivs)}) = ({bounds[0]}) to ({bounds[1]}) "
                 f"step ({bounds[2]}) {{")  # fmt: skip
    value = "%z"
    lines.append("        %z = arith.constant 0 : i64")
    for d in range(rank):
        lines += [
            f"        %off{d} = arith.subi {ivs[d]}, %lb{d} : index",
            f"        %at{d} = arith.divsi %off{d}, %st{d} : index",
            f"        %x{d} = arith.index_cast {ivs[d]} : index to i64",
            f"        %k{d} = arith.constant {1000**d} : i64",
            f"        %p{d} = arith.muli %x{d}, %k{d} : i64",
            f"        %v{d} = arith.addi {value}, %p{d} : i64",
        ]
        value = f"%v{d}"
    at = ", ".join(f"%at{d}" for d in range(rank))
    lines += [f"        memref.store {value}, %out[{at}] : memref<{shape}xi64>", "      }",
              "    }", "  }", "  func.return", "}"]  # fmt: skip
    return "\n".join(lines) + "\n"


@st.composite
def _loop_bounds(draw: st.DrawFn, side: int) -> list[tuple[int, int, int]]:
    dims = []
    for _ in range(draw(st.integers(1, 3))):
        lb = draw(st.integers(-40, 40))
        step = draw(st.integers(1, 5))
        ub = lb + draw(st.integers(-3, (side - 1) * step + 1))
        dims.append((lb, ub, step))
    return dims


@settings(max_examples=40, deadline=None)
@given(_loop_bounds(side=12))
def test_kernels_run_every_iteration_of_their_loops(dims: list[tuple[int, int, int]]) -> None:
    """Tiled and mapped to threads, a parallel loop runs each iteration once, whatever its
    bounds and steps (mlir-opt-22's bound check skipped iterations for steps other than 1
    and dropped negative indices). The kernels run in the interpreter."""
    text = _bounded_loops(dims, 12)
    note(text)
    want = dhir.run(text, np.zeros([12] * len(dims), np.int64), backend="interp")
    module = dhir.parse_string(text)
    dhir.run_pipeline(module, PassPipeline((GpuKernelsPass(str(find_llvm_tools().mlir_opt)),)))
    assert any(isinstance(op, dgpu.LaunchOp) for op in module.walk())
    got = dhir.run(module, np.zeros([12] * len(dims), np.int64), backend="interp")
    np.testing.assert_array_equal(got[0], want[0])


def test_a_launch_of_the_programs_own_gpu_func_is_a_clear_error() -> None:
    """The interpreter runs gpu.launch_func; the native backend says it does not build it
    (it said the task had no parallel loop or gpu.launch)."""
    text = (Path(__file__).parent / "data" / "launch_func.mlir").read_text()
    module = dhir.parse_string(text, "launch_func.mlir")
    with pytest.raises(DhirError, match=r"launch_func.mlir:18:9: .*does not build gpu.launch_func"):
        dhir.run_pipeline(module, PassPipeline((GpuKernelsPass(str(find_llvm_tools().mlir_opt)),)))


KERNEL_CALLING = """
func.func @twice(%v: i32) -> i32 {
  %w = arith.addi %v, %v : i32
  return %w : i32
}
func.func @main(%a: memref<20xi32>) {
  dhir.schedule %a {
    %gpu = dhir.target {arch = "sm_90"}
    %t = dhir.task %gpu, %a {
      %c1 = arith.constant 1 : index
      %c20 = arith.constant 20 : index
      gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
                 threads(%tx, %ty, %tz) in (%sx = %c20, %sy = %c1, %sz = %c1) {
        %v = memref.load %a[%tx] : memref<20xi32>
        %w = func.call @twice(%v) : (i32) -> i32
        memref.store %w, %a[%tx] : memref<20xi32>
        gpu.terminator
      }
    }
  }
  return
}
"""


def test_a_kernel_calling_a_function_of_the_program_builds(gpu_format: str) -> None:
    """dhir-user-names renamed @twice `dhir_user.twice`, which PTX cannot name: ptxas
    stopped the fatbin build ("syntax error"), and a PTX binary would have failed when
    the driver loaded it."""
    _, blob = _binaries(_build(KERNEL_CALLING, ranks=1))["dhir_sm_90"]
    if gpu_format == "isa":
        assert re.search(rb"\.func .*dhir_user\$twice", blob), blob[:2000]
        assert b"dhir_user.twice" not in blob


def test_a_kernel_calling_a_function_named_with_a_dot_builds(gpu_format: str) -> None:
    """@my.helper became `dhir_user$my.helper`, and ptxas stopped the fatbin build at its
    `.` ("syntax error"); the build now writes the `.` `$2E`."""
    text = KERNEL_CALLING.replace("@twice", "@my.helper")
    _, blob = _binaries(_build(text, ranks=1))["dhir_sm_90"]
    if gpu_format == "isa":
        assert re.search(rb"\.func .*dhir_user\$my\$2Ehelper", blob), blob[:2000]


CALLING_KERNELS = {
    # A parallel loop calling C: mlir-opt-22's "'func.call' op 'twice' does not reference
    # a valid function", at <stdin>, before.
    "loop, C": (
        "func.func private @twice(f64) -> f64",
        "scf.parallel (%i) = (%c0) to (%c8) step (%c1) {\n"
        "        %x = memref.load %a[%i] : memref<8xf64>\n"
        "        %y = func.call @twice(%x) : (f64) -> f64\n"
        "        memref.store %y, %a[%i] : memref<8xf64>\n      }",
        r"calls.mlir:11:14: error: .*calls @twice in a kernel, a function the program "
        "declares without a body",
    ),
    # The same loop calling a function with a body: the same mlir-opt-22 error before.
    "loop, body": (
        "func.func private @twice(%x: f64) -> f64 {\n  return %x : f64\n}",
        "scf.parallel (%i) = (%c0) to (%c8) step (%c1) {\n"
        "        %x = memref.load %a[%i] : memref<8xf64>\n"
        "        %y = func.call @twice(%x) : (f64) -> f64\n"
        "        memref.store %y, %a[%i] : memref<8xf64>\n      }",
        r"calls.mlir:13:14: error: .*calls @twice in a parallel loop, which dhir cannot map",
    ),
    # A gpu.launch calling C through a function with a body: built, with an unresolved
    # symbol in the kernel, before.
    "launch, C through a body": (
        "func.func private @c_code(f64) -> f64\n"
        "func.func private @twice(%x: f64) -> f64 {\n"
        "  %y = func.call @c_code(%x) : (f64) -> f64\n  return %y : f64\n}",
        "gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)\n"
        "                 threads(%tx, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1) {\n"
        "        %x = memref.load %a[%tx] : memref<8xf64>\n"
        "        %y = func.call @twice(%x) : (f64) -> f64\n"
        "        memref.store %y, %a[%tx] : memref<8xf64>\n        gpu.terminator\n      }",
        r"calls.mlir:16:14: error: .*calls @c_code \(through @twice\) in a kernel",
    ),
}


@pytest.mark.parametrize("case", sorted(CALLING_KERNELS))
def test_a_kernel_calling_c_is_refused_at_the_call(case: str) -> None:
    """A GPU cannot run host code: a kernel calling a function declared without a body
    (the user's C, libm's) is refused at the call, as is any call in a parallel loop of a
    GPU task, which mlir-opt-22 failed to map at no line of the program."""
    declarations, kernel, message = CALLING_KERNELS[case]
    text = f"""{declarations}
func.func @main(%a: memref<8xf64>) {{
  dhir.schedule %a {{
    %gpu = dhir.target {{arch = "sm_90"}}
    %t = dhir.task %gpu, %a {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      {kernel}
    }}
  }}
  return
}}"""
    module = dhir.parse_string(text, "calls.mlir")
    with pytest.raises(DhirError, match=message):
        dhir.run_pipeline(module, PassPipeline((GpuKernelsPass(str(find_llvm_tools().mlir_opt)),)))


def test_a_launch_may_call_a_function_with_a_body() -> None:
    """The kernel check leaves alone what builds: a gpu.launch calling the program's own
    function (gpu-kernel-outlining copies it into the GPU module)."""
    text = _proposal("sm_90")
    text = "func.func private @same(%x: i32) -> i32 {\n  return %x : i32\n}\n" + text.replace(
        "        memref.store %v, %a[%tx] : memref<20xi32>",
        "        %w = func.call @same(%v) : (i32) -> i32\n"
        "        memref.store %w, %a[%tx] : memref<20xi32>",
    )
    module = dhir.parse_string(text)
    dhir.run_pipeline(module, PassPipeline((GpuKernelsPass(str(find_llvm_tools().mlir_opt)),)))
    assert any(isinstance(op, func.CallOp) for op in module.walk())
