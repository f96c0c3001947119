"""Memory as a placement resource (dhir/placement/memory.py): a program whose arrays
exceed one device's memory_bytes runs on enough ranks, each holding its rows, and is
refused, naming the memrefs and bytes, on too few."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.passes import PassPipeline
from xdsl.traits import SymbolTable

from dhir.analysis.partition import row_bands
from dhir.api import run_pipeline
from dhir.cli.main import main
from dhir.ir.text import parse_string
from dhir.machine.dlti import attach
from dhir.machine.files import read_system, to_toml
from dhir.transforms.place import PlacePass
from dhir.transforms.split_tasks import SplitTasksPass

# Three 64x32 f64 arrays (16 KiB each) in a time loop: a smoothing into b, c halved (in
# 2 pieces, so that round robin puts the pieces of the tasks after it on other ranks
# than the rows they share), b copied back into a.
PROGRAM = """func.func @main(%a: memref<64x32xf64>, %b: memref<64x32xf64>, %c: memref<64x32xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %steps = arith.constant 3 : index
  scf.for %t = %c0 to %steps step %c1 {
    dhir.schedule %a, %b, %c {
      %cpu = dhir.target {kind = "cpu"}
      %smooth = dhir.task %cpu, %a, %b {
        %one = arith.constant 1 : index
        %c63 = arith.constant 63 : index
        %c31 = arith.constant 31 : index
        %q = arith.constant 0.25 : f64
        scf.for %i = %one to %c63 step %one {
          scf.for %j = %one to %c31 step %one {
            %im = arith.subi %i, %one : index
            %ip = arith.addi %i, %one : index
            %jm = arith.subi %j, %one : index
            %jp = arith.addi %j, %one : index
            %n = memref.load %a[%im, %j] : memref<64x32xf64>
            %s = memref.load %a[%ip, %j] : memref<64x32xf64>
            %w = memref.load %a[%i, %jm] : memref<64x32xf64>
            %e = memref.load %a[%i, %jp] : memref<64x32xf64>
            %ns = arith.addf %n, %s : f64
            %we = arith.addf %w, %e : f64
            %sum = arith.addf %ns, %we : f64
            %m = arith.mulf %sum, %q : f64
            memref.store %m, %b[%i, %j] : memref<64x32xf64>
          }
        }
      }
      %scale = dhir.task %cpu, %c attributes {dhir.split = 2} {
        %zero = arith.constant 0 : index
        %one = arith.constant 1 : index
        %c64 = arith.constant 64 : index
        %c32 = arith.constant 32 : index
        %h = arith.constant 0.5 : f64
        scf.for %i = %zero to %c64 step %one {
          scf.for %j = %zero to %c32 step %one {
            %x = memref.load %c[%i, %j] : memref<64x32xf64>
            %y = arith.mulf %x, %h : f64
            memref.store %y, %c[%i, %j] : memref<64x32xf64>
          }
        }
      }
      %copy = dhir.task %cpu, %b, %a {
        %one = arith.constant 1 : index
        %c63 = arith.constant 63 : index
        %c31 = arith.constant 31 : index
        scf.for %i = %one to %c63 step %one {
          scf.for %j = %one to %c31 step %one {
            %x = memref.load %b[%i, %j] : memref<64x32xf64>
            memref.store %x, %a[%i, %j] : memref<64x32xf64>
          }
        }
      }
    }
  }
  return
}
"""
ROW_BYTES = 32 * 8
MEMORY = 20000  # bytes per device: 3 arrays on 4 ranks fit, on 2 they do not


def _system(path: Path, devices: int, memory: int = MEMORY) -> Path:
    """`devices` CPUs of one rank and `memory` bytes each, on one node."""
    cpus = [
        {"name": f"cpu{k}", "arch": "x86_64", "memory_bytes": memory, "cores": 1}
        for k in range(devices)
    ]
    path.write_text(json.dumps({"name": "small", "nodes": [{"name": "n0", "devices": cpus}]}))
    return path


def _inputs(tmp_path: Path) -> list[str]:
    rng = np.random.default_rng(7)
    paths = []
    for name in "abc":
        path = tmp_path / f"{name}.npy"
        np.save(path, rng.random((64, 32)))
        paths += ["--input", str(path)]
    return paths


def test_round_robin_is_moved_so_that_each_rank_holds_its_rows(tmp_path: Path) -> None:
    # Round robin alone puts the second half of the copy's pieces on the ranks holding the
    # first half of the smoothing's rows: each of them would hold two bands of a and b.
    module = parse_string(PROGRAM)
    attach(module, read_system(_system(tmp_path / "four.json", 4)))
    run_pipeline(module, PassPipeline((SplitTasksPass(4), PlacePass(4, "round-robin"))))
    entry = SymbolTable.lookup_symbol(module, "main")
    assert isinstance(entry, func.FuncOp)
    found = row_bands(entry, 4, set(entry.body.block.args))  # all go to rank 0 at the end
    assert not found.whole and len(found.bands) == 3
    for rank in range(4):
        rows = sum(hi - lo for bands in found.bands.values() for lo, hi in bands[rank])
        assert rows * ROW_BYTES <= MEMORY, (rank, found.bands)


@pytest.mark.mpi
@pytest.mark.mlir
@pytest.mark.parametrize("placement", ["round-robin"])
def test_enough_ranks_run_it_bit_for_bit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], placement: str
) -> None:
    program = tmp_path / "jacobi.mlir"
    program.write_text(PROGRAM)
    inputs = _inputs(tmp_path)
    system = str(_system(tmp_path / "four.json", 4))
    native, interp = tmp_path / "native", tmp_path / "interp"
    run = ["run", str(program), *inputs, "--system", system, "--placement", placement]
    assert main([*run, "--timing", "--output-dir", str(native)]) == 0
    err = capsys.readouterr().err
    # What the built program reserves on each rank (its --timing notes), within memory.
    held = [0] * 4
    for line in re.findall(r"memory: %[abc]: partitioned, (.*)", err):
        for rank, rows in re.findall(r"rank (\d) rows ([^;]*)", line):
            for lo, hi in re.findall(r"(\d+)\.\.(\d+)", rows):
                held[int(rank)] += (int(hi) - int(lo) + 1) * ROW_BYTES
    assert 0 < max(held) <= MEMORY, err
    assert (
        main(["run", str(program), *inputs, "--backend", "interp", "--output-dir", str(interp)])
        == 0
    )
    for k in range(3):
        got, want = np.load(native / f"arg{k}.npy"), np.load(interp / f"arg{k}.npy")
        assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize(("devices", "placement"), [(1, "best"), (2, "round-robin"), (1, "heft")])
def test_too_few_ranks_are_refused_naming_the_memrefs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], devices: int, placement: str
) -> None:
    program = tmp_path / "jacobi.mlir"
    program.write_text(PROGRAM)
    system = str(_system(tmp_path / "few.json", devices))
    run = ["run", str(program), *_inputs(tmp_path), "--system", system]
    code = main([*run, "--placement", placement])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "Traceback" not in err
    assert f"more than the {MEMORY} bytes of device 'cpu" in err
    assert "memory_bytes in the machine description 'small'" in err
    assert re.search(r"memref %a needs \d+ bytes", err) and "run on more ranks" in err.lower()


@pytest.mark.parametrize("named_by", ["DHIR_SYSTEM", "XDG_CONFIG_HOME", "--system"])
def test_a_refusal_names_the_description_file_and_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    named_by: str,
) -> None:
    """From $DHIR_SYSTEM or the calibrated file, `dhir schedule` named no file at all;
    from --system, the file but not the line of the device's memory_bytes."""
    program = tmp_path / "jacobi.mlir"
    program.write_text(PROGRAM)
    (tmp_path / "dhir").mkdir()
    system = tmp_path / "dhir" / "system.toml"  # where `dhir calibrate` writes
    system.write_text(to_toml(read_system(_system(tmp_path / "one.json", 1))))
    monkeypatch.delenv("DHIR_SYSTEM", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "elsewhere"))
    args = ["schedule", str(program)]
    if named_by == "--system":
        args += ["--system", str(system)]
    else:
        monkeypatch.setenv(named_by, str(system if named_by == "DHIR_SYSTEM" else tmp_path))
    assert main(args) == 1
    err = capsys.readouterr().err
    line = system.read_text().splitlines().index("memory_bytes = 20000") + 1
    assert f"(memory_bytes in the machine description 'small', {system}:{line}:1)" in err


def test_a_whole_memref_too_large_for_any_device_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A load of %c after the loop: every rank needs all of it, whatever the placement.
    text = PROGRAM.replace(
        "  return\n}",
        "  %z = arith.constant 0 : index\n  %v = memref.load %c[%z, %z] : "
        "memref<64x32xf64>\n  return\n}",
    )
    program = tmp_path / "whole.mlir"
    program.write_text(text)
    system = str(_system(tmp_path / "four.json", 4, memory=16000))
    assert main(["schedule", str(program), "--system", system]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "memref %c needs 16384 bytes, whole (host code, which every rank runs" in err
    assert "more than the 16000 bytes of device 'cpu0'" in err


def test_dhir_schedule_prints_what_each_rank_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = tmp_path / "jacobi.mlir"
    program.write_text(PROGRAM)
    system = str(_system(tmp_path / "four.json", 4))
    args = ["schedule", str(program), "--system", system, "--placement", "round-robin"]
    assert main([*args, "--json"]) == 0
    memory = json.loads(capsys.readouterr().out)["memory"]
    assert memory["partitioned"]
    held = [memory["ranks"][f"rank{r}"]["held_bytes"] for r in range(4)]
    rows = [0] * 4
    for memref in memory["memrefs"]:
        for r in range(4):
            rows[r] += sum(hi - lo for lo, hi in memref["rows"][f"rank{r}"])
    assert held == [n * ROW_BYTES for n in rows] and max(held) <= MEMORY
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"  rank1: holds {held[1] / 1024:.3g} KiB" in out
    assert "  %c: partitioned, rank 0 rows none; rank 1 rows 0..31" in out


def test_ranks_holding_alike_share_a_line_of_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = tmp_path / "jacobi.mlir"
    program.write_text(PROGRAM)
    assert main(["schedule", str(program), "-n", "12", "--placement", "round-robin"]) == 0
    report = capsys.readouterr().out.split("memory per rank")[1].splitlines()[1:]
    assert len(report) < 12 and any(
        re.match(r"  rank\d+-rank\d+ \(each\): holds", line) for line in report
    )


def test_best_finds_each_tasks_regions_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """When `best` breaks a near tie by what the ranks hold, the storage takes the regions
    the dependence graph found instead of finding them again for every task."""
    import sys

    import dhir.analysis.dependences as dependences
    import dhir.analysis.footprint as footprint

    sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
    import programs

    import dhir.placement.as_built as as_built

    monkeypatch.setattr(as_built, "MEMORY_TIE", 1e9)  # every candidate ties: storage asked
    calls: list[object] = []
    found, shared = footprint.task_regions, dependences.shared_regions
    monkeypatch.setattr(footprint, "task_regions", lambda t: calls.append(t) or found(t))
    monkeypatch.setattr(
        dependences, "shared_regions", lambda ts, s: calls.extend(ts) or shared(ts, s)
    )
    program = parse_string(programs.many_tasks(64, literals=True))
    run_pipeline(program, PassPipeline((PlacePass(2, "best"),)), verify_each=False)
    assert len(calls) == 64


def test_best_models_the_outputs_of_the_entry_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """dhir-place's cost model and its replays send the outputs of its `entry` to rank 0,
    not those of a function named main (they once asked about main whatever the entry)."""
    import sys

    import dhir.analysis.outputs as outputs
    import dhir.placement.as_built as as_built
    import dhir.placement.from_ir as from_ir

    sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
    import programs

    asked: list[str] = []

    def recorded(schedule: object, entry: str, called: object = None) -> object:
        asked.append(entry)
        return outputs.root_only(schedule, entry, called)  # type: ignore[arg-type]

    for module in (from_ir, as_built):
        monkeypatch.setattr(module, "root_only", recorded)
    text = programs.neighbour_tasks(40).replace("@main(", "@compute(")
    run_pipeline(parse_string(text), PassPipeline((PlacePass(2, "best", None, "compute"),)))
    assert asked and set(asked) == {"compute"}


def test_a_task_too_large_for_any_device_names_the_description_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/machine.md: a device's data that does not fit in its memory is refused at the
    line of its memory_bytes; a single task too large for every rank named neither."""
    program = tmp_path / "jacobi.mlir"
    program.write_text(PROGRAM)
    system = tmp_path / "small.toml"
    system.write_text(to_toml(read_system(_system(tmp_path / "one.json", 2, memory=1000))))
    assert main(["schedule", str(program), "--system", str(system)]) == 1
    err = capsys.readouterr().err
    line = system.read_text().splitlines().index("memory_bytes = 1000") + 1
    assert re.search(r"task '\S+' needs [\d.]+ KiB of memory, more than any device", err), err
    assert f"the memory_bytes of 'cpu0' at {system}:{line}:1" in err, err
    assert "in the machine description 'small'" in err


DYNAMIC = """func.func @main(%a: memref<?xi32>) {
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %fill = dhir.task %cpu, %a {
      %zero = arith.constant 0 : index
      %one = arith.constant 1 : index
      %n = memref.dim %a, %zero : memref<?xi32>
      %v = arith.constant 7 : i32
      scf.for %i = %zero to %n step %one {
        memref.store %v, %a[%i] : memref<?xi32>
      }
    }
  }
  return
}
"""


def test_a_memref_of_unknown_size_makes_up_no_bytes_that_refuse_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """memory.py's docstring: memrefs of unknown size are not counted. A memref<?xi32> was
    counted as 100 elements, and 'needs 400 bytes of memory, more than any device' refused
    a program whose size nobody knew."""
    program = tmp_path / "fill.mlir"
    program.write_text(DYNAMIC)
    system = tmp_path / "small.toml"
    system.write_text(to_toml(read_system(_system(tmp_path / "one.json", 2, memory=16))))
    assert main(["schedule", str(program), "--system", str(system)]) == 0, capsys.readouterr().err


PARTLY_GPU = """func.func @main(%g: memref<64xi32>, %x: memref<64x8xi32>) {
  dhir.schedule %g, %x {
    %cpu = dhir.target {kind = "cpu"}
    %gpu = dhir.target {arch = "sm_90"}
    %double = dhir.task %gpu, %g attributes {dhir.rank = 1 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant 64 : index
      scf.parallel (%i) = (%c0) to (%n) step (%c1) {
        %v = memref.load %g[%i] : memref<64xi32>
        %w = arith.addi %v, %v : i32
        memref.store %w, %g[%i] : memref<64xi32>
      }
    }
    TASKS
  }
  return
}
"""
ROWS = """%rows{r} = dhir.task %cpu, %x attributes {{dhir.rank = {r} : i64}} {{
      %c1 = arith.constant 1 : index
      %c0 = arith.constant 0 : index
      %lo = arith.constant {lo} : index
      %hi = arith.constant {hi} : index
      scf.for %i = %lo to %hi step %c1 {{
        %v = memref.load %x[%i, %c0] : memref<64x8xi32>
        %w = arith.muli %v, %v : i32
        memref.store %w, %x[%i, %c0] : memref<64x8xi32>
      }}
    }}
    """


def test_a_build_for_gpus_is_modelled_as_it_partitions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The build partitions a memref no whole GPU task uses, in a build for GPUs too
    (test_gpu_runtime.py::test_memrefs_no_gpu_task_uses_are_partitioned): dhir schedule
    and placement's memory model said every rank held it whole."""
    tasks = "".join(ROWS.format(r=r, lo=32 * r, hi=32 * r + 32) for r in (0, 1))
    program = tmp_path / "gpu.mlir"
    program.write_text(PARTLY_GPU.replace("TASKS", tasks))
    assert main(["schedule", str(program), "-n", "2", "--placement", "round-robin"]) == 0
    out = capsys.readouterr().out
    assert "  %x: partitioned, rank 0 rows 0..31; rank 1 rows 32..63" in out
    assert "  %g: whole on every rank, a GPU task uses it (device copies are whole)" in out
