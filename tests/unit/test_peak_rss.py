"""bench/peak_rss.py, the launcher bench/memory.py puts in front of each MPI rank, reports
its child's peak resident memory (not its own), its rank's name and its exit as it was."""

import signal
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import peak_rss  # noqa: E402

LAUNCHER = BENCH / "peak_rss.py"
MIB = 1 << 20


def _launch(folder: Path, *command: str, rank: str = "0") -> subprocess.CompletedProcess[str]:
    """The launcher as bench/memory.py runs it: `python -S`, under an MPI's rank variable."""
    env = {"PMI_RANK": rank, "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-S", str(LAUNCHER), str(folder), *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _holding(mib: int) -> list[str]:
    """A child that writes `mib` MiB into one object (every page touched), then exits."""
    return [sys.executable, "-S", "-c", f"data = b'x' * {mib * MIB}"]


def test_reports_the_peak_of_a_child_that_allocates_a_known_amount(tmp_path: Path) -> None:
    peaks: dict[int, peak_rss.Report] = {}
    for mib in (64, 192):
        folder = tmp_path / str(mib)
        folder.mkdir()
        assert _launch(folder, *_holding(mib)).returncode == 0
        peaks[mib] = peak_rss.read_reports(str(folder))["0"]
    for mib, report in peaks.items():
        assert report.exact  # above the launcher's own footprint
        assert mib * MIB <= report.peak_kib * 1024 <= (mib + 40) * MIB
        assert report.status == 0 and report.seconds > 0.0
    # The same interpreter either way: the difference is the allocation, to within a page
    # table or two, so the figure is the child's and not a sum with the launcher's.
    grown = (peaks[192].peak_kib - peaks[64].peak_kib) * 1024
    assert abs(grown - 128 * MIB) <= 4 * MIB


def test_a_child_smaller_than_the_launcher_is_only_bounded(tmp_path: Path) -> None:
    assert _launch(tmp_path, "true", rank="3").returncode == 0
    report = peak_rss.read_reports(str(tmp_path))["3"]
    assert not report.exact
    assert report.peak_kib <= report.floor_kib


def test_exits_as_its_child_did(tmp_path: Path) -> None:
    assert _launch(tmp_path, "sh", "-c", "exit 3").returncode == 3
    assert peak_rss.read_reports(str(tmp_path))["0"].status >> 8 == 3
    killed = _launch(tmp_path, "sh", "-c", "kill -TERM $$")
    assert killed.returncode == -signal.SIGTERM
    missing = _launch(tmp_path, str(tmp_path / "no-such-program"))
    assert missing.returncode == 127 and "cannot run" in missing.stderr


def test_the_floor_is_the_launchers_own_not_what_started_it(tmp_path: Path) -> None:
    """A launcher started by a large process (pytest late in the suite, 145 MB) inherits
    that process's ru_maxrss across its exec; its floor must still be its own memory."""
    start = (
        "import subprocess, sys\n"
        f"ballast = b'x' * {256 * MIB}\n"
        f"sys.exit(subprocess.run({[sys.executable, '-S', str(LAUNCHER), str(tmp_path)]!r}"
        f" + {_holding(64)!r}, env={{'PMI_RANK': '0', 'PATH': '/usr/bin:/bin'}}).returncode)"
    )
    assert subprocess.run([sys.executable, "-S", "-c", start], timeout=60).returncode == 0
    report = peak_rss.read_reports(str(tmp_path))["0"]
    assert report.floor_kib < 64 * 1024 and report.exact
