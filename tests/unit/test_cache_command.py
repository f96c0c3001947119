"""`dhir cache`: what it shows and what --prune and --clear remove (dhir/toolchain/cache.py)."""

import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from dhir.cli.main import main
from dhir.toolchain.cache import UNFINISHED_AGE_S

KEY = "0123456789abcdef01234567"
PROGRAM = """\
func.func @main(%a: memref<4xf64>) {
  dhir.schedule %a {
    %cpu = dhir.target {arch = "x86_64"}
    %t = dhir.task %cpu, %a {
      %c0 = arith.constant 0 : index
      %x = memref.load %a[%c0] : memref<4xf64>
      %y = arith.addf %x, %x : f64
      memref.store %y, %a[%c0] : memref<4xf64>
    }
  }
  return
}
"""


def make(path: Path, size: int = 10, age_s: float = 0.0) -> Path:
    """A file of `size` bytes (its folders made), last used `age_s` seconds ago."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    when = time.time() - age_s
    os.utime(path, (when, when))
    return path


def age(path: Path, seconds: float) -> None:
    when = time.time() - seconds
    for inner in [path, *path.rglob("*")]:
        os.utime(inner, (when, when), follow_symlinks=False)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("DHIR_CACHE_DIR", str(root))
    day = 86400.0
    make(root / KEY / "program", 1000)
    age(root / KEY, 3 * day)  # an executable last run 3 days ago
    make(root / "modules" / KEY / "program.o", 500)
    age(root / "modules" / KEY, 0.5 * day)
    make(root / f"harness-{KEY}.o", 200, 10 * day)
    make(root / "runs" / ("ab" * 16 + ".json"), 20, 10 * day)
    make(root / "hosts-0123456789abcdef.mpich", 30, 10 * day)
    make(root / f"failed-{KEY}" / "program.mlir", 40)  # failed just now: removed anyway
    make(root / "build-a1b2c3_d" / "program.ll", 50)  # a build that may still run
    age(root / "build-a1b2c3_d", 60.0)
    make(root / "dhir_rt-zz99yy88" / "dhir_rt.c", 60)  # killed two hours ago
    age(root / "dhir_rt-zz99yy88", 2 * UNFINISHED_AGE_S)
    make(root / "runs" / ("cd" * 16 + ".4242.tmp"), 5, 2 * UNFINISHED_AGE_S)
    make(root / "notes.txt", 7, 30 * day)  # the user's own: never removed
    return root


def dhir_cache(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    status = main(["cache", *args])
    captured = capsys.readouterr()
    return status, captured.out + captured.err


def test_the_cache_is_shown_by_kind(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out = dhir_cache(capsys)
    assert status == 0
    assert f"{cache}: 1.87 KiB in 10 entries" in out
    lines = {" ".join(line.split()[3:]): line.split()[0] for line in out.splitlines()[1:]}
    assert lines == {
        "executables": "1",
        "module objects": "1",
        "C objects": "1",
        "run records": "1",
        "hostfiles": "1",
        "failed builds": "1",
        "unfinished builds": "3",
        "other files (not dhir's: kept)": "1",
    }


def test_prune_removes_failed_and_old_unfinished_builds(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out = dhir_cache(capsys, "--prune")
    assert status == 0
    assert out.startswith(f"removed 3 entries (105 B) from {cache}:")
    left = sorted(p.name for p in cache.iterdir())
    assert f"failed-{KEY}" not in left and "dhir_rt-zz99yy88" not in left
    assert "build-a1b2c3_d" in left  # younger than an hour: perhaps still building
    assert not list((cache / "runs").glob("*.tmp"))
    assert (cache / KEY / "program").is_file() and (cache / "notes.txt").is_file()


def test_prune_unused_for_removes_what_was_not_used_since(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _ = dhir_cache(capsys, "--prune", "--unused-for", "2")
    assert status == 0
    assert not (cache / KEY).exists()  # used 3 days ago
    assert not (cache / f"harness-{KEY}.o").exists()
    assert (cache / "modules" / KEY / "program.o").is_file()  # used half a day ago
    assert (cache / "notes.txt").is_file()


def test_clear_removes_every_entry_of_dhir_s_only(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "mine"
    make(mine / "data.bin")
    (cache / ("f" * 24)).symlink_to(mine)  # a link named as an executable's folder
    status, out = dhir_cache(capsys, "--clear")
    assert status == 0
    assert "removed 10 entries" in out
    assert sorted(p.name for p in cache.rglob("*")) == ["modules", "notes.txt", "runs"]
    assert (mine / "data.bin").is_file()  # the link went, not what it named


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--unused-for", "3"], "--unused-for says what --prune removes; give --prune too"),
        (["--prune", "--clear"], "give --prune or --clear, not both"),
    ],
)
def test_options_that_conflict_are_usage_errors(
    cache: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    status, out = dhir_cache(capsys, *args)
    assert (status, message in out) == (2, True)
    assert (cache / f"failed-{KEY}").is_dir()


@pytest.mark.parametrize("days", ["-1", "nan", "inf", "soon"])
def test_a_bad_number_of_days_is_refused(
    cache: Path, capsys: pytest.CaptureFixture[str], days: str
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["cache", "--prune", "--unused-for", days])
    assert stopped.value.code == 2
    assert f"'{days}' is not a number of days >= 0" in capsys.readouterr().err


def test_an_empty_or_missing_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DHIR_CACHE_DIR", str(tmp_path / "none"))
    assert main(["cache", "--prune"]) == 0
    assert not (tmp_path / "none").exists()


def test_a_cache_that_is_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("DHIR_CACHE_DIR", str(tmp_path / "file"))
    status, out = dhir_cache(capsys)
    assert status == 1
    assert "is a file, not a directory" in out


@pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")
@pytest.mark.mpi
def test_a_run_after_clear_builds_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("DHIR_CACHE_DIR", str(cache))
    source = tmp_path / "p.mlir"
    source.write_text(PROGRAM)
    np.save(tmp_path / "a.npy", np.full(4, 1.5))
    run = ["run", str(source), "--input", str(tmp_path / "a.npy"), "-q"]
    assert main([*run, "--output-dir", str(tmp_path / "o1")]) == 0
    _, out = dhir_cache(capsys)
    assert " executables" in out and " run records" in out
    _, out = dhir_cache(capsys, "--clear")
    assert out.endswith(f"{cache}: empty\n")
    assert main([*run, "--output-dir", str(tmp_path / "o2")]) == 0
    assert np.load(tmp_path / "o2" / "a.npy")[0] == 3.0
    assert list(cache.glob("?" * 24))  # built again
