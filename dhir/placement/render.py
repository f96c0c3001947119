"""Pictures of task graphs and their placements.

- `gantt(graph, placement, path)`: a Gantt chart, one row per device and a bar per task,
  written as PNG or SVG (by the path's suffix) with matplotlib.
- `dot(graph, placement)`: the task graph in Graphviz DOT, annotated with the placement
  when there is one (`dot -Tsvg` draws it).
"""

from pathlib import Path
from typing import TYPE_CHECKING

from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.placement.graph import Placement, TaskGraph

if TYPE_CHECKING:
    from matplotlib.axes import Axes

FORMATS = (".png", ".svg")

_FONT_SIZE = 8.0
_DPI = 100
_WIDTH_IN = 12.0
# Up to this many devices every row is named; beyond it, matplotlib picks a few.
_NAMED_ROWS = 64


def gantt(graph: TaskGraph, placement: Placement, path: Path, title: str | None = None) -> None:
    """Write a Gantt chart of `placement` to `path` (.png or .svg): one row per device in
    `graph.devices` order, a bar per task, labelled where the name fits, and a dashed line
    at the makespan. `title` goes before the default title's counts and makespan."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise _error(
            f"cannot draw a Gantt chart as '{path.suffix or path.name}': name a .png or .svg file"
        )
    rows = _rows(graph, placement)
    matplotlib = _matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    height = min(60.0, max(2.5, 1.2 + 0.3 * len(graph.devices)))
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "dhir"}):
        figure = Figure(figsize=(_WIDTH_IN, height), dpi=_DPI, layout="constrained")
        FigureCanvasAgg(figure)  # the Agg canvas: no display needed
        axes = figure.add_subplot()
        makespan = placement.makespan
        color_of = _colors(graph)
        _draw_bars(axes, placement, rows, color_of)
        _draw_axes(axes, graph, makespan)
        heading = f"{len(graph.tasks)} tasks on {len(graph.devices)} devices, makespan {makespan:g}"
        axes.set_title(f"{title}: {heading}" if title else heading)
        figure.canvas.draw()  # lay out first, so the labels know how wide the bars are
        _label_bars(axes, placement, rows, color_of)
        try:
            figure.savefig(path, format=path.suffix.lower()[1:], metadata=_metadata(path))
        except OSError as error:
            raise _error(f"cannot write {path}: {error.strerror or error}") from None


def _matplotlib():  # type: ignore[no-untyped-def]
    try:
        import matplotlib
    except ImportError:
        raise _error(
            "drawing Gantt charts needs matplotlib: .venv/bin/pip install matplotlib"
        ) from None
    return matplotlib


def _metadata(path: Path) -> dict[str, str | None]:
    # No creation date, so the same schedule gives the same file.
    if path.suffix.lower() == ".svg":
        return {"Date": None, "Creator": "dhir"}
    return {"Software": "dhir"}


def _rows(graph: TaskGraph, placement: Placement) -> list[list[str]]:
    """The tasks of each device (by `graph.devices` index), checking the placement."""
    row_of = {device: k for k, device in enumerate(graph.devices)}
    rows: list[list[str]] = [[] for _ in graph.devices]
    for task in graph.tasks:
        device = placement.assignment.get(task)
        if device not in row_of or task not in placement.start or task not in placement.finish:
            raise _error(
                f"the placement gives task '{task}' no device of the graph, start and finish"
            )
        rows[row_of[device]].append(task)
    return rows


Color = tuple[float, float, float]


def _colors(graph: TaskGraph) -> dict[str, Color]:
    from matplotlib import colormaps

    palette = colormaps["tab20"].colors  # type: ignore[attr-defined]
    return {task: palette[k % len(palette)] for k, task in enumerate(graph.tasks)}


def _draw_bars(
    axes: "Axes", placement: Placement, rows: list[list[str]], color_of: dict[str, Color]
) -> None:
    start, finish = placement.start, placement.finish
    for row, tasks in enumerate(rows):
        spans = [(start[t], finish[t] - start[t]) for t in tasks if finish[t] > start[t]]
        colors = [color_of[t] for t in tasks if finish[t] > start[t]]
        if spans:
            axes.broken_barh(
                spans, (row - 0.4, 0.8), facecolors=colors, edgecolor="white", linewidth=0.5
            )
        instants = [start[t] for t in tasks if finish[t] <= start[t]]
        if instants:  # zero-length tasks: a tick, since a bar would not show
            axes.vlines(instants, row - 0.4, row + 0.4, colors="black", linewidth=1.0)


def _draw_axes(axes: "Axes", graph: TaskGraph, makespan: float) -> None:
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    count = len(graph.devices)
    axes.set_ylim(count - 0.5, -0.5)  # the first device on top
    axes.set_xlim(0.0, makespan * 1.02 if makespan > 0 else 1.0)
    if count <= _NAMED_ROWS:
        axes.set_yticks(range(count), labels=list(graph.devices), fontsize=_FONT_SIZE)
    else:
        axes.yaxis.set_major_locator(MaxNLocator(nbins=40, integer=True))
        axes.yaxis.set_major_formatter(
            FuncFormatter(lambda y, _: graph.devices[int(y)] if 0 <= y < count else "")
        )
    axes.set_xlabel("time")
    axes.set_ylabel("device")
    axes.grid(axis="x", linestyle=":", linewidth=0.5)
    axes.axvline(makespan, color="tab:red", linestyle="--", linewidth=1.0)
    axes.annotate(
        f"makespan {makespan:g}",
        xy=(makespan, 0.0),
        xycoords=("data", "axes fraction"),
        xytext=(-3, 3),
        textcoords="offset points",
        ha="right",
        fontsize=_FONT_SIZE,
        color="tab:red",
    )


def _label_bars(
    axes: "Axes", placement: Placement, rows: list[list[str]], color_of: dict[str, Color]
) -> None:
    """Name each bar that is wide and tall enough for its name."""
    box = axes.get_window_extent()
    x_low, x_high = axes.get_xlim()
    pixels_per_time = box.width / (x_high - x_low)
    row_pixels = box.height / max(len(rows), 1) * 0.8
    char_pixels = 0.6 * _FONT_SIZE * _DPI / 72  # a rough average glyph width
    if row_pixels < _FONT_SIZE * _DPI / 72:
        return
    start, finish = placement.start, placement.finish
    for row, tasks in enumerate(rows):
        for task in tasks:
            width = (finish[task] - start[task]) * pixels_per_time
            if width >= (len(task) + 1) * char_pixels:
                middle = (start[task] + finish[task]) / 2
                red, green, blue = color_of[task][:3]
                dark = 0.299 * red + 0.587 * green + 0.114 * blue < 0.5  # luma
                axes.text(
                    middle,
                    row,
                    task,
                    ha="center",
                    va="center",
                    fontsize=_FONT_SIZE,
                    color="white" if dark else "black",
                    clip_on=True,
                )


# --- Graphviz ---------------------------------------------------------------------------

_FILLS = (
    "#cfe2f3",
    "#d9ead3",
    "#fff2cc",
    "#f4cccc",
    "#d9d2e9",
    "#fce5cd",
    "#d0e0e3",
    "#ead1dc",
    "#e6b8af",
    "#c9daf8",
    "#b6d7a8",
    "#ffe599",
)


def dot(graph: TaskGraph, placement: Placement | None = None) -> str:
    """The task graph in Graphviz DOT: a box per task (with its device and times, filled
    in one colour per device, when placed), an arrow per edge labelled with its comm
    (dashed where both tasks share a device, so the comm is not paid)."""
    lines = [f"digraph {quote('schedule' if placement else 'tasks')} {{"]
    lines.append('  node [shape=box, style="rounded,filled", fillcolor=white];')
    fill = {device: _FILLS[k % len(_FILLS)] for k, device in enumerate(graph.devices)}
    for task in graph.tasks:
        if placement is None or task not in placement.assignment:
            lines.append(f"  {quote(task)} [label={quote(task)}];")
            continue
        device = placement.assignment[task]
        times = f"{placement.start[task]:g} .. {placement.finish[task]:g}"
        label = quote(f"{task}\non {device}\n{times}")
        lines.append(
            f"  {quote(task)} [label={label}, fillcolor={quote(fill.get(device, 'white'))}];"
        )
    for edge in graph.edges:
        attributes = f"label={quote(f'{edge.comm:g}')}"
        if placement is not None and _local(placement, edge.source, edge.target):
            attributes += ", style=dashed, color=gray50, fontcolor=gray50"
        lines.append(f"  {quote(edge.source)} -> {quote(edge.target)} [{attributes}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _local(placement: Placement, source: str, target: str) -> bool:
    here = placement.assignment.get(source)
    return here is not None and here == placement.assignment.get(target)


def quote(text: str) -> str:
    """A DOT quoted string for any text: backslashes, quotes and newlines escaped, so
    names cannot end the string early (and label newlines become line breaks)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _error(message: str) -> DhirError:
    return DhirError([Diagnostic(message)])
