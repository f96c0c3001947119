"""PolyBench kernels written the ways a user writes loops in MLIR, each built by dhir for
1 rank (CodeDrop makes the tasks) and timed against the scf form of bench/polybench's
plain programs (docs/performance.md, "Task bodies"). The loop forms are made from the scf
form's text: `affine` (affine.for, affine.load, affine.store), `affine iter_args` (the
innermost loop carrying its element: k innermost for the products, the row sums of atax
and mvt), `affine.if` (syr2k's triangle as a condition in a full square), `affine.if
else` (the same with the condition negated, `j > i`, and the body in its else branch)
and `while` (every loop an scf.while); `linalg.generic` is written by hand where the
kernel is one (gemm, 2mm, atax, mvt; jacobi-2d's sweeps over views shifted to the
neighbours). Each element takes the operations of the scf form in its order, so every
result must equal the scf form's bit for bit: a mismatch stops the run.

    .venv/bin/python bench/polybench/forms.py [--size MEDIUM|LARGE] [--kernels gemm,...]
        [--forms affine,while,...] [--repeats R] [--no-optimize]

Runs alternate between the forms (R rounds), medians; `--timing`'s optimizer lines of
each build are printed with it.
"""

import os

os.environ["OMP_NUM_THREADS"] = "1"

import argparse  # noqa: E402
import contextlib  # noqa: E402
import io  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))

import kernels  # noqa: E402

from dhir import parse_string  # noqa: E402
from dhir.backends.native import compile_native  # noqa: E402
from dhir.runner import drop_code  # noqa: E402
from dhir.toolchain.build import Timing  # noqa: E402
from dhir.toolchain.launch import run_executable  # noqa: E402
from dhir.toolchain.options import RunOptions  # noqa: E402

KERNELS = ("gemm", "2mm", "syr2k", "atax", "mvt", "jacobi-2d")
FORMS = (
    "scf",
    "affine",
    "affine iter_args",
    "affine.if",
    "affine.if else",
    "linalg.generic",
    "while",
)

_FOR = re.compile(r"^(\s*)scf\.for (%\w+) = (%\w+) to (%\w+) step (%\w+) \{$")
_INDEX = re.compile(r"^\s*(%\w+) = arith\.(addi|subi) (%\w+), (%\w+) : index$")
_CONST = re.compile(r"^\s*(%\w+) = arith\.constant (-?\d+) : index$")
_ACCESS = re.compile(r"memref\.(load|store) (.*)\[([^\]]*)\]")


def _closing(lines: list[str], at: int) -> int:
    """The line closing the region opened at line `at` (same indentation)."""
    indent = len(lines[at]) - len(lines[at].lstrip())
    end = at + 1
    while lines[end] != " " * indent + "}":
        end += 1
    return end


def affine_form(text: str) -> str:
    """`text` (a plain scf program) with affine.for, affine.load and affine.store, the
    index sums of counters and constants written into the maps."""
    lines = text.split("\n")
    values: dict[str, str] = {}
    for line in lines:
        if m := _CONST.match(line):
            values[m[1]] = m[2]
    out: list[str] = []
    for line in lines:
        if (m := _INDEX.match(line)) and m[4] in values and "%iv_" in m[3]:
            values[m[1]] = f"{m[3]} {'+' if m[2] == 'addi' else '-'} {values[m[4]]}"
            continue
        if m := _FOR.match(line):
            lo, hi = (_bound(values.get(v, v)) for v in (m[3], m[4]))
            out.append(f"{m[1]}affine.for {m[2]} = {lo} to {hi} step {values[m[5]]} {{")
            continue
        if "memref.load" in line or "memref.store" in line:
            line = _ACCESS.sub(
                lambda a: (
                    f"affine.{a[1]} {a[2]}["
                    + ", ".join(values.get(v.strip(), v.strip()) for v in a[3].split(","))
                    + "]"
                ),
                line,
            )
        out.append(line)
    return "\n".join(out)


def _bound(value: str) -> str:
    if re.fullmatch(r"-?\d+", value):
        return value
    iv, op, const = value.split(" ")
    return f"affine_map<(d0) -> (d0 {op} {const})>({iv})"


def carried_form(text: str) -> str:
    """The affine form with each innermost loop that updates one element (fixed in the
    loop) carrying it in iter_args; a `for k { for j { C[i, j] ... } }` nest first
    interchanged to `for j { for k }` (each element's updates keep their order)."""
    lines = affine_form(text).split("\n")
    k = 0
    while k < len(lines):
        head = re.match(r"^(\s*)affine\.for (%\w+) = .* \{$", lines[k])
        nested = head and re.match(r"^\s*affine\.for (%\w+) = .* \{$", lines[k + 1])
        if head and nested and _closing(lines, k + 1) + 1 == _closing(lines, k):
            inner_end = _closing(lines, k + 1)
            body = lines[k + 2 : inner_end]
            stored = _element_of(body, head[2])
            if stored is not None and nested[1] in stored:
                lines[k], lines[k + 1] = _swap_headers(lines[k], lines[k + 1])
        k += 1
    k = 0
    while k < len(lines):
        head = re.match(r"^(\s*)affine\.for (%\w+) = (.*) \{$", lines[k])
        if head:
            end = _closing(lines, k)
            body = lines[k + 1 : end]
            if not any("affine.for" in b for b in body) and _element_of(body, head[2]):
                lines[k : end + 1] = _carry(head[1], head[2], head[3], body)
        k += 1
    return "\n".join(lines)


def _element_of(body: list[str], iv: str) -> str | None:
    """`X[subscripts]` when `body` loads it first and stores it last, not at `iv`."""
    first = re.search(r"affine\.load (%\w+\[[^\]]*\])", body[0]) if body else None
    last = re.search(r"affine\.store %\w+, (%\w+\[[^\]]*\])", body[-1]) if body else None
    if first and last and first[1] == last[1] and iv not in first[1]:
        return first[1]
    return None


def _swap_headers(outer: str, inner: str) -> tuple[str, str]:
    pad_o = outer[: len(outer) - len(outer.lstrip())]
    pad_i = inner[: len(inner) - len(inner.lstrip())]
    return pad_o + inner.lstrip(), pad_i + outer.lstrip()


def _carry(pad: str, iv: str, bounds: str, body: list[str]) -> list[str]:
    load = re.match(r"^\s*(%\w+) = (.*)$", body[0])
    store = re.match(r"^\s*affine\.store (%\w+), (.*)$", body[-1])
    assert load and store
    old, kind = load[1], store[2].split(" : ")[1]
    element = kind.split("x")[-1].rstrip(">")
    acc = f"{old}_acc"
    inner = [re.sub(rf"{old}\b", acc, line) for line in body[1:-1]]
    return [
        f"{pad}{old} = {load[2]}",
        f"{pad}{old}_sum = affine.for {iv} = {bounds} iter_args({acc} = {old}) -> ({element}) {{",
        *inner,
        f"{pad}  affine.yield {store[1]} : {element}",
        f"{pad}}}",
        f"{pad}affine.store {old}_sum, {store[2]}",
    ]


def condition_form(text: str, negated: bool = False) -> str:
    """syr2k's triangle `for j in [0, i]` as a square `for j in [0, n)` whose body runs
    under `affine.if (i - j >= 0)`, or (`negated`) in the else branch of
    `affine.if (j - i - 1 >= 0) {}`."""
    lines = affine_form(text).split("\n")
    n = re.search(r"memref<(\d+)x\1xf64>", text)
    assert n
    out: list[str] = []
    k = 0
    while k < len(lines):
        m = re.match(
            r"^(\s*)affine\.for %iv_j = 0 to affine_map<\(d0\) -> \(d0 \+ 1\)>\(%iv_i\) (.*)\{$",
            lines[k],
        )
        if not m:
            out.append(lines[k])
            k += 1
            continue
        end = _closing(lines, k)
        pad = m[1]
        held = f"{pad}  affine.if affine_set<(d0, d1) : (d0 - d1 >= 0)>(%iv_i, %iv_j) {{"
        if negated:
            held = (
                f"{pad}  affine.if affine_set<(d0, d1) : (d1 - d0 - 1 >= 0)>(%iv_i, %iv_j) {{\n"
                f"{pad}  }} else {{"
            )
        out += [
            f"{pad}affine.for %iv_j = 0 to {n[1]} {m[2]}{{",
            held,
            *("  " + line for line in lines[k + 1 : end]),
            f"{pad}  }}",
            f"{pad}}}",
        ]
        k = end + 1
    return "\n".join(out)


def while_form(text: str) -> str:
    """Every scf.for of `text` as an scf.while counting the same values."""
    lines = text.split("\n")
    count = 0
    k = 0
    while k < len(lines):
        m = _FOR.match(lines[k])
        if not m:
            k += 1
            continue
        pad, iv, lo, hi, step = m.groups()
        end = _closing(lines, k)
        count += 1
        w = f"%w{count}"
        lines[k : end + 1] = [
            f"{pad}{w} = scf.while ({w}_i = {lo}) : (index) -> index {{",
            f"{pad}  {w}_c = arith.cmpi slt, {w}_i, {hi} : index",
            f"{pad}  scf.condition({w}_c) {w}_i : index",
            f"{pad}}} do {{",
            f"{pad}^bb0({iv}: index):",
            *lines[k + 1 : end],
            f"{pad}  {w}_n = arith.addi {iv}, {step} : index",
            f"{pad}  scf.yield {w}_n : index",
            f"{pad}}}",
        ]
    return "\n".join(lines)


def generic_form(name: str, text: str) -> str | None:
    """The kernel as linalg.generic ops (each statement one, its body the scf form's
    arithmetic in its order), or None where it is no such kernel here."""
    makers = {
        "gemm": _generic_gemm,
        "2mm": _generic_2mm,
        "atax": _generic_atax,
        "mvt": _generic_mvt,
        "jacobi-2d": _generic_jacobi,
    }
    make = makers.get(name)
    if make is None:
        return None
    head, _, rest = text.partition("  %start = func.call @MPI_Wtime() : () -> f64\n")
    tail = rest[rest.index("  %end = func.call") :]
    return head + "  %start = func.call @MPI_Wtime() : () -> f64\n" + make(head) + tail


def _arg_types(head: str) -> dict[str, str]:
    return dict(re.findall(r"(%\w+): (memref<[^>]*>)", head))


def _const(head: str, value: str) -> str:
    m = re.search(rf"(%cf\d+) = arith\.constant {re.escape(value)} : f64", head)
    assert m, value
    return m[1]


_PAR, _RED = '"parallel"', '"reduction"'


def _generic(
    ins: list[str],
    out: str,
    maps: list[str],
    iters: list[str],
    body: list[str],
    types: dict[str, str],
) -> list[str]:
    args = ", ".join(f"%g{k}: f64" for k in range(len(ins) + 1))
    ins_text = f"ins({', '.join(ins)} : {', '.join(types[v] for v in ins)}) " if ins else ""
    return [
        "  linalg.generic {indexing_maps = [" + ", ".join(maps) + "], "
        f"iterator_types = [{', '.join(iters)}]}}",
        f"      {ins_text}outs({out} : {types[out]}) {{",
        f"  ^bb0({args}):",
        *(f"    {line}" for line in body),
        "  }",
    ]


def _scale(out: str, factor: str, types: dict[str, str]) -> list[str]:
    ident = "affine_map<(i, j) -> (i, j)>"
    return _generic(
        [],
        out,
        [ident],
        [_PAR, _PAR],
        [f"%s = arith.mulf %g0, {factor} : f64", "linalg.yield %s : f64"],
        types,
    )


def _product(
    out: str, left: str, right: str, alpha: str | None, types: dict[str, str]
) -> list[str]:
    """out[i, j] += (alpha * left[i, k]) * right[k, j], k innermost (the scf form's order:
    its k loop runs outside j, which changes no element's order)."""
    maps = [
        "affine_map<(i, j, k) -> (i, k)>",
        "affine_map<(i, j, k) -> (k, j)>",
        "affine_map<(i, j, k) -> (i, j)>",
    ]
    scaled = [f"%a = arith.mulf {alpha}, %g0 : f64"] if alpha else []
    left_value = "%a" if alpha else "%g0"
    body = [
        *scaled,
        f"%p = arith.mulf {left_value}, %g1 : f64",
        "%s = arith.addf %g2, %p : f64",
        "linalg.yield %s : f64",
    ]
    return _generic([left, right], out, maps, [_PAR, _PAR, _RED], body, types)


def _generic_gemm(head: str) -> str:
    types = _arg_types(head)
    beta, alpha = _const(head, "1.2"), _const(head, "1.5")
    return "\n".join([*_scale("%C", beta, types), *_product("%C", "%A", "%B", alpha, types)]) + "\n"


def _generic_2mm(head: str) -> str:
    types = _arg_types(head)
    zero, alpha, beta = _const(head, "0.0"), _const(head, "1.5"), _const(head, "1.2")
    fill = _generic(
        [],
        "%tmp",
        ["affine_map<(i, j) -> (i, j)>"],
        [_PAR, _PAR],
        [f"linalg.yield {zero} : f64"],
        types,
    )
    return (
        "\n".join(
            [
                *fill,
                *_product("%tmp", "%A", "%B", alpha, types),
                *_scale("%D", beta, types),
                *_product("%D", "%tmp", "%C", None, types),
            ]
        )
        + "\n"
    )


def _generic_atax(head: str) -> str:
    types = _arg_types(head)
    zero = _const(head, "0.0")
    one_d = "affine_map<(i) -> (i)>"
    fill_tmp = _generic([], "%tmp", [one_d], [_PAR], [f"linalg.yield {zero} : f64"], types)
    fill_y = _generic([], "%y", [one_d], [_PAR], [f"linalg.yield {zero} : f64"], types)
    body = [
        "%p = arith.mulf %g0, %g1 : f64",
        "%s = arith.addf %g2, %p : f64",
        "linalg.yield %s : f64",
    ]
    row = _generic(
        ["%A", "%x"], "%tmp",
        ["affine_map<(i, j) -> (i, j)>", "affine_map<(i, j) -> (j)>", "affine_map<(i, j) -> (i)>"],
        [_PAR, _RED], body, types,
    )  # fmt: skip
    column = _generic(
        ["%A", "%tmp"], "%y",
        ["affine_map<(i, j) -> (i, j)>", "affine_map<(i, j) -> (i)>", "affine_map<(i, j) -> (j)>"],
        [_RED, _PAR], body, types,
    )  # fmt: skip
    return "\n".join([*fill_tmp, *row, *fill_y, *column]) + "\n"


def _generic_mvt(head: str) -> str:
    types = _arg_types(head)
    body = [
        "%p = arith.mulf %g0, %g1 : f64",
        "%s = arith.addf %g2, %p : f64",
        "linalg.yield %s : f64",
    ]
    first = _generic(
        ["%A", "%y_1"], "%x1",
        ["affine_map<(i, j) -> (i, j)>", "affine_map<(i, j) -> (j)>", "affine_map<(i, j) -> (i)>"],
        [_PAR, _RED], body, types,
    )  # fmt: skip
    second = _generic(
        ["%A", "%y_2"], "%x2",
        ["affine_map<(j, i) -> (j, i)>", "affine_map<(j, i) -> (j)>", "affine_map<(j, i) -> (i)>"],
        [_RED, _PAR], body, types,
    )  # fmt: skip
    return "\n".join([*first, *second]) + "\n"


def _generic_jacobi(head: str) -> str:
    """Each sweep a linalg.generic over the inner square, its inputs the array's views
    shifted to the centre, left, right, lower and upper neighbours (the scf form's order
    of adds)."""
    n = int(re.findall(r"memref<(\d+)x", head)[0])
    tsteps = re.search(r"%tsteps = arith\.constant (\d+)", head)
    assert tsteps
    m = n - 2
    shifts = {"c": (1, 1), "l": (1, 0), "r": (1, 2), "d": (2, 1), "u": (0, 1)}
    views = {
        k: f"memref<{m}x{m}xf64, strided<[{n}, 1], offset: {di * n + dj}>>"
        for k, (di, dj) in shifts.items()
    }
    lines = ["  scf.for %t = %ci0 to %tsteps step %ci1 {"]
    for src, dst in (("%A", "%B"), ("%B", "%A")):
        name = src[1:]
        for key, (di, dj) in shifts.items():
            lines.append(
                f"    %{name}_{key} = memref.subview {src}[{di}, {dj}] [{m}, {m}] [1, 1] :"
                f" memref<{n}x{n}xf64> to {views[key]}"
            )
        out = f"%{name}_out"
        lines.append(
            f"    {out} = memref.subview {dst}[1, 1] [{m}, {m}] [1, 1] :"
            f" memref<{n}x{n}xf64> to {views['c']}"
        )
        ident = "affine_map<(i, j) -> (i, j)>"
        ins = ", ".join(f"%{name}_{key}" for key in shifts)
        types = ", ".join(views[key] for key in shifts)
        lines += [
            f"    linalg.generic {{indexing_maps = [{', '.join([ident] * 6)}], "
            f"iterator_types = [{_PAR}, {_PAR}]}}",
            f"        ins({ins} : {types}) outs({out} : {views['c']}) {{",
            "    ^bb0(%g0: f64, %g1: f64, %g2: f64, %g3: f64, %g4: f64, %g5: f64):",
            "      %s1 = arith.addf %g0, %g1 : f64",
            "      %s2 = arith.addf %s1, %g2 : f64",
            "      %s3 = arith.addf %s2, %g3 : f64",
            "      %s4 = arith.addf %s3, %g4 : f64",
            "      %s5 = arith.mulf %cf3, %s4 : f64",
            "      linalg.yield %s5 : f64",
            "    }",
        ]
    return "\n".join([*lines, "  }"]) + "\n"


def program(name: str, form: str, sizes: dict[str, int]) -> str | None:
    text = kernels.plain_program(name, sizes)
    if form == "scf":
        return text
    if form == "affine":
        return affine_form(text)
    if form == "affine iter_args":
        carried = carried_form(text)
        return carried if carried != affine_form(text) else None
    if form in ("affine.if", "affine.if else"):
        return condition_form(text, form == "affine.if else") if name == "syr2k" else None
    if form == "while":
        return while_form(text)
    assert form == "linalg.generic"
    return generic_form(name, text)


def build(text: str, optimize: bool):
    module = parse_string(text)
    with contextlib.redirect_stderr(io.StringIO()):
        drop_code(module, "main")
    timing = Timing()
    options = RunOptions(ranks=1, optimize=optimize, timeout=3600)
    exe, signature = compile_native(module, "main", options, timing)
    notes = [n for n in timing.notes if n.startswith(("optimizer", "time tiles"))]
    return exe, signature, options, notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="MEDIUM")
    parser.add_argument("--kernels", default=",".join(KERNELS))
    parser.add_argument("--forms", default=",".join(FORMS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-optimize", action="store_true")
    args = parser.parse_args()
    forms = ["scf", *(f for f in args.forms.split(",") if f != "scf")]
    for name in args.kernels.split(","):
        sizes = kernels.SIZES[name][args.size]
        inputs = list(kernels.inputs(name, sizes).values())
        built = {}
        for form in forms:
            text = program(name, form, sizes)
            if text is not None:
                built[form] = build(text, not args.no_optimize)
        times: dict[str, list[float]] = {form: [] for form in built}
        results: dict[str, list[np.ndarray]] = {}
        for _ in range(args.repeats):
            for form, (exe, signature, options, _notes) in built.items():
                out = run_executable(exe, signature, [*inputs, np.zeros(1)], options)
                times[form].append(float(out[-1][0]))
                results[form] = out[:-1]
        print(f"## {name} {args.size} (medians of {args.repeats}, ms)")
        scf_ms = statistics.median(times["scf"]) * 1e3
        for form, (_exe, _sig, _opts, notes) in built.items():
            for want, got in zip(results["scf"], results[form], strict=True):
                if not np.array_equal(want, got):
                    raise SystemExit(f"MISMATCH: {name} {form} differs from the scf form")
            ms = statistics.median(times[form]) * 1e3
            print(f"{form:18} {ms:10.2f}  {ms / scf_ms:5.2f}x scf")
            for note in notes:
                print(f"    {note}")


if __name__ == "__main__":
    main()
