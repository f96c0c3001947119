"""dhir.dialects.access: what each op does to memory, asked by every analysis (issue 25,
item 1), and the one purity rule (item 3)."""

import ast
import re
import shutil
from pathlib import Path

import islpy as isl
import numpy as np
import pytest
from single_task import single_task

import dhir
from dhir.analysis.effects import derived_results, task_effects
from dhir.analysis.regions import task_regions
from dhir.analysis.reuse import traffic_curve
from dhir.analysis.work import task_work
from dhir.dialects.access import (
    Kind,
    ViewKind,
    facts,
    is_pure,
    scalar_access,
    subscripts,
)
from dhir.ir.text import parse_string

PACKAGE = Path(__file__).resolve().parents[2] / "dhir"
needs_mlir = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")

OPS = """
func.func private @ext(memref<8x8xf32>)
memref.global "private" @g : memref<4xf32> = dense<0.0>
func.func @f(%a: memref<8x8xf32>, %b: memref<8x8xf32>, %v: memref<64xf32>, %i: index) {
  %c0 = arith.constant 0 : index
  %x = memref.load %a[%i, %c0] : memref<8x8xf32>
  memref.store %x, %a[%i, %c0] : memref<8x8xf32>
  %y = affine.load %a[%i, %i + 1] : memref<8x8xf32>
  affine.store %y, %a[%i, %i] : memref<8x8xf32>
  %w = vector.load %a[%i, %i] : memref<8x8xf32>, vector<4xf32>
  vector.store %w, %a[%i, %i] : memref<8x8xf32>, vector<4xf32>
  %p = arith.constant 0.0 : f32
  %t = vector.transfer_read %a[%i, %i], %p : memref<8x8xf32>, vector<4xf32>
  vector.transfer_write %t, %a[%i, %i] : vector<4xf32>, memref<8x8xf32>
  %av = affine.vector_load %a[%i, %i] : memref<8x8xf32>, vector<4xf32>
  affine.vector_store %av, %a[%i, %i] : memref<8x8xf32>, vector<4xf32>
  memref.copy %a, %b : memref<8x8xf32> to memref<8x8xf32>
  %s = memref.subview %a[%i, 0][4, 4][1, 1] : memref<8x8xf32> to memref<4x4xf32, strided<[8, 1], offset: ?>>
  %ms = memref.memory_space_cast %a : memref<8x8xf32> to memref<8x8xf32, 1>
  %cs = memref.collapse_shape %a [[0, 1]] : memref<8x8xf32> into memref<64xf32>
  %tr = memref.transpose %a (i, j) -> (j, i) : memref<8x8xf32> to memref<8x8xf32, strided<[1, 8]>>
  %ptr = memref.extract_aligned_pointer_as_index %a : memref<8x8xf32> -> index
  %base, %off, %sz:2, %st:2 = memref.extract_strided_metadata %a : memref<8x8xf32> -> memref<f32>, index, index, index, index, index
  %dm = memref.dim %a, %c0 : memref<8x8xf32>
  %al = memref.alloca() : memref<4xf32>
  %ga = gpu.alloc () : memref<4xf32>
  gpu.memcpy %ga, %al : memref<4xf32>, memref<4xf32>
  %ar = memref.atomic_rmw addf %x, %a[%i, %c0] : (f32, memref<8x8xf32>) -> f32
  %gr = memref.generic_atomic_rmw %a[%i, %c0] : memref<8x8xf32> {
  ^bb0(%cur: f32):
    memref.atomic_yield %cur : f32
  }
  %ap = affine.apply affine_map<(d0) -> (d0 + 1)>(%i)
  %amax = affine.max affine_map<(d0) -> (d0, 4)>(%i)
  %sq = math.sqrt %p : f32
  linalg.matmul ins(%a, %b : memref<8x8xf32>, memref<8x8xf32>) outs(%a : memref<8x8xf32>)
  %gg = memref.get_global @g : memref<4xf32>
  %re = memref.realloc %al : memref<4xf32> to memref<8xf32>
  func.call @ext(%a) : (memref<8x8xf32>) -> ()
  memref.dealloc %re : memref<8xf32>
  return
}
"""


@pytest.fixture(scope="module")
def ops() -> dict[str, list]:
    module = parse_string(OPS)
    found: dict[str, list] = {}
    for op in module.walk():
        found.setdefault(op.name, []).append(op)
    return found


def _one(ops: dict[str, list], name: str):
    (op,) = ops[name]
    return op


def test_loads_and_stores_name_their_memref_and_subscripts(ops: dict[str, list]) -> None:
    load = facts(_one(ops, "memref.load"))
    assert load is not None and load.kind is Kind.LOAD
    (access,) = load.accesses
    op = _one(ops, "memref.load")
    assert access.memref is op.operands[0] and access.indices == tuple(op.operands[1:])
    assert access.read and not access.write and not access.whole and access.value is op.results[0]
    store = _one(ops, "memref.store")
    (access,) = facts(store).accesses  # type: ignore[union-attr]
    assert access.memref is store.operands[1] and access.write and access.exact
    assert access.value is store.operands[0] and access.indices == tuple(store.operands[2:])
    assert scalar_access(store) == access


def test_affine_accesses_carry_their_map_and_vectors_their_lanes(ops: dict[str, list]) -> None:
    (affine_load,) = facts(_one(ops, "affine.load")).accesses  # type: ignore[union-attr]
    assert affine_load.map is not None and affine_load.map.num_dims == 1
    (vector_store,) = facts(_one(ops, "vector.store")).accesses  # type: ignore[union-attr]
    assert vector_store.lanes is not None and vector_store.lanes.get_shape() == (4,)
    assert vector_store.exact and scalar_access(_one(ops, "vector.store")) is None
    (affine_vector,) = facts(_one(ops, "affine.vector_store")).accesses  # type: ignore[union-attr]
    assert affine_vector.map is not None and affine_vector.lanes is not None
    assert affine_vector.write and not affine_vector.read


def test_transfers_may_touch_any_element_and_never_write_surely(ops: dict[str, list]) -> None:
    read = facts(_one(ops, "vector.transfer_read"))
    write = facts(_one(ops, "vector.transfer_write"))
    assert read is not None and read.kind is Kind.LOAD and read.accesses[0].whole
    assert write is not None and write.kind is Kind.STORE
    assert write.accesses[0].whole and not write.accesses[0].exact


def test_copies_overwrite_their_target_whole(ops: dict[str, list]) -> None:
    for name in ("memref.copy", "gpu.memcpy"):
        op = _one(ops, name)
        found = facts(op)
        assert found is not None and found.kind is Kind.COPY
        source, target = found.accesses
        assert source.read and source.whole and not source.write
        assert target.write and target.whole and target.exact and not target.read
    memcpy = _one(ops, "gpu.memcpy")
    assert facts(memcpy).accesses[1].memref is memcpy.operands[-2]  # type: ignore[union-attr]


def test_atomics_read_and_write_one_element(ops: dict[str, list]) -> None:
    for name in ("memref.atomic_rmw", "memref.generic_atomic_rmw"):
        found = facts(_one(ops, name))
        assert found is not None and found.kind is Kind.ATOMIC
        (access,) = found.accesses
        assert access.read and access.write and access.exact and len(access.indices) == 2
        assert found.derived == ()  # the old value is no pointer


def test_views_shape_queries_and_allocations(ops: dict[str, list]) -> None:
    kinds = {
        "memref.subview": ViewKind.SUBVIEW,
        "memref.memory_space_cast": ViewKind.SAME,
        "memref.collapse_shape": ViewKind.OTHER,
        "memref.transpose": ViewKind.TRANSPOSE,
        "memref.extract_aligned_pointer_as_index": ViewKind.OTHER,
    }
    for name, view in kinds.items():
        op = _one(ops, name)
        found = facts(op)
        assert found is not None and found.kind is Kind.VIEW and found.view is view
        assert found.accesses == () and found.derived == tuple(op.results)
    subview = _one(ops, "memref.subview")
    assert subscripts(subview) == tuple(subview.operands[1:])
    metadata = _one(ops, "memref.extract_strided_metadata")
    assert facts(metadata).kind is Kind.SHAPE  # type: ignore[union-attr]
    assert derived_results(metadata) == (metadata.results[0],)
    assert facts(_one(ops, "memref.dim")).kind is Kind.SHAPE  # type: ignore[union-attr]
    for name in ("memref.alloca", "gpu.alloc"):
        assert facts(_one(ops, name)).kind is Kind.ALLOC  # type: ignore[union-attr]


def test_linalg_reads_its_inputs_and_updates_its_outputs(ops: dict[str, list]) -> None:
    op = _one(ops, "linalg.matmul")
    found = facts(op)
    assert found is not None and found.kind is Kind.STRUCTURED
    *inputs, output = found.accesses
    assert all(a.read and not a.write and a.whole for a in inputs)
    assert output.read and output.write and not output.exact


@pytest.mark.parametrize(
    "name", ["func.call", "memref.dealloc", "memref.realloc", "memref.get_global"]
)
def test_ops_without_facts_are_unknown(ops: dict[str, list], name: str) -> None:
    """Unknown is the worst case: effects.py takes it to read and write all it reaches,
    and its results to point there."""
    op = _one(ops, name)
    assert facts(op) is None and not is_pure(op)
    assert derived_results(op) == tuple(op.results)


def test_one_purity_rule(ops: dict[str, list]) -> None:
    for name in ("arith.constant", "math.sqrt", "affine.apply", "affine.max"):
        assert all(is_pure(op) for op in ops[name]), name
    for name in ("memref.load", "memref.store", "memref.dim", "func.call", "memref.alloca"):
        assert not any(is_pure(op) for op in ops[name]), name


# --- the done criterion: ops are not named by string to decide what they access -------

OP_NAME = re.compile(r"^(memref|affine|vector|gpu|linalg)\.[a-z_]+$")
# Where such a name may stay, and why (none today: text emitted into MLIR would go here).
ALLOWED: dict[str, str] = {}


def test_no_module_outside_the_dialects_names_ops_by_string() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).as_posix()
        if relative.startswith(("dhir/dialects/", "dhir/backends/interp/")):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if OP_NAME.match(node.value) and f"{relative}:{node.value}" not in ALLOWED:
                    found.append(f"{relative}:{node.lineno}: {node.value!r}")
    assert not found, "ask dhir.dialects.access instead:\n" + "\n".join(found)


# --- results that change: the old tables disagreed or did not know an op ---------------


def test_math_on_an_address_touches_no_memory() -> None:
    """math ops are pure like arith ones (effects.py took them for unknown ops that read
    and write all an address reaches)."""
    task = single_task(
        "%a: memref<8xi64>",
        """
      %p = memref.extract_aligned_pointer_as_index %a : memref<8xi64> -> index
      %i = arith.index_cast %p : index to i64
      %m = math.absi %i : i64
""",
    )
    effects = task_effects(task)
    assert not effects.reads and not effects.writes


def test_an_affine_vector_load_only_reads() -> None:
    """affine.vector_load/store were unknown ops (read and write all); now a read of
    its lanes and a (sure) write of its lanes, and the work count moves their bytes."""
    task = single_task(
        "%a: memref<16xf32>, %b: memref<16xf32>",
        """
      %c2 = arith.constant 2 : index
      %v = affine.vector_load %a[%c2 + 1] : memref<16xf32>, vector<4xf32>
      affine.vector_store %v, %b[%c2 * 2] : memref<16xf32>, vector<4xf32>
""",
    )
    a, b = task.memrefs
    effects = task_effects(task)
    assert effects.reads == {a} and effects.writes == {b}
    regions = task_regions(task)
    assert regions.read(a).is_equal(isl.Set("{ [x0] : 3 <= x0 <= 6 }"))
    lanes = isl.Set("{ [x0] : 4 <= x0 <= 7 }")
    assert regions.written(b).is_equal(lanes) and regions.must_written(b).is_equal(lanes)
    assert task_work(task).bytes == 32


def test_atomics_touch_their_element_only() -> None:
    """An atomic read-modify-write of a[3] reads and surely writes a[3], not all of a."""
    task = single_task(
        "%a: memref<8xf32>",
        """
      %c3 = arith.constant 3 : index
      %one = arith.constant 1.0 : f32
      %old = memref.atomic_rmw addf %one, %a[%c3] : (f32, memref<8xf32>) -> f32
""",
    )
    (a,) = task.memrefs
    regions = task_regions(task)
    element = isl.Set("{ [3] }")
    assert regions.read(a).is_equal(element) and regions.written(a).is_equal(element)
    assert regions.must_written(a).is_equal(element)


def test_a_memory_space_cast_keeps_its_indices() -> None:
    task = single_task(
        "%a: memref<8xf32>",
        """
      %c5 = arith.constant 5 : index
      %x = arith.constant 1.0 : f32
      %m = memref.memory_space_cast %a : memref<8xf32> to memref<8xf32, 1>
      memref.store %x, %m[%c5] : memref<8xf32, 1>
""",
    )
    (a,) = task.memrefs
    regions = task_regions(task)
    element = isl.Set("{ [5] }")
    assert regions.written(a).is_equal(element) and regions.must_written(a).is_equal(element)


def test_a_transfer_write_stays_in_its_view_and_is_no_sure_write() -> None:
    """Its lanes may be masked: any element of the subview, none surely."""
    task = single_task(
        "%a: memref<16xf32>",
        """
      %c0 = arith.constant 0 : index
      %p = arith.constant 0.0 : f32
      %s = memref.subview %a[4] [4] [1] : memref<16xf32> to memref<4xf32, strided<[1], offset: 4>>
      %v = vector.transfer_read %s[%c0], %p : memref<4xf32, strided<[1], offset: 4>>, vector<4xf32>
      vector.transfer_write %v, %s[%c0] : vector<4xf32>, memref<4xf32, strided<[1], offset: 4>>
""",
    )
    (a,) = task.memrefs
    regions = task_regions(task)
    view = isl.Set("{ [x0] : 4 <= x0 <= 7 }")
    assert regions.read(a).is_equal(view) and regions.written(a).is_equal(view)
    assert regions.must_written(a).is_empty()


def test_affine_apply_in_a_loop_leaves_the_reuse_count_followable() -> None:
    """affine.apply is pure: the reuse count follows its body (it gave up on it)."""
    task = single_task(
        "%a: memref<64xf64>",
        """
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c32 = arith.constant 32 : index
      scf.for %i = %c0 to %c32 step %c1 {
        %j = affine.apply affine_map<(d0) -> (d0 * 2)>(%i)
        %x = memref.load %a[%j] : memref<64xf64>
        memref.store %x, %a[%i] : memref<64xf64>
      }
""",
    )
    assert traffic_curve(task.body.block) is not None


# rank 0 writes %a; rank 1 updates one element atomically and moves lanes through views
# (transfers): what each reads and writes decides what travels between them.
LANES = """
func.func @main(%a: memref<8xf32>, %b: memref<8xf32>) {
  dhir.schedule %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %a attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      scf.for %i = %c0 to %c8 step %c1 {
        %n = arith.index_cast %i : index to i32
        %x = arith.sitofp %n : i32 to f32
        memref.store %x, %a[%i] : memref<8xf32>
      }
    }
    %t1 = dhir.task %cpu, %a, %b attributes {dhir.rank = 1 : i64} {
      %c0 = arith.constant 0 : index
      %c3 = arith.constant 3 : index
      %ten = arith.constant 10.0 : f32
      %pad = arith.constant 0.0 : f32
      %old = memref.atomic_rmw addf %ten, %a[%c3] : (f32, memref<8xf32>) -> f32
      %s = memref.subview %a[4] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: 4>>
      %v = vector.transfer_read %s[%c0], %pad : memref<4xf32, strided<[1], offset: 4>>, vector<4xf32>
      %d = memref.subview %b[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
      vector.transfer_write %v, %d[%c0] : vector<4xf32>, memref<4xf32, strided<[1]>>
    }
  }
  return
}
"""


def test_atomics_and_vector_lanes_interp_means_what_the_program_says() -> None:
    a, b = dhir.run(LANES, np.zeros(8, np.float32), np.zeros(8, np.float32), backend="interp")
    assert a.tolist() == [0, 1, 2, 13, 4, 5, 6, 7]
    assert b.tolist() == [4, 5, 6, 7, 0, 0, 0, 0]


@needs_mlir
@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 3])
def test_atomics_and_vector_lanes_run_natively_as_the_interpreter_does(ranks: int) -> None:
    def inputs() -> list[np.ndarray]:
        return [np.zeros(8, np.float32), np.full(8, -1, np.float32)]

    expected = dhir.run(LANES, *inputs(), backend="interp")
    got = dhir.run(LANES, *inputs(), backend="native", ranks=ranks, placement="round-robin")
    for want, have in zip(expected, got, strict=True):
        np.testing.assert_array_equal(have, want)


def test_an_affine_store_of_a_vector_element_is_one_element() -> None:
    """Only affine.vector_load/store cover lanes: a plain affine.store into a memref of
    vectors writes one (vector) element, which reuse.py follows as a scalar access."""
    module = parse_string("""
func.func @f(%a: memref<4xvector<2xf32>>, %x: vector<2xf32>) {
  affine.store %x, %a[1] : memref<4xvector<2xf32>>
  return
}
""")
    store = next(op for op in module.walk() if op.name == "affine.store")
    access = scalar_access(store)
    assert access is not None and access.lanes is None and access.exact
