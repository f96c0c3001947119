"""One case of `bench/run.py compile`, in a process of its own (as `dhir compile` runs):
in one process, a case's parse slowed down by up to half under the collector's scans of
the IR the earlier cases left behind.

    .venv/bin/python bench/compile_case.py TASKS PROGRAM MPI

PROGRAM: `plain` or `literals` (bench/programs.py many_tasks, without or with each task's
own constants) or `neighbours` (neighbour_tasks, issue 25's program), or `matmuls` or
`nests` (matmul_tasks: a small linalg.matmul, or its loop nest, in every task). Prints
the stages' times as JSON: [[stage, seconds], ...].
"""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import programs  # noqa: E402

from dhir import parse_string  # noqa: E402
from dhir.backends.native import compile_native  # noqa: E402
from dhir.runner import check_runnable  # noqa: E402
from dhir.toolchain.build import Timing  # noqa: E402
from dhir.toolchain.options import RunOptions  # noqa: E402
from dhir.toolchain.shards import is_shard_program  # noqa: E402

PROGRAMS = ("plain", "literals", "neighbours", "matmuls", "nests")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("tasks", type=int, metavar="TASKS")
    parser.add_argument("program", choices=PROGRAMS, metavar="PROGRAM")
    parser.add_argument("mpi", choices=("mpich", "openmpi"), metavar="MPI")
    args = parser.parse_args()
    tasks, program, mpi = args.tasks, args.program, args.mpi
    if program == "neighbours":
        text = programs.neighbour_tasks(tasks)
    elif program in ("matmuls", "nests"):
        text = programs.matmul_tasks(tasks, loops=program == "nests")
    else:
        text = programs.many_tasks(tasks, literals=program == "literals")
    timing = Timing(reported=True)  # `dhir compile` records the build's report
    with timing.stage("parse + verify"):
        module = parse_string(text)
    with timing.stage("checks"):  # as `dhir compile` checks before it builds
        check_runnable(module, "main")
        is_shard_program(module)
    compile_native(module, "main", RunOptions(ranks=2, mpi=mpi), timing)
    print(json.dumps(timing.stages))


if __name__ == "__main__":
    main()
