"""The watchdog that ends a run's processes when dhir dies of SIGKILL (no MPI needed:
test_rank_failure.py has the real runs)."""

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

# A program that watches `marker` and `folder`, starts a process marked as mpirun's are
# (a session of its own, DHIR_RUN_ID in its environment), says so, and waits to be killed.
_WATCHED = """
import os, subprocess, sys, time
from pathlib import Path
from dhir.toolchain.reaper import watched
marker, folder = sys.argv[1], Path(sys.argv[2])
with watched(marker, folder):
    env = dict(os.environ, DHIR_RUN_ID=marker)
    sleep = ["sleep", "300"]
    subprocess.Popen(sleep, env=env, start_new_session=True, stdout=subprocess.DEVNULL)
    print("started", flush=True)
    time.sleep(300)
"""

# The same, leaving the block as a run that cleaned up does: the watchdog stands down.
_RELEASED = """
import os, subprocess, sys
from pathlib import Path
from dhir.toolchain.reaper import watched
marker, folder = sys.argv[1], Path(sys.argv[2])
with watched(marker, folder):
    env = dict(os.environ, DHIR_RUN_ID=marker)
    sleep = ["sleep", "300"]
    subprocess.Popen(sleep, env=env, start_new_session=True, stdout=subprocess.DEVNULL)
print("released", flush=True)
"""


def marked(marker: str) -> list[int]:
    """Live processes (not zombies) whose environment has DHIR_RUN_ID=`marker`."""
    needle = f"DHIR_RUN_ID={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit():
                continue
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def watchdogs(marker: str) -> list[int]:
    """Watchdogs still running for `marker` (it is on their command line)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def wait_until_none(find: Callable[[str], list[int]], marker: str, within: float) -> list[int]:
    deadline = time.monotonic() + within
    while (left := find(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def start(script: str, marker: str, folder: Path) -> "subprocess.Popen[str]":
    command = [sys.executable, "-c", script, marker, str(folder)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True)


def test_the_processes_of_a_killed_dhir_are_killed(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    folder = tmp_path / "dhir-run-x"
    (folder / "out").mkdir(parents=True)
    dhir = start(_WATCHED, marker, folder)
    try:
        assert dhir.stdout is not None
        assert dhir.stdout.readline() == "started\n"
        assert marked(marker), "the marked process did not start"
        dhir.send_signal(signal.SIGKILL)
        dhir.wait()
        left = wait_until_none(marked, marker, 20)
    finally:
        dhir.kill()
        dhir.communicate()
        for pid in marked(marker):
            os.kill(pid, signal.SIGKILL)
    assert not left, "a process of the run outlived dhir"
    assert not wait_until_none(watchdogs, marker, 20), "the watchdog is left"
    assert not folder.exists(), "the run's folder is left"


def test_a_run_that_ended_well_is_left_alone(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    folder = tmp_path / "kept"
    folder.mkdir()
    dhir = start(_RELEASED, marker, folder)
    try:
        output, _ = dhir.communicate(timeout=60)
        assert output == "released\n"
        assert dhir.returncode == 0
        time.sleep(0.3)  # time the watchdog would have had to kill
        assert marked(marker), "the watchdog killed a process after it was released"
        assert folder.exists()
        assert not watchdogs(marker), "the watchdog is left"
    finally:
        for pid in marked(marker):
            os.kill(pid, signal.SIGKILL)


def test_a_watchdog_that_cannot_start_leaves_the_run_to_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A watchdog this user may not run (seen with a Python one: a venv whose interpreter
    # lies under /root, run by another user): the run went no further, an internal error.
    from dhir.toolchain import reaper

    shell = tmp_path / "sh"
    shell.write_text("not a program\n")  # no execute bit: EACCES, even for root
    monkeypatch.setattr(reaper, "_SHELL", str(shell))
    ran = False
    with reaper.watched(uuid.uuid4().hex, tmp_path):
        ran = True
    assert ran
