"""Build the executables of examples/ and bench/ and print a hash of each, so that a
refactor can show it changed no binary (issue 25: "byte-identical before and after").

    .venv/bin/python scripts/executable_hashes.py > before.txt
    ... change the compiler ...
    .venv/bin/python scripts/executable_hashes.py > after.txt && diff before.txt after.txt

Each program is built with `dhir compile` (as users build it) for 1 and 2 ranks, with the
default placement and with round-robin. Builds are deterministic on one machine; the
placement's machine description makes them differ between machines. GPU programs need
the GPU toolchain (docs/gpu.md), not a GPU. A build that fails prints its last line.
"""

import hashlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "bench" / "polybench"))

import kernels  # noqa: E402
import programs  # noqa: E402


def sources(tmp: Path) -> Iterator[tuple[str, Path]]:
    for path in sorted((ROOT / "examples").glob("*.mlir")):
        copy = tmp / path.name
        shutil.copyfile(path, copy)
        yield f"examples/{path.name}", copy
    bench = {
        "hop_chain": programs.hop_chain(8),
        "dag20": programs.dag20(64, 2),
        "many_tasks": programs.many_tasks(100, literals=True),
        "compute_bound": programs.compute_bound(64, 8),
    }
    for name in sorted(kernels.BUILDERS):
        sizes = kernels.tiny_sizes(name)
        bench[f"polybench-{name}"] = kernels.program(name, sizes, 2)
        bench[f"polybench-{name}-plain"] = kernels.plain_program(name, sizes)
    for name, text in bench.items():
        path = tmp / f"{name}.mlir"
        path.write_text(text)
        yield f"bench/{name}", path


def build(source: Path, out: Path, ranks: int, placement: str | None) -> str:
    command = [sys.executable, "-m", "dhir", "compile", "-n", str(ranks), "-o", str(out)]
    command.append(str(source))
    if placement:
        command += ["--placement", placement]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return "build failed: " + last.replace(f"{source.parent}/", "")
    digest = hashlib.sha256(out.read_bytes())
    sidecar = out.with_name(out.name + ".dhir.json")
    if sidecar.exists():
        digest.update(sidecar.read_bytes())
    return digest.hexdigest()[:16]


# One fixed folder for every program, from any checkout: a program's path is part of
# its executable (its error messages).
WORK = Path("/tmp/dhir-executable-hashes")


def main() -> int:
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    for label, source in sources(WORK):
        for ranks in (1, 2):
            for placement in (None, "round-robin"):
                out = WORK / "exe"
                result = build(source, out, ranks, placement)
                print(f"{label} ranks={ranks} placement={placement or 'default'} {result}")
                sys.stdout.flush()
    shutil.rmtree(WORK)
    return 0


if __name__ == "__main__":
    sys.exit(main())
