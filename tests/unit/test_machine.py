"""The machine description: validation, rank order, transfer times, and rank layout
(hostfiles, `dhir run --system`)."""

import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from dhir.ir.diagnostics import DhirError
from dhir.machine.description import (
    GUESSED_HOST_LINK,
    DescriptionError,
    Device,
    Link,
    Node,
    System,
    guess_device,
    with_core_guesses,
)
from dhir.machine.detect import detect, local_caches
from dhir.machine.dlti import from_dlti, to_dlti
from dhir.machine.files import from_dict, read_system, to_dict, write_system
from dhir.machine.layout import hostfile_text, launch_plan, rank_slots, threads_per_rank
from dhir.targets import DeviceKind

EXAMPLES = Path(__file__).parents[2] / "examples"
needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")

PCIE = Link(10.0, 25.0)
NET = Link(2.0, 12.5)
SHM = Link(0.5, 8.0)


def cpu(name: str, cores: int = 8, ranks: int = 1) -> Device:
    return Device(name, "x86_64", 500.0, 100.0, 64 << 30, cores=cores, ranks=ranks)


def gpu(name: str, link: Link = PCIE) -> Device:
    return Device(name, "sm_90", 60_000.0, 3_000.0, 80 << 30, host_link=link)


def two_nodes() -> System:
    return System(
        (
            Node("n0", (cpu("n0.cpu", ranks=2), gpu("n0.gpu0"), gpu("n0.gpu1")), host="h0"),
            Node("n1", (cpu("n1.cpu", cores=4), gpu("n1.gpu0"))),
        ),
        network=NET,
        intra_node=SHM,
        name="pair",
    )


def test_ranks_follow_nodes_then_devices() -> None:
    system = two_nodes()
    names = [d.name for d in system.rank_devices()]
    assert names == ["n0.cpu", "n0.cpu", "n0.gpu0", "n0.gpu1", "n1.cpu", "n1.gpu0"]
    assert system.rank_count == 6
    assert [n.ranks for n in system.nodes] == [4, 2]
    assert system.ranks_of("n0.gpu1") == range(3, 4)
    assert system.ranks_of(system.device("n0.cpu")) == range(0, 2)
    assert system.node_of("n1.gpu0").name == "n1"
    assert system.nodes[1].host == "n1"  # a node's host defaults to its name


def test_transfer_time_stages_through_hosts_and_links() -> None:
    system = two_nodes()
    n = 1 << 20
    assert system.transfer_time("n0.cpu", "n0.cpu", n) == 0.0
    assert system.transfer_time("n0.cpu", "n1.cpu", n) == pytest.approx(NET.time(n))
    assert system.transfer_time("n0.cpu", "n0.gpu0", n) == pytest.approx(SHM.time(n) + PCIE.time(n))
    gpu_to_gpu = PCIE.time(n) + SHM.time(n) + PCIE.time(n)
    assert system.transfer_time("n0.gpu0", "n0.gpu1", n) == pytest.approx(gpu_to_gpu)
    across = PCIE.time(n) + NET.time(n) + PCIE.time(n)
    assert system.transfer_time("n0.gpu1", "n1.gpu0", n) == pytest.approx(across)
    assert Link(2.0, 1.0).time(10**9) == pytest.approx(1.000002)


def test_unknown_device_lists_the_known_ones() -> None:
    with pytest.raises(DescriptionError, match="no device named 'gpu7'.*n0.cpu, n0.gpu0"):
        two_nodes().transfer_time("gpu7", "n0.cpu", 1)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: replace(cpu("c"), arch="sparc"), 'unknown arch "sparc"; known archs'),
        (lambda: replace(cpu("c"), peak_gflops=-1.0), "peak_gflops must be a positive number"),
        (lambda: replace(cpu("c"), mem_bw_gbs=float("nan")), "mem_bw_gbs must be a positive"),
        (lambda: replace(cpu("c"), memory_bytes=0), "memory_bytes must be a positive whole"),
        (lambda: Node("n", (replace(cpu("c"), cores=None),)), "a CPU needs its number of cores"),
        (lambda: Node("n", (replace(cpu("c"), name=""),)), "needs a name and an arch"),
        (lambda: Node("n", (replace(cpu("c"), memory_bytes=None),)), "memory_bytes must be"),
        (lambda: Device("d", None, 1.0, 1.0, None), "give its arch, or its kind"),
        (lambda: Device("d", "sm_90", 1.0, 1.0, None, kind=DeviceKind.CPU), "is a gpu, not a cpu"),
        (lambda: replace(cpu("c"), host_link=PCIE), "host_link is for GPUs"),
        (lambda: replace(gpu("g"), ranks=2), "a GPU runs one rank, not 2"),
        (lambda: replace(gpu("g"), cores=4), "cores is for CPUs"),
        (
            lambda: Node("n", (cpu("c"), replace(gpu("g"), host_link=None))),
            "a GPU needs its host_link",
        ),
        (lambda: replace(cpu("c"), guessed=("speed",)), "guessed lists speed; it may list only"),
        (lambda: cpu("bad name"), "device name 'bad name' is not a valid name"),
        (lambda: replace(cpu("c"), core_bw_curve=((1, 2.0),)), "core_bw_curve must be a list"),
        (
            lambda: replace(cpu("c"), core_bw_curve=((2, 2.0), (1, 3.0))),
            "footprints increasing",
        ),
        (
            lambda: replace(cpu("c"), core_bw_curve=((1, 2.0), (2, 0.0))),
            "core_bw_curve GB/s must be a positive number",
        ),
        (lambda: replace(gpu("g"), core_bw_curve=((1, 2.0), (2, 1.0))), "are for CPUs"),
        (lambda: Link(-1.0, 1.0), "latency_us must be a non-negative number"),
        (lambda: Link(0.0, 0.0), "bandwidth_gbs must be a positive number"),
        (lambda: Node("n", ()), "node 'n' has no devices"),
        (lambda: Node("n", (gpu("g"),)), "node 'n' has no CPU"),
        (lambda: System((), NET, SHM), "has no nodes"),
        (
            lambda: System((Node("a", (cpu("c"),)), Node("b", (cpu("c"),))), NET, SHM),
            "two devices are named 'c'",
        ),
        (
            lambda: System((Node("a", (cpu("c"),), "h"), Node("b", (cpu("d"),), "h")), NET, SHM),
            "two nodes have host 'h'",
        ),
        (
            lambda: System((Node("a", (cpu("c", ranks=40000), cpu("d", ranks=30000))),), NET, SHM),
            "runs 70000 ranks .* at most 65536",
        ),
    ],
)
def test_bad_descriptions_say_what_is_wrong(make, message: str) -> None:
    with pytest.raises(DescriptionError, match=message):
        make()


def test_guesses_fill_what_is_missing_and_say_so() -> None:
    device = guess_device("c", "aarch64", cores=4, memory_bytes=1 << 30)
    assert device.cores == 4 and device.memory_bytes == 1 << 30
    assert device.guessed == ("peak_gflops", "mem_bw_gbs")
    assert device.peak_gflops > 0 and device.mem_bw_gbs > 0
    h100 = guess_device("g", "sm_90a")
    assert h100.host_link == GUESSED_HOST_LINK
    assert h100.guessed == ("peak_gflops", "mem_bw_gbs", "memory_bytes")
    measured = guess_device("g", "sm_80", peak_gflops=1.0, guessed=["peak_gflops"])
    assert measured.peak_gflops == 1.0 and "peak_gflops" in measured.guessed


def test_detect_describes_this_machine_as_one_node() -> None:
    system = detect()
    assert len(system.nodes) == 1
    cpu0 = system.device("cpu0")
    assert cpu0.cores is not None and cpu0.cores >= 1
    assert cpu0.memory_bytes > 0
    assert "peak_gflops" in cpu0.guessed and system.network.guessed


def test_detect_with_other_cores_rates_each_core_as_this_machine_does() -> None:
    here = detect().device("cpu0")
    other = detect(cores=16).device("cpu0")
    assert other.cores == 16
    assert other.core_gflops == here.core_gflops
    assert other.peak_gflops == pytest.approx(here.core_gflops * 16)


def test_detect_reads_gpus_from_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "nvidia-smi"
    fake.write_text(
        "#!/bin/sh\n"
        "echo '0, NVIDIA H100 80GB HBM3, 9.0, 81559'\n"
        "echo '1, Some Future GPU, 99.0, 1000'\n"  # unknown to LLVM 22: left out
        "echo '2, NVIDIA A100-SXM4-40GB, 8.0, 40960'\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    system = detect()
    gpus = [d for d in system.devices if d.kind == "gpu"]
    assert [(g.name, g.arch, g.memory_bytes) for g in gpus] == [
        ("gpu0", "sm_90", 81559 << 20),
        ("gpu2", "sm_80", 40960 << 20),
    ]
    assert gpus[0].guessed == ("peak_gflops", "mem_bw_gbs")
    assert system.rank_count == 3


def test_hostfile_for_two_nodes() -> None:
    system = two_nodes()
    assert hostfile_text(system, 6, "mpich") == "h0:4\nn1:2\n"
    assert hostfile_text(system, 6, "openmpi") == "h0 slots=4\nn1 slots=2\n"
    assert hostfile_text(system, 5, "mpich") == "h0:4\nn1:1\n"
    assert hostfile_text(system, 3, "mpich") == "h0:3\n"
    assert [(node.name, n) for node, n in rank_slots(system, 6)] == [("n0", 4), ("n1", 2)]
    # Node n1's 4 cores shared by 2 ranks; n0's 8 by 4.
    assert threads_per_rank(system, 6) == 2
    assert threads_per_rank(system, 4) == 2
    assert threads_per_rank(system, 1) == 8


def test_too_many_ranks_is_an_error() -> None:
    with pytest.raises(DhirError, match="runs 6 ranks \\(n0: 4, n1: 2\\); 7 ranks do not fit"):
        hostfile_text(two_nodes(), 7, "mpich")


def test_launch_plan_writes_a_hostfile_only_across_nodes(tmp_path: Path) -> None:
    plan = launch_plan(two_nodes(), None, "openmpi", tmp_path)
    assert plan.ranks == 6 and plan.threads == 2
    assert plan.hostfile is not None and plan.hostfile.parent == tmp_path
    assert plan.hostfile.read_text() == "h0 slots=4\nn1 slots=2\n"
    one = System((two_nodes().nodes[0],), NET, SHM)
    local = launch_plan(one, 4, "mpich", tmp_path)
    assert (local.ranks, local.hostfile, local.threads) == (4, None, 2)
    with pytest.raises(DhirError, match="runs 4 ranks \\(n0: 4\\), not 2: a program runs on all"):
        launch_plan(one, 2, "mpich", tmp_path)


CROWDED_NODE = """\
name = "m"
[[nodes]]
name = "n"
[[nodes.devices]]
name = "c"
arch = "x86_64"
cores = 2
ranks = 5
"""


def test_launch_plan_warns_of_ranks_that_outnumber_a_node_s_cores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """5 ranks on a node of 2 cores were laid out without a word."""
    path = tmp_path / "m.toml"
    path.write_text(CROWDED_NODE)
    assert launch_plan(read_system(path), None, "mpich", tmp_path, str(path)).ranks == 5
    assert capsys.readouterr().err == (
        f"{path}:8:1: warning: node 'n' runs 5 ranks on 2 cores: MPI ranks wait by polling, "
        "each on a core, so the run will be slow; give its devices at most 2 ranks in all\n"
    )
    for fits in (
        CROWDED_NODE.replace("cores = 2", "cores = 5"),
        CROWDED_NODE.replace("cores = 2\n", ""),
    ):
        path.write_text(fits)  # as many cores, or a guessed count: nothing to say
        launch_plan(read_system(path), None, "mpich", tmp_path, str(path))
        assert capsys.readouterr().err == ""


def test_launch_plan_writes_again_a_hostfile_cut_short_or_a_fifo(
    tmp_path: Path, no_block: None
) -> None:
    """A hostfile of the cache cut short (or edited by hand) was launched as it was: the
    ranks on other hosts; a FIFO in its place blocked the write for good."""
    plan = launch_plan(two_nodes(), None, "mpich", tmp_path)
    assert plan.hostfile is not None
    plan.hostfile.write_text("h0:4\n")
    assert launch_plan(two_nodes(), None, "mpich", tmp_path).hostfile == plan.hostfile
    assert plan.hostfile.read_text() == "h0:4\nn1:2\n"
    plan.hostfile.unlink()
    os.mkfifo(plan.hostfile)
    launch_plan(two_nodes(), None, "mpich", tmp_path)
    assert plan.hostfile.read_text() == "h0:4\nn1:2\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [plan.hostfile.name]  # none aside


def dhir(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dhir.cli.main", *args], capture_output=True, text=True, timeout=300
    )


def vector_add_inputs(tmp_path: Path) -> list[str]:
    arrays = [np.arange(20, dtype=np.int32), np.ones(20, np.int32), np.zeros(20, np.int32)]
    args = []
    for k, array in enumerate(arrays):
        np.save(tmp_path / f"in{k}.npy", array)
        args += ["--input", str(tmp_path / f"in{k}.npy")]
    return args


@pytest.mark.mpi
@needs_llvm
def test_run_with_a_one_node_description_uses_its_ranks(tmp_path: Path) -> None:
    local = detect()
    cpu0 = replace(local.device("cpu0"), ranks=2)
    write_system(local.with_device(cpu0), tmp_path / "here.toml")
    out = tmp_path / "out"
    result = dhir(
        "run",
        str(EXAMPLES / "vector_add.mlir"),
        "--system",
        str(tmp_path / "here.toml"),
        *vector_add_inputs(tmp_path),
        "--output-dir",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    a = np.arange(20, dtype=np.int32)
    np.testing.assert_array_equal(np.load(out / "arg0.npy"), (a + 1) * 2)
    np.testing.assert_array_equal(np.load(out / "arg2.npy"), a + 1)


@pytest.mark.mpi
@needs_llvm
def test_run_across_two_local_hosts_with_a_hostfile(tmp_path: Path) -> None:
    """Two 'nodes' on this machine under two of its names: the hostfile path, end to end
    (MPICH: OpenMPI sees through the names and refuses the duplicate)."""
    nodes = (
        Node("a", (cpu("cpu_a", cores=1),), host="localhost"),
        Node("b", (cpu("cpu_b", cores=1),), host=os.uname().nodename),
    )
    if nodes[1].host in ("localhost", ""):
        pytest.skip("this machine has no name other than localhost")
    write_system(System(nodes, NET, SHM), tmp_path / "two.json")
    out = tmp_path / "out"
    result = dhir(
        "run",
        str(EXAMPLES / "vector_add.mlir"),
        "--system",
        str(tmp_path / "two.json"),
        *vector_add_inputs(tmp_path),
        "--output-dir",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    a = np.arange(20, dtype=np.int32)
    np.testing.assert_array_equal(np.load(out / "arg0.npy"), (a + 1) * 2)


def test_run_with_other_ranks_than_described_is_an_error(tmp_path: Path) -> None:
    write_system(System((Node("n", (cpu("c"),)),), NET, SHM), tmp_path / "one.toml")
    result = dhir(
        "run",
        str(EXAMPLES / "vector_add.mlir"),
        "-n",
        "3",
        "--system",
        str(tmp_path / "one.toml"),
        *vector_add_inputs(tmp_path),
    )
    assert result.returncode == 1
    assert "runs 1 rank (n: 1), not 3: a program runs on all of them" in result.stderr
    assert "or give -n 1 (ranks=1 in the API)" in result.stderr
    # The file, not only the description's name ('system' where it gives none).
    assert f"the machine description 'system' ({tmp_path / 'one.toml'}) runs" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.mpi
@needs_llvm
def test_a_built_executable_runs_on_a_description_with_its_rank_count(tmp_path: Path) -> None:
    exe = tmp_path / "vector_add"
    built = dhir("compile", str(EXAMPLES / "vector_add.mlir"), "-n", "2", "-o", str(exe))
    assert built.returncode == 0, built.stderr
    local = detect()
    two = local.with_device(replace(local.device("cpu0"), ranks=2))
    write_system(two, tmp_path / "two.toml")
    write_system(local, tmp_path / "one.toml")
    inputs = vector_add_inputs(tmp_path)
    ok = dhir("run", str(exe), "--system", str(tmp_path / "two.toml"), *inputs, "--print")
    assert ok.returncode == 0, ok.stderr
    assert "[ 2  4  6" in ok.stdout
    wrong = dhir("run", str(exe), "--system", str(tmp_path / "one.toml"), *inputs)
    assert wrong.returncode == 1
    assert f"was built for 2 ranks and --system {tmp_path / 'one.toml'} runs 1 rank" in (
        wrong.stderr
    )


def test_core_rates_are_guessed_from_the_node_when_left_out() -> None:
    cpu = guess_device("c", "x86_64", cores=4, peak_gflops=200.0, mem_bw_gbs=8.0)
    assert cpu.core_gflops is None  # read as written: a file without them stays so
    filled = with_core_guesses(cpu)
    assert (filled.core_gflops, filled.core_mem_bw_gbs) == (50.0, 8.0)  # at most the node's
    assert (filled.core_cache_bytes, filled.llc_bytes) == (1 << 20, 8 << 20)
    assert (filled.core_cache_bw_gbs, filled.llc_bw_gbs) == (32.0, 16.0)
    assert {"core_gflops", "llc_bw_gbs"} <= set(filled.guessed)
    given = with_core_guesses(replace(cpu, core_mem_bw_gbs=12.0, llc_bytes=1 << 25))
    assert (given.core_cache_bw_gbs, given.llc_bytes) == (48.0, 1 << 25)
    assert "core_mem_bw_gbs" not in given.guessed and "llc_bytes" not in given.guessed
    assert with_core_guesses(guess_device("g", "sm_90")).core_gflops is None


def test_core_rates_round_trip_and_belong_to_cpus() -> None:
    cpu = replace(guess_device("c", "x86_64", cores=2), core_gflops=30.0, llc_bytes=1 << 22)
    system = System((Node("n", (cpu,)),), Link(1.0, 1.0), Link(1.0, 1.0))
    data = to_dict(system)
    assert data["nodes"][0]["devices"][0]["core_gflops"] == 30.0
    assert from_dict(data, "x") == system
    with pytest.raises(DescriptionError, match="core_gflops are for CPUs"):
        replace(guess_device("g", "sm_90"), core_gflops=1.0)
    with pytest.raises(DescriptionError, match="llc_bytes must be a positive whole number"):
        replace(cpu, llc_bytes=0.5)


def test_loop_rate_and_fp_latency_are_guessed_round_trip_and_belong_to_cpus(
    tmp_path: Path,
) -> None:
    cpu = guess_device("c", "x86_64", cores=4, peak_gflops=200.0, mem_bw_gbs=8.0)
    filled = with_core_guesses(cpu)
    assert (filled.core_loop_gflops, filled.fp_latency_ns) == (50.0 / 8, 0.85)
    assert {"core_loop_gflops", "fp_latency_ns"} <= set(filled.guessed)
    given = replace(cpu, core_loop_gflops=4.5, fp_latency_ns=0.8)
    assert (with_core_guesses(given).core_loop_gflops, with_core_guesses(given).fp_latency_ns) == (
        4.5,
        0.8,
    )
    system = System((Node("n", (given,)),), Link(1.0, 1.0), Link(1.0, 1.0))
    for name in ("m.toml", "m.json"):
        write_system(system, tmp_path / name)
        assert read_system(tmp_path / name) == system
    assert from_dlti(to_dlti(system)) == system
    with pytest.raises(DescriptionError, match="fp_latency_ns are for CPUs"):
        replace(guess_device("g", "sm_90"), fp_latency_ns=1.0)
    with pytest.raises(DescriptionError, match="core_loop_gflops"):
        replace(cpu, core_loop_gflops=-1.0)


def test_cache_sizes_come_from_sysfs(tmp_path: Path) -> None:
    for k, (level, kind, size) in enumerate(
        [(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K"),
         (3, "Unified", "105M")]
    ):  # fmt: skip
        index = tmp_path / f"index{k}"
        index.mkdir()
        (index / "level").write_text(f"{level}\n")
        (index / "type").write_text(f"{kind}\n")
        (index / "size").write_text(f"{size}\n")
    assert local_caches(tmp_path) == (2 << 20, 105 << 20)
