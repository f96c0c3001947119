"""`dhir calibrate`: measure this machine and write its description.

    dhir calibrate [-o FILE] [--mpi mpich|openmpi] [--quick] [--system FILE]

Without -o the description goes to $XDG_CONFIG_HOME/dhir/system.toml (else
~/.config/dhir/system.toml), where dhir looks for this machine's description. With
--system, a description of several nodes gets its links measured (and needs -o).
"""

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from dhir.cli.common import output_file, path
from dhir.cli.names import COMMANDS
from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.machine.files import default_system_path, description_format, read_system, write_system
from dhir.toolchain.calibrate import calibrate, calibrate_links
from dhir.toolchain.tools import DEFAULT_MPI, MPI_CHOICES


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "calibrate",
        help=COMMANDS["calibrate"],
        description="Measure MPI latency and bandwidth between two local ranks, memory "
        "bandwidth and f32 compute rate on every core, each GPU's copies to, from and within "
        "it and its f32 compute rate, and write this machine's description "
        "(docs/machine.md). Without -o it goes to $XDG_CONFIG_HOME/dhir/system.toml (default "
        "~/.config/dhir/system.toml), where dhir looks for it.",
    )
    parser.add_argument(
        "-o",
        "--output",
        type=output_file,
        metavar="FILE",
        help="where to write the description (.toml or .json)",
    )
    parser.add_argument(
        "--mpi",
        choices=MPI_CHOICES,
        default=DEFAULT_MPI,
        help=f"the MPI to measure (default: {DEFAULT_MPI})",
    )
    parser.add_argument(
        "--system",
        type=path,
        metavar="FILE",
        help="start from this description (TOML or JSON) instead of detection; with two "
        "nodes or more, measure its network (one rank on each of the first two nodes) and "
        "intra-node link (two ranks on the first node), launched with a hostfile as dhir run "
        "does, and keep its devices (needs -o)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="fewer, smaller measurements: a few seconds, less steady",
    )


def run(args: argparse.Namespace) -> int:
    base = read_system(args.system) if args.system is not None else None
    several = base is not None and len(base.nodes) > 1
    if several and args.output is None:
        raise DhirError(
            [
                Diagnostic(
                    f"{args.system} describes several nodes, not this machine alone: give "
                    "-o FILE for the measured description"
                )
            ]
        )
    path = args.output if args.output is not None else default_system_path()
    description_format(path)  # a bad name fails now, not after the measurements
    if args.output is not None:  # the default's folder is made when written
        _check_writable(Path(path))
    if base is not None and several:
        system = calibrate_links(base, args.mpi, args.quick, _say)
    else:
        system = calibrate(args.mpi, args.quick, base, _say)
    write_system(system, path)
    print(path)
    return 0


def _check_writable(path: Path) -> None:
    """Fail before the measurements, not after, where the description cannot be written:
    its folder is missing or not writable, or the file is not."""
    if path.is_dir():  # writable, as a folder: measured for nothing without this check
        raise DhirError([Diagnostic(f"-o {path} is a directory; name the description's file")])
    folder = path.parent if str(path.parent) else Path(".")
    target = path if path.exists() else folder
    if not folder.is_dir():  # the reason, not a bare "cannot write"
        reason = f"there is no folder {folder}; make it first"
    elif not os.access(target, os.W_OK):
        reason = f"{target} is not writable"
    else:
        return
    raise DhirError([Diagnostic(f"cannot write the machine description {path}: {reason}")])


def _say(line: str) -> None:
    print(line, file=sys.stderr)
