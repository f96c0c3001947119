"""Placement constraints a user declares (`--constraints FILE`, docs/commands.md):

    [[pin]]              # tasks whose name matches the glob run on a rank, node, device or kind
    tasks = "load*"
    rank = 2             # or: node = "n1" / device = "gpu0" / kind = "gpu"
    [[apart]]            # never on one rank
    tasks = ["solve0", "solve1"]
    [[together]]         # on one rank
    tasks = ["solve2", "load0"]

A glob matches a task's name as `dhir schedule` prints it, or that name without its
`.pieceK`, so a split task's pieces follow their task: a pin holds for each piece, and
the pieces of a task that one `apart` or `together` entry names stay on one rank (an
`apart` entry that names two pieces of one task is an error).

Placement honours them in two rounds (dhir-place): it places the program as if they were
not there, which says where each task would rather run; `settle` then picks, for every
constrained task, the rank nearest that wish that keeps every constraint (a search over
the constrained tasks, exact for the small sets people write), and the tasks are placed
again with those ranks fixed. The rest are placed by the chosen algorithm around them.
"""

import fnmatch
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from dhir.ir.diagnostics import (
    DhirError,
    Diagnostic,
    SourceLoc,
    as_written,
    decode_source,
    read_file,
)
from dhir.ir.file_lines import EntryError, did_you_mean, file_lines, locate

KINDS = ("cpu", "gpu")
_WHERE_KEYS = ("rank", "node", "device", "kind")
_PIECE = re.compile(r"\.piece[0-9]+$")
# How many partial choices `settle` tries before it gives up on a set of constraints.
SEARCH_LIMIT = 200_000


@dataclass(frozen=True)
class Pin:
    """Tasks matching one of `tasks` run where `key` = `value` says (rank, node, device,
    kind)."""

    tasks: tuple[str, ...]
    key: str
    value: str | int
    entry: str  # "[[pin]] #1", for errors


@dataclass(frozen=True)
class Group:
    """Tasks matching `tasks` run on one rank (`together`) or each on its own (`apart`)."""

    kind: str  # "apart" or "together"
    tasks: tuple[str, ...]
    entry: str


@dataclass(frozen=True)
class Constraints:
    pins: tuple[Pin, ...]
    groups: tuple[Group, ...]
    source: str  # the file they came from, for errors
    # The file's text, where they were read from it in this process: errors are at its
    # lines. None for those a module carries, whose file may be missing or another by now.
    text: str | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> str:
        """The form the module attribute `dhir.constraints` holds (read by `from_json`)."""
        data = asdict(self)
        del data["text"]
        return json.dumps(data)

    @staticmethod
    def from_json(text: str) -> "Constraints":
        """What `to_json` wrote, checked as a file's entries are (a module attribute may be
        written by hand); a ValueError saying what is wrong otherwise."""
        try:
            data = json.loads(text)
        except RecursionError:  # Python's reader recurses once per level
            raise ValueError("it is nested too deeply to read") from None
        if not isinstance(data, dict) or set(data) != {"pins", "groups", "source"}:
            raise ValueError('it must be {"pins": [...], "groups": [...], "source": "..."}')
        source = data["source"]
        pins, groups = data["pins"], data["groups"]
        if (
            not isinstance(source, str)
            or not isinstance(pins, list)
            or not isinstance(groups, list)
        ):
            raise ValueError('"source" must be a string, "pins" and "groups" lists')
        try:
            return Constraints(
                tuple(_pin_from_json(pin, source) for pin in pins),
                tuple(_group_from_json(group, source) for group in groups),
                source,
            )
        except DhirError as error:
            raise ValueError("; ".join(d.message for d in error.diagnostics)) from None


def _pin_from_json(pin: object, source: str) -> Pin:
    if not isinstance(pin, dict) or set(pin) != {"tasks", "key", "value", "entry"}:
        raise ValueError('a pin must be {"tasks": [...], "key": ..., "value": ..., "entry": ...}')
    key, entry = pin["key"], pin["entry"]
    if key not in _WHERE_KEYS or not isinstance(entry, str):
        raise ValueError(f"a pin's key must be one of {', '.join(_WHERE_KEYS)}, its entry a string")
    return _pin({"tasks": pin["tasks"], key: pin["value"]}, entry, source)


def _group_from_json(group: object, source: str) -> Group:
    if not isinstance(group, dict) or set(group) != {"kind", "tasks", "entry"}:
        raise ValueError('a group must be {"kind": ..., "tasks": [...], "entry": ...}')
    kind, entry = group["kind"], group["entry"]
    if kind not in ("apart", "together") or not isinstance(entry, str):
        raise ValueError("a group's kind must be apart or together, its entry a string")
    return _group(kind, {"tasks": group["tasks"]}, entry, source)


@dataclass(frozen=True)
class RankFacts:
    """What a pin can name about a rank."""

    node: str | None  # None: no machine description names nodes
    device: str  # "" when unnamed
    kind: str  # "cpu" or "gpu" (a rank that drives a GPU)


def read_constraints(path: Path) -> Constraints:
    """The constraints in `path` (.toml or .json), their form checked; an error in them is
    at its line in the file."""
    from dhir.machine.files import description_format, parse_json, parse_toml

    where = str(path)
    try:
        text = decode_source(read_file(path), where, bom=True)
    except OSError as error:
        raise _error(f"cannot read the constraints file {path}: {error.strerror}") from None
    try:
        json_format = description_format(path) == ".json"
    except DhirError:
        raise _error(f"{path}: a constraints file is a .toml or .json file") from None
    data = (parse_json if json_format else parse_toml)(text, where)
    try:
        return replace(constraints_from(data, where), text=text)
    except EntryError as error:
        raise locate(error, text, json_format) from None


_SECTIONS = ("pin", "apart", "together")


def constraints_from(data: object, source: str) -> Constraints:
    if not isinstance(data, dict):
        raise EntryError(source, "expected tables [[pin]], [[apart]] and [[together]]")
    unknown = sorted(set(data) - set(_SECTIONS))
    if unknown:
        raise EntryError(
            source,
            f"unknown section {', '.join(unknown)}{did_you_mean(unknown[0], _SECTIONS)}; "
            "the sections are [[pin]], [[apart]] and [[together]]",
            key=unknown[0],
        )
    pins = tuple(
        _pin(spec, f"[[pin]] #{k + 1}", source) for k, spec in enumerate(_list(data, "pin", source))
    )
    groups = tuple(
        _group(kind, spec, f"[[{kind}]] #{k + 1}", source)
        for kind in ("apart", "together")
        for k, spec in enumerate(_list(data, kind, source))
    )
    return Constraints(pins, groups, source)


_LABEL = re.compile(r"\[\[(\w+)\]\] #([0-9]+)$")


def entry_path(entry: str) -> tuple[str | int, ...]:
    """The path in the file's data of the entry called `entry` ("[[pin]] #2": ("pin", 1))."""
    found = _LABEL.match(entry)
    return () if found is None else (found[1], int(found[2]) - 1)


def _list(data: dict[str, object], key: str, source: str) -> list[object]:
    value = data.get(key, [])
    if not isinstance(value, list):
        message = f"'{key}' must be a list of tables ([[{key}]])"
        raise EntryError(source, message, key=key, at_value=True)
    return value


def _pin(spec: object, entry: str, source: str) -> Pin:
    table = _table(spec, entry, source, {"tasks", *_WHERE_KEYS})
    path = entry_path(entry)
    given = [key for key in _WHERE_KEYS if key in table]
    if len(given) > 1:
        message = f"{entry} gives {' and '.join(given)}; give only one of them"
        raise EntryError(source, message, path, given[1])
    if not given:
        raise EntryError(source, f"{entry} must give one of rank, node, device or kind", path)
    key = given[0]
    value = table[key]
    if key == "rank" and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        message = f"{entry}: rank must be a whole number >= 0, got {as_written(value)}"
        raise EntryError(source, message, path, key, at_value=True)
    if key != "rank" and not isinstance(value, str):
        message = f"{entry}: {key} must be a string, got {as_written(value)}"
        raise EntryError(source, message, path, key, at_value=True)
    if key == "kind" and value not in KINDS:
        kinds = ", ".join(KINDS)
        message = (
            f"{entry}: kind must be one of {kinds}, got {as_written(value)}"
            f"{did_you_mean(value, KINDS)}"
        )
        raise EntryError(source, message, path, key, at_value=True)
    assert isinstance(value, (str, int))
    return Pin(_globs(table, entry, source, 1), key, value, entry)


def _group(kind: str, spec: object, entry: str, source: str) -> Group:
    table = _table(spec, entry, source, {"tasks"})
    return Group(kind, _globs(table, entry, source, 1), entry)


def _table(spec: object, entry: str, source: str, keys: set[str]) -> dict[str, object]:
    path = entry_path(entry)
    if not isinstance(spec, dict):
        raise EntryError(source, f"{entry} must be a table", path)
    unknown = sorted(set(spec) - keys)
    if unknown:
        raise EntryError(
            source,
            f"{entry}: unknown key {', '.join(unknown)}{did_you_mean(unknown[0], sorted(keys))}; "
            f"it takes {', '.join(sorted(keys))}",
            path,
            unknown[0],
        )
    if "tasks" not in spec:
        raise EntryError(source, f'{entry} needs tasks = "GLOB" or a list of globs', path)
    return spec


def _globs(table: dict[str, object], entry: str, source: str, least: int) -> tuple[str, ...]:
    value = table["tasks"]
    globs = [value] if isinstance(value, str) else value
    path = entry_path(entry)
    if not isinstance(globs, list) or not all(isinstance(g, str) and g for g in globs):
        message = f"{entry}: tasks must be a glob or a list of globs"
        raise EntryError(source, message, path, "tasks", at_value=True)
    if len(globs) < least:
        message = f'{entry}: tasks is empty; give a glob or a list of globs (tasks = "load*")'
        raise EntryError(source, message, path, "tasks", at_value=True)
    return tuple(str(g) for g in globs)


# --- which tasks, which ranks --------------------------------------------------------


def base_name(name: str) -> str:
    """A piece's task name (`solve.piece2` -> `solve`); other names unchanged."""
    return _PIECE.sub("", name)


def matches(glob: str, name: str) -> bool:
    return fnmatch.fnmatchcase(name, glob) or fnmatch.fnmatchcase(base_name(name), glob)


def check_matches(constraints: Constraints, names: Sequence[str]) -> None:
    """A DhirError for a glob that matches no task of the program."""
    for entry, globs in [(p.entry, p.tasks) for p in constraints.pins] + [
        (g.entry, g.tasks) for g in constraints.groups
    ]:
        for glob in globs:
            if not any(matches(glob, name) for name in names):
                tasks = list(dict.fromkeys(map(base_name, names)))
                shown = ", ".join(tasks[:8]) + (", ..." if len(tasks) > 8 else "")
                message = (
                    f"{entry}: '{glob}' matches no task{did_you_mean(glob, tasks)}; the tasks "
                    f"are {shown} (the names dhir schedule prints)"
                )
                path = entry_path(entry)
                error = EntryError(constraints.source, message, path, "tasks", True, item=glob)
                raise in_file(error, constraints.text)


def check_apart_pieces(constraints: Constraints, names: Sequence[str]) -> None:
    """A DhirError for an `apart` entry that names a piece and another piece of its task:
    the pieces of a task one entry names share a rank, so it cannot keep them apart."""
    for group in constraints.groups:
        if group.kind != "apart":
            continue
        members = [n for n in names if any(matches(g, n) for g in group.tasks)]
        for named in (n for n in members if _names_piece(group, n)):
            other = next(
                (n for n in members if n != named and base_name(n) == base_name(named)), None
            )
            if other is not None:
                message = (
                    f"{group.entry} names {named} and {other}, pieces of the task "
                    f"{base_name(named)}; the pieces of a task one entry names share a rank, "
                    "so they cannot be apart (name whole tasks; dhir-split spreads a task's "
                    "pieces over the ranks itself)"
                )
                path = entry_path(group.entry)
                error = EntryError(constraints.source, message, path, "tasks", True)
                raise in_file(error, constraints.text)


def _names_piece(group: Group, name: str) -> bool:
    """Whether a glob of `group` matches the piece `name` by its own name, not its task's."""
    return base_name(name) != name and any(
        fnmatch.fnmatchcase(name, g) and not fnmatch.fnmatchcase(base_name(name), g)
        for g in group.tasks
    )


def pinned_ranks(pin: Pin, ranks: Sequence[RankFacts], constraints: Constraints) -> set[int]:
    """The ranks `pin`, of `constraints`, allows; a DhirError when it names what the
    machine does not have."""
    source, text = constraints.source, constraints.text
    if pin.key == "rank":
        assert isinstance(pin.value, int)
        if pin.value >= len(ranks):
            message = (
                f"{pin.entry}: rank {pin.value} does not exist; the program runs on "
                f"{len(ranks)} rank{'s' if len(ranks) != 1 else ''} (0..{len(ranks) - 1})"
            )
            raise in_file(EntryError(source, message, entry_path(pin.entry), "rank", True), text)
        return {pin.value}
    found = {r for r, facts in enumerate(ranks) if getattr(facts, pin.key) == pin.value}
    if not found:
        known = sorted({str(getattr(f, pin.key)) for f in ranks if getattr(f, pin.key)})
        hint = (
            "no machine description names them (give one with --system)"
            if not known
            else f"the ranks' {pin.key}s are {', '.join(known)}"
        )
        message = (
            f"{pin.entry}: no rank is on {pin.key} '{pin.value}'{did_you_mean(pin.value, known)}; "
            f"{hint}"
        )
        raise in_file(EntryError(source, message, entry_path(pin.entry), pin.key, True), text)
    return found


def violations(
    constraints: Constraints, names: Sequence[str], rank: Sequence[int], ranks: Sequence[RankFacts]
) -> list[str]:
    """How the ranks `rank` (task k's is `rank[k]`) break `constraints`: one line per
    broken entry, none when all hold (the simulator's check)."""
    check_apart_pieces(constraints, names)
    broken: list[str] = []
    for pin in constraints.pins:
        allowed = pinned_ranks(pin, ranks, constraints)
        off = [
            n
            for n, r in zip(names, rank)
            if any(matches(g, n) for g in pin.tasks) and r not in allowed
        ]
        if off:
            broken.append(f"{pin.entry}: {', '.join(off)} not on {pin.key} {pin.value}")
    for group in constraints.groups:
        members = [k for k, n in enumerate(names) if any(matches(g, n) for g in group.tasks)]
        by_task: dict[str, set[int]] = {}
        for k in members:
            by_task.setdefault(base_name(names[k]), set()).add(rank[k])
        used = [r for ranks_of in by_task.values() for r in ranks_of]
        if group.kind == "together" and len(set(used)) > 1:
            broken.append(f"{group.entry}: {', '.join(by_task)} on ranks {_ranks(set(used))}")
        if group.kind == "apart" and len(used) != len(set(used)):
            broken.append(f"{group.entry}: {', '.join(by_task)} share a rank")
    return broken


# --- settling the constraints --------------------------------------------------------


@dataclass
class _Unit:
    """Tasks that must share one rank: a task's pieces, or a `together` group."""

    members: list[int]
    allowed: set[int]
    entries: set[str]


def settle(
    constraints: Constraints,
    names: Sequence[str],
    runnable: Sequence[set[int]],
    fixed: Sequence[int | None],
    preferred: Sequence[int],
    ranks: Sequence[RankFacts],
) -> list[int | None]:
    """A rank for every task a constraint names (None for the others), the nearest to
    `preferred` (task k's rank when placed without the constraints) that keeps them all:
    task k may run on `runnable[k]`; `fixed[k]`: its `dhir.rank` in the IR. Where its
    preferred rank is not allowed, the allowed rank given fewest tasks so far. A DhirError
    names the entries that cannot all hold."""
    check_matches(constraints, names)
    check_apart_pieces(constraints, names)
    allowed = [set(r) if f is None else {f} & set(r) for r, f in zip(runnable, fixed)]
    pinned_by: dict[int, list[str]] = {}
    for pin in constraints.pins:
        where = pinned_ranks(pin, ranks, constraints)
        for k, name in enumerate(names):
            if any(matches(g, name) for g in pin.tasks):
                pinned_by.setdefault(k, []).append(pin.entry)
                allowed[k] &= where
                if not allowed[k]:
                    why = _refused(pinned_by[k], name, fixed[k], runnable[k])
                    raise _spanning(constraints, why, pinned_by[k])
    constrained = set(pinned_by)
    units, apart = _units(constraints, names, allowed, pinned_by)
    constrained.update(k for unit in units for k in unit.members)
    chosen: list[int | None] = [None] * len(names)
    load = [0] * len(ranks)
    for unit, rank in zip(units, _search(units, apart, preferred, constraints), strict=True):
        for k in unit.members:
            chosen[k] = rank
            load[rank] += 1
    for k in sorted(constrained - {k for unit in units for k in unit.members}):
        rank = _order(allowed[k], [k], preferred, load)[0]
        chosen[k] = rank
        load[rank] += 1
    return chosen


def _refused(entries: list[str], name: str, fixed: int | None, runnable: set[int]) -> str:
    if len(entries) > 1:
        why = f"{', '.join(entries)} leave it no rank in common"
    elif fixed is not None:
        why = f"{entries[0]} contradicts its dhir.rank = {fixed} in the program"
    else:
        plural = "s" if len(runnable) != 1 else ""
        why = (
            f"{entries[0]} names ranks its target cannot run on (it can run on "
            f"rank{plural} {_ranks(runnable)})"
        )
    task = base_name(name)  # the task the user wrote, not the piece split_tasks made
    named = task if task == name else f"{task} (piece {name})"
    return f"task {named} cannot be placed: {why}"


def _ranks(ranks: set[int]) -> str:
    return ", ".join(map(str, sorted(ranks))) or "none"


def _units(
    constraints: Constraints,
    names: Sequence[str],
    allowed: list[set[int]],
    pinned_by: dict[int, list[str]],
) -> tuple[list[_Unit], set[tuple[int, int]]]:
    """The units `together` and `apart` speak of (pieces of a task joined), and the pairs
    of units that must be apart."""
    parent = list(range(len(names)))

    def find(k: int) -> int:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    grouped: set[int] = set()
    entries_of: dict[int, set[str]] = {}
    apart_pairs: list[tuple[list[int], str]] = []
    for group in constraints.groups:
        members = [k for k, n in enumerate(names) if any(matches(g, n) for g in group.tasks)]
        grouped.update(members)
        first_of: dict[str, int] = {}
        for k in members:  # a task's pieces in one entry share a rank, as `violations` reads it
            entries_of.setdefault(k, set()).add(group.entry)
            parent[find(k)] = find(first_of.setdefault(base_name(names[k]), k))
        if group.kind == "together":
            for k in members[1:]:
                parent[find(k)] = find(members[0])
        else:
            apart_pairs.append((members, group.entry))
    by_root: dict[int, _Unit] = {}
    for k in sorted(grouped):
        unit = by_root.setdefault(find(k), _Unit([], set(allowed[k]), set()))
        unit.members.append(k)
        unit.allowed &= allowed[k]
        unit.entries |= entries_of.get(k, set()) | set(pinned_by.get(k, ()))
    units = list(by_root.values())
    index = {find(k): u for u, k in enumerate(by_root)}
    apart: set[tuple[int, int]] = set()
    for members, entry in apart_pairs:
        for a in members:
            for b in members:
                if base_name(names[a]) == base_name(names[b]) or a >= b:
                    continue
                ua, ub = index[find(a)], index[find(b)]
                if ua == ub:
                    message = (
                        f"{entry} asks {names[a]} and {names[b]} apart, but a [[together]] "
                        "entry puts them on one rank"
                    )
                    error = EntryError(constraints.source, message, entry_path(entry), "tasks")
                    raise in_file(error, constraints.text)
                apart.add((min(ua, ub), max(ua, ub)))
    for unit in units:
        if not unit.allowed:
            listed = ", ".join(sorted(unit.entries))
            shown = ", ".join(dict.fromkeys(base_name(names[k]) for k in unit.members))
            message = (
                f"{listed} cannot all hold: {shown} must share a rank, and no rank may run "
                "them all (their pins and targets allow none in common)"
            )
            raise _spanning(constraints, message, sorted(unit.entries))
    return units, apart


def _order(
    allowed: set[int], members: list[int], preferred: Sequence[int], load: Sequence[int]
) -> list[int]:
    """`allowed` ranks, best first: where most members would rather run, then the rank
    given fewest tasks, then the lower rank."""

    def score(rank: int) -> tuple[int, int, int]:
        return (-sum(1 for k in members if preferred[k] == rank), load[rank], rank)

    return sorted(allowed, key=score)


def _search(
    units: list[_Unit],
    apart: set[tuple[int, int]],
    preferred: Sequence[int],
    constraints: Constraints,
) -> list[int]:
    """A rank per unit, units in `apart` on different ranks: depth first, the most
    constrained unit first, each unit's ranks in `_order`."""
    neighbours: dict[int, set[int]] = {u: set() for u in range(len(units))}
    for a, b in apart:
        neighbours[a].add(b)
        neighbours[b].add(a)
    order = sorted(range(len(units)), key=lambda u: (len(units[u].allowed), -len(neighbours[u]), u))
    even = [0] * (max((r for u in units for r in u.allowed), default=0) + 1)
    choices = [_order(u.allowed, u.members, preferred, even) for u in units]
    chosen: dict[int, int] = {}
    tried = [0] * len(order)  # at each position, how many of its choices were tried
    position, steps = 0, 0
    while 0 <= position < len(order):
        unit = order[position]
        chosen.pop(unit, None)
        taken = {chosen[n] for n in neighbours[unit] if n in chosen}
        options = choices[unit]
        k = tried[position]
        while k < len(options) and options[k] in taken:
            k += 1
        steps += 1
        if steps > SEARCH_LIMIT:
            raise _error(
                f"{constraints.source}: could not settle the [[apart]] and [[together]] "
                f"entries within {SEARCH_LIMIT} steps; pin some of their tasks to ranks"
            )
        if k == len(options):  # none left here: back to the previous unit's next choice
            tried[position] = 0
            position -= 1
            continue
        chosen[unit] = options[k]
        tried[position] = k + 1
        position += 1
    if position < 0:
        entries = sorted({e for unit in units for e in unit.entries})
        message = (
            f"{', '.join(entries)} cannot all hold: the tasks asked apart need more ranks "
            "than their pins and targets leave them"
        )
        raise _spanning(constraints, message, entries)
    return [chosen[u] for u in range(len(units))]


def in_file(error: EntryError, text: str | None) -> DhirError:
    """`error`, about the constraints file it names, at its line in `text`, the file's
    text; for constraints a module carries (`text` None), the error as it is, without
    reading a file of that name: it may be missing where the module is used, or another."""
    if text is None:
        return error
    return locate(error, text, Path(error.where).suffix.lower() == ".json")


def _spanning(constraints: Constraints, message: str, entries: Sequence[str]) -> DhirError:
    """`message`, about `entries` of `constraints` taken together, at the line of the last
    of them in their file with a note at each other's line; the file's name alone for
    constraints a module carries (`in_file`)."""
    source, text = constraints.source, constraints.text
    plain = _error(f"{source}: {message}")
    if text is None:
        return plain
    lines = file_lines(text, Path(source).suffix.lower() == ".json")
    found = [(lines.find(entry_path(entry)), entry) for entry in entries]
    located = sorted((at, entry) for at, entry in found if at is not None)
    if not located:
        return plain
    *others, (last, _) = located
    notes = [Diagnostic(f"{entry} is here", SourceLoc(source, *at), "note") for at, entry in others]
    return DhirError([Diagnostic(message, SourceLoc(source, *last), notes=notes)], {source: text})


def _error(message: str) -> DhirError:
    return DhirError([Diagnostic(message)])
