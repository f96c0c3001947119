"""How much of MLIR 22's op syntax dhir reads and prints back.

    .venv/bin/python bench/syntax_coverage.py [--per-op] [--misses N] FILE.mlir ...

Each file is split at `// -----` (and, with --per-op, each piece into its top-level
ops). A piece counts when mlir-opt-22 accepts it; it passes when dhir parses it and
mlir-opt-22 reads dhir's printed form as the same generic IR it reads from the piece.
Prints, per file (named by its folder when the file is `ops.mlir`), passed/accepted.

Meant for upstream MLIR's op-syntax tests (mlir/test/Dialect/*/ops.mlir), fetched into
a temporary folder: they are not part of dhir.
"""

import argparse
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from io import StringIO
from pathlib import Path

from xdsl.printer import Printer

from dhir.context import make_context
from dhir.ir.parser import LocatedParser

MLIR_OPT = shutil.which("mlir-opt-22") or "mlir-opt-22"
TOP_LEVEL = re.compile(r"^[^\s/}^)\]]")


@dataclass
class Tally:
    accepted: int = 0
    parsed: int = 0
    passed: int = 0
    misses: Counter[str] = field(default_factory=Counter)


def generic(text: str) -> str | None:
    """mlir-opt-22's generic form of `text`, or None when it refuses it."""
    args = [MLIR_OPT, "--allow-unregistered-dialect", "--mlir-print-op-generic"]
    done = subprocess.run(args, input=text, capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def chunks(text: str) -> list[str]:
    return [c for c in re.split(r"^// -----.*$", text, flags=re.M) if c.strip()]


def _has_code(lines: list[str]) -> bool:
    return any(s.strip() and not s.lstrip().startswith("//") for s in lines)


def top_level_ops(chunk: str) -> list[str]:
    """The chunk's top-level ops as texts: a line starting in column 0 starts one."""
    pieces: list[list[str]] = [[]]
    for line in chunk.splitlines():
        if TOP_LEVEL.match(line) and _has_code(pieces[-1]):
            pieces.append([])
        pieces[-1].append(line)
    # Comments before an op go with it: a piece of comments alone is no op to count.
    texts = ["\n".join(p) + "\n" for p in pieces if _has_code(p)]
    # Attribute and type aliases (`#name = ...`, `!name = ...`) go with every op.
    aliases = "".join(t for t in texts if _is_alias(t))
    return [aliases + t for t in texts if not _is_alias(t)]


def _is_alias(text: str) -> bool:
    code = next(s for s in text.splitlines() if s.strip() and not s.lstrip().startswith("//"))
    return code[0] in "#!"


def dhir_print(text: str) -> str:
    ctx = make_context(allow_unregistered=True)
    module = LocatedParser(ctx, text, "<piece>").parse_module()
    module.verify()
    out = StringIO()
    Printer(stream=out).print_op(module)
    return out.getvalue()


def first_op(text: str) -> str:
    found = re.findall(r"\b([a-z_]+\.[a-z_0-9.]+)\b", text)
    return found[0] if found else "?"


def miss_key(error: Exception, piece: str) -> str:
    message = str(error)
    named = re.search(r"'([a-z_]+\.[a-z_0-9.]+)'|([a-z_]+\.[a-z_0-9]+) ", message)
    op = next((g for g in named.groups() if g), None) if named else None
    last = message.strip().splitlines()[-1][:70] if message.strip() else type(error).__name__
    return f"parse: {op or first_op(piece)}: {last}"


def measure(piece: str, tally: Tally) -> None:
    expected = generic(piece)
    if expected is None:
        return
    tally.accepted += 1
    try:
        printed = dhir_print(piece)
    except Exception as error:  # noqa: BLE001 - any failure is a miss to count
        tally.misses[miss_key(error, piece)] += 1
        return
    tally.parsed += 1
    again = generic(printed)
    if again == expected:
        tally.passed += 1
    elif again is None:
        tally.misses["print: mlir-opt-22 refuses dhir's output"] += 1
    else:
        tally.misses["print: different generic form"] += 1


def label(path: Path) -> str:
    return path.parent.name if path.stem == "ops" else path.stem


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:5.1f}%" if whole else "    -"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--per-op", action="store_true", help="count top-level ops")
    parser.add_argument("--misses", type=int, default=0, help="show the N commonest misses")
    args = parser.parse_args()
    total = Tally()
    print(f"{'file':<16} {'accepted':>8} {'parsed':>7} {'round trip':>10}")
    for path in args.files:
        tally = Tally()
        for chunk in chunks(path.read_text()):
            for piece in top_level_ops(chunk) if args.per_op else [chunk]:
                measure(piece, tally)
        total.accepted += tally.accepted
        total.parsed += tally.parsed
        total.passed += tally.passed
        total.misses.update(tally.misses)
        print(
            f"{label(path):<16} {tally.accepted:>8} {percent(tally.parsed, tally.accepted):>7}"
            f" {percent(tally.passed, tally.accepted):>10}"
        )
        for key, count in tally.misses.most_common(args.misses):
            print(f"    {count:3} {key}")
    print(
        f"{'all':<16} {total.accepted:>8} {percent(total.parsed, total.accepted):>7}"
        f" {percent(total.passed, total.accepted):>10}"
    )


if __name__ == "__main__":
    main()
