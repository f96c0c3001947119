"""The argument parser of dhir's commands and dhir-opt: argparse's, except that an option
taking one value may be given once. argparse keeps the last of `-o a -o b` and drops the
others without a word, so `dhir-opt -p cse -p dce` ran only dce; a second one is now a
malformed command line (exit status 2), as in mlir-opt. Options meant to repeat (`--input`,
`--link`, `-l`, `-L`) append, and flags may be given again."""

import argparse
from collections.abc import Sequence
from typing import Any

# Where, in the namespace being filled, the options given so far are noted (by dest).
_GIVEN = "_dhir_options_given"


class _StoreOnce(argparse.Action):
    """argparse's "store", refusing an option whose value is already given."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        given: set[str] = namespace.__dict__.setdefault(_GIVEN, set())
        if self.option_strings and self.dest in given:
            raise argparse.ArgumentError(
                self, "given more than once: it takes one value, so give it once"
            )
        given.add(self.dest)
        setattr(namespace, self.dest, values)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser (its subcommands' parsers too) whose single-valued options may be
    given once."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", None, _StoreOnce)
        self.register("action", "store", _StoreOnce)

    def parse_known_args(  # pyright: ignore[reportIncompatibleMethodOverride]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        parsed.__dict__.pop(_GIVEN, None)  # a note for the parse alone
        return parsed, extras
