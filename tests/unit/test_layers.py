"""Imports point down the pipeline: dialects/ir -> analysis -> machine -> placement ->
transforms -> toolchain -> backends -> runner/cli. Checked two ways: statically (every
`import` in dhir/, function-local ones included) and by importing each layer's modules in
a fresh interpreter, which must load no module of a higher layer."""

import ast
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "dhir"

# Module name prefixes by layer, lowest first.
LAYERS: list[tuple[str, ...]] = [
    (
        "dhir.lazy",
        "dhir.version",
        "dhir.choices",
        "dhir.units",
        "dhir.install",
        "dhir.targets",
        "dhir.dialects",
        "dhir.ir",
        "dhir.context",
        "dhir.runtime",
    ),
    ("dhir.analysis",),
    ("dhir.machine",),
    ("dhir.placement",),
    ("dhir.transforms", "dhir.api"),
    ("dhir.toolchain",),
    ("dhir.backends",),
    ("dhir.runner", "dhir.cli", "dhir.__main__"),
]


def layer_of(module: str) -> int | None:
    for number, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return number
    return None  # the package itself: imports nothing eagerly


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(module: str, path: Path) -> set[str]:
    """The dhir modules `module` imports anywhere in its text."""
    names: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    known = modules()
    return {name for name in names if name in known and name != module}


def test_every_module_has_a_layer() -> None:
    unplaced = [m for m in modules() if m != "dhir" and layer_of(m) is None]
    assert unplaced == []


def test_no_import_runs_up_the_layers() -> None:
    upward = []
    for module, path in modules().items():
        own = layer_of(module)
        for target in imports(module, path):
            theirs = layer_of(target)
            if own is not None and theirs is not None and theirs > own:
                upward.append(f"{module} -> {target}")
    assert upward == []


def test_no_import_cycle_spans_two_folders() -> None:
    graph = {module: imports(module, path) for module, path in modules().items()}
    for component in _cycles(graph):
        folders = {module.rpartition(".")[0] for module in component}
        assert len(folders) == 1, f"an import cycle spans {sorted(folders)}: {sorted(component)}"


@pytest.mark.parametrize("number", range(len(LAYERS)))
def test_a_layer_loads_no_module_of_a_higher_one(number: int) -> None:
    # Importing dhir.__main__ would run the command line.
    own = [m for m in modules() if layer_of(m) == number and m != "dhir.__main__"]
    higher = [p for prefixes in LAYERS[number + 1 :] for p in prefixes]
    script = (
        "import importlib, sys\n"
        f"for name in {own!r}:\n"
        "    importlib.import_module(name)\n"
        f"higher = {higher!r}\n"
        "print('\\n'.join(sorted(m for m in sys.modules\n"
        "    if any(m == p or m.startswith(p + '.') for p in higher))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == []


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_cycle_finder_finds_a_cycle() -> None:
    graph = {"a.x": {"b.y"}, "b.y": {"a.x"}, "c.z": {"a.x"}}
    assert _cycles(graph) == [{"a.x", "b.y"}]
    graph = defaultdict(set, {"a.x": {"b.y"}})
    assert _cycles(graph) == []


def test_the_readme_s_layout_names_every_module_of_the_layers() -> None:
    """README.md's Layout left out dhir/version.py and dhir/choices.py."""
    readme = (PACKAGE.parent / "README.md").read_text()
    layout = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^      (\w+)(?:\.py|/)\s", layout, re.MULTILINE))
    top = {prefix.split(".")[1] for layer in LAYERS for prefix in layer}
    assert sorted(top - listed - {"__main__"}) == []


def _layout_entries() -> dict[str, str]:
    """README.md's Layout: each entry (`dhir/`, `  lazy.py`, `tests/unit`) with its text,
    the continuation lines joined."""
    readme = (PACKAGE.parent / "README.md").read_text()
    layout = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    entries: dict[str, str] = {}
    name = ""
    for line in layout.splitlines():
        entry = re.match(r"^    (?:  )?(\S+)(?:\s+(.*))?$", line)
        if entry is not None and not line.startswith(" " * 8 + " " * 12):
            prefix = "dhir/" if line.startswith("      ") else ""
            name = prefix + entry[1].removesuffix("/")
            entries[name] = entry[2] or ""
        elif name and line.strip():
            entries[name] += " " + line.strip()
    return entries


def test_what_the_readme_s_layout_names_is_there() -> None:
    """The Layout checked only that each module of the layers is listed: an entry, or a
    file an entry names (`bounds.py` under analysis/), stayed listed after it was gone."""
    root = PACKAGE.parent
    entries = _layout_entries()
    assert {"dhir", "dhir/transforms", "dhir/runner.py", "tests/unit"} <= set(entries)
    missing = [name for name in entries if not (root / name).exists()]
    for name, text in entries.items():
        if (root / name).is_dir():
            files = {path.name for path in (root / name).rglob("*")}
            missing += [f"{name}: {f}" for f in re.findall(r"\b\w+\.py\b", text) if f not in files]
    assert not missing, f"README.md's Layout names what is not there: {missing}"
