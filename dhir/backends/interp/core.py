"""What xDSL's interpreter lacks to run dhir programs, with MLIR's exact semantics.

Values, as the interpreter passes them between ops:
  - integers and index: Python ints, signed two's complement of the declared width
    (i1 is 0 or 1); every op reinterprets its operands as signed or unsigned itself;
  - floats: Python floats holding a value exactly representable in the declared type;
    every f16/f32 op rounds its result to that type (for + - * / and sqrt, computing in
    double and rounding once is exact, since 53 >= 2*24 + 2);
  - memrefs: NumPy arrays; subviews and reshapes are NumPy views of the same buffer;
    bf16 is kept in float32 arrays (every bf16 op rounds its result to bf16);
  - vectors: read-only NumPy arrays of the vector's shape; arith and math ops run on
    them lane by lane with the scalar implementations (see `lanewise`);
  - dhir targets/tokens, gpu async tokens: None.

Run-time errors in the program (out-of-bounds access, division by zero, values MLIR
calls poison) raise `Trap`, which `dhir.backends.interp` turns into a located DhirError.
"""

from collections.abc import Callable
from functools import wraps
from typing import Any, NoReturn, TypeVar

import numpy as np
from xdsl.dialects.builtin import BFloat16Type, VectorType
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    ReturnedValues,
    impl,
    impl_terminator,
    register_impls,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.traits import IsTerminator

# dhir's subclasses of xDSL ops must exist before `register` looks for them.
import dhir.dialects.gpu
import dhir.dialects.memref
import dhir.dialects.scf  # noqa: F401
from dhir.toolchain.entry import numpy_dtype

INDEX_WIDTH = 64
# The Python recursion limit during a run (see run_interp); each level of calls or
# nested regions takes about 12 Python frames.
RECURSION_LIMIT = 20_000
MAX_DEPTH = RECURSION_LIMIT // 12
Values = PythonValues
Returned = tuple[ReturnedValues, PythonValues]


# A size or value a failed check found, for the note that names the entry's argument it
# is (dhir.analysis.arg_origins): the words before it, and a memref and the dimension of
# its size, or an index or integer (the dimension None) whose value it is.
Named = tuple[str, SSAValue, int | None]


class Trap(BaseException):
    """A run-time error of the program at `op`. A BaseException so that it passes
    through xDSL's dispatcher, which catches Exception at every nesting level and
    prints the whole module into a note each time."""

    def __init__(self, op: Operation, message: str, named: tuple[Named, ...] = ()) -> None:
        super().__init__(message)
        self.op = op
        self.message = message
        self.named = named


def fail(
    op: Operation, message: str, named: tuple[Named, ...] = (), name: str | None = None
) -> NoReturn:
    """Stop the run at `op`; `named`: the sizes and values whose arguments the message
    names after it, as native code's checks do; `name`: the op the user wrote, where
    not `op`'s own."""
    raise Trap(op, f"'{name or op.name}' {message}", named)


class OpStack(Interpreter.Listener):
    """The ops being run, innermost last: where an unexpected exception came from
    (xDSL's dispatcher loses that when it re-raises). The GPU threads of a block that
    wait at a barrier take their part of it with them (dhir.backends.interp.phases)."""

    def __init__(self) -> None:
        self.ops: list[Operation] = []

    def will_interpret_op(self, op: Operation, args: PythonValues) -> None:
        self.ops.append(op)

    def did_interpret_op(self, op: Operation, results: PythonValues) -> None:
        self.ops.pop()


ImplT = TypeVar("ImplT", bound=Callable[..., Any])
# The op types each implementation handles, as `handles` marks them for `register`.
_OP_TYPES: dict[Callable[..., Any], tuple[type[Operation], ...]] = {}


def handles(*op_types: type[Operation]) -> Callable[[ImplT], ImplT]:
    def mark(function: ImplT) -> ImplT:
        _OP_TYPES[function] = (*_OP_TYPES.get(function, ()), *op_types)
        return function

    return mark


def _with_dhir_subclasses(op_type: type[Operation]) -> list[type[Operation]]:
    # xDSL dispatches on the exact class, and dhir's parser builds its own subclasses
    # of some xDSL ops (custom syntax), so each needs the implementation too.
    found = [op_type]
    for sub in op_type.__subclasses__():
        found += [t for t in _with_dhir_subclasses(sub) if t.__module__.startswith("dhir.")]
    return found


FunctionsT = TypeVar("FunctionsT", bound=type[InterpreterFunctions])


def register(cls: FunctionsT) -> FunctionsT:
    for name, function in list(vars(cls).items()):
        for op_type in _OP_TYPES.get(function, ()):
            for target in _with_dhir_subclasses(op_type):
                wrap = impl_terminator if target.has_trait(IsTerminator) else impl
                key = f"_{name}__{target.__module__}.{target.__qualname__}"
                setattr(cls, key, wrap(target)(function))  # type: ignore[arg-type]
    return register_impls(cls)


def value_dtype(type_: Attribute) -> np.dtype | None:
    """How the interpreter stores elements of `type_` in arrays (memrefs, vectors)."""
    if isinstance(type_, BFloat16Type):
        return np.dtype(np.float32)
    return numpy_dtype(type_)


def f32_value(bits: int) -> float:
    """The f32 (or bf16, stored as f32) of `bits` as the interpreter holds it: a Python
    float. A signalling NaN stays one, with its payload in the double's top bits (the
    hardware's conversion, which NumPy and ctypes use, quiets it, where loads, stores,
    bitcasts, selects, negf, absf and copysign keep every bit in LLVM and natively)."""
    bits &= 0xFFFFFFFF
    if bits & 0x7F800000 != 0x7F800000 or not bits & 0x7FFFFF:
        return float(np.array(bits, np.uint32).view(np.float32))
    double = (bits >> 31) << 63 | 0x7FF << 52 | (bits & 0x7FFFFF) << 29
    return float(np.array(double, np.uint64).view(np.float64))


def f32_bits(value: float) -> int:
    """The bits of the f32 `value` holds (the inverse of `f32_value`)."""
    if value == value:
        return int(np.array(value, np.float32).view(np.uint32))
    double = int(np.array(value, np.float64).view(np.uint64))
    payload = (double >> 29) & 0x7FFFFF
    if not payload:  # a payload f32 cannot hold: the NaN the hardware makes
        payload = 0x400000
    return (double >> 63) << 31 | 0x7F800000 | payload


def element(value: np.generic) -> Any:
    """An element of an array (memref, vector) as the interpreter holds it (f32_value)."""
    item = value.item()
    if item != item and value.dtype == np.float32:  # a NaN: keep its every bit
        return f32_value(int(value.view(np.uint32)))
    return int(item) if isinstance(item, bool) else item


def put(array: np.ndarray, index: Any, value: Any) -> None:
    """array[index] = value, a signalling f32 NaN kept (f32_value)."""
    if array.dtype == np.float32 and isinstance(value, float) and value != value:
        array.view(np.uint32)[index] = f32_bits(value)
    else:
        array[index] = value


def lanewise(cls: FunctionsT) -> FunctionsT:
    """Each scalar implementation of `cls` runs on vectors too, lane by lane, as MLIR
    defines arith and math ops on vectors (apply before `register`)."""
    for name, function in list(vars(cls).items()):
        if function in _OP_TYPES:
            wrapped = _on_lanes(function)
            _OP_TYPES[wrapped] = _OP_TYPES.pop(function)
            setattr(cls, name, wrapped)
    return cls


def _on_lanes(function: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(function)
    def run(self: object, interp: object, op: Operation, args: PythonValues) -> PythonValues:
        shape = _vector_shape(op)
        if shape is None or not args:  # constants build their vectors themselves
            return function(self, interp, op, args)
        results = [np.empty(shape, _lane_dtype(op, r.type)) for r in op.results]
        vectors = [isinstance(t, VectorType) for t in op.operand_types]
        for index in np.ndindex(*shape):
            lane = tuple(element(a[index]) if v else a for a, v in zip(args, vectors))
            for array, value in zip(results, function(self, interp, op, lane)):
                put(array, index, value)
        for array in results:
            array.flags.writeable = False
        return tuple(results)

    return run


def _vector_shape(op: Operation) -> tuple[int, ...] | None:
    for type_ in (*op.operand_types, *op.result_types):
        if isinstance(type_, VectorType):
            return tuple(type_.get_shape())
    return None


def _lane_dtype(op: Operation, type_: Attribute) -> np.dtype:
    element = type_.element_type if isinstance(type_, VectorType) else type_
    dtype = value_dtype(element)
    if dtype is None:
        fail(op, f"on {type_} is not supported by the interpreter")
    return dtype


def assign(target: np.ndarray, values: Any) -> None:
    """target[...] = values, element by element in row-major order where `target`
    holds an element more than once (a stride of 0): the last write stays, as in
    native code's loops."""
    if any(s == 0 and n > 1 for s, n in zip(target.strides, target.shape)):
        values = np.broadcast_to(values, target.shape)
        for index in np.ndindex(*target.shape):
            target[index] = values[index]
    else:
        np.copyto(target, values)
