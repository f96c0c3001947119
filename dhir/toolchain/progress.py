"""A status line on the terminal for stages that take more than a second: `dhir run` and
`dhir compile` show which stage is running (parsing, the passes, mlir-opt, the builds, the
run) and for how long, on standard error, and clear it when the command ends.

Written here rather than with tqdm or rich: a stage has no count to show a bar for, and
the line is one `\\r` write a few times a second from a helper thread.
"""

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

SHOW_AFTER_S = 1.0
TICK_S = 0.25


class StatusLine:
    """The innermost running stage and its seconds, rewritten in place on `stream`."""

    def __init__(self, stream: TextIO, command: str) -> None:
        self._stream = stream
        self._command = command
        self._stages: list[tuple[str, float]] = []
        self._lock = threading.Lock()
        self._shown = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, daemon=True)

    def begin(self, name: str) -> None:
        with self._lock:
            self._stages.append((name, time.monotonic()))

    def end(self, name: str) -> None:
        with self._lock:
            for k in range(len(self._stages) - 1, -1, -1):
                if self._stages[k][0] == name:
                    del self._stages[k]
                    break

    def _tick(self) -> None:
        while not self._stop.wait(TICK_S):
            with self._lock:
                if not self._stages:
                    continue
                name, began = self._stages[-1]
                seconds = time.monotonic() - began
                if seconds >= SHOW_AFTER_S:
                    self._write(f"\r\x1b[K{self._command}: {name} ... {seconds:.0f} s")
                    self._shown = True

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):
            self._stop.set()

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        if self._shown:
            self._write("\r\x1b[K")


_LISTENER: StatusLine | None = None


def listener() -> StatusLine | None:
    """The status line stages report to, if one is shown."""
    return _LISTENER


@contextmanager
def status_line(command: str, quiet: bool, stream: TextIO | None = None) -> Iterator[None]:
    """Show stages on `stream` (standard error) while the block runs, unless `quiet` or the
    stream is not a terminal."""
    global _LISTENER
    out: TextIO = stream if stream is not None else sys.stderr
    if quiet or not out.isatty() or _LISTENER is not None:
        yield
        return
    line = StatusLine(out, command)
    _LISTENER = line
    line.start()
    try:
        yield
    finally:
        _LISTENER = None
        line.close()
