"""MLIR 22's named linalg ops and the memref ops xDSL 0.74 lacks: dhir reads them and
prints them back as mlir-opt-22 does (custom and generic form, bodies included), the
indexing maps it runs them by are MLIR's, and the interpreter runs them as NumPy does or
refuses them clearly."""

from collections.abc import Iterator

import numpy as np
import pytest
from roundtrip import assert_same_as_mlir, mlir_opt, parse
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation
from xdsl.utils.exceptions import ParseError

import dhir
from dhir import DhirError
from dhir.backends.interp import run_interp
from dhir.dialects import linalg

WINDOWED = {op.name: op for op in linalg._WINDOWED}  # pyright: ignore[reportPrivateUsage]


def _windowed_text(name: str, elements: tuple[str, ...], windows: bool) -> str:
    """A function applying `name` to memrefs of dynamic shape with the given element
    types (a scalar where the op takes one), with strides and dilations when asked."""
    op = WINDOWED[name]
    types = [
        f"memref<{'?x' * len(access.split(','))}{element}>" if access.strip() else element
        for access, element in zip(op.ACCESS, elements, strict=True)
    ]
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(types))
    rank = op.spatial_rank()
    attrs = ""
    if windows:
        strides = ", ".join(str(2 + i) for i in range(rank))
        dilations = ", ".join(str(5 + i) for i in range(rank))
        attrs = (
            f" {{dilations = dense<[{dilations}]> : tensor<{rank}xi64>,"
            f" strides = dense<[{strides}]> : tensor<{rank}xi64>}}"
        )
    ins = ", ".join(f"%a{i}" for i in range(len(types) - 1))
    return (
        f"func.func @f({args}) {{\n"
        f"  {name}{attrs} ins({ins} : {', '.join(types[:-1])})"
        f" outs(%a{len(types) - 1} : {types[-1]})\n  return\n}}\n"
    )


def _element_cases(name: str) -> Iterator[tuple[str, ...]]:
    inputs = len(WINDOWED[name].ACCESS) - 1
    if name.endswith("_q"):
        yield ("i8", "i8", "i32", "i32", "i32")
    elif name.endswith("_unsigned"):
        yield ("i8",) * inputs + ("i32",)
    else:
        yield ("i8",) * inputs + ("i32",)
        yield ("f16",) * inputs + ("f32",)
        yield ("f32",) * (inputs + 1)


@pytest.mark.mlir
@pytest.mark.parametrize("name", sorted(WINDOWED))
def test_windowed_maps_are_mlirs(name: str) -> None:
    """The maps dhir runs a convolution or pooling by are the ones mlir-opt-22 computes
    (it shows them as `linalg.memoized_indexing_maps`), strides and dilations included."""
    elements = next(_element_cases(name))
    generic = mlir_opt(_windowed_text(name, elements, windows=True))
    op = next(op for op in parse(generic).walk() if op.name == name)
    assert isinstance(op, LinalgStructuredOperation)
    assert op.get_indexing_maps() == op.attributes["linalg.memoized_indexing_maps"]


@pytest.mark.mlir
@pytest.mark.parametrize("name", sorted(WINDOWED))
def test_windowed_bodies_are_mlirs(name: str) -> None:
    """Casts (extsi, extui, sitofp, extf), operand order and zero points as MLIR's, with
    and without the optional strides and dilations."""
    for windows, elements in zip((False, True, False), _element_cases(name)):
        assert_same_as_mlir(_windowed_text(name, elements, windows))


ELEMENTWISE = """
func.func @e(%a: memref<4x?xf32>, %b: memref<4x?xf32>, %i: memref<4x?xi32>,
             %t: tensor<4xf64>) -> tensor<4xf64> {
  linalg.abs ins(%a : memref<4x?xf32>) outs(%b : memref<4x?xf32>)
  linalg.ceil ins(%a : memref<4x?xf32>) outs(%b : memref<4x?xf32>)
  linalg.floor ins(%a : memref<4x?xf32>) outs(%b : memref<4x?xf32>)
  linalg.negf ins(%a : memref<4x?xf32>) outs(%b : memref<4x?xf32>)
  linalg.reciprocal ins(%a : memref<4x?xf32>) outs(%b : memref<4x?xf32>)
  linalg.round ins(%a : memref<4x?xf32>) outs(%b : memref<4x?xf32>)
  linalg.rsqrt ins(%a : memref<4x?xf32>) outs(%b : memref<4x?xf32>)
  linalg.square ins(%a : memref<4x?xf32>) outs(%b : memref<4x?xf32>)
  linalg.tanh {note} ins(%a : memref<4x?xf32>) outs(%b : memref<4x?xf32>)
  linalg.erf ins(%a : memref<4x?xf32>) outs(%b : memref<4x?xf32>)
  linalg.powf ins(%a, %b : memref<4x?xf32>, memref<4x?xf32>) outs(%b : memref<4x?xf32>)
  linalg.div_unsigned ins(%i, %i : memref<4x?xi32>, memref<4x?xi32>) outs(%i : memref<4x?xi32>)
  %r = linalg.reciprocal ins(%t : tensor<4xf64>) outs(%t : tensor<4xf64>) -> tensor<4xf64>
  return %r : tensor<4xf64>
}
"""

CONTRACTIONS = """
func.func @c(%a: memref<2x3x5xi8>, %b: memref<2x5x7xi8>, %c: memref<3x7xi32>,
             %x: memref<5xf32>, %y: memref<2x5x7xf32>, %z: memref<3x7xf32>,
             %p: memref<3x5xf16>, %q: memref<5x7xf16>,
             %A: tensor<10x32x8x1xf32>, %B: tensor<80x32x4x1xf32>, %C: tensor<10x80x8x4xf32>,
             %D: memref<2x10x32x8x1xi8>, %E: memref<2x80x32x4x1xi8>, %F: memref<2x10x80x8x4xi32>,
             %v: vector<2x4xf32>, %tv: tensor<3xvector<2x4xf32>>) {
  linalg.batch_reduce_matmul ins(%a, %b : memref<2x3x5xi8>, memref<2x5x7xi8>) outs(%c : memref<3x7xi32>)
  linalg.batch_reduce_matmul indexing_maps = [
      affine_map<(d0, d1, d2, d3) -> (d3)>,
      affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>,
      affine_map<(d0, d1, d2, d3) -> (d1, d2)>]
      ins(%x, %y : memref<5xf32>, memref<2x5x7xf32>) outs(%z : memref<3x7xf32>)
  linalg.contract indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>,
                                   affine_map<(d0, d1, d2) -> (d2, d1)>,
                                   affine_map<(d0, d1, d2) -> (d0, d1)>]
      ins(%p, %q : memref<3x5xf16>, memref<5x7xf16>) outs(%z : memref<3x7xf32>)
  linalg.matmul ins(%p, %q : memref<3x5xf16>, memref<5x7xf16>) outs(%z : memref<3x7xf32>)
  %0 = linalg.mmt4d ins(%A, %B : tensor<10x32x8x1xf32>, tensor<80x32x4x1xf32>) outs(%C : tensor<10x80x8x4xf32>) -> tensor<10x80x8x4xf32>
  linalg.batch_mmt4d ins(%D, %E : memref<2x10x32x8x1xi8>, memref<2x80x32x4x1xi8>) outs(%F : memref<2x10x80x8x4xi32>)
  %1 = linalg.fill ins(%v : vector<2x4xf32>) outs(%tv : tensor<3xvector<2x4xf32>>) -> tensor<3xvector<2x4xf32>>
  return
}
"""

PACK = """
func.func @p(%s: tensor<?x?xf32>, %d: tensor<?x?x8x?xf32>, %pad: f32, %n: index,
             %m: tensor<13x15xf32>, %md: tensor<2x8x8x2xf32>) -> tensor<?x?xf32> {
  %0 = linalg.pack %s padding_value(%pad : f32) outer_dims_perm = [1, 0] inner_dims_pos = [0, 1] inner_tiles = [8, %n] into %d {note} : tensor<?x?xf32> -> tensor<?x?x8x?xf32>
  %1 = linalg.unpack %0 inner_dims_pos = [0, 1] inner_tiles = [8, %n] into %s : tensor<?x?x8x?xf32> -> tensor<?x?xf32>
  %2 = linalg.pack %m padding_value(%pad : f32) inner_dims_pos = [0, 1] inner_tiles = [8, 2] into %md : tensor<13x15xf32> -> tensor<2x8x8x2xf32>
  %3 = linalg.unpack %2 outer_dims_perm = [0, 1] inner_dims_pos = [0, 1] inner_tiles = [8, 2] into %m : tensor<2x8x8x2xf32> -> tensor<13x15xf32>
  return %1 : tensor<?x?xf32>
}
"""

MEMREF = """
func.func @m(%src: memref<2xf32>, %d: index, %u: memref<*xf32>, %shape: memref<2xi32>,
             %t: memref<4x4xi32>, %i: index) -> (memref<?xf32>, memref<?x?xf32>) {
  %0 = memref.realloc %src(%d) {alignment = 8} : memref<2xf32> to memref<?xf32>
  %1 = memref.realloc %0 : memref<?xf32> to memref<4xf32>
  %2 = memref.reshape %u(%shape) : (memref<*xf32>, memref<2xi32>) -> memref<?x?xf32>
  memref.prefetch %t[%i, %i], write, locality<1>, data : memref<4x4xi32>
  memref.prefetch %t[%i, %d], read, locality<3>, instr : memref<4x4xi32>
  memref.copy %u, %u : memref<*xf32> to memref<*xf32>
  %tag = memref.alloc() : memref<1xf32>
  memref.dma_start %t[%i, %i], %t[%d, %i], %i, %tag[%i] : memref<4x4xi32>, memref<4x4xi32>, memref<1xf32>
  memref.dma_start %src[%i], %0[%i], %d, %tag[%i], %i, %d : memref<2xf32>, memref<?xf32>, memref<1xf32>
  memref.dma_wait %tag[%i], %d : memref<1xf32>
  return %0, %2 : memref<?xf32>, memref<?x?xf32>
}
"""


@pytest.mark.mlir
@pytest.mark.parametrize(
    "text",
    [ELEMENTWISE, CONTRACTIONS, PACK, MEMREF],
    ids=["elementwise", "contractions", "pack", "memref"],
)
def test_round_trips_through_mlir_opt(text: str) -> None:
    assert_same_as_mlir(text)


@pytest.mark.parametrize(
    "body",
    [
        "linalg.abs ins(%i : memref<4xi32>) outs(%i : memref<4xi32>)",
        "linalg.div_unsigned ins(%f, %f : memref<4xf32>, memref<4xf32>) outs(%f : memref<4xf32>)",
        "linalg.pooling_nwc_max ins(%f : memref<4xf32>) outs(%f : memref<4xf32>)",
        "linalg.pooling_nwc_max_unsigned ins(%f, %f : memref<4xf32>, memref<4xf32>)"
        " outs(%f : memref<4xf32>)",
        "linalg.contract ins(%f, %f : memref<4xf32>, memref<4xf32>) outs(%f : memref<4xf32>)",
        "linalg.pack %f inner_dims_pos = [0] inner_tiles = [2] : memref<4xf32> -> memref<2x2xf32>",
        "linalg.pack %f inner_dims_pos = [0] inner_tiles = [2] into %f"
        " : memref<4xf32> -> memref<2x2xf32>",
        "memref.prefetch %f[%n], write, locality<1>, code : memref<4xf32>",
        "memref.dma_start %f[%n], %f[%n], %n : memref<4xf32>, memref<4xf32>",
    ],
    ids=[
        "abs-int",
        "div-unsigned-float",
        "one-input",
        "unsigned-float",
        "maps",
        "into",
        "pack-memref",
        "cache",
        "dma-tag",
    ],
)
def test_malformed_ops_raise_parse_error(body: str) -> None:
    text = (
        f"func.func @f(%i: memref<4xi32>, %f: memref<4xf32>, %n: index) {{\n  {body}\n  return\n}}"
    )
    with pytest.raises(ParseError):
        parse(text)


def _run(src: str, *inputs: np.ndarray) -> list[np.ndarray]:
    return run_interp(dhir.parse_string(src, "prog.mlir"), "main", list(inputs))


WINDOWS = """
func.func @main(%i: memref<1x7x7x2xf32>, %w: memref<2x2xf32>, %o: memref<1x3x3x2xf32>,
                %k: memref<2x2x2xf32>, %d: memref<1x4x4x2xf32>,
                %b: memref<1x7x3xi8>, %f: memref<2x3x2xi8>, %c: memref<1x6x2xi32>) {
  linalg.pooling_nhwc_max {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
    ins(%i, %w : memref<1x7x7x2xf32>, memref<2x2xf32>) outs(%o : memref<1x3x3x2xf32>)
  linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<3> : tensor<2xi64>}
    ins(%i, %k : memref<1x7x7x2xf32>, memref<2x2x2xf32>) outs(%d : memref<1x4x4x2xf32>)
  linalg.conv_1d_nwc_wcf ins(%b, %f : memref<1x7x3xi8>, memref<2x3x2xi8>) outs(%c : memref<1x6x2xi32>)
  return
}
"""


def test_interpreter_runs_windowed_ops_as_numpy() -> None:
    rng = np.random.default_rng(7)
    image = rng.standard_normal((1, 7, 7, 2)).astype(np.float32)
    kernel = rng.standard_normal((2, 2, 2)).astype(np.float32)
    ints = rng.integers(-128, 128, (1, 7, 3)).astype(np.int8)
    filters = rng.integers(-128, 128, (2, 3, 2)).astype(np.int8)
    start = np.full((1, 3, 3, 2), -np.inf, np.float32)
    got = _run(
        WINDOWS,
        image,
        np.zeros((2, 2), np.float32),
        start,
        kernel,
        np.zeros((1, 4, 4, 2), np.float32),
        ints,
        filters,
        np.zeros((1, 6, 2), np.int32),
    )
    pooled = start.copy()
    for oh, ow, c, kh, kw in np.ndindex(3, 3, 2, 2, 2):
        pooled[0, oh, ow, c] = max(pooled[0, oh, ow, c], image[0, 2 * oh + kh, 2 * ow + kw, c])
    depthwise = np.zeros((1, 4, 4, 2), np.float32)
    for oh, ow, c, kh, kw in np.ndindex(4, 4, 2, 2, 2):  # MLIR's loop order
        product = image[0, oh + 3 * kh, ow + 3 * kw, c] * kernel[kh, kw, c]
        depthwise[0, oh, ow, c] = depthwise[0, oh, ow, c] + product
    conv = np.zeros((1, 6, 2), np.int32)
    for ow, f, kw, c in np.ndindex(6, 2, 2, 3):
        conv[0, ow, f] += np.int32(ints[0, ow + kw, c]) * np.int32(filters[kw, c, f])
    np.testing.assert_array_equal(got[2], pooled)
    np.testing.assert_array_equal(got[4], depthwise)
    np.testing.assert_array_equal(got[7], conv)


ELEMENTWISE_RUN = """
func.func @main(%a: memref<5xf32>, %s: memref<5xf32>, %r: memref<5xf32>, %n: memref<5xf32>,
                %i: memref<5xi32>, %j: memref<5xi32>, %q: memref<5xi32>) {
  linalg.square ins(%a : memref<5xf32>) outs(%s : memref<5xf32>)
  linalg.reciprocal ins(%a : memref<5xf32>) outs(%r : memref<5xf32>)
  linalg.negf ins(%a : memref<5xf32>) outs(%n : memref<5xf32>)
  linalg.div_unsigned ins(%i, %j : memref<5xi32>, memref<5xi32>) outs(%q : memref<5xi32>)
  return
}
"""


def test_interpreter_runs_elementwise_ops_as_numpy() -> None:
    a = np.array([0.5, -2.0, 3.0, 1e-3, -7.25], np.float32)
    i = np.array([-1, 7, 100, -50, 9], np.int32)
    j = np.array([2, 3, 7, 5, 9], np.int32)
    zeros = np.zeros(5, np.float32)
    got = _run(ELEMENTWISE_RUN, a, zeros, zeros, zeros, i, j, np.zeros(5, np.int32))
    np.testing.assert_array_equal(got[1], a * a)
    np.testing.assert_array_equal(got[2], np.float32(1) / a)
    np.testing.assert_array_equal(got[3], -a)
    unsigned = i.view(np.uint32) // j.view(np.uint32)
    np.testing.assert_array_equal(got[6], unsigned.view(np.int32))


@pytest.mark.parametrize(
    "body",
    [
        "%r = memref.realloc %a : memref<4xf32> to memref<8xf32>",
        "memref.dma_wait %a[%c], %c : memref<4xf32>",
    ],
    ids=["realloc", "dma"],
)
def test_interpreter_refuses_what_it_cannot_run(body: str) -> None:
    src = (
        "func.func @main(%a: memref<4xf32>, %b: memref<2x2xf32>) {\n"
        f"  %c = arith.constant 0 : index\n  {body}\n  return\n}}"
    )
    with pytest.raises(DhirError, match="not supported by the interpreter"):
        _run(src, np.zeros(4, np.float32), np.zeros((2, 2), np.float32))
