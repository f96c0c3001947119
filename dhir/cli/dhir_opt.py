"""`dhir-opt` (its console script calls `main`): the driver is dhir/cli/opt_driver.py.

It is loaded inside `main`, so that Ctrl-C while xDSL and the passes load says
`interrupted` (exit status 130), as it does later, not a traceback of the import.
"""

import sys

from dhir.cli.interrupt import interruptible


def main(argv: list[str] | None = None) -> int:
    def run() -> int:
        from dhir.cli.opt_driver import run_opt

        return run_opt(argv)

    return interruptible(run)


if __name__ == "__main__":
    sys.exit(main())
