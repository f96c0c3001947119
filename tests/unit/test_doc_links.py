"""README.md and docs/*.md point at what is there: each relative link at a file, and at a
heading of it where the link names one; each DHIR_* variable the code reads is described."""

import re
from pathlib import Path

import pytest

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
