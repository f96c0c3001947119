"""Pictures of task graphs and their placements.

- `gantt(graph, placement, path)`: a Gantt chart, one row per device and a bar per task,
  messages as arrows, written as PNG or SVG (by the path's suffix) with matplotlib.
- `dot(graph, placement)`: the task graph in Graphviz DOT, annotated with the placement
  when there is one (`dot -Tsvg` draws it).
"""

import re
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from dhir.ir.diagnostics import DhirError, Diagnostic, warn
from dhir.placement.graph import Placement, TaskGraph

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

FORMATS = (".png", ".svg")

_FONT_SIZE = 8.0
_DPI = 100
_WIDTH_IN = 12.0
# Up to this many devices every row is named; beyond it, matplotlib picks a few.
_NAMED_ROWS = 64


@dataclass(frozen=True)
class Arrow:
    """A message to draw: from `source`'s row at `begin` to `target`'s at `end` (seconds);
    `target` None: to the first device's row (rank 0), after the schedule. With the
    devices given, the arrow goes between their rows instead (a recorded trace's)."""

    source: str
    target: str | None
    begin: float
    end: float
    nbytes: int
    source_device: str | None = None
    target_device: str | None = None


@dataclass(frozen=True)
class Span:
    """Something else a device did, drawn grey on its row under `name` (a recorded run's
    input reads and result writes): from `begin` to `end` (seconds)."""

    device: str
    begin: float
    end: float
    name: str


def gantt(
    graph: TaskGraph,
    placement: Placement,
    path: Path,
    title: str | None = None,
    arrows: Sequence[Arrow] = (),
    kind: str = "plan",
    spans: Sequence[Span] = (),
    zoom: bool = False,
) -> None:
    """Write a Gantt chart of `placement` to `path` (.png or .svg): one row per device in
    `graph.devices` order, a bar per task (pieces of a task in one colour, a legend naming
    the tasks where there are few), labelled where the name fits, messages as arrows
    between rows, a time axis in s, ms, us or ns, and a dashed line at the end. In an SVG
    each bar and arrow has a `<title>` (its name, device and times), which viewers show on
    hover. `kind` says what the times are ("plan", "as built"); `title` goes first.
    `spans` are drawn grey and named where they fit; `zoom`: the time axis shows only the
    tasks and messages (a run's tasks of microseconds after 100 ms of reading were
    invisible), else the whole chart from 0."""
    path = Path(path)
    if path.is_dir():  # out or even out.svg: matplotlib would say only "Is a directory"
        raise _error(
            f"cannot draw a Gantt chart as {path}: it is a folder; name a .png or .svg file "
            f"to write, such as {path / 'chart.svg'}"
        )
    if path.suffix.lower() not in FORMATS:
        raise _error(
            f"cannot draw a Gantt chart as '{path.suffix or path.name}': name a .png or .svg file"
        )
    rows = _rows(graph, placement)
    matplotlib = _matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    end = max(placement.makespan, max((a.end for a in arrows), default=0.0))
    window = _window(placement, arrows, spans, end, zoom)
    whole = max(end, max((s.end for s in spans), default=0.0))
    scale = _Scale.of(whole)  # of the run, as the times from its start read best
    height = min(60.0, max(2.5, 1.2 + 0.3 * len(graph.devices)))
    heading = (
        f"{len(graph.tasks)} tasks on {len(graph.devices)} devices, {kind}: "
        f"makespan {scale.text(end)}"
    )
    if window[0] > 0:
        heading += f" (showing {scale.between(*window)})"
    heading = f"{_shown(title, _TITLE_MAX)}: {heading}" if title else heading
    with (
        matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "dhir"}),
        _warnings_in_our_words(path),
    ):
        figure = Figure(figsize=(_WIDTH_IN, height), dpi=_DPI, layout="constrained")
        FigureCanvasAgg(figure)  # the Agg canvas: no display needed
        # matplotlib refuses what it cannot draw (times beyond its range, a chart too big
        # for an image) with ValueError or OverflowError: the user's data, not a bug.
        try:
            drawing = _Drawing(graph, placement, rows, arrows, spans, scale, end, window)
            titles = _draw(figure, drawing, heading)
            figure.savefig(path, format=path.suffix.lower()[1:], metadata=_metadata(path))
        except OSError as error:
            raise _error(f"cannot write {path}: {error.strerror or error}") from None
        except (ValueError, OverflowError) as error:
            raise _error(f"cannot draw the Gantt chart {path}: {error}") from None
    if path.suffix.lower() == ".svg" and titles:
        _add_titles(path, titles)


def _window(
    placement: Placement, arrows: Sequence[Arrow], spans: Sequence[Span], end: float, zoom: bool
) -> tuple[float, float]:
    """The times the chart shows (seconds): with `zoom`, the tasks and messages with a
    margin of 2% each side; else (or with none of them) everything from 0."""
    lows = [*placement.start.values(), *(a.begin for a in arrows)]
    highs = [*placement.finish.values(), *(a.end for a in arrows)]
    if zoom and lows:
        low, high = min(lows), max(highs)
        margin = (high - low) * 0.02 if high > low else max(high * 1e-3, 1e-9)
        return max(0.0, low - margin), high + margin
    whole = max(end, max((s.end for s in spans), default=0.0))
    return 0.0, whole * 1.02 if whole > 0 else 1.0 / _Scale.of(0.0).factor


@dataclass(frozen=True)
class _Drawing:
    """What one chart draws, and the times it shows (`window`, seconds)."""

    graph: TaskGraph
    placement: Placement
    rows: list[list[str]]
    arrows: Sequence[Arrow]
    spans: Sequence[Span]
    scale: "_Scale"
    end: float
    window: tuple[float, float]


def _draw(figure: "Figure", drawing: _Drawing, heading: str) -> dict[str, list[str]]:
    """The chart on `figure`; the SVG ids of its bars and arrows, with their titles."""
    graph, placement, rows, scale = drawing.graph, drawing.placement, drawing.rows, drawing.scale
    axes = figure.add_subplot()
    # _draw_axes sets the limits. Autoscaling, after each bar, walked every artist drawn
    # before it: quadratic (2,000 bars 15 s of 46 s; a long time loop's trace, hours).
    axes.set_autoscale_on(False)
    color_of = _colors(graph)
    titles = _draw_spans(axes, graph, drawing.spans, scale)
    titles |= _draw_bars(axes, placement, rows, color_of, scale)
    titles |= _draw_arrows(axes, graph, placement, drawing.arrows, scale)
    _draw_axes(axes, graph, drawing.end, scale, drawing.window)
    _legend(axes, graph, color_of, bool(drawing.spans))
    axes.set_title(heading)
    figure.canvas.draw()  # lay out first, so the labels know how wide the bars are
    _label_bars(axes, placement, rows, color_of, scale)
    _label_spans(axes, graph, drawing.spans, scale)
    return titles


@contextmanager
def _warnings_in_our_words(path: Path) -> Iterator[None]:
    """matplotlib's warnings (each with a line of dhir's source) as dhir's warnings about
    the chart, once each."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)  # each time, not once a process
        yield
    for message in dict.fromkeys(str(w.message) for w in caught):
        warn(Diagnostic(f"drawing {path}: {message}", severity="warning"))


# Names longer than this are cut (ending in "…") in the legend, on the device axis and in
# the heading; matplotlib otherwise gives them the whole figure and squeezes the chart to
# nothing. The SVG's hover titles keep them whole.
_LABEL_MAX = 60
_TITLE_MAX = 120


def _shown(text: str, limit: int | None = None) -> str:
    """`text` as a chart shows it: control characters (which no font draws and XML cannot
    hold) written as escapes, cut to `limit` characters."""
    text = "".join(f"\\x{ord(c):02x}" if ord(c) < 0x20 or ord(c) == 0x7F else c for c in text)
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class _Scale:
    """Seconds shown in the unit that suits the chart's length."""

    factor: float
    unit: str

    @staticmethod
    def of(seconds: float) -> "_Scale":
        for factor, unit in ((1.0, "s"), (1e3, "ms"), (1e6, "us"), (1e9, "ns")):
            if seconds * factor >= 1.0:
                return _Scale(factor, unit)
        return _Scale(1e9, "ns")

    def text(self, seconds: float, digits: int = 4) -> str:
        return f"{seconds * self.factor:.{digits}g} {self.unit}"

    def between(self, low: float, high: float) -> str:
        """`low` to `high`, with the digits it takes to tell them apart."""
        digits = 4
        while digits < 12 and self.text(low, digits) == self.text(high, digits):
            digits += 1
        return f"{self.text(low, digits)} to {self.text(high, digits)}"


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
    """A colour per task, the same for the pieces of one task (`name.pieceK`)."""
    from matplotlib import colormaps

    palette = colormaps["tab20"].colors  # type: ignore[attr-defined]
    bases = list(dict.fromkeys(_base(task) for task in graph.tasks))
    index = {base: k for k, base in enumerate(bases)}
    return {task: palette[index[_base(task)] % len(palette)] for task in graph.tasks}


def _base(task: str) -> str:
    """The task a bar belongs to: without `.pieceK`, or a recorded run's ` #K`."""
    task = task.partition(" #")[0]
    head, dot_, tail = task.rpartition(".")
    return head if dot_ and tail.startswith("piece") and tail[5:].isdigit() else task


_LEGEND_MAX = 12  # tasks named in the legend, where there are no more than this


def _legend(axes: "Axes", graph: TaskGraph, color_of: dict[str, Color], spans: bool) -> None:
    from matplotlib.patches import Patch

    # "(end)", where results reach rank 0, is no task of the user's.
    bases = [b for b in dict.fromkeys(_base(task) for task in graph.tasks) if b != "(end)"]
    if len(bases) > _LEGEND_MAX:
        bases = []
    first = {_base(task): color_of[task] for task in reversed(graph.tasks)}
    handles = [Patch(facecolor=first[base], label=_shown(base, _LABEL_MAX)) for base in bases]
    if spans:
        handles.append(Patch(facecolor=_SPAN_COLOR, label="I/O (inputs, results)"))
    if not handles:
        return
    axes.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=_FONT_SIZE)


def _draw_bars(
    axes: "Axes",
    placement: Placement,
    rows: list[list[str]],
    color_of: dict[str, Color],
    scale: _Scale,
) -> dict[str, list[str]]:
    """A bar per task (a tick for one of no length), each row's bars one collection and its
    ticks another (an artist per bar cost 1.5 ms of CPU: 116 s for a trace's 80,000); the
    SVG ids of the collections, with their bars' titles in drawing order."""
    start, finish = placement.start, placement.finish
    titles: dict[str, list[str]] = {}
    for row, tasks in enumerate(rows):
        spans = [(start[t] * scale.factor, (finish[t] - start[t]) * scale.factor) for t in tasks]
        bars = [k for k, (_, length) in enumerate(spans) if length > 0]
        ticks = [k for k, (_, length) in enumerate(spans) if not length > 0]
        if bars:
            drawn = axes.broken_barh(
                [spans[k] for k in bars],
                (row - 0.4, 0.8),
                facecolors=[color_of[tasks[k]] for k in bars],
                edgecolor="white",
                linewidth=0.5,
            )
            drawn.set_gid(f"dhir-bars-{row}")
            titles[f"dhir-bars-{row}"] = [_bar_title(placement, tasks[k], scale) for k in bars]
        if ticks:  # zero-length tasks: a tick, since a bar would not show
            drawn = axes.vlines(
                [spans[k][0] for k in ticks], row - 0.4, row + 0.4, colors="black", linewidth=1.0
            )
            drawn.set_gid(f"dhir-ticks-{row}")
            titles[f"dhir-ticks-{row}"] = [_bar_title(placement, tasks[k], scale) for k in ticks]
    return titles


_SPAN_COLOR = "lightgray"


def _draw_spans(
    axes: "Axes", graph: TaskGraph, spans: Sequence[Span], scale: _Scale
) -> dict[str, list[str]]:
    """A grey bar per span, each row's one collection under the tasks' bars; the SVG ids of
    the collections, with their spans' titles."""
    row_of = {device: k for k, device in enumerate(graph.devices)}
    by_row: dict[int, list[Span]] = {}
    for span in spans:
        by_row.setdefault(row_of[span.device], []).append(span)
    titles: dict[str, list[str]] = {}
    for row, mine in sorted(by_row.items()):
        drawn = axes.broken_barh(
            [(s.begin * scale.factor, (s.end - s.begin) * scale.factor) for s in mine],
            (row - 0.4, 0.8),
            facecolors=_SPAN_COLOR,
            edgecolor="gray",
            linewidth=0.5,
            zorder=1,
        )
        drawn.set_gid(f"dhir-io-{row}")
        titles[f"dhir-io-{row}"] = [
            f"{s.name} on {s.device}: {scale.text(s.begin)} to {scale.text(s.end)}" for s in mine
        ]
    return titles


def _bar_title(placement: Placement, task: str, scale: _Scale) -> str:
    times = f"{scale.text(placement.start[task])} to {scale.text(placement.finish[task])}"
    return f"{task} on {placement.assignment[task]}: {times}"


def _draw_arrows(
    axes: "Axes",
    graph: TaskGraph,
    placement: Placement,
    arrows: Sequence[Arrow],
    scale: _Scale,
) -> dict[str, list[str]]:
    """An arrow per message between rows, all of them one collection (an annotation each
    cost 3 ms of CPU, so only the first 2,000 were drawn, and nothing said so); its SVG id
    with the arrows' titles in drawing order."""
    if not arrows:
        return {}
    row_of = {device: k for k, device in enumerate(graph.devices)}
    x: list[float] = []  # tails
    y: list[float] = []
    dx: list[float] = []  # to heads
    dy: list[float] = []
    titles: list[str] = []
    for arrow in arrows:
        source = row_of[arrow.source_device or placement.assignment[arrow.source]]
        if arrow.target_device is not None:
            target = row_of[arrow.target_device]
        else:
            target = row_of[placement.assignment[arrow.target]] if arrow.target is not None else 0
        x.append(arrow.begin * scale.factor)
        y.append(source)
        # Never backwards (a trace of dhir's before 2026-11-30 joined the slices' middles,
        # and a receive posted early has its middle before its send's): at worst upright.
        dx.append(max(0.0, arrow.end - arrow.begin) * scale.factor)
        dy.append(target - source)
        to = arrow.target if arrow.target is not None else "rank 0 (the results)"
        titles.append(
            f"{arrow.nbytes} bytes from {arrow.source} to {to}: "
            f"{scale.text(arrow.begin)} to {scale.text(arrow.end)}"
        )
    drawn = axes.quiver(
        x,
        y,
        dx,
        dy,
        angles="xy",  # from tail to head in data coordinates, whatever the axes' shape
        scale_units="xy",
        scale=1.0,
        units="inches",
        width=_ARROW_WIDTH,
        headwidth=5.0,
        headlength=5.0,
        headaxislength=4.5,
        color="dimgray",
        alpha=0.8,
        zorder=3,  # over the ticks, as annotations were
    )
    drawn.set_gid("dhir-messages-0")
    return {"dhir-messages-0": titles}


_ARROW_WIDTH = 0.8 / 72  # inches: a line of 0.8 points


def _add_titles(path: Path, titles: dict[str, list[str]]) -> None:
    """Give each shape in the first group matplotlib wrote with each of `titles`' ids a
    `<title>`, the id's titles in the order the shapes were drawn (a collection writes
    a shape per bar), in one pass over the file (a search from its start per id took 63 s
    for 5,000 bars, and hours for a trace of a long time loop)."""
    from xml.sax.saxutils import escape

    left = dict(titles)

    def titled(group: re.Match[str]) -> str:
        texts = iter(left.pop(group[1], ()))  # none for an id titled already

        def shape(element: re.Match[str]) -> str:
            text = next(texts, None)
            if text is None:
                return element[0]
            return f"{element[1]}><title>{escape(_shown(text))}</title></path>"

        return _SHAPE.sub(shape, group[0])

    path.write_text(_GROUP.sub(titled, path.read_text()))


# dhir's groups (a collection each) hold shapes and no groups: one ends at the next </g>.
_GROUP = re.compile(r'<g id="(dhir-[^"]*)">.*?</g>', re.DOTALL)
_SHAPE = re.compile(r"(<path\b[^>]*?)\s*/>")


def _draw_axes(
    axes: "Axes", graph: TaskGraph, end: float, scale: _Scale, window: tuple[float, float]
) -> None:
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    count = len(graph.devices)
    # The first device on top; with none, a row's height still (equal limits warn).
    axes.set_ylim(max(count, 1) - 0.5, -0.5)
    makespan = end * scale.factor
    axes.set_xlim(window[0] * scale.factor, window[1] * scale.factor)
    if count <= _NAMED_ROWS:
        labels = [_shown(device, _LABEL_MAX) for device in graph.devices]
        axes.set_yticks(range(count), labels=labels, fontsize=_FONT_SIZE)
    else:
        axes.yaxis.set_major_locator(MaxNLocator(nbins=40, integer=True))
        axes.yaxis.set_major_formatter(
            FuncFormatter(
                lambda y, _: _shown(graph.devices[int(y)], _LABEL_MAX) if 0 <= y < count else ""
            )
        )
    axes.set_xlabel(f"time ({scale.unit})")
    axes.set_ylabel("device")
    axes.grid(axis="x", linestyle=":", linewidth=0.5)
    axes.axvline(makespan, color="tab:red", linestyle="--", linewidth=1.0)
    if not window[0] <= end <= window[1]:
        return
    axes.annotate(
        f"makespan {scale.text(end)}",
        xy=(makespan, 0.0),
        xycoords=("data", "axes fraction"),
        xytext=(-3, 3),
        textcoords="offset points",
        ha="right",
        fontsize=_FONT_SIZE,
        color="tab:red",
    )


def _label_bars(
    axes: "Axes",
    placement: Placement,
    rows: list[list[str]],
    color_of: dict[str, Color],
    scale: _Scale,
) -> None:
    """Name each bar that is wide and tall enough for its name: all names one artist."""
    box = axes.get_window_extent()
    x_low, x_high = axes.get_xlim()
    pixels_per_time = box.width / (x_high - x_low)
    row_pixels = box.height / max(len(rows), 1) * 0.8
    char_pixels = 0.6 * _FONT_SIZE * _DPI / 72  # a rough average glyph width
    if row_pixels < _FONT_SIZE * _DPI / 72:
        return
    start, finish = placement.start, placement.finish
    labels: list[tuple[float, float, str, str]] = []
    for row, tasks in enumerate(rows):
        for task in tasks:
            width = (finish[task] - start[task]) * scale.factor * pixels_per_time
            label = _shown(task)
            if width >= (len(label) + 1) * char_pixels:
                middle = (start[task] + finish[task]) / 2 * scale.factor
                red, green, blue = color_of[task][:3]
                dark = 0.299 * red + 0.587 * green + 0.114 * blue < 0.5  # luma
                labels.append((middle, row, label, "white" if dark else "black"))
    if labels:
        axes.add_artist(_labels_class()(labels))


def _label_spans(axes: "Axes", graph: TaskGraph, spans: Sequence[Span], scale: _Scale) -> None:
    """Name each span on the middle of what the chart shows of it, where the name fits."""
    box = axes.get_window_extent()
    x_low, x_high = axes.get_xlim()
    pixels_per_time = box.width / (x_high - x_low)
    if box.height / max(len(graph.devices), 1) * 0.8 < _FONT_SIZE * _DPI / 72:
        return
    row_of = {device: k for k, device in enumerate(graph.devices)}
    labels: list[tuple[float, float, str, str]] = []
    for span in spans:
        low = max(span.begin * scale.factor, x_low)
        high = min(span.end * scale.factor, x_high)
        label = _shown(span.name)
        if (high - low) * pixels_per_time >= (len(label) + 1) * 0.6 * _FONT_SIZE * _DPI / 72:
            labels.append(((low + high) / 2, row_of[span.device], label, "black"))
    if labels:
        axes.add_artist(_labels_class()(labels))


@cache
def _labels_class() -> type:
    """`_Labels`, made on first use: matplotlib is imported only to draw."""
    from matplotlib.artist import Artist
    from matplotlib.backend_bases import RendererBase
    from matplotlib.font_manager import FontProperties
    from matplotlib.transforms import TransformedPath

    class _Labels(Artist):
        """Names centred on their bars, drawn by the renderer one after the other. A Text
        artist each measured and laid out every name on every draw (4,000 names: 6.9 s of
        CPU); here a name's width is the sum of its characters', each measured once
        (kerning left out), and the names are left out of the layout. Names are drawn as
        written: no mathtext, which a `$` in a task's name would start."""

        def __init__(self, labels: list[tuple[float, float, str, str]]) -> None:
            super().__init__()
            self.labels = labels
            self.set_in_layout(False)
            self.set_zorder(3)  # above the bars, as Text artists are

        def draw(self, renderer: RendererBase) -> None:
            if not self.get_visible() or not self.labels:
                return
            prop = FontProperties(size=_FONT_SIZE)
            _, height, descent = renderer.get_text_width_height_descent("lp", prop, False)
            widths: dict[str, float] = {}

            def width(text: str) -> float:
                for char in set(text) - widths.keys():
                    widths[char] = renderer.get_text_width_height_descent(char, prop, False)[0]
                return sum(widths[char] for char in text)

            points = self.get_transform().transform([(x, y) for x, y, _, _ in self.labels])
            gc = renderer.new_gc()
            if self.get_clip_on():  # to the axes, as add_artist set it
                gc.set_clip_rectangle(self.get_clip_box())
                clip = self.get_clip_path()
                gc.set_clip_path(clip if isinstance(clip, TransformedPath) else None)
            renderer.open_group("bar-names", gid=self.get_gid())  # not dhir-: no titles
            canvas_height = renderer.get_canvas_width_height()[1]
            for (x, y), (_, _, text, color) in zip(points, self.labels, strict=True):
                gc.set_foreground(color)
                base = y - height / 2 + descent
                base = canvas_height - base if renderer.flipy() else base  # as Text.draw does
                renderer.draw_text(gc, x - width(text) / 2, base, text, prop, 0.0)
            renderer.close_group("bar-names")
            gc.restore()
            self.stale = False

    return _Labels


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
