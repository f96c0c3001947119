"""The C `main` wrapped around a compiled entry function.

The executable's command line is `OUTDIR` followed by each entry argument in order: a memref
is a raw little-endian file (row-major) then one integer per `?` dimension; a scalar is its
value. For a memref every rank holds whole, rank 0 reads the file and broadcasts it and,
after the entry, writes it to `OUTDIR/argK.raw`; for one held in part (`bands`), each rank
reads its rows and the entry writes the result file (see generate_harness). Every rank calls
the entry through MLIR's C interface (`_mlir_ciface_<entry>` taking memref descriptors by
pointer).
"""

import math
import struct
from collections.abc import Mapping, Sequence
from itertools import accumulate

from dhir.toolchain.linking import C_INTERFACE_PREFIX
from dhir.toolchain.signature import DYNAMIC, ArgSpec, EntrySignature

# C types of scalar arguments, by NumPy dtype, with the range the command line may hold.
_SCALARS: dict[str, tuple[str, int, int]] = {
    "bool": ("_Bool", 0, 1),
    "int8": ("int8_t", -(2**7), 2**7 - 1),
    "int16": ("int16_t", -(2**15), 2**15 - 1),
    "int32": ("int32_t", -(2**31), 2**31 - 1),
    "int64": ("int64_t", -(2**63), 2**63 - 1),
    "uint8": ("uint8_t", 0, 2**8 - 1),
    "uint16": ("uint16_t", 0, 2**16 - 1),
    "uint32": ("uint32_t", 0, 2**32 - 1),
    # Passed as its two's complement bit pattern: the runtime parses int64 words.
    "uint64": ("uint64_t", -(2**63), 2**63 - 1),
    "float16": ("_Float16", 0, 0),
    "float32": ("float", 0, 0),
    "float64": ("double", 0, 0),
}


# struct's formats of the float widths, and the NaN strtod's "nan" gives (cast to each).
_FLOAT_FORMATS = {2: "<e", 4: "<f", 8: "<d"}
_STRTOD_NAN = {2: 0x7E00, 4: 0x7FC0_0000, 8: 0x7FF8_0000_0000_0000}


def _float_word(value: float | bytes) -> str:
    """`value` (a float, or a float argument's little-endian bytes) as the harness reads
    it back exactly: hexadecimal, inf, and nan with its sign (float.hex writes "nan" for
    every NaN); a NaN with another payload, or one that signals, as `bits:0x` and its
    bits, which strtod would lose (dhir_rt_parse_float_bits)."""
    if isinstance(value, bytes):
        (number,) = struct.unpack(_FLOAT_FORMATS[len(value)], value)
        bits = int.from_bytes(value, "little")
        sign = 1 << (8 * len(value) - 1)
        if math.isnan(number) and bits & ~sign != _STRTOD_NAN[len(value)]:
            return f"bits:0x{bits:0{2 * len(value)}x}"
        return _float_word(float(number))
    if math.isnan(value):
        return "-nan" if math.copysign(1.0, value) < 0 else "nan"
    return float(value).hex()


def command_line_args(
    signature: EntrySignature,
    input_paths: Mapping[int, str],
    values: Sequence[tuple[int, ...] | float | int | bytes],
) -> list[str]:
    """The executable's arguments after OUTDIR, for checked inputs: per entry argument,
    a memref's shape (its file is in `input_paths`) or a scalar's value (a float's may be
    its little-endian bytes, which keep a NaN's payload)."""
    words: list[str] = []
    for spec, value in zip(signature.args, values, strict=True):
        if isinstance(value, tuple):
            assert spec.shape is not None
            words.append(input_paths[spec.index])
            words += [str(n) for want, n in zip(spec.shape, value) if want == DYNAMIC]
        elif spec.kind == "f":
            words.append(_float_word(value if isinstance(value, bytes) else float(value)))
        else:
            assert not isinstance(value, bytes)
            number = int(value)
            words.append(str(number - 2**64 if number >= 2**63 else number))
    return words


def usage(signature: EntrySignature) -> str:
    words = ["OUTDIR"]
    for spec in signature.args:
        if spec.is_memref:
            assert spec.shape is not None
            words.append(f"ARG{spec.index}.raw")
            words += [f"ARG{spec.index}_DIM{d}" for d, n in enumerate(spec.shape) if n == DYNAMIC]
        else:
            words.append(f"ARG{spec.index}_{spec.mlir_type.upper()}")
    return " ".join(words)


def generate_harness(
    signature: EntrySignature,
    ranks: int,
    tasks: Sequence[str] = (),
    bands: Mapping[int, Sequence[Sequence[tuple[int, int]]]] | None = None,
) -> str:
    """`tasks`: one line per task id (`name<TAB>location`, see dhir-track-tasks), for the
    ranks' state files that name the task a dead rank was running. `bands`: per memref
    argument each rank holds only in part, each rank's row ranges (lo, hi) of it (see
    dhir-lower-to-mpi's `dhir.bands`): each rank reads only those rows, and the entry
    writes the result file, which appears under its name only when the run succeeds."""
    bands = bands or {}
    ranks_in_use = sorted({len(s.shape) for s in signature.args if s.shape is not None})
    params = ", ".join(_param_type(spec) for spec in signature.args) or "void"
    # An asm label names the symbol exactly, whatever characters the MLIR symbol holds.
    lines = [
        f"/* Generated by dhir for @{_comment_safe(signature.name)} on {ranks} MPI ranks. */",
        '#include "dhir_rt.h"',
        "#include <stdbool.h>",
        "#include <stddef.h>",
        "#include <stdint.h>",
        "",
        *(_descriptor_type(r) for r in ranks_in_use),
        f'void dhir_entry({params}) __asm__("{C_INTERFACE_PREFIX}{_c_string(signature.name)}");',
        "",
        "int main(int argc, char **argv) {",
        f"  dhir_rt_init(&argc, &argv, {ranks});",
        f'  dhir_rt_track("{_c_string("".join(line + chr(10) for line in tasks))}");',
        f"  dhir_rt_expect_argc(argc, {2 + _word_count(signature)}, "
        f'"{_c_string(usage(signature))}");',
        "  const char *out_dir = argv[1];",
    ]
    word = 2
    for spec in signature.args:
        body, word = _load(spec, word, bands.get(spec.index))
        lines += body
    call_args = ", ".join(f"&a{s.index}" if s.is_memref else f"a{s.index}" for s in signature.args)
    lines.append(f"  dhir_entry({call_args});")
    for spec in signature.args:
        if spec.is_memref:
            k = spec.index
            if k in bands:
                lines.append(f"  dhir_rt_close_result(out_dir, {k});")
            else:
                lines.append(f"  dhir_rt_save_arg(out_dir, {k}, a{k}.aligned, bytes{k});")
    lines += ["  dhir_rt_finalize();", "  return 0;", "}", ""]
    return "\n".join(lines)


def _descriptor_type(rank: int) -> str:
    # MLIR's memref descriptor; the element type does not change its layout, so one per rank.
    arrays = f" int64_t sizes[{rank}]; int64_t strides[{rank}];" if rank else ""
    fields = f"void *allocated; void *aligned; int64_t offset;{arrays}"
    return f"typedef struct {{ {fields} }} memref{rank}_t;"


def _param_type(spec: ArgSpec) -> str:
    if spec.shape is not None:
        return f"memref{len(spec.shape)}_t *"
    return _SCALARS[spec.dtype.name][0]


def _word_count(signature: EntrySignature) -> int:
    return sum(
        1 + spec.shape.count(DYNAMIC) if spec.shape is not None else 1 for spec in signature.args
    )


def _load(
    spec: ArgSpec, word: int, rows: Sequence[Sequence[tuple[int, int]]] | None = None
) -> tuple[list[str], int]:
    k = spec.index
    what = _c_string(f"argument #{k} ({spec.mlir_type})")
    if spec.shape is None:
        c_type, low, high = _SCALARS[spec.dtype.name]
        if spec.dtype.kind == "f":
            bits = f'dhir_rt_parse_float_bits(argv[{word}], &a{k}, sizeof a{k}, "{what}")'
            parse = f'dhir_rt_parse_float(argv[{word}], "{what}")'
            return [
                f"  {c_type} a{k};",
                f"  if (!{bits})",
                f"    a{k} = ({c_type}){parse};",
            ], word + 1
        parse = f'dhir_rt_parse_int(argv[{word}], {_c_int(low)}, {_c_int(high)}, "{what}")'
        return [f"  {c_type} a{k} = ({c_type}){parse};"], word + 1
    rank = len(spec.shape)
    path_word = word
    word += 1
    lines = [f"  memref{rank}_t a{k} = {{0}};"]
    for d, size in enumerate(spec.shape):
        if size == DYNAMIC:
            dim_what = _c_string(f"size of dimension {d} of argument #{k}")
            parse = f'dhir_rt_parse_int(argv[{word}], 0, INT64_MAX, "{dim_what}")'
            lines.append(f"  a{k}.sizes[{d}] = {parse};")
            lines += _size_checks(spec, d)
            word += 1
        else:
            lines.append(f"  a{k}.sizes[{d}] = {size};")
    sizes, strides = (f"a{k}.sizes", f"a{k}.strides") if rank else ("NULL", "NULL")
    lines.append(
        f"  int64_t bytes{k} = dhir_rt_layout({rank}, {sizes}, {strides}, {spec.dtype.itemsize});"
    )
    if rows is None:
        load = f"dhir_rt_load_arg({k}, argv[{path_word}], bytes{k})"
        return [*lines, f"  a{k}.allocated = a{k}.aligned = {load};"], word
    # The runtime sets the aligned pointer as many rows before the reserved ones as they
    # start after the first row, so that global subscripts and offsets land in them
    # (docs/semantics.md, "Partitioned storage").
    table = ", ".join(str(n) for ranges in rows for band in ranges for n in band) or "0"
    starts = [0, *accumulate(len(ranges) for ranges in rows)]
    row = f"a{k}.strides[0] * {spec.dtype.itemsize}"
    lines += [
        f"  static const int64_t rows{k}[] = {{{table}}};",
        f"  static const int64_t starts{k}[] = {{{', '.join(map(str, starts))}}};",
        f"  a{k}.allocated = dhir_rt_load_rows({k}, argv[{path_word}], bytes{k}, {row}, "
        f"rows{k}, starts{k}, &a{k}.aligned);",
        f"  dhir_rt_open_result(out_dir, {k}, argv[{path_word}], bytes{k});",
    ]
    return lines, word


def _size_checks(spec: ArgSpec, dim: int) -> list[str]:
    """The least size of dimension `dim` that accesses the program surely runs need
    (`spec.needs`), checked when `dhir run` did not check it first: an executable run
    with mpirun directly."""
    what = _c_string(f"the size of dimension {dim} of argument #{spec.index} ({spec.mlir_type})")
    return [
        f'  dhir_rt_expect_size(a{spec.index}.sizes[{dim}], {size}, "{what}", "{_c_string(why)}");'
        for d, size, why in spec.needs
        if d == dim
    ]


def _c_int(value: int) -> str:
    # -2**63 has no literal form in C.
    return "INT64_MIN" if value == -(2**63) else f"{value}LL"


def _c_string(text: str) -> str:
    return "".join(c if c.isalnum() or c in " _-.#()[]<>:,=" else f"\\{ord(c):03o}" for c in text)


def _comment_safe(text: str) -> str:
    return text.replace("*/", "* /")
