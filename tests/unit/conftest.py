import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

FAKE_CUDA_SOURCE = Path(__file__).parents[1] / "gpu_fake" / "fake_cuda.c"


def pytest_configure(config: pytest.Config) -> None:
    # A suite started in the background (`nohup`, `cmd &` in a script) inherits SIGINT and
    # SIGHUP ignored, and so would every dhir it starts: the tests of what Ctrl-C and
    # hang-ups do need them as a terminal gives them.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if shutil.which("mlir-opt-22") is None:
        skip = pytest.mark.skip(reason="mlir-opt-22 not installed (run scripts/setup.sh)")
        for item in items:
            if "mlir" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def fake_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the fake CUDA driver (tests/gpu_fake/fake_cuda.c) as libcuda.so.1."""
    folder = tmp_path_factory.mktemp("fake-cuda")
    subprocess.run(
        ["clang-22", "-shared", "-fPIC", "-O1", "-o", folder / "libcuda.so.1", FAKE_CUDA_SOURCE],
        check=True,
    )
    return folder


@pytest.fixture
def no_block() -> Iterator[None]:
    """A test that would block for good (a FIFO opened with no writer) fails after 30 s
    instead (pytest's Failed: not an OSError, which the code under test may catch)."""

    def stop(*_: object) -> None:
        pytest.fail("blocked for 30 s")

    before = signal.signal(signal.SIGALRM, stop)
    signal.alarm(30)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
