"""`dhir calibrate`: measure this machine and write its description.

    dhir calibrate [-o FILE] [--mpi mpich|openmpi] [--quick]

Without -o the description goes to $XDG_CONFIG_HOME/dhir/system.toml (else
~/.config/dhir/system.toml), where dhir looks for this machine's description.
"""

import argparse
import sys
from pathlib import Path
from typing import Any

from dhir.machine.files import default_system_path, description_format, write_system
from dhir.toolchain.calibrate import calibrate
from dhir.toolchain.tools import MPI_CHOICES


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "calibrate",
        help="measure this machine (MPI, memory, compute, GPUs) and write its description",
        description="Measure MPI latency and bandwidth between two local ranks, memory "
        "bandwidth and f32 compute rate on every core, each GPU's copies to, from and within "
        "it and its f32 compute rate, and write this machine's description "
        "(docs/machine.md). Without -o it goes to $XDG_CONFIG_HOME/dhir/system.toml (default "
        "~/.config/dhir/system.toml), where dhir looks for it.",
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="FILE",
        help="where to write the description (.toml or .json)",
    )
    parser.add_argument(
        "--mpi",
        choices=MPI_CHOICES,
        default="mpich",
        help="the MPI to measure (default: mpich)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="fewer, smaller measurements: a few seconds, less steady",
    )


def run(args: argparse.Namespace) -> int:
    path = args.output if args.output is not None else default_system_path()
    description_format(path)  # a bad name fails now, not after the measurements
    system = calibrate(args.mpi, args.quick, say=lambda line: print(line, file=sys.stderr))
    write_system(system, path)
    print(path)
    return 0
