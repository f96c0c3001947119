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
hang or go on: it is refused, naming two threads that part there.

The collective ops (dhir.backends.interp.collectives) wait as a barrier does, each thread
bringing its value: `gpu.all_reduce` for every thread of the block, `gpu.shuffle` and
`gpu.subgroup_reduce` for the lanes of one subgroup (a warp of 32 threads), which go on
once they have all met there, while the other subgroups' threads still wait where they
are. Lanes that should meet and do not are refused as a barrier is."""

import contextvars
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

from xdsl.interpreter import Interpreter
from xdsl.ir import Operation, Region
from xdsl.utils.scoped_dict import ScopedDict

from dhir.backends.interp.collectives import SUBGROUP_SIZE, Meeting
from dhir.backends.interp.core import OpStack, fail
from dhir.backends.interp.memref import state
from dhir.dialects import func
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
    waits_at: Operation | None = None  # the barrier or collective op it waits at
    # The calls, outermost first, through which it reached `waits_at`: one barrier in a
    # function called from two places is two barriers (after inlining, as on a GPU).
    calls: tuple[Operation, ...] = ()
    meeting: Meeting | None = None  # what it brings to a collective op
    result: Any = None  # what the collective op gives it
    ready: bool = True  # may run on: not started, or what it waits at is settled
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
        """Run every thread that may go on to its next wait or its end, then settle what
        they wait at; whether they have all ended."""
        for place, thread in enumerate(self.threads):
            if thread.ready and not thread.done:
                self._resume(thread, place)
                if thread.error is not None:
                    raise thread.error
        if all(thread.done for thread in self.threads):
            return True
        subgroups = {
            place // SUBGROUP_SIZE
            for place, thread in enumerate(self.threads)
            if thread.meeting is not None and thread.meeting.lanes
        }
        for subgroup in sorted(subgroups):
            self._settle_subgroup(subgroup)
        if not subgroups:
            self._settle_block()
        return False

    def _settle_block(self) -> None:
        """Every thread waits at one barrier or `gpu.all_reduce`: all go on."""
        first = self.threads[0]
        for thread in self.threads:
            if not _together(thread, first):
                _parted(first, thread, "Every thread of a block")
        self._settle(self.threads)

    def _settle_subgroup(self, subgroup: int) -> None:
        """The lanes of `subgroup` that wait at an op of subgroups meet there: the first
        of them says how many lanes must (those below the shuffle's width, or all)."""
        lanes = self.threads[subgroup * SUBGROUP_SIZE : (subgroup + 1) * SUBGROUP_SIZE]
        first = next(t for t in lanes if t.meeting is not None and t.meeting.lanes)
        assert first.meeting is not None and first.waits_at is not None
        need = first.meeting.lanes
        if need > len(lanes):
            fail(
                first.waits_at,
                f"is reached by {_name(first)}, in a subgroup of {len(lanes)} threads (the "
                f"block's last), but it takes {need} lanes: its lowering leaves the lanes the "
                f"block lacks undefined. Give the block a multiple of {SUBGROUP_SIZE} threads",
            )
        for lane in lanes[:need]:
            if not _together(lane, first):
                _parted(first, lane, f"The first {need} lanes of a subgroup")
        self._settle([lane for lane in lanes if _together(lane, first)])

    def _settle(self, threads: list[_Thread]) -> None:
        """Give each of `threads`, which wait at one op, what it gives them, and let them
        go on."""
        meeting = threads[0].meeting
        if meeting is not None:
            offers = [(_lane(t), t.meeting.offer if t.meeting else None) for t in threads]
            self.interpreter._ctx = threads[0].scope  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]
            try:
                results = meeting.settle(offers)
            finally:
                self.interpreter._ctx = self.scope  # pyright: ignore[reportPrivateUsage]
            for thread, result in zip(threads, results, strict=True):
                thread.result = result
        for thread in threads:
            thread.ready = True

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

    def wait(self, op: Operation, meeting: Meeting | None = None) -> Any:
        """The running thread reached `op`, a barrier or a collective op it brings
        `meeting` to: hand over to the next, until every thread that must has reached
        it; what the op gives this thread."""
        thread = self.running
        assert thread is not None and thread.worker is not None
        thread.waits_at, thread.meeting, thread.ready = op, meeting, False
        thread.calls = self._calls()
        self.back.release()
        thread.worker.go.acquire()
        if thread.stop:
            raise _Stop()
        thread.waits_at, thread.meeting, thread.calls = None, None, ()
        result, thread.result = thread.result, None
        return result

    def _calls(self) -> tuple[Operation, ...]:
        """The calls the running thread is in, outermost first."""
        if not self.stacks:
            return ()
        stack, depth = self.stacks[0], self.depths[0]
        return tuple(op for op in stack.ops[depth:] if isinstance(op, func.CallOp))

    def _stop_waiting(self) -> None:
        """End the threads still waiting at a barrier (the block failed), one by one."""
        for thread in self.threads:
            if thread.worker is None or thread is self.running or thread.waits_at is None:
                continue
            thread.stop = True
            thread.worker.go.release()
            self.back.acquire()


def _together(thread: _Thread, first: _Thread) -> bool:
    """Whether `thread` is where `first` is: ended too, or waiting at the same op reached
    through the same calls."""
    return (
        thread.done == first.done
        and thread.waits_at is first.waits_at
        and thread.calls == first.calls
    )


def _parted(first: _Thread, other: _Thread, who: str) -> NoReturn:
    """Refuse the barrier or collective op that `first` or `other` (of one block) waits
    at and the other does not; `who` must reach it together."""
    waiting, elsewhere = (first, other) if first.waits_at is not None else (other, first)
    assert waiting.waits_at is not None
    name = waiting.waits_at.name
    if elsewhere.waits_at is None:
        instead = "returns from the kernel"
    elif elsewhere.waits_at is waiting.waits_at:
        instead = (
            f"waits at this {name} through other calls ({_through(elsewhere)}, where "
            f"{_name(waiting)} came {_through(waiting)}): on a GPU, a function called from "
            "two places is two barriers"
        )
    else:
        where = loc_of(elsewhere.waits_at)
        at = f" at {where}" if where is not None else ""
        other_name = elsewhere.waits_at.name
        instead = f"waits at {'another ' + name if other_name == name else other_name}{at}"
    fail(
        waiting.waits_at,
        f"is reached by {_name(waiting)} but not by thread "
        f"({', '.join(map(str, elsewhere.ids.thread))}) of that block, which {instead}. "
        f"{who} must reach each {name} together: CUDA "
        "leaves one that only some of them reach undefined (the GPU may hang or go "
        f"on). Make the condition or the trip count of the loop around the {name} the "
        "same for all of them, or move it out of it",
    )


def _through(thread: _Thread) -> str:
    """The calls `thread` waits through, as their places, outermost first."""
    if not thread.calls:
        return "through no call"
    places = [str(loc_of(call) or call.name) for call in thread.calls]
    return "through the call at " + ", then ".join(places)


def _lane(thread: _Thread) -> int:
    """`thread`'s lane in its subgroup: its place in the block, x fastest, modulo 32."""
    (x, y, z), (sx, sy, _) = thread.ids.thread, thread.ids.block_dim
    return (x + sx * (y + sy * z)) % SUBGROUP_SIZE


def _name(thread: _Thread) -> str:
    ids = thread.ids
    return f"thread ({', '.join(map(str, ids.thread))}) of block ({', '.join(map(str, ids.block))})"
