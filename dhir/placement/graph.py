"""The task graph placement algorithms work on, apart from any IR.

Costs are times: `cost[task][device]` is how long `task` runs on `device` (a device
missing from a task's costs cannot run it), and an edge's `comm` is paid only when its
two tasks run on different devices. `dhir schedule --graph G.json` reads this from
JSON: {"devices": [...], "tasks": {"T": {"cost": {"dev": t}}}, "edges": [{"from": "T",
"to": "U", "comm": t}]}.
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    comm: float


@dataclass(frozen=True)
class TaskGraph:
    devices: tuple[str, ...]
    tasks: tuple[str, ...]  # in a topological order (the input's order when it is one)
    cost: dict[str, dict[str, float]]
    edges: tuple[Edge, ...]

    def successors(self, task: str) -> list[Edge]:
        return self._out.get(task, [])

    def predecessors(self, task: str) -> list[Edge]:
        return self._in.get(task, [])

    def __post_init__(self) -> None:
        out: dict[str, list[Edge]] = {}
        into: dict[str, list[Edge]] = {}
        for edge in self.edges:
            out.setdefault(edge.source, []).append(edge)
            into.setdefault(edge.target, []).append(edge)
        object.__setattr__(self, "_out", out)
        object.__setattr__(self, "_in", into)

    _out: dict[str, list[Edge]] = field(init=False, repr=False, compare=False)
    _in: dict[str, list[Edge]] = field(init=False, repr=False, compare=False)


@dataclass
class Placement:
    """Where and when each task runs, as a placement algorithm predicts it."""

    assignment: dict[str, str]
    start: dict[str, float]
    finish: dict[str, float]

    @property
    def makespan(self) -> float:
        return max(self.finish.values(), default=0.0)
