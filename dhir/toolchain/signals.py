"""SIGTERM and SIGHUP end a run as Ctrl-C does.

`timeout`, `scancel` and Slurm's time limit send SIGTERM; a closed terminal sends SIGHUP.
Python's default for both ends the process at once, leaving mpirun, its proxies and the
ranks running (they run in sessions of their own, out of reach of a signal sent to our
process group) and the run's directory behind. While `ending_cleanly` is active, either
signal raises `Terminated` in the main thread instead, which unwinds like
KeyboardInterrupt through the clean-up in dhir/toolchain/launch.py.
"""

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

from dhir.ir.diagnostics import DhirError, Diagnostic

ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)

_Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived: not an Exception, so that nothing on the way out that
    catches errors mistakes it for one (as for KeyboardInterrupt)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"ended by {signal.Signals(signum).name}")
        self.signum = signum


@contextmanager
def ending_cleanly(redeliver: bool = False) -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into `Terminated` inside the block. With `redeliver` (for a
    program that calls dhir, whose own disposition of the signal stands), the signal is
    sent again once the block has cleaned up and the earlier handlers are back: by
    default the process then dies of it, as it would have without dhir."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers, and only it runs them
        return
    arrived: list[int] = []

    def handler(signum: int, _frame: FrameType | None) -> None:
        # A second signal (Slurm repeats SIGTERM) must not cut short the clean-up.
        if not arrived:
            arrived.append(signum)
            raise Terminated(signum)

    previous: dict[int, _Handler] = {}
    for signum in ENDING_SIGNALS:
        prior = signal.getsignal(signum)
        # Left alone: an ignored signal (`nohup` ignores SIGHUP), or one set outside Python.
        if prior is not signal.SIG_IGN and prior is not None:
            previous[signum] = signal.signal(signum, handler)
    try:
        yield
    except Terminated as ended:
        _restore(previous)
        if not redeliver:
            raise
        signal.raise_signal(ended.signum)
        # Still here: the program handles the signal itself, and the run is over.
        raise DhirError(
            [Diagnostic(f"the run was {ended}; every process of it was stopped")]
        ) from None
    finally:
        _restore(previous)


def _restore(previous: dict[int, _Handler]) -> None:
    for signum, prior in previous.items():
        signal.signal(signum, prior)
