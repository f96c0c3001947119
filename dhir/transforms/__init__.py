"""Every pass dhir-opt and the Python API can run, by kebab-case name.

One registry: a pass is added here and nowhere else.
"""

from collections.abc import Callable

from xdsl.passes import ModulePass


def _dhir_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    def annotate_dependences() -> type[ModulePass]:
        from dhir.transforms.annotate_dependences import AnnotateDependencesPass

        return AnnotateDependencesPass

    def codedrop() -> type[ModulePass]:
        from dhir.transforms.codedrop import CodeDropPass

        return CodeDropPass

    def place() -> type[ModulePass]:
        from dhir.transforms.place import PlacePass

        return PlacePass

    def instrument() -> type[ModulePass]:
        from dhir.transforms.instrument import InstrumentPass

        return InstrumentPass

    def agree_calls() -> type[ModulePass]:
        from dhir.transforms.agree_calls import AgreeCallsPass

        return AgreeCallsPass

    def track_tasks() -> type[ModulePass]:
        from dhir.transforms.track_tasks import TrackTasksPass

        return TrackTasksPass

    def gpu_kernels() -> type[ModulePass]:
        from dhir.transforms.gpu_kernels import GpuKernelsPass

        return GpuKernelsPass

    def split_devices() -> type[ModulePass]:
        from dhir.transforms.split_devices import SplitDevicesPass

        return SplitDevicesPass

    def gpu_row_copies() -> type[ModulePass]:
        from dhir.transforms.gpu_row_copies import GpuRowCopiesPass

        return GpuRowCopiesPass

    def gpu_data() -> type[ModulePass]:
        from dhir.transforms.gpu_data import GpuDataPass

        return GpuDataPass

    def lower_to_mpi() -> type[ModulePass]:
        from dhir.transforms.lower_to_mpi import LowerToMPIPass

        return LowerToMPIPass

    def shard_stubs() -> type[ModulePass]:
        from dhir.transforms.shard_collectives import ShardStubsPass

        return ShardStubsPass

    def shard_collectives() -> type[ModulePass]:
        from dhir.transforms.shard_collectives import ShardCollectivesPass

        return ShardCollectivesPass

    def accurate_math() -> type[ModulePass]:
        from dhir.transforms.accurate_math import AccurateMathPass

        return AccurateMathPass

    def mlir22_workarounds() -> type[ModulePass]:
        from dhir.transforms.mlir22_workarounds import Mlir22WorkaroundsPass

        return Mlir22WorkaroundsPass

    def loop_steps() -> type[ModulePass]:
        from dhir.transforms.loop_steps import LoopStepsPass

        return LoopStepsPass

    def endless_loops() -> type[ModulePass]:
        from dhir.transforms.endless_loops import EndlessLoopsPass

        return EndlessLoopsPass

    def host_prints() -> type[ModulePass]:
        from dhir.transforms.host_prints import HostPrintsPass

        return HostPrintsPass

    def wrap_checks() -> type[ModulePass]:
        from dhir.transforms.wrap_checks import WrapChecksPass

        return WrapChecksPass

    def alloc_sizes() -> type[ModulePass]:
        from dhir.transforms.alloc_sizes import AllocSizesPass

        return AllocSizesPass

    def check_mpi() -> type[ModulePass]:
        from dhir.transforms.check_mpi import CheckMpiPass

        return CheckMpiPass

    def assert_locations() -> type[ModulePass]:
        from dhir.transforms.assert_locations import AssertLocationsPass

        return AssertLocationsPass

    def float_atomics() -> type[ModulePass]:
        from dhir.transforms.float_atomics import FloatAtomicsPass

        return FloatAtomicsPass

    def openmp_reductions() -> type[ModulePass]:
        from dhir.transforms.openmp_reductions import OpenMPReductionsPass

        return OpenMPReductionsPass

    def serial_loops() -> type[ModulePass]:
        from dhir.transforms.serial_loops import SerialLoopsPass

        return SerialLoopsPass

    def vector_rows() -> type[ModulePass]:
        from dhir.transforms.vector_rows import VectorRowsPass

        return VectorRowsPass

    def packed_vectors() -> type[ModulePass]:
        from dhir.transforms.packed_vectors import PackedVectorsPass

        return PackedVectorsPass

    def cast_checks() -> type[ModulePass]:
        from dhir.transforms.cast_checks import CastChecksPass

        return CastChecksPass

    def cast_sizes() -> type[ModulePass]:
        from dhir.transforms.cast_checks import CastSizesPass

        return CastSizesPass

    def linalg_sizes() -> type[ModulePass]:
        from dhir.transforms.linalg_sizes import LinalgSizesPass

        return LinalgSizesPass

    def copy_checks() -> type[ModulePass]:
        from dhir.transforms.copy_checks import CopyChecksPass

        return CopyChecksPass

    def bounds_checks() -> type[ModulePass]:
        from dhir.transforms.bounds_checks import BoundsChecksPass

        return BoundsChecksPass

    def vector_checks() -> type[ModulePass]:
        from dhir.transforms.vector_checks import VectorChecksPass

        return VectorChecksPass

    def fast_math() -> type[ModulePass]:
        from dhir.transforms.fast_math import FastMathPass

        return FastMathPass

    def optimize_bodies() -> type[ModulePass]:
        from dhir.transforms.optimize_bodies import OptimizeBodiesPass

        return OptimizeBodiesPass

    def time_tiles() -> type[ModulePass]:
        from dhir.transforms.time_tiles import TimeTilesPass

        return TimeTilesPass

    def c_abi() -> type[ModulePass]:
        from dhir.transforms.c_abi import CAbiPass

        return CAbiPass

    def split() -> type[ModulePass]:
        from dhir.transforms.split_tasks import SplitTasksPass

        return SplitTasksPass

    return {
        "dhir-annotate-dependences": annotate_dependences,
        "dhir-codedrop": codedrop,
        "dhir-split-devices": split_devices,
        "dhir-split": split,
        "dhir-place": place,
        "dhir-instrument": instrument,
        "dhir-track-tasks": track_tasks,
        "dhir-agree-calls": agree_calls,
        "dhir-host-prints": host_prints,
        "dhir-fast-math": fast_math,
        "dhir-optimize-bodies": optimize_bodies,
        "dhir-time-tiles": time_tiles,
        "dhir-gpu-kernels": gpu_kernels,
        "dhir-gpu-data": gpu_data,
        "dhir-gpu-row-copies": gpu_row_copies,
        "dhir-lower-to-mpi": lower_to_mpi,
        "dhir-shard-stubs": shard_stubs,
        "dhir-shard-collectives": shard_collectives,
        "dhir-accurate-math": accurate_math,
        "dhir-float-atomics": float_atomics,
        "dhir-assert-locations": assert_locations,
        "dhir-loop-steps": loop_steps,
        "dhir-endless-loops": endless_loops,
        "dhir-wrap-checks": wrap_checks,
        "dhir-alloc-sizes": alloc_sizes,
        "dhir-check-mpi": check_mpi,
        "dhir-serial-loops": serial_loops,
        "dhir-openmp-reductions": openmp_reductions,
        "dhir-vector-rows": vector_rows,
        "dhir-packed-vectors": packed_vectors,
        "dhir-bounds-checks": bounds_checks,
        "dhir-vector-checks": vector_checks,
        "dhir-cast-checks": cast_checks,
        "dhir-cast-sizes": cast_sizes,
        "dhir-linalg-sizes": linalg_sizes,
        "dhir-copy-checks": copy_checks,
        "dhir-mlir22-workarounds": mlir22_workarounds,
        "dhir-c-abi": c_abi,
    }


# xDSL's general-purpose cleanups; its dialect-specific passes assume xDSL's own
# dialect versions (its legacy `mpi`, for one) and are not offered.
_XDSL_PASSES = ("canonicalize", "cse", "dce", "licm")


def dhir_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    return _dhir_passes()


def all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    from xdsl.transforms import get_all_passes

    xdsl_passes = get_all_passes()
    passes = {name: xdsl_passes[name] for name in _XDSL_PASSES}
    passes.update(_dhir_passes())
    return passes
