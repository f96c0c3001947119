"""CPU time of a Gantt chart (dhir/placement/render.py) of many bars.

    .venv/bin/python bench/gantt.py [BARS ...]

A chart like `dhir gantt`'s of a long time loop's trace: BARS task runs (5,000 and 80,000
unless given) round-robin on 4 ranks, each 0.8 ms of every 1 ms, with and without an
arrow from each run to the next, written as PNG and as SVG to a temporary folder. Prints
the CPU time of `gantt()` for each (time.process_time: the figure, not the machine's load).
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

from dhir.placement.graph import Placement, TaskGraph  # noqa: E402
from dhir.placement.render import Arrow, gantt  # noqa: E402

RANKS = 4
SIZES = (5_000, 80_000)


def chart(bars: int, arrows: bool) -> tuple[TaskGraph, Placement, list[Arrow]]:
    tasks = tuple(f"step.piece{k % RANKS} #{k // RANKS}" for k in range(bars))
    devices = tuple(f"rank{r}" for r in range(RANKS))
    graph = TaskGraph(devices, tasks, {t: {devices[0]: 1.0} for t in tasks}, ())
    start = {t: (k // RANKS) * 1e-3 for k, t in enumerate(tasks)}
    finish = {t: s + 0.8e-3 for t, s in start.items()}
    placement = Placement({t: devices[k % RANKS] for k, t in enumerate(tasks)}, start, finish)
    messages = [
        Arrow(a, b, finish[a], start[b] + 1e-3, 8)
        for a, b in zip(tasks, tasks[1:], strict=False)
        if arrows
    ]
    return graph, placement, messages


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("bars", type=int, nargs="*", metavar="BARS")
    sizes = parser.parse_args().bars or SIZES
    with tempfile.TemporaryDirectory() as folder:
        for bars in sizes:
            for arrows in (False, True):
                graph, placement, messages = chart(bars, arrows)
                for suffix in (".png", ".svg"):
                    path = Path(folder) / f"chart{suffix}"
                    began = time.process_time()
                    gantt(graph, placement, path, arrows=messages)
                    seconds = time.process_time() - began
                    print(
                        f"{bars:>7,} bars {len(messages):>7,} arrows {suffix}: "
                        f"{seconds:7.2f} s CPU, {path.stat().st_size:>11,} bytes",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
