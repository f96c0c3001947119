"""Where an entry of a TOML or JSON input file (--system, --constraints, --costs, --graph)
is written, for errors about it: the line and column of a table (`[[nodes.devices]]`, a
JSON object), of one of its keys or of that key's value.

An entry is named by its path in the plain data: ("nodes", 0, "devices", 1) is the second
device of the first node. tomllib and json keep no positions, so the text is scanned
again (only when there is an error to report): TOML by its table headers and `key =`
lines, JSON by the objects its pure-Python scanner reads. What the scan cannot place
(inline tables, dotted keys) falls back to the nearest entry around it, else the file.
"""

import difflib
import json
import json.decoder
import json.scanner
import re
from collections.abc import Iterable
from typing import Any

from dhir.ir.diagnostics import DhirError, Diagnostic, SourceLoc

Entry = tuple[str | int, ...]
Position = tuple[int, int]  # line, column (from 1)


class EntryError(DhirError):
    """A problem in the content of the TOML or JSON file `where`: `message` about `key`
    (its value when `at_value`) of the entry at `entry`. It names the file alone until the
    file's reader, which has its text, gives it a line with `locate`; until then it says
    `alone` (default: "WHERE: MESSAGE")."""

    def __init__(
        self,
        where: str,
        message: str,
        entry: Entry = (),
        key: str | None = None,
        at_value: bool = False,
        alone: str | None = None,
        item: str | None = None,
    ) -> None:
        self.where = where
        self.message = message
        self.entry = entry
        self.key = key
        self.at_value = at_value
        self.item = item  # the string in a list value at fault, where one is
        super().__init__([Diagnostic(alone or f"{where}: {message}")])


def locate(error: EntryError, text: str, json_format: bool) -> DhirError:
    """`error` at the line and column of its entry in `text`, the file's text, with the
    line quoted; as it was where the entry cannot be found, or it is of the whole file."""
    if not error.entry and error.key is None:
        return error
    found = file_lines(text, json_format).find(error.entry, error.key, error.at_value)
    if found is None:
        return error
    if error.item is not None:
        found = _item(text, found, error.item)
    loc = SourceLoc(error.where, *found)
    return DhirError([Diagnostic(error.message, loc)], {error.where: text})


def _item(text: str, value: Position, item: str) -> Position:
    """Where the string `item` is written in the list value at `value`, on its line; else
    the value."""
    line = text.splitlines()[value[0] - 1]
    for quoted in (json.dumps(item, ensure_ascii=False), f"'{item}'"):
        column = line.find(quoted, value[1] - 1)
        if column >= 0:
            return value[0], column + 1
    return value


def did_you_mean(word: object, known: Iterable[str]) -> str:
    """The hint " (did you mean 'x'?)", x the known word nearest a misspelt `word`; else ""."""
    if not isinstance(word, str):
        return ""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


_HEADER = re.compile(r"\s*(\[\[?)\s*([A-Za-z0-9_\-.\"' ]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"\s*(\"[^\"]*\"|'[^']*'|[A-Za-z0-9_\-]+)\s*=")


class FileLines:
    """The positions of a description file's tables and keys."""

    def __init__(
        self,
        tables: dict[Entry, Position],
        keys: dict[tuple[Entry, str], Position],
        values: dict[tuple[Entry, str], Position],
    ):
        self.tables = tables
        self.keys = keys
        self.values = values

    def find(self, entry: Entry, key: str | None = None, at_value: bool = False) -> Position | None:
        """Where `key` of `entry` (its value, when `at_value`) is written, else `entry`
        itself, else the nearest entry that holds it; None when nothing of it is found."""
        if key is not None and at_value and (entry, key) in self.values:
            return self.values[entry, key]
        if key is not None and (entry, key) in self.keys:
            return self.keys[entry, key]
        for table in [(*entry, key), (*entry, key, 0)] if key is not None else []:
            if table in self.tables:  # a key given as a table: `[key]`, `[[key]]`
                return self.tables[table]
        for end in range(len(entry), 0, -1):
            found = self.tables.get(entry[:end])
            if found is not None:
                return found
            if isinstance(entry[end - 1], str) and (entry[: end - 1], str(entry[end - 1])) in (
                self.keys
            ):
                return self.keys[entry[: end - 1], str(entry[end - 1])]
        return None


def file_lines(text: str, json_format: bool) -> FileLines:
    return _json_lines(text) if json_format else _toml_lines(text)


def device_entry(data: object, name: str) -> Entry | None:
    """The path of the device called `name` in a description's plain data."""
    nodes = data.get("nodes") if isinstance(data, dict) else None
    for n, node in enumerate(nodes if isinstance(nodes, list) else []):
        devices = node.get("devices") if isinstance(node, dict) else None
        for d, device in enumerate(devices if isinstance(devices, list) else []):
            if isinstance(device, dict) and device.get("name") == name:
                return ("nodes", n, "devices", d)
    return None


def _toml_lines(text: str) -> FileLines:
    tables: dict[Entry, Position] = {(): (1, 1)}
    keys: dict[tuple[Entry, str], Position] = {}
    values: dict[tuple[Entry, str], Position] = {}
    counts: dict[Entry, int] = {}  # arrays of tables: how many elements so far
    current: Entry = ()
    depth = 0  # brackets a multi-line value left open
    for number, line in enumerate(text.splitlines(), start=1):
        if depth > 0:
            depth += _brackets(line)
            continue
        header = _HEADER.match(line)
        if header is not None:
            current = _table_path(header.group(2), header.group(1) == "[[", counts)
            tables.setdefault(current, (number, line.index("[") + 1))
            continue
        key = _KEY.match(line)
        if key is not None:
            name = key.group(1).strip("\"'")
            keys.setdefault((current, name), (number, key.start(1) + 1))
            value = len(line) - len(line[key.end() :].lstrip())
            values.setdefault((current, name), (number, min(value, len(line) - 1) + 1))
            depth = max(_brackets(line[key.end() :]), 0)
    return FileLines(tables, keys, values)


def _table_path(header: str, array: bool, counts: dict[Entry, int]) -> Entry:
    """A header's entry: each part an element of the array of tables of that name, where
    there is one (the last element so far), and a new element for `[[...]]`."""
    path: Entry = ()
    parts = [p.strip().strip("\"'") for p in header.split(".")]
    for part in parts[:-1]:
        path += (part,)
        if path in counts:
            path += (counts[path] - 1,)
    path += (parts[-1],)
    if not array:
        return path
    counts[path] = counts.get(path, 0) + 1
    return (*path, counts[path] - 1)


def _brackets(text: str) -> int:
    """Brackets `text` opens and does not close (strings in descriptions are plain names)."""
    code = text.split("#", 1)[0]
    return code.count("[") + code.count("{") - code.count("]") - code.count("}")


def _json_lines(text: str) -> FileLines:
    spans: dict[int, tuple[int, int]] = {}  # id of each object read -> its start and end
    decoder = json.JSONDecoder()

    def parse_object(state: tuple[str, int], *rest: Any) -> tuple[Any, int]:
        found, end = json.decoder.JSONObject(state, *rest)  # pyright: ignore[reportAttributeAccessIssue]
        spans[id(found)] = (state[1] - 1, end)
        return found, end

    decoder.parse_object = parse_object  # pyright: ignore[reportAttributeAccessIssue]
    # The pure-Python scanner: the C one does not call parse_object.
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # pyright: ignore[reportAttributeAccessIssue]
    try:
        data = decoder.decode(text)
    except ValueError:
        return FileLines({(): (1, 1)}, {}, {})
    tables: dict[Entry, Position] = {}
    keys: dict[tuple[Entry, str], Position] = {}
    values: dict[tuple[Entry, str], Position] = {}
    _walk_json(data, (), text, spans, tables, (keys, values))
    tables.setdefault((), (1, 1))
    return FileLines(tables, keys, values)


def json_duplicate(text: str) -> tuple[str, Position] | None:
    """The first key given twice in one object of the JSON `text` (which Python's reader,
    as most, takes silently: the last value wins), and where its second is written."""
    spans: list[tuple[int, int]] = []  # the objects read so far: inner ones end first
    found: list[tuple[str, Position]] = []
    decoder = json.JSONDecoder(object_pairs_hook=lambda pairs: pairs)

    def parse_object(state: tuple[str, int], *rest: Any) -> tuple[Any, int]:
        pairs, end = json.decoder.JSONObject(state, *rest)  # pyright: ignore[reportAttributeAccessIssue]
        start = state[1] - 1
        inner = [(low, high) for low, high in spans if start < low and high <= end]
        spans.append((start, end))
        keys = [key for key, _ in pairs]
        twice = next((key for k, key in enumerate(keys) if key in keys[:k]), None)
        if twice is not None and not found:
            offsets = _key_offsets(text, twice, start + 1, end, inner)
            offset = offsets[1][0] if len(offsets) > 1 else start
            found.append((twice, _position(text, offset)))
        return pairs, end

    decoder.parse_object = parse_object  # pyright: ignore[reportAttributeAccessIssue]
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # pyright: ignore[reportAttributeAccessIssue]
    try:
        decoder.decode(text)
    except (ValueError, RecursionError):
        return None
    return found[0] if found else None


def _walk_json(
    value: object,
    entry: Entry,
    text: str,
    spans: dict[int, tuple[int, int]],
    tables: dict[Entry, Position],
    places: tuple[dict[tuple[Entry, str], Position], dict[tuple[Entry, str], Position]],
) -> None:
    """Records the positions of the objects in `value`, and of their keys and values."""
    keys, values = places
    if isinstance(value, list):
        for index, item in enumerate(value):  # pyright: ignore[reportUnknownVariableType]
            _walk_json(item, (*entry, index), text, spans, tables, places)
        return
    if not isinstance(value, dict) or id(value) not in spans:
        return
    start, end = spans[id(value)]
    tables[entry] = _position(text, start)
    inner = [spans[id(v)] for v in _nested(value) if id(v) in spans]
    for key in value:  # pyright: ignore[reportUnknownVariableType]
        found = _key_offset(text, str(key), start + 1, end, inner)  # pyright: ignore[reportUnknownArgumentType]
        if found is not None:
            keys[entry, str(key)] = _position(text, found[0])  # pyright: ignore[reportUnknownArgumentType]
            values[entry, str(key)] = _position(text, found[1])  # pyright: ignore[reportUnknownArgumentType]
    for key, item in value.items():  # pyright: ignore[reportUnknownVariableType]
        _walk_json(item, (*entry, str(key)), text, spans, tables, places)  # pyright: ignore[reportUnknownArgumentType]


def _nested(value: object) -> list[object]:
    """The objects within `value`, at any depth."""
    found: list[object] = []
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for item in items:  # pyright: ignore[reportUnknownVariableType]
        if isinstance(item, dict):
            found.append(item)  # pyright: ignore[reportUnknownArgumentType]
        found += _nested(item)  # pyright: ignore[reportUnknownArgumentType]
    return found


def _key_offset(
    text: str, key: str, start: int, end: int, inner: list[tuple[int, int]]
) -> tuple[int, int] | None:
    """Where `"key":` is written between `start` and `end`, outside the nested objects,
    and where its value starts."""
    found = _key_offsets(text, key, start, end, inner)
    return found[0] if found else None


def _key_offsets(
    text: str, key: str, start: int, end: int, inner: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    """Where each `"key":` is written between `start` and `end`, outside the nested
    objects, and where its value starts."""
    pattern = re.compile(re.escape(json.dumps(key, ensure_ascii=False)) + r"\s*:\s*")
    return [
        (match.start(), match.end())
        for match in pattern.finditer(text, start, end)
        if not any(low <= match.start() < high for low, high in inner)
    ]


def _position(text: str, offset: int) -> Position:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1
