"""The threads of one GPU block, run in phases between barriers, as CUDA runs them: each
thread in turn (x fastest) runs until it reaches a `gpu.barrier` or returns; once every
thread of the block waits at the barrier, all go on to the next phase. So what a thread
writes before a barrier is there for every thread of its block after it, in workgroup
memory and in global memory alike.

Each thread runs on a Python thread of its own (reused by the next block's thread at its
place), which keeps its place in the regions it runs (a barrier in an `scf.for`, in an
`scf.if`, in a called function), but only one of them runs at any time, handing over to
the next at a barrier: the order is fixed, and the interpreter's state (the values in
scope, the ops being run, the thread ids) is swapped at each hand-over.

A barrier that not every thread of the block reaches (under a condition that differs
between them, in a loop whose trip count does) is undefined in CUDA, where the GPU may
hang or go on: it is refused, naming two threads that part there."""

import contextvars
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

from xdsl.interpreter import Interpreter
from xdsl.ir import Operation, Region
from xdsl.utils.scoped_dict import ScopedDict

from dhir.backends.interp.core import OpStack, fail
from dhir.backends.interp.memref import state
from dhir.dialects import gpu
from dhir.ir.diagnostics import loc_of

if TYPE_CHECKING:
    from dhir.backends.interp.gpu import GpuIds


class _Stop(BaseException):
    """Unwinds a thread that waits at a barrier of a block that is given up (another of
    its threads failed)."""


@dataclass(eq=False)
class _Thread:
    ids: "GpuIds"
    args: tuple[Any, ...]
    block: "_Block | None" = None
    worker: "_Worker | None" = None
    waits_at: Operation | None = None  # the barrier it waits at
    done: bool = False
    error: BaseException | None = None
    stop: bool = False
    # What it had in the interpreter when it stopped at its barrier.
    scope: "ScopedDict[Any, Any] | None" = None
    ops: list[list[Operation]] = field(default_factory=list[list[Operation]])


@dataclass(eq=False)
class _Worker:
    """A Python thread that runs the GPU thread at one place of each block in turn."""

    go: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    job: _Thread | None = None
    thread: threading.Thread | None = None


class Workers:
    """The Python threads of one launch: starting one costs more than running a short
    kernel's thread, so each block's threads reuse those of the block before."""

    def __init__(self) -> None:
        self.pool: list[_Worker] = []
        self.back = threading.Semaphore(0)  # a GPU thread has stopped at a barrier or ended

    def take(self, place: int, job: _Thread) -> _Worker:
        while len(self.pool) <= place:
            # Each Python thread starts with a context of its own, where NumPy keeps its
            # error state: give it the launching thread's.
            context = contextvars.copy_context()
            worker = _Worker()
            worker.thread = threading.Thread(
                target=context.run, args=(self._serve, worker), daemon=True
            )
            worker.thread.start()
            self.pool.append(worker)
        worker = self.pool[place]
        worker.job = job
        return worker

    def _serve(self, worker: _Worker) -> None:
        while True:
            worker.go.acquire()
            job = worker.job
            if job is None or job.block is None:
                return
            job.block.work(job)

    def close(self) -> None:
        """End the Python threads that wait for a job (one a signal left running goes on
        until it reaches a barrier: it is a daemon)."""
        for worker in self.pool:
            job = worker.job
            if job is not None and not job.done and job.error is None:
                continue
            worker.job = None
            worker.go.release()
            if worker.thread is not None:
                worker.thread.join()


def run_block(
    interpreter: Interpreter,
    body: Region,
    name: str,
    threads: list[tuple["GpuIds", tuple[Any, ...]]],
    workers: Workers,
) -> None:
    """Run `body` once for each of `threads` (their ids and the body's arguments), in
    phases between barriers, on `workers`."""
    _Block(interpreter, body, name, [_Thread(ids, args) for ids, args in threads], workers).run()


class _Block:
    def __init__(
        self,
        interpreter: Interpreter,
        body: Region,
        name: str,
        threads: list[_Thread],
        workers: Workers,
    ) -> None:
        self.workers = workers
        self.back = workers.back
        self.interpreter = interpreter
        self.body = body
        self.name = name
        self.threads = threads
        for thread in threads:
            thread.block = self
        self.running: _Thread | None = None
        self.scope = interpreter._ctx  # pyright: ignore[reportPrivateUsage]
        self.stacks = [s for s in interpreter.listeners if isinstance(s, OpStack)]
        self.depths = [len(s.ops) for s in self.stacks]

    def run(self) -> None:
        run_state = state(self.interpreter)
        run_state.barrier = self.wait
        try:
            while not self._phase():
                pass
        finally:
            run_state.barrier = None
            self._stop_waiting()

    def _phase(self) -> bool:
        """Run every thread to its next barrier or its end; whether they have all ended."""
        first = self.threads[0]
        for place, thread in enumerate(self.threads):
            self._resume(thread, place)
            if thread.error is not None:
                raise thread.error
            if (thread.done, thread.waits_at) != (first.done, first.waits_at):
                _parted(first, thread)
        return first.done

    def _resume(self, thread: _Thread, place: int) -> None:
        state(self.interpreter).gpu = thread.ids
        self.running = thread
        if thread.worker is None:
            thread.worker = self.workers.take(place, thread)
        else:
            self.interpreter._ctx = thread.scope  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]
            for stack, ops in zip(self.stacks, thread.ops, strict=True):
                stack.ops.extend(ops)
        thread.worker.go.release()
        self.back.acquire()
        self.running = None
        if thread.waits_at is not None:
            self._set_aside(thread)

    def _set_aside(self, thread: _Thread) -> None:
        """Keep what a thread waiting at a barrier has in the interpreter, and give the
        interpreter back the launch's."""
        thread.scope = self.interpreter._ctx  # pyright: ignore[reportPrivateUsage]
        self.interpreter._ctx = self.scope  # pyright: ignore[reportPrivateUsage]
        thread.ops = []
        for stack, depth in zip(self.stacks, self.depths, strict=True):
            thread.ops.append(stack.ops[depth:])
            del stack.ops[depth:]

    def work(self, thread: _Thread) -> None:
        """Run `thread` on the Python thread calling, to its end (it waits at barriers)."""
        assert thread.worker is not None
        try:
            self.interpreter.run_ssacfg_region(self.body, thread.args, self.name)
            thread.done = True
        except _Stop:
            thread.done = True
        except BaseException as error:  # raised again on the launching thread (_phase)
            thread.error = error
        finally:
            self.back.release()

    def wait(self, barrier: Operation) -> None:
        """The running thread reached `barrier`: hand over to the next, until every
        thread of the block has reached it."""
        thread = self.running
        assert thread is not None and thread.worker is not None
        thread.waits_at = barrier
        self.back.release()
        thread.worker.go.acquire()
        if thread.stop:
            raise _Stop()
        thread.waits_at = None

    def _stop_waiting(self) -> None:
        """End the threads still waiting at a barrier (the block failed), one by one."""
        for thread in self.threads:
            if thread.worker is None or thread is self.running or thread.waits_at is None:
                continue
            thread.stop = True
            thread.worker.go.release()
            self.back.acquire()


def _parted(first: _Thread, other: _Thread) -> NoReturn:
    """Refuse the barrier that `first` or `other` (of one block) waits at and the other
    does not."""
    waiting, elsewhere = (first, other) if first.waits_at is not None else (other, first)
    assert waiting.waits_at is not None
    if elsewhere.waits_at is None:
        instead = "returns from the kernel"
    else:
        where = loc_of(elsewhere.waits_at)
        at = f" at {where}" if where is not None else ""
        instead = f"waits at another {gpu.BarrierOp.name}{at}"
    fail(
        waiting.waits_at,
        f"is reached by {_name(waiting)} but not by thread "
        f"({', '.join(map(str, elsewhere.ids.thread))}) of that block, which {instead}. "
        f"Every thread of a block must reach each {gpu.BarrierOp.name} together: CUDA "
        "leaves a barrier that only some of them reach undefined (the GPU may hang or go "
        "on). Make the condition or the trip count of the loop around the barrier the same "
        "for all threads of a block, or move the barrier out of it",
    )


def _name(thread: _Thread) -> str:
    ids = thread.ids
    return f"thread ({', '.join(map(str, ids.thread))}) of block ({', '.join(map(str, ids.block))})"
