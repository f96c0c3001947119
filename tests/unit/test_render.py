"""Pictures: Gantt charts (valid PNG and SVG files naming the tasks) and Graphviz DOT
(checked structurally: balanced, every task and edge there, names quoted safely)."""

import re
import shutil
import subprocess
import warnings
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

from dhir import DhirError
from dhir.placement.graph import Edge, Placement, TaskGraph
from dhir.placement.list_scheduling import heft
from dhir.placement.render import (
    Arrow,
    Span,
    _add_titles,
    _warnings_in_our_words,
    dot,
    gantt,
    quote,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def small_graph() -> TaskGraph:
    devices = ("cpu0", "gpu0")
    tasks = ("load", "a<b&c", "mul", "store")
    cost = {task: {"cpu0": 10.0, "gpu0": 12.0} for task in tasks}
    edges = (
        Edge("load", "a<b&c", 3.0),
        Edge("load", "mul", 30.0),
        Edge("a<b&c", "store", 1.0),
        Edge("mul", "store", 2.5),
    )
    return TaskGraph(devices, tasks, cost, edges)


# --- Gantt charts -----------------------------------------------------------------------


def test_gantt_png(tmp_path: Path) -> None:
    graph = small_graph()
    path = tmp_path / "chart.png"
    gantt(graph, heft(graph), path, title="heft")
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC)
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width > 100 and height > 100


def svg_text(path: Path) -> str:
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg")
    return " ".join(root.itertext())


def test_gantt_svg_names_every_task(tmp_path: Path) -> None:
    graph = small_graph()
    placement = heft(graph)
    path = tmp_path / "chart.svg"
    gantt(graph, placement, path, title="heft")
    text = svg_text(path)
    for name in (*graph.tasks, *graph.devices, "heft", f"makespan {placement.makespan:g}"):
        assert name in text


def test_gantt_svg_is_reproducible(tmp_path: Path) -> None:
    graph = small_graph()
    placement = heft(graph)
    gantt(graph, placement, tmp_path / "one.svg")
    gantt(graph, placement, tmp_path / "two.svg")
    assert (tmp_path / "one.svg").read_bytes() == (tmp_path / "two.svg").read_bytes()


def test_gantt_leaves_out_names_that_do_not_fit(tmp_path: Path) -> None:
    devices = ("d0",)
    tasks = ("long", "a_task_with_a_name_far_longer_than_its_bar")
    cost = {"long": {"d0": 100.0}, tasks[1]: {"d0": 0.5}}
    graph = TaskGraph(devices, tasks, cost, ())
    path = tmp_path / "chart.svg"
    gantt(graph, heft(graph), path)
    texts = [e.text for e in ET.parse(path).getroot().iter() if e.tag.endswith("text")]
    # On its bar and in the legend; the other only in the legend (and its hover title).
    assert texts.count("long") == 2
    assert texts.count(tasks[1]) == 1


def test_gantt_zero_length_tasks_and_empty_graphs(tmp_path: Path) -> None:
    graph = TaskGraph(("d0",), ("x", "y"), {"x": {"d0": 0.0}, "y": {"d0": 0.0}}, ())
    gantt(graph, heft(graph), tmp_path / "zero.png")
    empty = TaskGraph(("d0",), (), {}, ())
    gantt(empty, Placement({}, {}, {}), tmp_path / "empty.svg")
    assert (tmp_path / "zero.png").read_bytes().startswith(PNG_MAGIC)
    svg_text(tmp_path / "empty.svg")


def test_gantt_many_devices(tmp_path: Path) -> None:
    devices = tuple(f"d{k}" for k in range(200))
    tasks = tuple(f"t{k}" for k in range(400))
    graph = TaskGraph(devices, tasks, {t: {devices[k % 200]: 1.0} for k, t in enumerate(tasks)}, ())
    path = tmp_path / "wide.png"
    gantt(graph, heft(graph), path)
    assert path.read_bytes().startswith(PNG_MAGIC)


@pytest.mark.parametrize(
    ("name", "message"),
    [("chart.pdf", "name a .png or .svg file"), ("missing/chart.png", "cannot write")],
)
def test_gantt_bad_paths(tmp_path: Path, name: str, message: str) -> None:
    graph = small_graph()
    with pytest.raises(DhirError, match=message):
        gantt(graph, heft(graph), tmp_path / name)


def test_gantt_incomplete_placement(tmp_path: Path) -> None:
    graph = small_graph()
    with pytest.raises(DhirError, match="task 'load' no device"):
        gantt(graph, Placement({}, {}, {}), tmp_path / "chart.png")


def test_gantt_says_what_matplotlib_cannot_draw(tmp_path: Path) -> None:
    graph = TaskGraph(("d0",), ("x",), {"x": {"d0": 1.0}}, ())
    endless = Placement({"x": "d0"}, {"x": 0.0}, {"x": float("inf")})
    with pytest.raises(DhirError, match="cannot draw the Gantt chart .*chart.png: Axis limits"):
        gantt(graph, endless, tmp_path / "chart.png")


def test_gantt_of_no_devices_draws_without_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning of matplotlib's fails the test
        gantt(TaskGraph((), (), {}, ()), Placement({}, {}, {}), tmp_path / "empty.svg")
    assert "0 tasks on 0 devices" in svg_text(tmp_path / "empty.svg")
    assert capsys.readouterr().err == ""


def test_gantt_cuts_long_names_and_escapes_control_characters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    long, odd = "a" * 5000, "<b>&\x00"
    devices = ("d" * 300, "d1")
    cost = {long: {devices[0]: 1.0}, odd: {"d1": 2.0}}
    graph = TaskGraph(devices, (long, odd), cost, ())
    placement = Placement(
        {long: devices[0], odd: "d1"}, {long: 0.0, odd: 0.0}, {long: 1.0, odd: 2.0}
    )
    path = tmp_path / "chart.svg"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gantt(graph, placement, path, title="t" * 1000)
    text = svg_text(path)  # XML: no NUL in it
    assert "a" * 59 + "…" in text and "d" * 59 + "…" in text and "t" * 119 + "…" in text
    assert "<b>&\\x00" in text and "\x00" not in path.read_text()
    assert f"<title>{long} on {devices[0]}: " in path.read_text()  # hover titles: whole
    assert capsys.readouterr().err == ""


def test_matplotlibs_warnings_are_said_as_dhirs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with _warnings_in_our_words(tmp_path / "c.png"):
        warnings.warn("axes sizes collapsed to zero", UserWarning, stacklevel=1)
        warnings.warn("axes sizes collapsed to zero", UserWarning, stacklevel=1)
    err = capsys.readouterr().err
    assert err == f"warning: drawing {tmp_path / 'c.png'}: axes sizes collapsed to zero\n"


# --- DOT --------------------------------------------------------------------------------

# A DOT token: a quoted string (with backslash escapes), an arrow, a name or number, or
# one punctuation character.
TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|->|[A-Za-z_0-9.]+|[{}\[\];,=]')


def unquote(token: str) -> str:
    if not token.startswith('"'):
        return token
    return re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m[1], m[1]), token[1:-1], flags=re.S)


def parse_dot(text: str) -> tuple[dict[str, dict[str, str]], list[tuple[str, str, dict]]]:
    """A small DOT reader, enough for what `dot` writes: one statement per `;`, nodes as
    `ID [attrs]` and edges as `ID -> ID [attrs]`. Returns the nodes and edges, names and
    attribute values unquoted."""
    tokens = TOKEN.findall(text)
    assert not TOKEN.sub("", text).strip(), "text that is no DOT token"
    assert tokens[0] == "digraph" and tokens[2] == "{" and tokens[-1] == "}"
    depth = 0
    for token in tokens:
        depth += {"{": 1, "}": -1, "[": 1, "]": -1}.get(token, 0)
        assert depth >= 0
    assert depth == 0
    nodes: dict[str, dict[str, str]] = {}
    edges: list[tuple[str, str, dict]] = []
    statement: list[str] = []
    for token in tokens[3:-1]:
        if token != ";":
            statement.append(token)
            continue
        head, attributes = _split_attributes(statement)
        if len(head) == 3 and head[1] == "->":
            edges.append((unquote(head[0]), unquote(head[2]), attributes))
        elif len(head) == 1 and head[0] not in ("node", "edge", "graph"):
            nodes[unquote(head[0])] = attributes
        statement = []
    assert not statement
    return nodes, edges


def _split_attributes(statement: list[str]) -> tuple[list[str], dict[str, str]]:
    if "[" not in statement:
        return statement, {}
    at = statement.index("[")
    assert statement[-1] == "]"
    inner = [t for t in statement[at + 1 : -1] if t != ","]
    assert len(inner) % 3 == 0 and all(t == "=" for t in inner[1::3])
    return statement[:at], {inner[k]: unquote(inner[k + 2]) for k in range(0, len(inner), 3)}


def check_dot(graph: TaskGraph, text: str) -> tuple[dict[str, dict[str, str]], list]:
    nodes, edges = parse_dot(text)
    assert set(nodes) == set(graph.tasks)
    assert sorted((s, t) for s, t, _ in edges) == sorted((e.source, e.target) for e in graph.edges)
    return nodes, edges


def test_dot_of_a_placed_graph() -> None:
    graph = small_graph()
    placement = heft(graph)
    nodes, edges = check_dot(graph, dot(graph, placement))
    for task in graph.tasks:
        label = nodes[task]["label"]
        assert label.startswith(task) and f"on {placement.assignment[task]}" in label
    comms = {(e.source, e.target): e.comm for e in graph.edges}
    for source, target, attributes in edges:
        assert attributes["label"] == f"{comms[source, target]:g}"
        local = placement.assignment[source] == placement.assignment[target]
        assert (attributes.get("style") == "dashed") == local


def test_dot_of_an_unplaced_graph() -> None:
    graph = small_graph()
    nodes, _ = check_dot(graph, dot(graph))
    assert {nodes[t]["label"] for t in graph.tasks} == set(graph.tasks)


AWKWARD = ('say "hi"', "back\\slash", "ends with \\", "two\nlines", "{x -> y};", "ünïcødé")


def test_dot_quotes_any_name() -> None:
    cost = {task: {"d0": 1.0} for task in AWKWARD}
    edges = tuple(Edge(a, b, 1.0) for a, b in zip(AWKWARD, AWKWARD[1:]))
    graph = TaskGraph(("d0",), AWKWARD, cost, edges)
    check_dot(graph, dot(graph))
    check_dot(graph, dot(graph, heft(graph)))


@pytest.mark.parametrize("text", AWKWARD)
def test_quote_round_trips(text: str) -> None:
    assert unquote(quote(text)) == text


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
def test_graphviz_reads_the_dot(tmp_path: Path) -> None:
    graph = small_graph()
    result = subprocess.run(
        ["dot", "-Tsvg"], input=dot(graph, heft(graph)), capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_gantt_svg_has_units_titles_a_legend_and_messages(tmp_path: Path) -> None:
    """Times in ms (the chart lasts 40 ms), a <title> on every bar and arrow, pieces of one
    task in one colour under one legend entry."""
    devices = ("rank0", "rank1")
    tasks = ("load", "sweep.piece0", "sweep.piece1", "store")
    cost = {t: {d: 0.01 for d in devices} for t in tasks}
    graph = TaskGraph(devices, tasks, cost, ())
    placement = Placement(
        dict(zip(tasks, ("rank0", "rank0", "rank1", "rank0"))),
        dict(zip(tasks, (0.0, 0.01, 0.015, 0.03))),
        dict(zip(tasks, (0.01, 0.02, 0.025, 0.04))),
    )
    arrow = Arrow("load", "sweep.piece1", 0.01, 0.015, 4096)
    path = tmp_path / "chart.svg"
    gantt(graph, placement, path, arrows=[arrow], kind="as built")
    text = svg_text(path)
    assert "time (ms)" in text and "as built: makespan 40 ms" in text
    root = ET.parse(path).getroot()
    titles = [e.text for e in root.iter() if e.tag.endswith("title")]
    assert "sweep.piece1 on rank1: 15 ms to 25 ms" in titles
    assert "4096 bytes from load to sweep.piece1: 10 ms to 15 ms" in titles
    assert sum(t is not None and " on rank" in t for t in titles) == len(tasks)
    legend = [name for name in ("load", "sweep", "store") if name in text.split()]
    assert legend == ["load", "sweep", "store"]


def test_a_chart_of_many_bars_is_not_autoscaled_per_bar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Autoscaling walks every artist drawn so far; after each bar, that made a chart of
    n bars cost n^2 (a trace of a 20,000-step time loop has 80,000 bars). The chart sets
    its limits itself: they still span every bar."""
    from matplotlib.axes import Axes

    walked: list[int] = []
    children = Axes._get_data_children  # pyright: ignore[reportAttributeAccessIssue]

    def counted(self: Axes) -> list[object]:
        found = children(self)
        walked.append(len(found))
        return found

    monkeypatch.setattr(Axes, "_get_data_children", counted)
    tasks = tuple(f"step.piece{k % 2} #{k}" for k in range(300))
    devices = ("rank0", "rank1")
    graph = TaskGraph(devices, tasks, {t: {d: 1.0 for d in devices} for t in tasks}, ())
    placement = Placement(
        {t: devices[k % 2] for k, t in enumerate(tasks)},
        {t: k * 0.5 for k, t in enumerate(tasks)},
        {t: k * 0.5 + 0.4 for k, t in enumerate(tasks)},
    )
    path = tmp_path / "chart.svg"
    gantt(graph, placement, path)
    assert sum(walked) < 10 * len(tasks)  # 92,098 when autoscaled per bar
    root = ET.parse(path).getroot()
    titles = [e.text for e in root.iter() if e.tag.endswith("title")]
    assert "step.piece1 #299 on rank1: 149.5 s to 149.9 s" in titles


def test_titles_of_many_bars_land_on_each_ids_first_group(tmp_path: Path) -> None:
    """Each shape of each id's first group gets its title, in order; other groups stay as
    they were. (The pass that adds them was once a search of the whole SVG per bar: 40 s
    for these 4,000.)"""
    groups_of, shapes = 2000, 2
    path = "M 0 0 L 1 1 " * 80
    shape = f'<path d="{path}" style="fill: #ff0000"/>'
    groups = "".join(f'<g id="dhir-bars-{k}">{shape * shapes}</g>' for k in range(groups_of))
    svg = tmp_path / "chart.svg"
    svg.write_text(f'<svg><g id="axes_1">{groups}<g id="dhir-bars-0">{shape}</g></g></svg>')
    _add_titles(
        svg, {f"dhir-bars-{k}": [f"t{k}.{j} <&>" for j in range(shapes)] for k in range(groups_of)}
    )
    root = ET.parse(svg).getroot()
    groups_seen = [g for g in root.iter() if g.get("id", "").startswith("dhir-bars-")]
    got = [[p.findtext("title") for p in g] for g in groups_seen]
    want = [[f"t{k}.{j} <&>" for j in range(shapes)] for k in range(groups_of)]
    assert got == [*want, [None]]


def test_gantt_of_a_program_is_drawn_as_built_unless_the_plan_is_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dhir.cli.main import main

    program = str(Path(__file__).parents[2] / "examples" / "hazards.mlir")
    built, plan = tmp_path / "built.svg", tmp_path / "plan.svg"
    placed = ["-n", "2", "--placement", "round-robin"]
    assert main(["schedule", program, *placed, "--gantt", str(built)]) == 0
    assert main(["schedule", program, *placed, "--gantt", str(plan), "--gantt-plan"]) == 0
    capsys.readouterr()
    assert "as built: makespan" in svg_text(built) and "plan: makespan" in svg_text(plan)
    assert "bytes from t0 to t1" in built.read_text()  # t1 runs on rank 1


def test_a_chart_draws_a_collection_per_row_and_every_arrow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An artist per bar cost 1.5 ms of CPU (80,000 bars: 116 s) and an annotation per
    arrow 3 ms, so only the first 2,000 arrows were drawn, silently. Now each row's bars
    are one collection, its ticks another, the arrows one; each still has its SVG title."""
    from matplotlib.axes import Axes

    calls: Counter[str] = Counter()
    for name in ("broken_barh", "vlines", "quiver", "annotate", "arrow"):
        original = getattr(Axes, name)

        def counted(self: Axes, *args: object, _name: str = name, _f=original, **kw: object):
            calls[_name] += 1
            return _f(self, *args, **kw)

        monkeypatch.setattr(Axes, name, counted)
    devices = ("rank0", "rank1", "rank2")
    tasks = tuple(f"step #{k}" for k in range(600))
    graph = TaskGraph(devices, tasks, {t: {d: 1.0 for d in devices} for t in tasks}, ())
    placement = Placement(
        {t: devices[k % 3] for k, t in enumerate(tasks)},
        {t: k * 1.0 for k, t in enumerate(tasks)},
        {t: k * 1.0 + (0.0 if k % 5 == 0 else 0.5) for k, t in enumerate(tasks)},
    )
    arrows = [
        Arrow(tasks[k % 599], tasks[k % 599 + 1], k % 599 + 0.5, k % 599 + 1.0, k)
        for k in range(2500)
    ]
    path = tmp_path / "chart.svg"
    gantt(graph, placement, path, arrows=arrows)
    assert calls == {"broken_barh": 3, "vlines": 3, "quiver": 1, "annotate": 1}  # the makespan's
    root = ET.parse(path).getroot()
    titles = [e.text or "" for e in root.iter() if e.tag.endswith("title")]
    assert sum(" on rank" in t for t in titles) == len(tasks)
    assert sum(" bytes from " in t for t in titles) == len(arrows)
    assert "2499 bytes from step #103 to step #104: 103.5 s to 104 s" in titles
    assert "step #595 on rank1: 595 s to 595 s" in titles  # a tick


def test_an_arrow_is_never_drawn_backwards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A trace dhir wrote before 2026-11-30 joined a message's send and receive at their
    middles, which for a receive posted early is before the send's: drawn as recorded,
    the arrow pointed back in time. Its head is at its tail's time at the earliest."""
    from matplotlib.axes import Axes
    from matplotlib.quiver import Quiver

    drawn: list[Quiver] = []
    quiver = Axes.quiver

    def kept(self: Axes, *args: object, **kw: object) -> Quiver:
        drawn.append(quiver(self, *args, **kw))
        return drawn[-1]

    monkeypatch.setattr(Axes, "quiver", kept)
    devices = ("rank0", "rank1")
    tasks = ("a", "b")
    graph = TaskGraph(devices, tasks, {t: {d: 1.0 for d in devices} for t in tasks}, ())
    placement = Placement(dict(zip(tasks, devices)), {"a": 0.0, "b": 0.0}, {"a": 2.0, "b": 2.0})
    backwards = Arrow("rank0", "rank1", 1.05, 0.6, 8, "rank0", "rank1")
    forwards = Arrow("rank0", "rank1", 0.5, 1.5, 8, "rank0", "rank1")
    gantt(graph, placement, tmp_path / "chart.svg", arrows=[backwards, forwards])
    (arrows,) = drawn
    tails = [float(x) for x in arrows.X]
    lengths = [float(u) for u in arrows.U]
    assert tails == [1.05, 0.5] and lengths[0] >= 0.0 and lengths[1] == 1.0
    assert "8 bytes from rank0 to rank1: 1.05 s to 0.6 s" in (tmp_path / "chart.svg").read_text()


def test_bar_names_are_one_artist_not_a_text_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Text artist per name measured and laid out each on every draw (4,000 names: 6.9 s
    of CPU). The names are one artist now; each is still in the SVG, and a
    `$` in a name is drawn as written, not as mathtext."""
    from matplotlib.axes import Axes

    texts: list[object] = []
    original = Axes.text

    def counted(self: Axes, *args: object, **kw: object):  # pyright: ignore[reportMissingParameterType]
        texts.append(args)
        return original(self, *args, **kw)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(Axes, "text", counted)
    devices = tuple(f"rank{r}" for r in range(20))
    tasks = tuple(f"t{k}$x$" for k in range(200))
    graph = TaskGraph(devices, tasks, {t: {d: 1.0 for d in devices} for t in tasks}, ())
    placement = Placement(
        {t: devices[k % 20] for k, t in enumerate(tasks)},
        {t: (k // 20) * 1.0 for k, t in enumerate(tasks)},
        {t: (k // 20) * 1.0 + 0.9 for k, t in enumerate(tasks)},
    )
    path = tmp_path / "chart.svg"
    gantt(graph, placement, path)
    assert texts == []
    root = ET.parse(path).getroot()
    drawn = [e for e in root.iter() if e.tag.endswith("text") and (e.text or "").endswith("$x$")]
    assert sorted(e.text for e in drawn) == sorted(tasks)
    gantt(graph, placement, tmp_path / "chart.png")
    assert (tmp_path / "chart.png").read_bytes().startswith(PNG_MAGIC)


def _drawn_xlim(monkeypatch: pytest.MonkeyPatch) -> list[tuple[float, float]]:
    """The time axis of each chart drawn from now on, as it was saved."""
    from matplotlib.figure import Figure

    limits: list[tuple[float, float]] = []
    save = Figure.savefig

    def saving(figure: Figure, *args: object, **kwargs: object) -> None:
        limits.append(figure.axes[0].get_xlim())
        save(figure, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Figure, "savefig", saving)
    return limits


def _a_run() -> tuple[TaskGraph, Placement, list[Arrow], list[Span]]:
    """Tasks of 5 us each after 150 ms of reading inputs, as a recorded run has them."""
    devices = ("rank0", "rank1")
    tasks = ("a", "b")
    graph = TaskGraph(devices, tasks, {t: {d: 5e-6 for d in devices} for t in tasks}, ())
    placement = Placement(
        {"a": "rank0", "b": "rank1"}, {"a": 0.15, "b": 0.150010}, {"a": 0.150005, "b": 0.150015}
    )
    arrows = [Arrow("a", "b", 0.150005, 0.150010, 8, "rank0", "rank1")]
    spans = [Span("rank0", 0.0, 0.1, "read input #0"), Span("rank1", 0.0, 0.149, "read input #1")]
    return graph, placement, arrows, spans


def test_a_zoomed_chart_shows_the_tasks_not_the_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tasks of microseconds after 150 ms of reading were drawn on an axis from 0: a pixel
    wide, invisible. Zoomed, the axis spans the tasks and messages (2% either side)."""
    graph, placement, arrows, spans = _a_run()
    limits = _drawn_xlim(monkeypatch)
    path = tmp_path / "chart.svg"
    gantt(graph, placement, path, arrows=arrows, kind="as run", spans=spans, zoom=True)
    low, high = limits[0]  # in ms, the run's unit
    assert 149.999 < low < 150.0 < 150.015 < high < 150.0155
    assert "(showing 150 ms to 150.02 ms)" in svg_text(path)
    gantt(graph, placement, tmp_path / "whole.png", arrows=arrows, spans=spans)
    assert limits[1] == (0.0, pytest.approx(150.015 * 1.02))


def test_io_spans_are_drawn_with_titles_and_a_legend(tmp_path: Path) -> None:
    """A recorded run's input reads and result writes were left out of the chart."""
    graph, placement, arrows, spans = _a_run()
    path = tmp_path / "chart.svg"
    gantt(graph, placement, path, arrows=arrows, kind="as run", spans=spans)
    root = ET.parse(path).getroot()
    groups = {e.get("id"): e for e in root.iter() if e.get("id", "").startswith("dhir-io-")}
    assert set(groups) == {"dhir-io-0", "dhir-io-1"}
    titles = [e.text for e in root.iter() if e.tag.endswith("title")]
    assert "read input #1 on rank1: 0 ms to 149 ms" in titles
    text = svg_text(path)
    assert "I/O (inputs, results)" in text
    assert text.count("read input #1") == 2  # its title, and its name on its bar
