"""Layouts of uneven shards (dhir/analysis/shard_layout.py): MLIR's own, checked against
mlir-opt-22's `shard.shard_shape`, and the padded one, checked element by element."""

import re
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dhir.analysis.shard_layout import Padding, mlir_layout

needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


@needs_llvm
@pytest.mark.mlir
def test_mlir_layout_is_the_one_mlir_gives_each_device() -> None:
    cases = [(size, devices) for size in range(0, 11) for devices in range(1, 6)]
    lines = ['module attributes { mpi.dlti = #dlti.map<"MPI:comm_world_rank" = 0> } {']
    for k, (_, devices) in enumerate(cases):
        lines.append(f"shard.grid @g{k}(shape = {devices})")
    lines.append(f"func.func @f() -> ({', '.join(['index'] * sum(d for _, d in cases))}) {{")
    names = []
    for k, (size, devices) in enumerate(cases):
        lines.append(f"  %s{k} = shard.sharding @g{k} split_axes = [[0]] : !shard.sharding")
        for device in range(devices):
            lines.append(f"  %d{k}_{device} = arith.constant {device} : index")
            lines.append(
                f"  %n{k}_{device} = shard.shard_shape dims = [{size}] sharding = %s{k} "
                f"device = [%d{k}_{device}] : index"
            )
            names.append(f"%n{k}_{device}")
    lines += [f"  return {', '.join(names)} : {', '.join(['index'] * len(names))}", "}", "}"]
    lowered = subprocess.run(
        ["mlir-opt-22", "--convert-shard-to-mpi", "--canonicalize"],
        input="\n".join(lines),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    constants = dict(re.findall(r"(%[\w]+) = arith.constant (\d+) : index", lowered))
    returned = re.search(r"return (.*?) :", lowered)
    assert returned is not None
    got = [int(constants[name.strip()]) for name in returned.group(1).split(",")]
    want = [n for size, devices in cases for n in mlir_layout(size, devices)]
    assert got == want


@st.composite
def paddings(draw: st.DrawFn) -> Padding:
    return Padding(tuple(draw(st.lists(st.integers(0, 5), min_size=1, max_size=6))))


def _positions(padding: Padding) -> list[int | None]:
    """Each padded position's real index, None for padding."""
    out: list[int | None] = []
    real = 0
    for n in padding.counts:
        out += list(range(real, real + n)) + [None] * (padding.block - n)
        real += n
    return out


@settings(max_examples=200, deadline=None)
@given(paddings(), st.data())
def test_the_segments_of_a_piece_are_its_real_elements(
    padding: Padding, data: st.DataObject
) -> None:
    start = data.draw(st.integers(0, padding.size))
    length = data.draw(st.integers(0, padding.size - start))
    positions = _positions(padding)[start : start + length]
    got: list[int | None] = [None] * length
    for real, offset, count in padding.segments(start, length):
        assert count > 0
        got[offset : offset + count] = range(real, real + count)
    assert got == positions


@settings(max_examples=200, deadline=None)
@given(paddings(), st.data())
def test_held_counts_the_real_elements_of_even_blocks(
    padding: Padding, data: st.DataObject
) -> None:
    devices = data.draw(st.sampled_from([d for d in range(1, 13) if padding.size % d == 0]))
    width = padding.size // devices
    positions = _positions(padding)
    want = tuple(
        sum(p is not None for p in positions[j * width : (j + 1) * width]) for j in range(devices)
    )
    assert padding.held(devices) == want
    assert sum(want) == sum(padding.counts)
