"""dhir-opt --mlir-timing: wall time of parsing, each pass, verifying and printing,
reported on standard error in the layout of mlir-opt's execution time report."""

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from xdsl.passes import ModulePass, PassPipeline

from dhir.transforms.nesting import OnEach

_RULE = "===" + "-" * 73 + "==="


@dataclass
class PassTiming:
    pipeline: PassPipeline
    phases: dict[str, float] = field(default_factory=dict[str, float])
    passes: dict[int, float] = field(default_factory=dict[int, float])
    _started: dict[int, float] = field(default_factory=dict[int, float])
    _begun: float = field(default_factory=time.perf_counter)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - start

    def between(self, previous: ModulePass | None, following: ModulePass | None) -> None:
        """Called between passes (a PassPipeline callback's first and last arguments)."""
        now = time.perf_counter()
        if previous is not None:
            key = id(previous)
            self.passes[key] = self.passes.get(key, 0.0) + now - self._started.pop(key, now)
        if following is not None:
            self._started[id(following)] = now

    def report(self) -> str:
        total = time.perf_counter() - self._begun
        # Parsing first, then the passes, then the rest (verifying after passes, printing).
        rows = [(name, seconds) for name, seconds in self.phases.items() if name == "parse"]
        rows += self._pass_rows(self.pipeline, "")
        rows += [(name, seconds) for name, seconds in self.phases.items() if name != "parse"]
        lines = [
            _RULE,
            f"{'... Execution time report ...':^79}".rstrip(),
            _RULE,
            f"  Total Execution Time: {total:.4f} seconds",
            "",
            "  ----Wall Time----  ----Name----",
        ]
        lines += [_row(seconds, total, name) for name, seconds in rows]
        lines.append(_row(total, total, "Total"))
        return "\n".join(lines)

    def _pass_rows(self, pipeline: PassPipeline, indent: str) -> list[tuple[str, float]]:
        rows: list[tuple[str, float]] = []
        for one in pipeline.passes:
            seconds = self.passes.get(id(one), 0.0)
            if isinstance(one, OnEach):
                rows.append((f"{indent}'{one.anchor}' pipeline", seconds))
                rows += self._pass_rows(one.pipeline, indent + "  ")
            else:
                rows.append((indent + one.name, seconds))
        return rows


def _row(seconds: float, total: float, name: str) -> str:
    share = 100.0 * seconds / total if total > 0 else 0.0
    return f"  {seconds:10.4f} ({share:5.1f}%)  {name}"
