"""`dhir schedule`'s pictures and simulator options, run in-process as users call them."""

import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from dhir.cli.main import main
from dhir.cli.schedule import gantt_paths
from dhir.ir.text import parse_file, print_module
from dhir.machine.dlti import attach
from dhir.machine.files import read_system

DATA = Path(__file__).parent / "data"
TOPCUOGLU = DATA / "topcuoglu2002.json"  # 10 tasks on 3 devices; HEFT's makespan is 80


def schedule(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["schedule", "--graph", str(TOPCUOGLU), "--placement", "heft", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_simulate_in_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = schedule(capsys, "--json", "--simulate")
    assert code == 0, err
    result = json.loads(out)
    # Without contention the replay agrees with HEFT's own prediction.
    assert result["makespan"] == result["simulated_makespan"] == 80


def test_no_simulated_makespan_unless_asked(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = schedule(capsys, "--json")
    assert code == 0
    assert "simulated_makespan" not in json.loads(out)


def test_simulate_in_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = schedule(capsys, "--simulate")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[-2] == "makespan: 80"
    assert lines[-1].startswith("simulated makespan: 80 ")


def test_nodes_sharing_a_link_slow_the_replay(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = schedule(capsys, "--json", "--simulate", "--node-size", "1")
    assert code == 0, err
    result = json.loads(out)
    assert result["simulated_makespan"] > result["makespan"]
    code, out, _ = schedule(capsys, "--simulate", "--node-size", "1")
    assert "nodes of 1 devices sharing one network link" in out.splitlines()[-1]


@pytest.mark.parametrize(
    ("args", "message", "status"),
    [
        (["--node-size", "2"], "add --simulate", 2),  # a malformed command line
        (["--gantt", "missing/chart.png"], "cannot write missing/chart.png", 1),
        (["--dot", "missing/graph.dot"], "cannot write missing/graph.dot", 1),
    ],
)
def test_bad_options(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    args: list[str],
    message: str,
    status: int,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = schedule(capsys, *args)
    assert code == status
    assert message in err
    assert "Traceback" not in err


@pytest.mark.parametrize("option", ["--gantt", "--dot"])
def test_a_folder_is_not_a_chart(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, option: str
) -> None:
    """--gantt DIR drew DIR.png and DIR.svg beside the folder, and said nothing."""
    folder = tmp_path / "charts"
    folder.mkdir()
    code, out, err = schedule(capsys, option, str(folder))
    assert code == 1 and not out
    assert f"{option} {folder} is a folder; name the file to write" in err
    assert [p.name for p in tmp_path.iterdir()] == ["charts"]


@pytest.mark.parametrize("option", ["--gantt", "--dot"])
def test_a_chart_in_a_folder_that_is_not_there_is_refused_first(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, option: str
) -> None:
    """Said before placing, as a missing folder (not after, as the writer's ENOENT)."""
    named = tmp_path / "charts" / "chart.svg"
    code, out, err = schedule(capsys, option, str(named))
    assert code == 1 and not out
    assert f"cannot write {named}: there is no folder {named.parent}; make it first" in err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("option", ["--gantt", "--dot"])
def test_a_chart_in_a_folder_this_user_cannot_write_is_refused_first(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    option: str,
) -> None:
    """A read-only folder was said after placing and printing, as the writer's EACCES."""
    folder = tmp_path / "charts"
    folder.mkdir(mode=0o555)
    real = os.access  # as it answers a user other than root, whom modes do not stop

    def access(path: str | Path, mode: int) -> bool:
        return not (mode & os.W_OK and Path(path) == folder) and real(path, mode)

    monkeypatch.setattr(os, "access", access)
    named = folder / "chart.svg"
    code, out, err = schedule(capsys, option, str(named))
    assert code == 1 and not out
    assert f"cannot write {named}: the folder {folder} is not writable" in err


def test_gantt_without_a_suffix_writes_png_and_svg(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = schedule(capsys, "--gantt", str(tmp_path / "chart"))
    assert code == 0, err
    assert (tmp_path / "chart.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    text = " ".join(ET.parse(tmp_path / "chart.svg").getroot().itertext())
    assert all(f"T{k}" in text for k in range(1, 11))


def test_gantt_with_a_suffix_writes_that_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = schedule(capsys, "--gantt", str(tmp_path / "chart.svg"))
    assert code == 0, err
    assert [p.name for p in tmp_path.iterdir()] == ["chart.svg"]


def test_gantt_paths() -> None:
    assert gantt_paths(Path("a/b.PNG")) == [Path("a/b.PNG")]
    assert gantt_paths(Path("b")) == [Path("b.png"), Path("b.svg")]
    assert gantt_paths(Path("b.pdf")) == [Path("b.pdf.png"), Path("b.pdf.svg")]


def test_dot(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "graph.dot"
    code, out, err = schedule(capsys, "--json", "--dot", str(path))
    assert code == 0, err
    text = path.read_text()
    assignment = json.loads(out)["assignment"]
    assert text.startswith('digraph "schedule" {') and text.rstrip().endswith("}")
    for task, device in assignment.items():
        assert f'"{task}" [label="{task}\\non {device}\\n' in text
    assert '"T1" -> "T2"' in text


# --- programs rather than task graphs ------------------------------------------------

EXAMPLES = Path(__file__).parents[2] / "examples"
MACHINE_DOC = Path(__file__).parents[2] / "docs" / "machine.md"


def run_schedule(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["schedule", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_program_round_robin_on_n_ranks(capsys: pytest.CaptureFixture[str]) -> None:
    program = str(EXAMPLES / "hazards.mlir")
    code, out, err = run_schedule(capsys, program, "-n", "2", "--algorithm", "round-robin")
    assert code == 0, err
    assert out.startswith("ranks: 2 alike CPUs")
    rows = [line.split() for line in out.splitlines()]
    placed = {row[0]: row[1] for row in rows if len(row) == 4 and row[1].startswith("rank")}
    placed.pop("(end)", None)
    assert placed == {f"t{k}": f"rank{k % 2}" for k in range(4)}  # the tasks' SSA names


def test_program_json_lists_each_schedule(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_schedule(capsys, str(EXAMPLES / "host_between.mlir"), "-n", "3", "--json")
    assert code == 0, err
    schedules = json.loads(out)["schedules"]
    assert len(schedules) == 2
    for entry in schedules:
        assert entry["makespan"] == max(entry["finish"].values())
        assert set(entry["assignment"].values()) <= {"rank0", "rank1", "rank2"}
        assert entry["as_built_makespan"] > 0  # its value: tests/unit/test_as_built.py


def test_program_table_says_the_makespan_as_built(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_schedule(capsys, str(EXAMPLES / "hazards.mlir"), "-n", "2")
    assert code == 0, err
    assert re.search(r"^as built: \S+ s \(each rank runs its tasks in program order", out, re.M)


def test_program_table_says_its_times_are_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    """A program's times are seconds, which the table did not say (`makespan: 4.09e-09`);
    a --graph's are in the graph's own units, and stay bare."""
    code, out, err = run_schedule(
        capsys, str(EXAMPLES / "hazards.mlir"), "-n", "2", "--simulate", "--node-size", "1"
    )
    assert code == 0, err
    assert out.splitlines()[2].split()[:6] == ["task", "device", "start", "(s)", "finish", "(s)"]
    assert re.search(r"^makespan: \S+ s$", out, re.M)
    assert re.search(r"^simulated makespan: \S+ s \(.* waited \S+ s in all\)$", out, re.M)


def test_program_on_a_described_machine_puts_gpu_tasks_on_gpus(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    toml = MACHINE_DOC.read_text().split("```toml\n", 1)[1].split("```", 1)[0]
    system = tmp_path / "cluster.toml"
    system.write_text(toml)
    program = str(EXAMPLES / "proposal.mlir")
    code, out, err = run_schedule(capsys, program, "--system", str(system), "--json")
    assert code == 0, err
    (entry,) = json.loads(out)["schedules"]
    gpu_ranks = {"rank1", "rank2", "rank5"}  # docs/machine.md: ranks 1, 2 and 5 are GPUs
    placed = entry["assignment"]
    gpu_tasks = [t for t in placed if t != "(end)" and placed[t] in gpu_ranks]
    assert gpu_tasks, placed
    code, out, err = run_schedule(capsys, program, "--system", str(system))
    assert "rank1 = node0.gpu0 (sm_90) on node0" in out


def test_gpu_task_on_a_system_of_cpus_is_an_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    system = tmp_path / "cpus.json"
    cpu = {"name": "cpu0", "arch": "x86_64", "peak_gflops": 50.0, "mem_bw_gbs": 20.0,
           "memory_bytes": 1 << 33, "cores": 4, "ranks": 2}  # fmt: skip
    system.write_text(json.dumps({"nodes": [{"name": "n0", "devices": [cpu]}]}))
    program = str(EXAMPLES / "proposal.mlir")
    code, _, err = run_schedule(capsys, program, "--system", str(system))
    assert code == 1
    assert (
        "proposal.mlir:18:14" in err and "sm_90" in err and "no rank runs on such a device" in err
    )


def test_local_ranks_drive_a_gpu_for_gpu_tasks(capsys: pytest.CaptureFixture[str]) -> None:
    # As dhir run places them without --system: each rank may run GPU tasks on a GPU of
    # this machine (one assumed where none is found; the run then says there is none).
    code, out, err = run_schedule(capsys, str(EXAMPLES / "proposal.mlir"), "-n", "2")
    assert code == 0, err
    assert "GPU" in out.splitlines()[0] and "task1.piece0" in out


def test_program_pictures_per_schedule(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    program = str(EXAMPLES / "host_between.mlir")
    gantt = tmp_path / "chart.svg"
    code, _, err = run_schedule(capsys, program, "-n", "2", "--gantt", str(gantt))
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chart.0.svg", "chart.1.svg"]


@pytest.mark.parametrize(
    "args, message",
    [
        ((), "either a program FILE or --graph"),
        (("x.mlir", "--graph", "g.json"), "either a program FILE or --graph"),
        (("--graph", str(TOPCUOGLU), "-n", "2"), "a --graph names its devices"),
        (("--graph", str(TOPCUOGLU), "--entry", "f"), "--entry says how to read a program"),
        (("--graph", str(TOPCUOGLU), "--target", "cpu"), "--target says how to read"),
        (("--graph", str(TOPCUOGLU), "--no-codedrop"), "--no-codedrop says how to read"),
        (("--graph", str(TOPCUOGLU), "--gantt-plan"), "give --gantt PATH too"),
    ],
)
def test_bad_program_arguments(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str
) -> None:
    code, _, err = run_schedule(capsys, *args)
    assert code == 2  # options missing or at odds: a malformed command line
    assert message in err


def test_a_graph_has_no_other_chart_to_plan(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # A --graph is always drawn as planned: --gantt-plan would choose nothing.
    chart = tmp_path / "g.svg"
    code, _, err = run_schedule(
        capsys, "--graph", str(TOPCUOGLU), "--gantt", str(chart), "--gantt-plan"
    )
    assert code == 2
    assert "a --graph is always drawn as planned: leave --gantt-plan out" in err
    assert not chart.exists()


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            None,
            "no function @nope to run; the module defines @main (choose one with --entry, or entry= in dhir.run)",
        ),
        ("func.func private @nope()\n", "entry function @nope has no body"),
    ],
)
def test_an_entry_the_program_lacks_is_refused_as_dhir_run_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, source: str | None, message: str
) -> None:
    program = EXAMPLES / "time_loop.mlir"  # a program with schedules in @main
    if source is not None:
        text = program.read_text() + source
        program = tmp_path / "p.mlir"
        program.write_text(text)
    code, out, err = run_schedule(capsys, str(program), "-n", "2", "--entry", "nope")
    assert (code, out) == (1, "")
    assert message in err


def test_a_plain_program_is_wrapped_and_split_as_dhir_run_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    plain = Path(__file__).parents[2] / "examples" / "plain_gemm.mlir"
    assert main(["schedule", str(plain), "-n", "2"]) == 0
    captured = capsys.readouterr()
    assert "CodeDrop made 1 task in 1 schedule" in captured.err
    rows = [line.split() for line in captured.out.splitlines() if line.startswith("main.")]
    assert {row[0]: row[1] for row in rows} == {
        "main.schedule0.task0.piece0": "rank0",
        "main.schedule0.task0.piece1": "rank1",
    }
    assert main(["schedule", str(plain), "-n", "2", "--no-codedrop"]) == 0
    out = capsys.readouterr().out
    assert f"{plain}: @main has no dhir.schedule (--no-codedrop): it runs as host code" in out


# Runs as host code in dhir run (no loop nest, linalg op or call for CodeDrop to wrap).
HOST_ONLY = """
func.func @main(%a: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %v = memref.load %a[%c0] : memref<8xf32>
  %w = arith.addf %v, %v : f32
  memref.store %w, %a[%c0] : memref<8xf32>
  return
}
"""


def test_a_program_that_runs_as_host_code_is_shown_as_such(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """dhir run ran it and dhir schedule said 'error: p.mlir has no dhir.schedule to
    place', exit status 1."""
    program = tmp_path / "p.mlir"
    program.write_text(HOST_ONLY)
    code, out, err = run_schedule(capsys, str(program), "-n", "2")
    assert code == 0, err
    assert out.splitlines() == [
        "ranks: 2 alike CPUs of this machine (rank0 .. rank1)",
        f"{program}: @main has no dhir.schedule and CodeDrop made no task: it runs as host "
        "code, the same on every rank, so there is no task to place",
    ]
    code, out, err = run_schedule(capsys, str(program), "-n", "2", "--json")
    assert code == 0 and json.loads(out) == {"schedules": []}, err
    chart = tmp_path / "c.svg"
    code, out, err = run_schedule(capsys, str(program), "-n", "2", "--gantt", str(chart))
    assert code == 1 and not chart.exists()
    assert f"error: {program}: @main has no dhir.schedule" in err and "no chart to draw" in err


def two_node_system(path: Path, network: dict[str, float] | None = None) -> Path:
    """Two nodes of one 2-rank CPU each, reached as hosts alpha.example and beta.example."""

    def node(name: str, host: str) -> dict[str, object]:
        # Loops at a core's whole rate (50 / 4 cores): the forks' times were set for it.
        cpu = {"name": f"{name}.cpu", "arch": "x86_64", "peak_gflops": 50.0, "mem_bw_gbs": 20.0,
               "memory_bytes": 1 << 33, "cores": 4, "ranks": 2,
               "core_loop_gflops": 12.5}  # fmt: skip
        return {"name": name, "host": host, "devices": [cpu]}

    data: dict[str, object] = {
        "nodes": [node("n0", "alpha.example"), node("n1", "beta.example")],
        "links": {"intra_node": {"latency_us": 1.0, "bandwidth_gbs": 10.0}},
    }
    if network is not None:
        data["links"] = {**data["links"], "network": network}  # type: ignore[dict-item]
    path.write_text(json.dumps(data))
    return path


def test_program_on_two_nodes_shows_each_rank_host(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    system = str(two_node_system(tmp_path / "two.json"))
    program = str(EXAMPLES / "hazards.mlir")
    code, out, err = run_schedule(capsys, program, "--system", system)
    assert code == 0, err
    legend, _, header, *rows = out.splitlines()  # the second: the schedule's name
    assert "rank1 = n0.cpu (x86_64) on n0 (host alpha.example)" in legend
    assert "rank2 = n1.cpu (x86_64) on n1 (host beta.example)" in legend
    assert header.split()[:3] == ["task", "device", "host"]
    hosts = {"rank0": "alpha.example", "rank1": "alpha.example"}
    hosts |= {"rank2": "beta.example", "rank3": "beta.example"}
    placed = [row.split() for row in rows if row.startswith("t")]  # %t0 .. %t3
    assert placed and all(hosts[row[1]] == row[2] for row in placed)
    code, out, err = run_schedule(capsys, program, "--system", system, "--json")
    assert code == 0, err
    assert json.loads(out)["hosts"] == hosts


def test_a_program_describing_its_machine_is_placed_on_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A module carrying a whole machine description (as `dhir run` reads it when no
    --system is given) is shown on that machine, with or without -n, not on this one."""
    module = parse_file(EXAMPLES / "hazards.mlir")
    attach(module, read_system(two_node_system(tmp_path / "two.json")))
    program = tmp_path / "described.mlir"
    program.write_text(print_module(module))
    for ranks in ([], ["-n", "4"]):
        code, out, err = run_schedule(capsys, str(program), *ranks)
        assert code == 0, err
        legend = out.splitlines()[0]
        assert "rank3 = n1.cpu (x86_64) on n1 (host beta.example)" in legend, legend


def test_one_node_table_has_no_host_column(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_schedule(capsys, str(EXAMPLES / "hazards.mlir"), "-n", "2")
    assert code == 0, err
    assert out.splitlines()[2].split()[:3] == ["task", "device", "start"]
    code, out, _ = run_schedule(capsys, str(EXAMPLES / "hazards.mlir"), "-n", "2", "--json")
    assert "hosts" not in json.loads(out)


FORK_N = 262144


def _fork_task(name: str, reads: str, writes: str, reps: int) -> str:
    """A task writing `writes` (from `reads` `reps` times, or filled with ones)."""
    mem = f"memref<{FORK_N}xf32>"
    if not reads:
        body = f"memref.store %v, %{writes}[%i] : {mem}"
        return (
            f"    %{name} = dhir.task %cpu, %{writes} {{\n"
            f"      %lo = arith.constant 0 : index\n      %hi = arith.constant {FORK_N} : index\n"
            f"      %one = arith.constant 1 : index\n      %v = arith.constant 1.0 : f32\n"
            f"      scf.for %i = %lo to %hi step %one {{\n        {body}\n      }}\n    }}\n"
        )
    return (
        f"    %{name} = dhir.task %cpu, %{reads}, %{writes} {{\n"
        f"      %lo = arith.constant 0 : index\n      %hi = arith.constant {FORK_N} : index\n"
        f"      %one = arith.constant 1 : index\n      %r = arith.constant {reps} : index\n"
        f"      scf.for %k = %lo to %r step %one {{\n"
        f"        scf.for %i = %lo to %hi step %one {{\n"
        f"          %v = memref.load %{reads}[%i] : {mem}\n"
        f"          %w = memref.load %{writes}[%i] : {mem}\n"
        f"          %s = math.fma %v, %v, %w : f32\n"
        f"          memref.store %s, %{writes}[%i] : {mem}\n"
        f"        }}\n      }}\n    }}\n"
    )


def two_forks_program(path: Path) -> Path:
    """Two independent forks: task0 fills x1, tasks 1 and 2 compute long from it; tasks
    3-5 the same on x2. Each fork's transfers stay inside a node only if it has one."""
    names = ["x1", "y1", "z1", "x2", "y2", "z2"]
    args = ", ".join(f"%{n}: memref<{FORK_N}xf32>" for n in names)
    tasks = "".join(
        _fork_task(f"t{k}", reads, writes, 200)
        for k, (reads, writes) in enumerate(
            [("", "x1"), ("x1", "y1"), ("x1", "z1"), ("", "x2"), ("x2", "y2"), ("x2", "z2")]
        )
    )
    path.write_text(
        f"func.func @main({args}) {{\n  dhir.schedule {', '.join('%' + n for n in names)} {{\n"
        f'    %cpu = dhir.target {{kind = "cpu"}}\n{tasks}  }}\n  return\n}}\n'
    )
    return path


def test_a_slow_network_keeps_transfers_inside_a_node(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    program = str(two_forks_program(tmp_path / "forks.mlir"))
    placed = {}
    bandwidths = (0.05, 0.1, 10.0)  # GB/s between the nodes; 10 inside each
    for bandwidth in bandwidths:
        network = {"latency_us": 2.0, "bandwidth_gbs": bandwidth}
        system = two_node_system(tmp_path / f"two-{bandwidth}.json", network)
        code, out, err = run_schedule(capsys, program, "--system", str(system), "--json")
        assert code == 0, err
        result = json.loads(out)
        (entry,) = result["schedules"]
        placed[bandwidth] = {
            task: result["hosts"][rank]
            for task, rank in entry["assignment"].items()
            if task != "(end)"
        }
    # Slow: the forks' inputs and every result (which rank 0 gets at the end) would cross
    # the network, so all stays on rank 0's node. Averaging the network with the node's
    # link, as placement once did, put two tasks on the other node.
    assert set(placed[0.05].values()) == {"alpha.example"}
    # A faster network makes the second node worth using, more so the faster it is.
    away = [sum(host == "beta.example" for host in placed[b].values()) for b in bandwidths]
    assert away == sorted(away) and away[-1] > 0


@pytest.mark.parametrize("option", ["", "--system", "--constraints", "--graph"])
def test_files_that_are_not_utf8_are_errors(
    option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suffix = ".toml" if option == "--constraints" else ".json" if option else ".mlir"
    bad = tmp_path / f"bad{suffix}"
    bad.write_bytes(b"\n# \xff\xfegarbage\x80\n")
    example = str(Path(__file__).parents[2] / "examples" / "vector_add.mlir")
    args = [str(bad)] if not option else [option, str(bad)]
    if option in ("--system", "--constraints"):
        args = [example, *args]
    code = main(["schedule", *args])
    err = capsys.readouterr().err
    assert code == 1 and "internal error" not in err
    assert err.startswith(f"{bad}:2:3: error: byte 0xff is not UTF-8; dhir reads UTF-8 text\n")


def test_input_nested_too_deeply_is_a_located_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = tmp_path / "deep.mlir"
    levels = 400
    deep.write_text(
        "func.func @f(%t: i1) {\n" + "  scf.if %t {\n" * levels + "  }\n" * levels + "  return\n}\n"
    )
    code = main(["schedule", str(deep)])
    err = capsys.readouterr().err
    assert code == 1 and "deep.mlir:" in err and "nested too deeply" in err


def test_schedule_reads_the_program_from_standard_input(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As dhir run and dhir compile do for `-`."""
    import io

    program = EXAMPLES / "vector_add.mlir"
    code, want, err = run_schedule(capsys, str(program), "-n", "2", "--placement", "heft")
    assert code == 0, err
    monkeypatch.setattr("sys.stdin", io.StringIO(program.read_text()))
    code, out, err = run_schedule(capsys, "-", "-n", "2", "--placement", "heft")
    assert code == 0, err
    assert out == want.replace(str(program), "<stdin>")  # dhir-split's lines name loops
    # Named as the parser names it, not "- has no dhir.schedule".
    monkeypatch.setattr("sys.stdin", io.StringIO("func.func @main() {\n  return\n}\n"))
    code, out, err = run_schedule(capsys, "-", "-n", "2", "--no-codedrop")
    assert code == 0 and "<stdin>: @main has no dhir.schedule" in out


# t0 on rank 0 writes %a, t1 on rank 1 copies it to %b, an output the ranks hold in part.
PARTITIONED = """
func.func @main(%a: memref<1000xf32>, %b: memref<1000xf32>) {
  dhir.schedule %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %a attributes {dhir.rank = 0 : i64} {
      %lo = arith.constant 0 : index
      %hi = arith.constant 1000 : index
      %one = arith.constant 1 : index
      %v = arith.constant 1.0 : f32
      scf.for %i = %lo to %hi step %one {
        memref.store %v, %a[%i] : memref<1000xf32>
      }
    }
    %t1 = dhir.task %cpu, %a, %b attributes {dhir.rank = 1 : i64} {
      %lo = arith.constant 0 : index
      %hi = arith.constant 1000 : index
      %one = arith.constant 1 : index
      scf.for %i = %lo to %hi step %one {
        %v = memref.load %a[%i] : memref<1000xf32>
        memref.store %v, %b[%i] : memref<1000xf32>
      }
    }
  }
  return
}
"""


def test_the_plan_shown_sends_no_output_written_in_part(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Each rank writes its part of %b itself, as the replay has it: the plan's end no
    longer waits for a message of %b from rank 1 (placement still counts it)."""
    program = tmp_path / "prog.mlir"
    program.write_text(PARTITIONED)
    code, out, err = run_schedule(capsys, str(program), "-n", "2", "--json")
    assert code == 0, err
    shown = json.loads(out)["schedules"][0]
    assert shown["start"]["(end)"] == shown["finish"]["t1"]
    assert shown["makespan"] == pytest.approx(shown["as_built_makespan"])
    code, out, err = run_schedule(capsys, str(program), "-n", "2")
    assert code == 0, err
    rows = {row[0]: row for row in map(str.split, out.splitlines()) if len(row) == 4}
    assert rows["(end)"][2] == rows["t1"][3]


def test_a_bad_description_in_the_program_is_reported_at_its_line_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    program = tmp_path / "p.mlir"
    program.write_text(
        "module attributes {\n"
        "  dlti.target_system_spec = #dlti.target_system_spec<\n"
        '    "cpu0" = #dlti.target_device_spec<"arch" = "x86_64", "ranks" = 1000002 : i64>>,\n'
        '  dhir.machine = {name = "big"}\n'
        "} {\n"
        "  func.func @main() {\n"
        "    return\n"
        "  }\n"
        "}\n"
    )
    assert main(["schedule", str(program)]) == 1
    err = capsys.readouterr().err
    assert f"\n{program}:2:3: error: the module: the description runs 1000002 ranks" in err


SEQUENTIAL_ANY = """
func.func @main(%a: memref<4000x1000xf64>, %b: memref<4000x1000xf64>) {
  dhir.schedule %a, %b {
    %any = dhir.target {kind = "any"}
    %t = dhir.task %any, %a, %b {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c1000 = arith.constant 1000 : index
      %c3999 = arith.constant 3999 : index
      scf.for %i = %c1 to %c3999 step %c1 {
        scf.for %j = %c0 to %c1000 step %c1 {
          %im = arith.subi %i, %c1 : index
          %ip = arith.addi %i, %c1 : index
          %x = memref.load %a[%im, %j] : memref<4000x1000xf64>
          %y = memref.load %a[%ip, %j] : memref<4000x1000xf64>
          %s = arith.addf %x, %y : f64
          memref.store %s, %b[%i, %j] : memref<4000x1000xf64>
        }
      }
    }
  }
  return
}
"""


def _two_cpu_ranks_two_gpus(tmp_path: Path) -> Path:
    """A node of a CPU run by 2 ranks and 2 GPUs, whose host links are slower than the
    node's link between the CPU ranks (16 MB: 3.2 ms between those, 3.85 ms on average
    over every pair of the 4 ranks)."""
    cpu = {"name": "n0.cpu", "arch": "x86_64", "peak_gflops": 100.0, "mem_bw_gbs": 40.0,
           "memory_bytes": 1 << 35, "cores": 8, "ranks": 2}  # fmt: skip
    gpus = [
        {"name": f"n0.gpu{k}", "arch": "sm_90", "peak_gflops": 300.0, "mem_bw_gbs": 3350.0,
         "memory_bytes": 1 << 36, "host_link": {"latency_us": 10.0, "bandwidth_gbs": 25.0}}
        for k in range(2)
    ]  # fmt: skip
    links = {"intra_node": {"latency_us": 1.0, "bandwidth_gbs": 5.0}}
    system = tmp_path / "node.json"
    system.write_text(
        json.dumps({"nodes": [{"name": "n0", "devices": [cpu, *gpus]}], "links": links})
    )
    return system


def test_cpu_pieces_beside_two_gpus_go_to_both_cpu_ranks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # dhir-split cuts the loop in 2 pieces for the 2 CPU ranks. Rank 1 sends its piece's
    # rows of %b to rank 0 over the node (16 MB: 3.2 ms); the replay that judges `best`'s
    # candidates timed it as the mean over every pair of ranks, GPUs' host links and
    # all (3.85 ms), so both pieces went to rank 0 (7.2 ms, rank 1 idle).
    system = _two_cpu_ranks_two_gpus(tmp_path)
    program = tmp_path / "loop.mlir"
    program.write_text(SEQUENTIAL_ANY)
    code, out, err = run_schedule(capsys, str(program), "--system", str(system), "--json")
    assert code == 0, err
    (entry,) = json.loads(out)["schedules"]
    placed = entry["assignment"]
    assert {placed["t.piece0"], placed["t.piece1"]} == {"rank0", "rank1"}
    piece = entry["finish"]["t.piece0"] - entry["start"]["t.piece0"]
    assert entry["makespan"] == entry["as_built_makespan"] == pytest.approx(piece)


def test_peft_times_each_transfer_on_the_link_of_its_two_ranks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # PEFT's look-ahead (its optimistic cost table) took rank 1's output to the end on
    # rank 0 for 3.85 ms, the mean over every pair of ranks, GPUs' host links included,
    # rather than the CPU ranks' 3.2 ms: both 3.6 ms pieces went to rank 0 (7.2 ms).
    system = _two_cpu_ranks_two_gpus(tmp_path)
    program = tmp_path / "loop.mlir"
    program.write_text(SEQUENTIAL_ANY)
    args = ("--system", str(system), "--placement", "peft", "--json")
    code, out, err = run_schedule(capsys, str(program), *args)
    assert code == 0, err
    (entry,) = json.loads(out)["schedules"]
    assert {entry["assignment"]["t.piece0"], entry["assignment"]["t.piece1"]} == {
        "rank0",
        "rank1",
    }
    piece = entry["finish"]["t.piece0"] - entry["start"]["t.piece0"]
    assert entry["makespan"] == pytest.approx(piece)


# %c is read after the schedule, so it is broadcast at the end wherever its rows were
# written: where q2 runs costs nothing there.
FAN_OUT = """
func.func @main(%a: memref<4000x1000xf64>, %b: memref<4000x1000xf64>,
                %c: memref<4000x1000xf64>) {
  dhir.schedule %a, %b, %c {
    %cpu = dhir.target {kind = "cpu"}
    %p = dhir.task %cpu, %a, %b {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c1000 = arith.constant 1000 : index
      %c4000 = arith.constant 4000 : index
      scf.for %i = %c0 to %c4000 step %c1 {
        scf.for %j = %c0 to %c1000 step %c1 {
          %x = memref.load %a[%i, %j] : memref<4000x1000xf64>
          %s = arith.addf %x, %x : f64
          memref.store %s, %b[%i, %j] : memref<4000x1000xf64>
        }
      }
    }
    %q1 = dhir.task %cpu, %b, %c {HALF}
    %q2 = dhir.task %cpu, %b, %c {HALF}
  }
  %z = arith.constant 0 : index
  %v = memref.load %c[%z, %z] : memref<4000x1000xf64>
  memref.store %v, %a[%z, %z] : memref<4000x1000xf64>
  return
}
"""
_HALF = """
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c1000 = arith.constant 1000 : index
      %lo = arith.constant LO : index
      %hi = arith.constant HI : index
      scf.for %i = %lo to %hi step %c1 {
        scf.for %j = %c0 to %c1000 step %c1 {
          %x = memref.load %b[%i, %j] : memref<4000x1000xf64>
          %s = arith.mulf %x, %x : f64
          memref.store %s, %c[%i, %j] : memref<4000x1000xf64>
        }
      }
    """


def test_heft_times_each_transfer_on_the_link_of_its_two_ranks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # p (7.2 ms, rank 0) writes %b; q1 and q2 (3.6 ms each) read half of it each. HEFT
    # timed q2 on rank 1 with the mean transfer over every pair of ranks (16 MB: 3.85
    # ms), 7.2 + 3.85 + 3.6 > 7.2 + 3.6 + 3.6 on rank 0, so it kept rank 1 idle. The two
    # CPU ranks' link takes 3.2 ms: q2 runs on rank 1, done 0.4 ms sooner.
    system = _two_cpu_ranks_two_gpus(tmp_path)
    halves = [
        _HALF.replace("LO", lo).replace("HI", hi) for lo, hi in (("0", "2000"), ("2000", "4000"))
    ]
    program = tmp_path / "fan.mlir"
    program.write_text(
        FAN_OUT.replace("{HALF}", "{" + halves[0] + "}", 1).replace("{HALF}", "{" + halves[1] + "}")
    )
    code, out, err = run_schedule(
        capsys, str(program), "--system", str(system), "--placement", "heft", "--json"
    )
    assert code == 0, err
    (entry,) = json.loads(out)["schedules"]
    assert [entry["assignment"][t] for t in ("p", "q1", "q2")] == ["rank0", "rank0", "rank1"]
    start, finish = entry["start"], entry["finish"]
    assert start["q2"] - finish["p"] == pytest.approx(1e-6 + 16e6 / 5e9)
    assert finish["q2"] < finish["q1"] + (finish["q1"] - start["q1"])
