"""Where an entry of a machine description file is written, for errors about it: the line
and column of a table (`[[nodes.devices]]`, a JSON object) or of one of its keys.

An entry is named by its path in the plain data: ("nodes", 0, "devices", 1) is the second
device of the first node. tomllib and json keep no positions, so the text is scanned
again (only when there is an error to report): TOML by its table headers and `key =`
lines, JSON by the objects its pure-Python scanner reads. What the scan cannot place
(inline tables, dotted keys) falls back to the nearest entry around it, else the file.
"""

import json
import json.decoder
import json.scanner
import re
from typing import Any

Entry = tuple[str | int, ...]
Position = tuple[int, int]  # line, column (from 1)

_HEADER = re.compile(r"\s*(\[\[?)\s*([A-Za-z0-9_\-.\"' ]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"\s*(\"[^\"]*\"|'[^']*'|[A-Za-z0-9_\-]+)\s*=")


class FileLines:
    """The positions of a description file's tables and keys."""

    def __init__(self, tables: dict[Entry, Position], keys: dict[tuple[Entry, str], Position]):
        self.tables = tables
        self.keys = keys

    def find(self, entry: Entry, key: str | None = None) -> Position | None:
        """Where `key` of `entry` is written, else `entry` itself, else the nearest
        entry that holds it; None when nothing of it is found."""
        if key is not None and (entry, key) in self.keys:
            return self.keys[entry, key]
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
            depth = max(_brackets(line[key.end() :]), 0)
    return FileLines(tables, keys)


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
        return FileLines({(): (1, 1)}, {})
    tables: dict[Entry, Position] = {}
    keys: dict[tuple[Entry, str], Position] = {}
    _walk_json(data, (), text, spans, tables, keys)
    tables.setdefault((), (1, 1))
    return FileLines(tables, keys)


def _walk_json(
    value: object,
    entry: Entry,
    text: str,
    spans: dict[int, tuple[int, int]],
    tables: dict[Entry, Position],
    keys: dict[tuple[Entry, str], Position],
) -> None:
    if isinstance(value, list):
        for index, item in enumerate(value):  # pyright: ignore[reportUnknownVariableType]
            _walk_json(item, (*entry, index), text, spans, tables, keys)
        return
    if not isinstance(value, dict) or id(value) not in spans:
        return
    start, end = spans[id(value)]
    tables[entry] = _position(text, start)
    inner = [spans[id(v)] for v in _nested(value) if id(v) in spans]
    for key in value:  # pyright: ignore[reportUnknownVariableType]
        found = _key_offset(text, str(key), start + 1, end, inner)  # pyright: ignore[reportUnknownArgumentType]
        if found is not None:
            keys[entry, str(key)] = _position(text, found)  # pyright: ignore[reportUnknownArgumentType]
    for key, item in value.items():  # pyright: ignore[reportUnknownVariableType]
        _walk_json(item, (*entry, str(key)), text, spans, tables, keys)  # pyright: ignore[reportUnknownArgumentType]


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
) -> int | None:
    """Where `"key":` is written between `start` and `end`, outside the nested objects."""
    pattern = re.compile(re.escape(json.dumps(key)) + r"\s*:")
    for match in pattern.finditer(text, start, end):
        if not any(low <= match.start() < high for low, high in inner):
            return match.start()
    return None


def _position(text: str, offset: int) -> Position:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1
