"""The passes that cut a program's tasks for its ranks before dhir-place, in the one order
that `dhir run` (dhir/backends/native.py) and `dhir schedule` (dhir/cli/schedule.py) both
follow, so that `dhir schedule` places the tasks that `dhir run` places:
dhir-split-devices (loops on any device over a node's GPU and CPUs), then dhir-time-tiles
(time loops run in bands of steps), then dhir-split (the rest of the tasks). The native
backend makes its GPU kernels between the first and the second."""

from functools import partial

from xdsl.dialects.builtin import ModuleOp

from dhir.analysis.threads import decide_threads, has_parallel_loops, openmp_safe
from dhir.api import diagnosed
from dhir.dialects.linalg import LinalgStructuredOperation as _Linalg
from dhir.ir.diagnostics import DhirError
from dhir.ir.walk import holds_op
from dhir.toolchain.build import Timing
from dhir.toolchain.cpu import cpu_facts, cpu_for
from dhir.toolchain.tools import find_llvm_tools
from dhir.transforms.blocked_nests import dry_run
from dhir.transforms.optimize_bodies import Decision, linalg_left
from dhir.transforms.split_devices import SplitDevicesPass
from dhir.transforms.split_tasks import SplitPlan, SplitTasksPass
from dhir.transforms.time_tiles import time_tiles


class RankSplits:
    """The splits of one module for `ranks` ranks: `devices`, then `tasks`. `plan`
    learns what dhir-split-devices and dhir-split did with each task, and why; `timing`
    times dhir-time-tiles and dhir-split as the native backend reports them."""

    def __init__(
        self, ranks: int, plan: SplitPlan | None = None, timing: Timing | None = None
    ) -> None:
        self.ranks = ranks
        self.plan = plan
        self.timing = timing if timing is not None else Timing()
        self._devices_asked = False

    def devices(self, module: ModuleOp, *, split: bool = True) -> None:
        """dhir-split-devices, first: the GPU pieces need kernels made of them later.
        `split` False (a CPU fallback, which runs no task on a GPU): none."""
        if split:
            with diagnosed():
                SplitDevicesPass(self.ranks).split(module, self.plan)
        self._devices_asked = True

    def tasks(
        self,
        module: ModuleOp,
        *,
        tiles: bool = True,
        safe: bool | None = None,
        vector_bits: int | None = None,
    ) -> list[Decision]:
        """dhir-time-tiles (when `tiles`: not with --no-optimize, which also leaves out
        dhir-optimize-bodies), then dhir-split, after `devices`; what dhir-time-tiles did
        with each time loop. In between, with `tiles`, one dry run of dhir-optimize-bodies
        (dhir.transforms.blocked_nests) marks the nests it will block (for
        `vector_bits`-wide vectors: the build's CPU's; by default this machine's) for the
        cost model, before dhir-split, and says whether linalg ops are left; then whether
        the module runs on threads is decided and kept on it (dhir.analysis.threads), for
        dhir-split, dhir-place and the build; `safe`: `openmp_safe`'s answer, when known
        already."""
        assert self._devices_asked, "dhir-split-devices runs before dhir-split"
        safe = openmp_safe(module) if safe is None else safe
        loops = safe and has_parallel_loops(module)
        tiled: list[Decision] = []
        if tiles:
            with self.timing.stage("dhir time tiles"):
                tiled = time_tiles(module, ranks=self.ranks)
        # The optimizer runs where the time tiles do (not with --no-optimize).
        left = partial(_holds_linalg, module)
        if tiles:
            # Before dhir-split, whose pieces keep the marks: once per task, not per piece.
            bits = vector_bits if vector_bits is not None else native_vector_bits()
            with self.timing.stage("dhir optimizer (dry run)"):
                found = dry_run(module, bits).linalg_left
            left = partial(linalg_left, module) if found is None else partial(_same, found)
        decide_threads(module, safe, loops, left)
        with self.timing.stage("dhir passes"), diagnosed():
            SplitTasksPass(self.ranks).split(module, self.plan)
        return tiled


def native_vector_bits() -> int:
    """The vector width of the CPU dhir builds for by default (this machine's); 256 when
    clang cannot say (the cost model's guess only: the build asks again)."""
    try:
        return cpu_facts(find_llvm_tools().clang, cpu_for(None)).vector_bits
    except DhirError:
        return 256


def _holds_linalg(module: ModuleOp) -> bool:
    return holds_op(module, _Linalg)


def _same(answer: bool) -> bool:
    return answer
