"""Run the GPU tests' programs on a machine that has an NVIDIA GPU but not the compile
toolchain (LLVM 22, MPICH's headers): build them here, run them there.

    .venv/bin/python tests/gpu_check.py build DIR [--random N] [--chip sm_90]   # here
    python3 tests/gpu_check.py check DIR [--jobs N]               # on the GPU machine

`build` compiles, with `dhir compile`, the programs of tests/unit/test_gpu_real.py (the
proposal's example on 1 and 2 ranks, default placement and round-robin; a CPU -> GPU ->
CPU chain across 2 ranks; a GPU -> GPU chain as PTX and as a fatbin), a GPU -> GPU
ping-pong between 2 ranks for each way of device messages (DHIR_GPU_MESSAGES=peer and
staged), every loop form a GPU task may use (1-D, 2-D, 3-D scf.parallel,
affine.parallel, linalg), block and warp reductions (gpu.all_reduce, gpu.shuffle,
gpu.subgroup_reduce), a tiled matmul with workgroup memory and barriers, kernels calling
the program's functions, N random schedules with GPU tasks (tests/unit/strategies.py;
their messages alternate between the two ways; every third runs in a time loop), and
N / 8 each of the other differential tests' random programs with GPU targets (GPU-only
schedules on 2-3 ranks in a time loop, planned row by row; loop bounds and steps tiled
onto threads; loops and linalg ops split over a GPU and CPU ranks), and
`dhir calibrate`'s GPU measuring program, saves their inputs and what the
sequential interpreter computes from them, and copies what the executables load at run
time (MPICH's launcher and libmpi, MLIR's runner utilities, libomp) into DIR/runtime.

`check` needs Python with NumPy and dhir importable (xdsl too); it runs every program with
`python -m dhir run EXE` and compares each output with the interpreter's bit for bit,
and the GPU -> GPU chain's host<->device copy counts (DHIR_GPU_STATS) with what the
lowering promises. It exits non-zero if any differs.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "unit")]

SCALAR_TYPES = {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64"}
# The GPU machine's CPU is not this one: build for a level every x86-64 server of the
# last decade runs (`native` would be this machine's).
CPU = "x86-64-v3"
# The GPU -> GPU chain: %a and %b go in once, %b comes out once, three kernels run.
CHAIN_COPIES = {"h2d": 2, "d2h": 1, "launches": 3}
WAYS = ("peer", "staged")  # of DHIR_GPU_MESSAGES; "direct" needs a CUDA-aware MPI
# Each test of tests/unit/test_gpu_real.py (marked `gpu`: run only where a GPU is) and the
# cases here that run its programs on the GPU machine (tests/unit/test_gpu_check.py holds
# the two together).
REAL_TESTS = {
    "test_proposal_equals_the_oracle": ("proposal-1r-round-robin", "proposal-2r-round-robin"),
    "test_cpu_gpu_cpu_chain_across_two_ranks": ("cpu-gpu-cpu-2r",),
    "test_a_tiled_matmul_with_barriers_equals_the_oracle": ("matmul-barriers",),
    "test_a_block_sum_equals_the_oracle_bit_for_bit": (
        "block-sum-2x32",
        "block-sum-3x96",
        "block-sum-2x200",
    ),
    "test_a_warp_shuffle_block_sum_equals_the_oracle_bit_for_bit": ("warp-sum",),
    "test_gpu_chain_stays_on_the_device": ("gpu-chain-isa", "gpu-chain-fatbin"),
    "test_calibration_measures_every_gpu": ("calibration",),
}

# linalg on the GPU (a reduction dimension stays a loop in each thread) and a 3-D loop
# nest (tiles of 32 x 4 x 2 threads), on two ranks, with CPU work between.
MATMUL_3D = """
func.func @main(%a: memref<64x32xf32>, %b: memref<32x48xf32>, %c: memref<64x48xf32>,
                %v: memref<8x16x32xf32>) {
  dhir.schedule %a, %b, %c, %v {
    %gpu = dhir.target {arch = "sm_90"}
    %cpu = dhir.target {kind = "cpu"}
    %mm = dhir.task %gpu, %a, %b, %c attributes {dhir.rank = 1 : i64} {
      linalg.matmul ins(%a, %b : memref<64x32xf32>, memref<32x48xf32>)
                    outs(%c : memref<64x48xf32>)
    }
    %scale = dhir.task %cpu, %c attributes {dhir.rank = 0 : i64} {
      %two = arith.constant 2.0 : f32
      linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>],
                      iterator_types = ["parallel", "parallel"]} outs(%c : memref<64x48xf32>) {
      ^bb0(%x: f32):
        %y = arith.mulf %x, %two : f32
        linalg.yield %y : f32
      }
    }
    %cube = dhir.task %gpu, %v, %c attributes {dhir.rank = 1 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n0 = arith.constant 8 : index
      %n1 = arith.constant 16 : index
      %n2 = arith.constant 32 : index
      scf.parallel (%i, %j, %k) = (%c0, %c0, %c0) to (%n0, %n1, %n2) step (%c1, %c1, %c1) {
        %x = memref.load %v[%i, %j, %k] : memref<8x16x32xf32>
        %y = memref.load %c[%j, %k] : memref<64x48xf32>
        %z = arith.subf %x, %y : f32
        memref.store %z, %v[%i, %j, %k] : memref<8x16x32xf32>
      }
    }
  }
  return
}
"""


def _cases(random_count: int) -> list[dict[str, object]]:
    from test_gpu_runtime import PROPOSAL, _chain

    rng = np.random.default_rng(2026)
    ints = lambda n, k: [rng.integers(-99, 99, n).astype(np.int32) for _ in range(k)]  # noqa: E731
    cases: list[dict[str, object]] = []
    for ranks in (1, 2):
        for placement in ("round-robin", "best"):
            cases.append(
                dict(
                    name=f"proposal-{ranks}r-{placement}",
                    text=PROPOSAL.read_text(),
                    ranks=ranks,
                    placement=placement,
                    inputs=ints(20, 3),
                )
            )
    cases.append(dict(name="cpu-gpu-cpu-2r", text=_chain(1), ranks=2, inputs=ints(64, 2)))
    for fmt in ("isa", "fatbin"):
        cases.append(
            dict(
                name=f"gpu-chain-{fmt}",
                text=_chain(1, 1, 1),
                ranks=2,
                inputs=ints(64, 2),
                env={"DHIR_GPU_FORMAT": fmt},
                copies=CHAIN_COPIES,
            )
        )
    # %b goes 1 -> 0 -> 1 -> 0 device to device, each way of DHIR_GPU_MESSAGES there.
    for way in WAYS:
        cases.append(
            dict(
                name=f"gpu-ping-pong-{way}",
                text=_chain(1, 0, 1, 0),
                ranks=2,
                inputs=ints(64, 2),
                run_env={"DHIR_GPU_MESSAGES": way},
            )
        )
    from test_gpu_data import halo

    # A Jacobi sweep cut over two ranks' GPUs in a time loop: only halo rows go device to
    # device each step (dhir.transforms.gpu_rows), each way; the offsets show only here.
    for way in WAYS:
        cases.append(
            dict(
                name=f"halo-rows-{way}",
                text=halo(32, 16),
                ranks=2,
                inputs=[rng.standard_normal((32, 16)), rng.standard_normal((32, 16)), np.int64(6)],
                scalar_types={2: "index"},
                run_env={"DHIR_GPU_MESSAGES": way},
            )
        )
    floats = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    from test_gpu_build import LOOPS

    # math.exp runs libdevice's expf on the GPU, NumPy's on the host: a few ulp apart.
    cases.append(
        dict(
            name="loop-forms",
            text=LOOPS.replace("ARCH", "sm_90"),
            ranks=1,
            inputs=[floats(1000), floats(64, 48), np.float32(1.5)],
            rtol=1e-6,
        )
    )
    cases.append(
        dict(
            name="matmul-3d",
            text=MATMUL_3D,
            ranks=2,
            inputs=[floats(64, 32), floats(32, 48), floats(64, 48), floats(8, 16, 32)],
        )
    )
    from test_gpu_barriers import MATMUL
    from test_gpu_build import KERNEL_CALLING

    # Workgroup memory and gpu.barrier in a loop (the interpreter runs a block's threads in
    # phases between barriers); kernels calling the program's functions, whose names PTX
    # spells apart (`dhir_user$twice`, `dhir_user$my$2Ehelper`).
    cases.append(
        dict(name="matmul-barriers", text=MATMUL, ranks=1, inputs=[floats(8, 8) for _ in "abc"])
    )
    for callee in ("twice", "my.helper"):
        cases.append(
            dict(
                name=f"kernel-calls-{callee}",
                text=KERNEL_CALLING.replace("@twice", f"@{callee}"),
                ranks=1,
                inputs=ints(20, 1),
            )
        )
    extra = random_count // 8
    return (
        cases
        + _collective_cases(floats)
        + _random_cases(random_count, rng)
        + _random_rows_cases(extra, rng)
        + _random_bounds_cases(extra)
        + _random_split_cases(extra)
    )


def _collective_cases(floats: Callable[..., np.ndarray]) -> list[dict[str, object]]:
    """gpu.all_reduce block sums (1, 3 and 7 warps, the last of 8 lanes), shuffles of
    every mode, a warp-shuffle block sum, subgroup_reduce and the subgroup ids: the
    interpreter combines in the order of MLIR 22's lowering, checked here on a GPU."""
    from test_gpu_collectives import SHUFFLES, SUBGROUP_IDS, SUM, TRUE, WARP_SUM, _program

    def launch(name: str, body: str, grid: int, block: tuple[int, int, int]) -> dict[str, object]:
        n = grid * block[0] * block[1] * block[2]
        inputs = [floats(n) * np.float32(1e4), np.zeros(n, np.float32), np.zeros(n, np.int32)]
        return dict(name=name, text=_program(body, "f32", grid, block), ranks=1, inputs=inputs)

    subgroups = (
        "        %r0 = gpu.subgroup_reduce add %v uniform cluster(size = 16, stride = 2)"
        " : (f32) -> f32\n" + SUBGROUP_IDS + "        %r = arith.addf %r0, %bf : f32\n" + TRUE
    )
    return [
        *(launch(f"block-sum-{g}x{t}", SUM, g, (t, 1, 1)) for g, t in ((2, 32), (3, 96), (2, 200))),
        launch("shuffles", SHUFFLES, 2, (64, 1, 1)),
        launch("subgroups", subgroups, 2, (16, 4, 1)),
        dict(
            name="warp-sum", text=WARP_SUM, ranks=1, inputs=[floats(128), np.zeros(1, np.float32)]
        ),
    ]


def _random_cases(count: int, rng: np.random.Generator) -> list[dict[str, object]]:
    from hypothesis.errors import NonInteractiveExampleWarning
    from strategies import schedules
    from test_gpu_data import (
        GPU_TARGETS,
        LOOP_KINDS,
        HostTouch,
        TimeLoop,
        _in_time_loop,
        parallel,
    )

    cases: list[dict[str, object]] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NonInteractiveExampleWarning)
        for k in range(count):
            ranks = int(rng.integers(1, 4))
            program = schedules(max_tasks=12, max_buffers=4, targets=GPU_TARGETS, ranks=ranks)
            drawn = parallel(program.example())
            inputs = [
                rng.integers(-50, 50, drawn.size).astype(np.int32) for _ in range(drawn.buffers)
            ]
            way = {"DHIR_GPU_MESSAGES": WAYS[k % len(WAYS)]}
            # Every third in a time loop (an scf.for or scf.while of each kind in turn):
            # device buffers that last every step, data kept on its ranks and devices
            # between steps; every sixth with host code in the loop touching a memref
            # between steps, so copied around every step; the other scf.while loops
            # with a condition reading a memref, which alone is copied out every step.
            text = drawn.text()
            if k % 3 == 2:
                touch = HostTouch(0, drawn.buffers - 1, k % drawn.size, before=False)
                touches = (touch,) if k % 6 == 5 else ()
                kind = LOOP_KINDS[k // 3 % len(LOOP_KINDS)]
                seen = (0, k % drawn.size) if k % 6 == 2 and kind != "for" else None
                loop = TimeLoop(3, lb=1, step=2, touches=touches, kind=kind, seen=seen)
                text = _in_time_loop(text, loop.steps, loop)
            cases.append(
                dict(name=f"random-{k}", text=text, ranks=ranks, inputs=inputs, run_env=way)
            )
    return cases


def _examples(strategy: object, count: int) -> list:
    from hypothesis.errors import NonInteractiveExampleWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NonInteractiveExampleWarning)
        return [strategy.example() for _ in range(count)]  # type: ignore[attr-defined]


def _random_rows_cases(count: int, rng: np.random.Generator) -> list[dict[str, object]]:
    """test_rows_between_gpus_in_a_time_loop_keep_the_sequential_result's programs: GPU
    tasks only on 2-3 ranks in an scf.for, planned row by row (dhir.transforms.gpu_rows),
    each message of rows landing at its offset on the other GPU."""
    from strategies import ranked_cases
    from test_gpu_data import GPU_ONLY, TimeLoop, _in_time_loop, parallel

    cases: list[dict[str, object]] = []
    for k, (ranks, drawn, _) in enumerate(_examples(ranked_cases((2, 3), 10, 4, GPU_ONLY), count)):
        program = parallel(drawn)
        loop = TimeLoop(1 + k % 4, k % 3, 1 + k % 3)
        inputs = [
            rng.integers(-50, 50, program.size).astype(np.int32) for _ in range(program.buffers)
        ]
        cases.append(
            dict(
                name=f"rows-{k}",
                text=_in_time_loop(program.text(), loop.steps, loop),
                ranks=ranks,
                inputs=inputs,
                run_env={"DHIR_GPU_MESSAGES": WAYS[k % len(WAYS)]},
            )
        )
    return cases


def _random_bounds_cases(count: int) -> list[dict[str, object]]:
    """test_kernels_run_every_iteration_of_their_loops' programs: 1-3-D parallel loops
    of any bounds and steps, tiled onto threads, each iteration storing its indices."""
    from test_gpu_build import _bounded_loops, _loop_bounds

    return [
        dict(
            name=f"bounds-{k}",
            text=_bounded_loops(dims, 12),
            ranks=1,
            inputs=[np.zeros([12] * len(dims), np.int64)],
        )
        for k, dims in enumerate(_examples(_loop_bounds(side=12), count))
    ]


def _random_split_cases(count: int) -> list[dict[str, object]]:
    """test_split_devices' programs: a parallel loop or a linalg op bound to any device,
    cut over a GPU and 1-3 CPU ranks by a machine description (dhir-split-devices), the
    GPU piece copying its rows only."""
    from test_split_devices import _any, _node
    from test_split_tasks import linalg_tasks, one_loops

    loops = _examples(one_loops(("scf.parallel", "affine.parallel")), count - count // 2)
    ops = _examples(linalg_tasks(), count // 2)
    cases: list[dict[str, object]] = []
    for k, case in enumerate([*loops, *ops]):
        cpu_ranks = 1 + k % 3
        system = _node(cpu_ranks, (50.0, 100.0)[k % 2], (30.0, 100.0, 200.0)[k % 3])
        if hasattr(case, "unforced"):
            text, types = _any(case.unforced()), {}
        else:
            text = _any(case.text().replace(f" attributes {{dhir.split = {case.pieces}}}", ""))
            types = {2: "index"} if case.counter == "index" else {}
        cases.append(
            dict(
                name=f"split-{k}",
                text=text,
                ranks=cpu_ranks + 1,
                inputs=case.inputs(),
                scalar_types=types,
                system=system,
            )
        )
    return cases


def build(directory: Path, random_count: int, chip: str) -> int:
    os.environ["DHIR_GPU_CHIP"] = chip  # for `kind = "gpu"` targets: no GPU here to ask
    directory.mkdir(parents=True, exist_ok=True)
    manifest = [_build_case(directory / str(case["name"]), case) for case in _cases(random_count)]
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=1))
    _copy_runtime(directory / "runtime")
    _build_calibration(directory / "calibration", chip)
    return 0


def _build_calibration(folder: Path, chip: str) -> None:
    """`dhir calibrate`'s GPU program and FMA kernel for `chip`, which it compiles with
    clang where it measures: the GPU machine has no clang."""
    from dhir.toolchain.calibrate_gpu import build_gpu_program, build_kernel

    folder.mkdir(exist_ok=True)
    build_gpu_program(folder, "mpich")
    kernel = build_kernel(folder, chip)
    (folder / "chip").write_text(chip)
    print(f"built calibration ({kernel.name})")


def _build_case(folder: Path, case: dict[str, object]) -> dict[str, object]:
    """Compile the case into `folder` with its inputs and the interpreter's results;
    its manifest entry."""
    import dhir

    folder.mkdir(exist_ok=True)
    source = folder / "program.mlir"
    source.write_text(str(case["text"]))
    placement = str(case.get("placement", "round-robin"))
    command = [sys.executable, "-m", "dhir", "compile", str(source), "-o", str(folder / "exe")]
    command += ["-n", str(case["ranks"]), "--placement", placement, "--cpu", CPU]
    if case.get("system") is not None:  # placed and split by a machine description
        from dhir.machine.files import write_system

        write_system(case["system"], folder / "system.json")  # type: ignore[arg-type]
        command += ["--system", str(folder / "system.json")]
    subprocess.run(command, env=dict(os.environ, **case.get("env", {})), check=True)
    inputs = list(case["inputs"])
    types: dict[int, str] = case.get("scalar_types", {})  # type: ignore[assignment]  # by position: index
    expected = dhir.run(source, *inputs, backend="interp")
    given, outputs = [], []
    for k, (value, want) in enumerate(zip(inputs, expected)):
        if np.ndim(value) == 0:  # a scalar: TYPE=VALUE on the command line
            kind = types.get(k, SCALAR_TYPES[np.asarray(value).dtype.name])
            given.append(f"{kind}={value}")
            continue
        np.save(folder / f"in{k}.npy", value)
        np.save(folder / f"want{k}.npy", want)
        given.append(f"in{k}.npy")
        outputs.append(k)
    print(f"built {case['name']}")
    kept = {k: case[k] for k in ("name", "ranks", "copies", "rtol", "run_env") if k in case}
    system = ["system.json"] if case.get("system") is not None else []
    return kept | {"inputs": given, "outputs": outputs, "system": system}


def _copy_runtime(target: Path) -> None:
    from dhir.toolchain.tools import find_llvm_tools, find_mpi

    mpi = find_mpi("mpich")
    for sub in ("bin", "lib", "include"):
        (target / "mpich" / sub).mkdir(parents=True, exist_ok=True)
    # Only what dhir starts (mpirun, the same program as mpiexec and mpiexec.hydra) and
    # what mpirun starts: the device tool carries 64 MiB, tree and bundle together.
    for name in ("mpirun", "hydra_pmi_proxy"):
        shutil.copy2(mpi.prefix / "bin" / name, target / "mpich" / "bin" / name)
    shutil.copy2(mpi.include_dir / "mpi.h", target / "mpich" / "include" / "mpi.h")
    for library in mpi.lib_dir.glob("libmpi.so*"):
        shutil.copy2(library, target / "mpich" / "lib" / library.name)
    if (mpi.lib_dir / "mpich").is_dir():  # the wheel's libfabric and UCX, on libmpi's RUNPATH
        shutil.copytree(
            mpi.lib_dir / "mpich", target / "mpich" / "lib" / "mpich", dirs_exist_ok=True
        )
    (target / "lib").mkdir(exist_ok=True)
    llvm = find_llvm_tools()
    for library in llvm.lib_dir.glob("libomp.so.*"):  # the name programs need
        shutil.copy2(library, target / "lib" / library.name)


def check(directory: Path, jobs: int) -> int:
    runtime = directory.resolve() / "runtime"
    libraries = [runtime / "lib", runtime / "mpich" / "lib", os.environ.get("LD_LIBRARY_PATH", "")]
    env = dict(
        os.environ,
        DHIR_MPICH_PREFIX=str(runtime / "mpich"),
        LD_LIBRARY_PATH=":".join(str(part) for part in libraries),
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    )
    cases = json.loads((directory / "manifest.json").read_text())
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        outcomes = pool.map(lambda case: _check_case(directory / case["name"], case, env), cases)
        passed = 0
        for ok, line in outcomes:
            print(line, flush=True)
            passed += ok
    print(f"gpu_check: {passed} of {len(cases)} programs gave the interpreter's results")
    measured, line = _check_calibration(directory / "calibration", env)
    print(line)
    return 0 if passed == len(cases) and measured else 1


def _check_calibration(folder: Path, env: dict[str, str]) -> tuple[bool, str]:
    """test_gpu_real.py's test_calibration_measures_every_gpu, with the program built
    here: each GPU measured through dhir's runtime, within sane bounds of its guesses."""
    from dhir import DhirError
    from dhir.machine.detect import detect
    from dhir.toolchain.calibrate_gpu import GPU_QUICK, device_index, measure_gpu

    chip = (folder / "chip").read_text()
    gpus = [d for d in detect().devices if d.kind == "gpu"]
    if not gpus:
        return False, "FAIL calibration: no GPU found (nvidia-smi)"
    os.environ["LD_LIBRARY_PATH"] = env["LD_LIBRARY_PATH"]  # the program's libmpi
    lines = []
    for position, gpu in enumerate(gpus):
        if gpu.arch != chip:
            return False, f"FAIL calibration: {gpu.name} is {gpu.arch}, the kernel is for {chip}"
        exe, kernel = folder / "dhir_calibrate_gpu", folder / f"kernel-{chip}.ptx"
        try:
            got = measure_gpu(exe, kernel, device_index(gpu, position), GPU_QUICK, gpu)
        except DhirError as error:
            return False, f"FAIL calibration of {gpu.name}: {error}"
        link = got.host_link.bandwidth_gbs
        said = f"{gpu.name}: host link {link:.3g} GB/s, memory {got.mem_bw_gbs:.4g} GB/s, "
        said += f"{got.peak_gflops:.4g} GFLOP/s (guessed {gpu.peak_gflops:.4g})"
        # Any PCIe or NVLink host link moves more than 1 GB/s, a GPU's memory more than its
        # host link; the FMA kernel gets within 3x of the data sheet's peak.
        if not (1 < link < got.mem_bw_gbs and gpu.peak_gflops / 3 < got.peak_gflops):
            return False, f"FAIL calibration: {said}"
        if got.peak_gflops > 3 * gpu.peak_gflops:
            return False, f"FAIL calibration: {said}"
        lines.append(said)
    return True, "ok   calibration: " + "; ".join(lines)


def _check_case(folder: Path, case: dict[str, object], env: dict[str, str]) -> tuple[bool, str]:
    """Whether the case's program gave the interpreter's results, and a line saying so."""
    out, stats = folder / "out", folder / "gpu-stats.txt"
    stats.unlink(missing_ok=True)
    command = [sys.executable, "-m", "dhir", "run", str(folder / "exe"), "--output-dir", str(out)]
    for given in case["inputs"]:
        command += ["--input", str(folder / given) if given.endswith(".npy") else given]
    for system in case.get("system", []):  # lays the ranks out as the build placed them
        command += ["--system", str(folder / system)]
    env = dict(env, DHIR_GPU_STATS=str(stats), **case.get("run_env", {}))
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        return False, f"FAIL {case['name']}: dhir run exited {result.returncode}\n{result.stderr}"
    rtol = float(case.get("rtol", 0.0))
    wrong = [
        k for k in case["outputs"] if not _same(out / f"arg{k}.npy", folder / f"want{k}.npy", rtol)
    ]
    counts = stats.read_text().strip() if stats.exists() else "(no GPU used)"
    if wrong:
        return False, f"FAIL {case['name']}: arguments {wrong} differ from the interpreter's"
    if case.get("copies"):
        found = dict(part.split("=") for part in counts.split() if "=" in part)
        if any(int(found.get(k, -1)) != v for k, v in case["copies"].items()):
            return False, f"FAIL {case['name']}: copies {counts}, want {case['copies']}"
    return True, f"ok   {case['name']} ({case['ranks']} ranks; GPU: {counts})"


def _same(got: Path, want: Path, rtol: float) -> bool:
    """Bit for bit, or within `rtol` where a case allows it (math library functions)."""
    a, b = np.load(got), np.load(want)
    if rtol == 0.0:
        return a.dtype == b.dtype and a.tobytes() == b.tobytes()
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=rtol, atol=0.0))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    built = sub.add_parser("build")
    built.add_argument("directory", type=Path)
    built.add_argument("--random", type=int, default=30, metavar="N")
    built.add_argument("--chip", default="sm_90", help="the GPU machine's chip")
    checked = sub.add_parser("check")
    checked.add_argument("directory", type=Path)
    checked.add_argument("--jobs", type=int, default=1, help="programs run at once")
    args = parser.parse_args()
    if args.command == "build":
        return build(args.directory, args.random, args.chip)
    return check(args.directory, args.jobs)


if __name__ == "__main__":
    sys.exit(main())
