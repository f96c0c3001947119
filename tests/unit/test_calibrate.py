"""`dhir calibrate` and finding this machine's description."""

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from two_hosts import (
    TwoHosts,
    Unavailable,
    opened_for,
    skip_where_it_hangs,
    system_toml,
)

from dhir.ir.diagnostics import DhirError
from dhir.machine.description import Link, guess_device
from dhir.machine.detect import detect, load_local_system
from dhir.machine.files import default_system_path, read_system, write_system
from dhir.toolchain import calibrate
from dhir.toolchain.calibrate import (
    FULL,
    TRIAD_BYTES,
    Measurements,
    apply,
    curve_footprints,
    measure_curve,
)
from dhir.toolchain.calibrate_steps import Result, fit_link, noisy, results

needs_clang = pytest.mark.skipif(shutil.which("clang-22") is None, reason="needs clang-22")


def test_fit_link_gives_both_times_back() -> None:
    latency, bandwidth = fit_link(8, 1e-6, 8 + 10**9, 1e-6 + 0.5)
    assert latency == pytest.approx(1.0)
    assert bandwidth == pytest.approx(2.0)
    assert Link(latency, bandwidth).time(8 + 10**9) == pytest.approx(1e-6 + 0.5)
    # Noise that makes the large message look faster than the small one: its average rate.
    assert fit_link(8, 2e-6, 1000, 1e-6)[1] == pytest.approx(1000 / 1e-6 / 1e9)


def test_results_are_read_from_the_programs_lines() -> None:
    output = "noise\npingpong 8 1.5e-06 1 0.4000\ncheck 3\npingpong 4096 2.0e-06 1\n"
    assert results(output, "pingpong") == [Result(8.0, 1.5e-6, 0.4), Result(4096.0, 2.0e-6)]
    # The first spreads over 40% of its median: a warning says so; the second has no spread.
    assert "noisy: the middle half of the trials spread over 40%" in noisy(
        results(output, "pingpong")[0]
    )
    assert noisy(results(output, "pingpong")[1]) == ""
    with pytest.raises(DhirError, match="'triad' printed no result; its output:\nnoise"):
        results(output, "triad")


def test_apply_replaces_guesses_and_says_what_stays_guessed() -> None:
    system = detect()
    gpu = guess_device("gpu0", "sm_90")
    node = replace(system.nodes[0], devices=(*system.nodes[0].devices, gpu))
    system = replace(system, nodes=(node,))
    said: list[str] = []
    cpu = system.device("cpu0")
    result = apply(system, cpu, Measurements(1.23456, 7.891011, 12.345678, 98.765432), said.append)
    measured = result.device("cpu0")
    assert (measured.peak_gflops, measured.mem_bw_gbs) == (98.77, 12.35)
    assert "peak_gflops" not in measured.guessed and "mem_bw_gbs" not in measured.guessed
    assert result.intra_node == Link(1.235, 7.891)
    assert result.device("gpu0") == gpu and result.network == system.network  # measured later
    assert any("network between nodes: not measured" in line for line in said)


def test_apply_stores_one_cores_rates() -> None:
    system = detect()
    cpu = system.device("cpu0")
    core = {"core_gflops": 33.333333, "core_mem_bw_gbs": 9.87654, "llc_bw_gbs": 20.0}
    result = apply(system, cpu, Measurements(1, 1, 1, 1, core), lambda _: None).device("cpu0")
    assert (result.core_gflops, result.core_mem_bw_gbs, result.llc_bw_gbs) == (33.33, 9.877, 20.0)
    assert not set(core) & set(result.guessed)
    assert result.llc_bytes == cpu.llc_bytes  # sizes come from detection, not measurement


def test_apply_stores_the_measured_curve() -> None:
    system = detect()
    cpu = system.device("cpu0")
    curve = ((1 << 20, 80.0), (64 << 20, 20.0))
    measured = Measurements(1, 1, 1, 1, curve=curve)
    assert apply(system, cpu, measured, lambda _: None).device("cpu0").core_bw_curve == curve


def test_the_curve_spans_the_caches_and_beyond() -> None:
    cpu = replace(detect().device("cpu0"), core_cache_bytes=2 << 20, llc_bytes=32 << 20)
    sizes = curve_footprints(cpu)
    assert sizes[0] <= 512 << 10 and sizes[-1] > (128 << 20) - 24  # whole triad elements
    assert sizes == sorted(set(sizes))
    assert all(b / a < 1.5 for a, b in zip(sizes, sizes[1:]))  # two points per doubling


def test_the_curve_keeps_each_footprints_median_over_the_passes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cpu = replace(detect().device("cpu0"), core_cache_bytes=2 << 20, llc_bytes=32 << 20)
    sizes = curve_footprints(cpu)
    # A busy spell slows pass 2's small footprints and pass 3's large ones.
    half = len(sizes) // 2
    slow = {1: set(), 2: set(sizes[:half]), 3: set(sizes[half:])}
    calls: list[tuple[int, int]] = []

    def fake_run(exe: Path, args: list[str], threads: int) -> Result:
        footprint = int(args[1]) * TRIAD_BYTES
        done = sum(1 for size, _ in calls if size == footprint) + 1
        calls.append((footprint, int(args[2])))
        seconds = 2.0 if footprint in slow[done] else 1.0
        return Result(1e9 * footprint / (1 << 20), seconds)  # fast: as many GB/s as MiB

    monkeypatch.setattr(calibrate, "_run_local", fake_run)
    curve = measure_curve(Path("unused"), FULL, cpu, lambda _: None)
    assert len(calls) == FULL.curve_passes * len(sizes)
    assert [size for size, _ in curve] == sizes
    for size, rate in curve:
        assert rate == pytest.approx(size / (1 << 20), rel=1e-3)  # no slow pass kept
    # Each pass runs its share of the trials.
    assert all(trials < FULL.triad_trials * 4 for _, trials in calls)


def test_load_local_system_prefers_env_then_calibrated_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DHIR_SYSTEM", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    assert default_system_path() == tmp_path / "config" / "dhir" / "system.toml"
    assert load_local_system() == detect()
    calibrated = replace(detect(), name="calibrated")
    write_system(calibrated, default_system_path())
    assert load_local_system() == calibrated
    named = replace(detect(), name="named")
    write_system(named, tmp_path / "named.json")
    monkeypatch.setenv("DHIR_SYSTEM", str(tmp_path / "named.json"))
    assert load_local_system() == named
    monkeypatch.setenv("DHIR_SYSTEM", str(tmp_path / "missing.toml"))
    with pytest.raises(DhirError, match=r"machine description .* \(named by \$DHIR_SYSTEM\)$"):
        load_local_system()


def test_default_path_without_xdg(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    assert default_system_path() == Path.home() / ".config" / "dhir" / "system.toml"


def dhir(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dhir.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def test_a_bad_output_name_fails_before_measuring(tmp_path: Path) -> None:
    result = dhir("calibrate", "-o", str(tmp_path / "system.yaml"))
    assert result.returncode == 1
    assert "a .toml or .json file, not '.yaml'" in result.stderr
    assert "ping-pong" not in result.stderr
    result = dhir("calibrate", "-o", str(tmp_path / "missing" / "system.json"))
    assert result.returncode == 1 and "cannot write the machine description" in result.stderr
    assert f"there is no folder {tmp_path / 'missing'}; make it first" in result.stderr
    assert "ping-pong" not in result.stderr


@pytest.mark.mpi
@needs_clang
def test_calibrate_measures_and_writes_the_default_file(tmp_path: Path) -> None:
    result = dhir("calibrate", "--quick", env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    path = tmp_path / "dhir" / "system.toml"
    assert result.stdout.strip() == str(path)
    system = read_system(path)
    cpu0 = system.device("cpu0")
    assert "peak_gflops" not in cpu0.guessed and "mem_bw_gbs" not in cpu0.guessed
    assert cpu0.peak_gflops > 0 and cpu0.mem_bw_gbs > 0
    assert not system.intra_node.guessed and system.intra_node.bandwidth_gbs > 0
    assert cpu0.core_bw_curve is not None and len(cpu0.core_bw_curve) >= 8
    assert cpu0.core_loop_gflops is not None and cpu0.core_loop_gflops > 0
    assert cpu0.fp_latency_ns is not None and 0.05 < cpu0.fp_latency_ns < 50
    assert not {"core_loop_gflops", "fp_latency_ns"} & set(cpu0.guessed)
    assert system.network.guessed  # one node cannot measure it
    for step in ("latency", "GB/s", "GFLOP/s", "ns per op", "(trials +-", "network between"):
        assert step in result.stderr


HOSTS = ("n0.example", "n1.example")


def two_node_description(path: Path) -> Path:
    """Two nodes of one 2-rank CPU each, on HOSTS; links left to guesses."""
    nodes = [
        f'[[nodes]]\nname = "n{k}"\nhost = "{host}"\n\n[[nodes.devices]]\nname = "n{k}.cpu"\n'
        f'arch = "x86_64"\ncores = 2\nranks = 2\n'
        for k, host in enumerate(HOSTS)
    ]
    path.write_text("\n".join(nodes))
    return path


def test_calibrate_links_puts_one_rank_on_each_node_then_two_on_the_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layouts: list[str] = []

    def pingpong(*args: object) -> tuple[float, float]:
        hostfile = args[5]
        assert isinstance(hostfile, Path)
        layouts.append(hostfile.read_text())
        return (3.0, 1.5) if len(layouts) == 1 else (0.5, 9.0)

    monkeypatch.setenv("DHIR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(calibrate, "build_program", lambda directory, mpi: directory / "exe")
    monkeypatch.setattr(calibrate, "measure_pingpong", pingpong)
    base = read_system(two_node_description(tmp_path / "two.toml"))
    said: list[str] = []
    result = calibrate.calibrate_links(base, "mpich", quick=True, say=said.append)
    assert layouts == [f"{HOSTS[0]}:1\n{HOSTS[1]}:1\n", f"{HOSTS[0]}:2\n"]
    assert result.network == Link(3.0, 1.5) and result.intra_node == Link(0.5, 9.0)
    assert result.nodes == base.nodes  # devices kept as described
    assert any("devices: kept as described" in line for line in said)
    assert list((tmp_path / "cache").iterdir()) == []  # the build directory is removed


def test_calibrate_links_needs_two_nodes() -> None:
    with pytest.raises(DhirError, match="two nodes or more"):
        calibrate.calibrate_links(detect())


def test_calibrating_several_nodes_needs_an_output_file(tmp_path: Path) -> None:
    result = dhir("calibrate", "--system", str(two_node_description(tmp_path / "two.toml")))
    assert result.returncode == 1
    assert "describes several nodes" in result.stderr and "-o FILE" in result.stderr
    assert "ping-pong" not in result.stderr


@pytest.fixture(scope="module")
def hosts(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TwoHosts]:
    """Two hosts over TCP (tests/unit/two_hosts.py): namespaces where they can be made."""
    yield from opened_for(request, tmp_path_factory, None, "c")


def calibrate_two_hosts(hosts: TwoHosts, work: Path, mpi: str) -> tuple[Path, str]:
    """`dhir calibrate --quick --system` run on the first host: the file written, stderr."""
    description = work / "two.toml"
    description.write_text(system_toml(hosts, 2))
    out = work / "measured.toml"
    command = [sys.executable, "-m", "dhir.cli.main", "calibrate", "--quick", "--mpi", mpi]
    command += ["--system", str(description), "-o", str(out)]
    env_command = ["env", f"DHIR_CACHE_DIR={work / 'cache'}", *command]
    result = hosts.run(hosts.hosts[0], env_command, mpi, 300)
    assert result.returncode == 0, result.stderr
    return out, result.stderr


@pytest.mark.mpi
@needs_clang
@pytest.mark.parametrize("mpi", ["mpich", "openmpi"])
def test_calibrate_measures_the_network_between_two_hosts(
    hosts: TwoHosts, tmp_path: Path, mpi: str
) -> None:
    skip_where_it_hangs(hosts, mpi)
    try:
        before = hosts.link_bytes()[0]
    except Unavailable:
        before = None
    out, said = calibrate_two_hosts(hosts, tmp_path, mpi)
    first, second = hosts.hosts
    assert f"ping-pong between {first} and {second}" in said
    assert f"ping-pong between 2 ranks on {first}" in said
    system = read_system(out)
    for link in (system.network, system.intra_node):
        assert not link.guessed and link.latency_us > 0 and link.bandwidth_gbs > 0
    assert system.nodes == read_system(tmp_path / "two.toml").nodes
    # Not compared: on a loaded 2-core machine shared memory's latency was seen above TCP's
    # (12.9 against 7.0 us). The bytes on the link tell which way the messages went.
    if before is not None:  # the large message crossed the link (2 ranks on one host do not)
        assert hosts.link_bytes()[0] - before >= calibrate.QUICK.large_message


def test_an_output_that_is_a_directory_is_refused_before_measuring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from dhir.cli import calibrate as command
    from dhir.cli.main import main

    def measure(*_: object) -> None:
        raise AssertionError("measured before checking -o")

    monkeypatch.setattr(command, "calibrate", measure)
    folder = tmp_path / "dir.toml"
    folder.mkdir()
    assert main(["calibrate", "--quick", "-o", str(folder)]) == 1
    assert f"-o {folder} is a directory; name the description's file" in capsys.readouterr().err


@pytest.mark.mpi
@needs_clang
def test_a_ping_pong_whose_host_mpirun_cannot_reach_says_which(tmp_path: Path) -> None:
    """`dhir calibrate --system` with a host no ssh reaches showed only mpirun's output;
    it names the hosts and what to check, as `dhir run` does, and only where no rank got
    past MPI_Init (a rank that did marks itself started)."""
    import socket

    from dhir.machine.layout import slots_text
    from dhir.toolchain.launch import run_mpi_program
    from dhir.toolchain.options import RunOptions

    exe = calibrate.build_program(tmp_path, "mpich")
    hostfile = tmp_path / "hosts"
    hostfile.write_text(slots_text([(socket.gethostname(), 1), ("node1.invalid", 1)], "mpich"))
    options = RunOptions(ranks=2, mpi="mpich", timeout=60, hostfile=hostfile)
    with pytest.raises(DhirError) as caught:
        run_mpi_program(exe, ["pingpong", "1", "8:1"], options)
    message = str(caught.value)
    assert "no rank got past MPI_Init" in message and "node1.invalid)" in message, message
    assert "ssh HOST true" in message, message
    # One rank, started on this host: the ping-pong aborts, past MPI_Init.
    hostfile.write_text(slots_text([(socket.gethostname(), 1)], "mpich"))
    with pytest.raises(DhirError) as caught:
        run_mpi_program(exe, ["pingpong", "1", "8:1"], replace(options, ranks=1))
    assert "MPI_Init" not in str(caught.value), str(caught.value)
