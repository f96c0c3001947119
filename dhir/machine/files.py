"""Machine descriptions in files: TOML or JSON, one structure (see docs/machine.md).

    name = "cluster"
    [links.network]            # node <-> node
    latency_us = 2.0
    bandwidth_gbs = 12.5
    [[nodes]]
    name = "node0"
    [[nodes.devices]]
    name = "cpu0"
    arch = "x86_64"
    cores = 64
    ...

Values left out are filled with typical values and listed in the device's `guessed` (links:
`guessed = true`); the writers write every value, so a written file reads back equal.
"""

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from dhir.choices import MAX_RANKS
from dhir.ir.diagnostics import (
    DhirError,
    Diagnostic,
    SourceLoc,
    as_written,
    decode_source,
    parse_json,
    parse_toml,
    read_file,
)
from dhir.ir.file_lines import Entry, device_entry, did_you_mean, file_lines
from dhir.machine.description import (
    CACHE_SIZES,
    CORE_FIELDS,
    CORE_RATES,
    CURVE_RULE,
    GUESSED_INTRA_NODE,
    GUESSED_NETWORK,
    DescriptionError,
    Device,
    Link,
    Node,
    System,
    check_field,
    guess_device,
)
from dhir.targets import DeviceKind, UnknownArchError, kind_of_arch

FORMATS = (".toml", ".json")
_TOP_KEYS = ("name", "links", "nodes")
_LINKS_KEYS = ("network", "intra_node")
_LINK_KEYS = ("latency_us", "bandwidth_gbs", "guessed")
_NODE_KEYS = ("name", "host", "devices")
DEVICE_KEYS = (
    "name", "kind", "arch", "peak_gflops", "mem_bw_gbs", "memory_bytes", "cores", "ranks",
    *CORE_FIELDS, "core_bw_curve", "cpu", "host_link", "guessed",
)  # fmt: skip
_FLOAT_KEYS = ("peak_gflops", "mem_bw_gbs", *CORE_RATES)
_INT_KEYS = ("memory_bytes", "cores", "ranks", *CACHE_SIZES)


# --- System <-> plain data ---------------------------------------------------------------


def to_dict(system: System) -> dict[str, Any]:
    """The description as plain data (str, int, float, bool, list, dict), in file order."""
    return {
        "name": system.name,
        "links": {"network": _link(system.network), "intra_node": _link(system.intra_node)},
        "nodes": [_node(node) for node in system.nodes],
    }


def _link(link: Link) -> dict[str, Any]:
    data: dict[str, Any] = {"latency_us": link.latency_us, "bandwidth_gbs": link.bandwidth_gbs}
    if link.guessed:
        data["guessed"] = True
    return data


def _node(node: Node) -> dict[str, Any]:
    data: dict[str, Any] = {"name": node.name}
    if node.host != node.name:
        data["host"] = node.host
    data["devices"] = [_device(device) for device in node.devices]
    return data


def _device(device: Device) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": device.name,
        "kind": str(device.kind),
        "arch": device.arch,
        "peak_gflops": device.peak_gflops,
        "mem_bw_gbs": device.mem_bw_gbs,
        "memory_bytes": device.memory_bytes,
    }
    if device.cores is not None:
        data["cores"] = device.cores
    data["ranks"] = device.ranks
    for key in CORE_FIELDS:  # CPUs only
        if getattr(device, key) is not None:
            data[key] = getattr(device, key)
    if device.core_bw_curve is not None:
        data["core_bw_curve"] = [[size, rate] for size, rate in device.core_bw_curve]
    if device.cpu is not None:
        data["cpu"] = device.cpu
    if device.host_link is not None:
        data["host_link"] = _link(device.host_link)
    if device.guessed:
        data["guessed"] = list(device.guessed)
    return data


def from_dict(data: object, where: str) -> System:
    """A System from plain data; its problems are a DhirError, one diagnostic each, naming
    `where` and the entry."""
    reader = _Reader()
    system = _read_system(reader, data)
    if system is None:
        raise DhirError([Diagnostic(f"{where}: {problem}") for _, problem in reader.problems])
    return system


class _Problem(ValueError):
    """A problem with `key` of an entry: its value's, when `at_value`."""

    def __init__(self, message: str, key: str | None = None, at_value: bool = False) -> None:
        super().__init__(message)
        self.key = key
        self.at_value = at_value


# A problem with the entry (its path in the plain data) it was found in, for its line.
_Found = tuple[Entry, _Problem | DescriptionError]
_T = TypeVar("_T")


class _Reader:
    """Reads the entry `entry` of a description, going on past a problem to the next value,
    device and node so that one run reports them all: each problem joins `problems`, which
    the readers of the entry's parts share."""

    def __init__(self, entry: Entry = (), problems: list[_Found] | None = None) -> None:
        self.entry = entry
        self.problems = [] if problems is None else problems
        self._before = len(self.problems)

    def part(self, *keys: str | int) -> "_Reader":
        """The reader of the entry at `keys` within this one."""
        return _Reader((*self.entry, *keys), self.problems)

    @property
    def found(self) -> bool:
        """Whether this reader or one of its parts found a problem."""
        return len(self.problems) > self._before

    def note(self, *problems: _Problem | DescriptionError) -> None:
        self.problems.extend((self.entry, problem) for problem in problems)

    def read(self, read: Callable[..., _T], *args: Any) -> _T | None:
        """`read(*args)`; None where it found a problem, which is noted."""
        try:
            return read(*args)
        except (_Problem, DescriptionError) as problem:
            self.note(problem)
            return None

    def table(self, data: object, where: str, known: tuple[str, ...]) -> dict[str, Any] | None:
        """`data` as a table of `known` keys, each unknown key noted (a problem at its own
        line) and left out; None where `data` is no table."""
        if not isinstance(data, dict):
            self.note(_Problem(f"{where} must be a table (an object), got {as_written(data)}"))
            return None
        self.note(
            *(
                _Problem(
                    f"{where}: unknown key {key!r}{did_you_mean(key, known)}; known keys: "
                    f"{', '.join(known)}",
                    key,
                )
                for key in data
                if key not in known
            )
        )
        return {key: value for key, value in data.items() if key in known}


def _read_system(reader: _Reader, data: object) -> System | None:
    """The System `data` describes; None where `reader` noted problems."""
    top = reader.table(data, "the description", _TOP_KEYS)
    if top is None:
        return None
    name = reader.read(_get, top, "name", str, "the description", "system")
    links = reader.part("links").table(top.get("links", {}), "links", _LINKS_KEYS) or {}
    network = _optional_link(reader, links, "network", GUESSED_NETWORK)
    intra_node = _optional_link(reader, links, "intra_node", GUESSED_INTRA_NODE)
    nodes = reader.read(
        _list, top.get("nodes"), "nodes", "[[nodes]] tables (name, devices)", "nodes"
    )
    read = [
        _read_node(reader.part("nodes", k), node, f"nodes[{k}]")
        for k, node in enumerate(nodes or [])
    ]
    if reader.found:
        return None
    assert name is not None and network is not None and intra_node is not None
    whole = tuple(node for node in read if node is not None)
    twice = _named_twice(whole) or _too_many_ranks(whole)
    if twice is not None:
        reader.problems.append(twice)
        return None
    return reader.read(System, whole, network, intra_node, name)


def _named_twice(nodes: tuple[Node, ...]) -> _Found | None:
    """Two nodes or two devices of one name, or two nodes of one host (which the System
    refuses too), at the second's line."""
    seen: set[tuple[str, str]] = set()
    for k, node in enumerate(nodes):
        named = [
            ("node", "name", node.name, ("nodes", k)),
            ("host", "host", node.host, ("nodes", k)),
        ]
        named += [
            ("device", "name", device.name, ("nodes", k, "devices", d))
            for d, device in enumerate(node.devices)
        ]
        for what, key, name, entry in named:
            if (what, name) in seen:
                return entry, _Problem(_TWICE[what].format(name=name), key, at_value=True)
            seen.add((what, name))
    return None


def _too_many_ranks(nodes: tuple[Node, ...]) -> _Found | None:
    """More ranks than dhir runs, at the `ranks` of the device that passes the limit (the
    System refuses them too, naming the file alone)."""
    total = 0
    for k, node in enumerate(nodes):
        for d, device in enumerate(node.devices):
            total += device.ranks
            if total > MAX_RANKS:
                return ("nodes", k, "devices", d), _Problem(
                    f"the description runs {sum(n.ranks for n in nodes)} ranks (the sum "
                    f"of its devices' ranks); dhir runs at most {MAX_RANKS}: give "
                    f"device '{device.name}' fewer",
                    "ranks",
                    at_value=True,
                )
    return None


_TWICE = {
    "node": "two nodes are named '{name}'; node names must differ",
    "device": "two devices are named '{name}'; device names must differ",
    "host": "two nodes have host '{name}'; mpirun places ranks by host, so each node needs a "
    "host of its own",
}


def _optional_link(reader: _Reader, links: dict[str, Any], key: str, default: Link) -> Link | None:
    data = links.get(key)
    return default if data is None else _read_link(reader.part("links", key), data, f"links.{key}")


def _read_link(reader: _Reader, data: object, where: str) -> Link | None:
    """The link `data` describes; its unknown keys are all noted, else its first problem."""
    table = reader.table(data, where, _LINK_KEYS)
    if table is None or reader.found:
        return None
    return reader.read(_link_of, table, where)


def _link_of(table: dict[str, Any], where: str) -> Link:
    latency = _get(table, "latency_us", float, where)
    bandwidth = _get(table, "bandwidth_gbs", float, where)
    try:
        return Link(latency, bandwidth, _get(table, "guessed", bool, where, False))
    except DescriptionError as error:
        message = f"{where}: {str(error).removeprefix('link: ')}"
        raise _Problem(message, error.key) from None


def _read_node(reader: _Reader, data: object, where: str) -> Node | None:
    where = _labelled(data, where)
    table = reader.table(data, where, _NODE_KEYS)
    if table is None:
        return None
    name = reader.read(_get, table, "name", str, where)
    host = reader.read(_get, table, "host", str, where, "")
    listed = reader.read(
        _list, table.get("devices"), f"{where}.devices", "[[nodes.devices]] tables", "devices"
    )
    devices = [
        _read_device(reader.part("devices", k), device, f"{where}.devices[{k}]")
        for k, device in enumerate(listed or [])
    ]
    if reader.found:
        return None
    return reader.read(Node, name, tuple(d for d in devices if d is not None), host)


def _read_device(reader: _Reader, data: object, where: str) -> Device | None:
    """The device `data` describes; each of its values is checked alone (and every
    problem noted), then the device as a whole."""
    where = _labelled(data, where)
    table = reader.table(data, where, DEVICE_KEYS)
    if table is None:
        return None
    name = reader.read(_get, table, "name", str, where)
    arch = reader.read(_get, table, "arch", str, where)
    if arch is not None:
        reader.read(_check_kind, table, arch, where)
    given: dict[str, object] = {}
    for key in (*_FLOAT_KEYS, *_INT_KEYS):
        if key in table:
            given[key] = reader.read(_value_of, table, key, where)
    if table.get("host_link") is not None:
        given["host_link"] = _read_link(
            reader.part("host_link"), table["host_link"], f"{where}.host_link"
        )
    if "core_bw_curve" in table:
        given["core_bw_curve"] = reader.read(_read_curve, table["core_bw_curve"], where)
    if "cpu" in table:
        given["cpu"] = reader.read(_get, table, "cpu", str, where)
    given = {key: value for key, value in given.items() if value is not None}
    guessed = reader.read(_guessed, table, where) or []
    if name is None or arch is None:
        return None
    if not reader.found:
        return reader.read(_whole_device, name, arch, guessed, given)
    # The values that were right, with the others guessed: what the device lacks as well
    # (a CPU without cores) is said with the values at fault.
    reader.read(_complete, name, arch, given)
    return None


def _whole_device(name: str, arch: str, guessed: list[Any], given: dict[str, object]) -> Device:
    device = guess_device(name, arch, guessed=guessed, **given)
    device.check_complete()  # here, not in its Node: so that errors name the device
    return device


def _complete(name: str, arch: str, given: dict[str, object]) -> None:
    guess_device(name, arch, **given).check_complete()


def _value_of(table: dict[str, Any], key: str, where: str) -> object:
    """`key`'s rate or count in `table`, checked as the Device checks it."""
    value = _get(table, key, float if key in _FLOAT_KEYS else int, where)
    named = table.get("name")
    try:  # in the Device's words, as the file's values were checked by it alone before
        check_field(key, value, f"device '{named}'" if isinstance(named, str) else where)
    except DescriptionError as error:
        raise _Problem(str(error), key, error.at_value) from None
    return value


def _guessed(table: dict[str, Any], where: str) -> list[Any]:
    guessed = _list(table.get("guessed", []), f"{where}.guessed", "field names", "guessed")
    if not all(isinstance(g, str) for g in guessed):
        raise _Problem(
            f"{where}.guessed: must be a list of field names (strings)", "guessed", at_value=True
        )
    return guessed


def _read_curve(data: object, where: str) -> tuple[tuple[int, float], ...]:
    """[[bytes, GB/s], ...] as pairs; the Device checks their values and order."""
    pairs = data if isinstance(data, list) else None
    if pairs is None or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
        message = f"{where}: core_bw_curve must be {CURVE_RULE}, got {as_written(data)}"
        raise _Problem(message, "core_bw_curve", at_value=True)
    point = f"{where}: core_bw_curve"
    try:
        return tuple(
            (_get({"bytes": size}, "bytes", int, point), _get({"GB/s": rate}, "GB/s", float, point))
            for size, rate in pairs
        )
    except _Problem as problem:
        raise _Problem(str(problem), "core_bw_curve", at_value=True) from None


def _labelled(data: object, where: str) -> str:
    """`where` with the entry's name, when it has one, for messages."""
    name = data.get("name") if isinstance(data, dict) else None
    return f"{where} ('{name}')" if isinstance(name, str) else where


def _check_kind(table: dict[str, Any], arch: str, where: str) -> None:
    kind = _get(table, "kind", str, where, None)
    if kind is None:
        return
    choices = (DeviceKind.CPU, DeviceKind.GPU)
    if kind not in choices:
        raise _Problem(f'{where}: kind must be "cpu" or "gpu", got "{kind}"', "kind", True)
    try:
        actual = kind_of_arch(arch)
    except UnknownArchError as error:
        raise _Problem(f"{where}: {error}", "arch", at_value=True) from None
    if actual != kind:
        raise _Problem(f'{where}: arch "{arch}" is a {actual}, but kind says {kind}', "kind", True)


_MISSING = object()
_TYPE_NAMES = {str: "a string", float: "a number", int: "a whole number", bool: "true or false"}


def _get(table: dict[str, Any], key: str, type_: type, where: str, default: Any = _MISSING) -> Any:
    if key not in table:
        if default is _MISSING:
            raise _Problem(f"{where}: missing {key}")  # no line of its own
        return default
    value = table[key]
    is_bool = isinstance(value, bool)
    if type_ is float and isinstance(value, int | float) and not is_bool:
        try:
            number = float(value)
        except OverflowError:  # an integer beyond any float
            number = math.inf
        if not math.isfinite(number):
            message = f"{where}: {key} must be a finite number, got {as_written(value)}"
            raise _Problem(message, key, at_value=True)
        return number
    if isinstance(value, type_) and (type_ is bool or not is_bool):
        return value
    message = f"{where}: {key} must be {_TYPE_NAMES[type_]}, got {as_written(value)}"
    raise _Problem(message, key, at_value=True)


def _list(data: object, where: str, what: str, key: str) -> list[Any]:
    if not isinstance(data, list):
        raise _Problem(f"{where}: missing or not a list; give a list of {what}", key, True)
    return data


# --- files -------------------------------------------------------------------------------

SYSTEM_ENV = "DHIR_SYSTEM"


def default_system_path() -> Path:
    """Where `dhir calibrate` writes (and load_local_system looks) by default:
    $XDG_CONFIG_HOME/dhir/system.toml, else ~/.config/dhir/system.toml."""
    config = os.environ.get("XDG_CONFIG_HOME")
    return (Path(config) if config else Path.home() / ".config") / "dhir" / "system.toml"


def read_system(path: Path) -> System:
    """The description in `path` (.toml or .json)."""
    path = Path(path)
    parse = _parser_for(path)
    try:
        text = decode_source(read_file(path), str(path), bom=True)
    except OSError as error:
        raise DhirError(
            [Diagnostic(f"cannot read the machine description {path}: {error.strerror}")]
        ) from None
    data = parse(text, str(path))
    reader = _Reader()
    system = _read_system(reader, data)
    if system is None:
        located = [_in_file(noted, path, text) for noted in reader.problems]
        raise DhirError([d for error in located for d in error.diagnostics], {str(path): text})
    return system


def device_loc(path: Path, device: str, key: str | None = None) -> SourceLoc | None:
    """Where `device`'s `key` (else the device) is written in the description file `path`;
    None where that cannot be read or found (an error about it names the file alone)."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
        data = _parser_for(Path(path))(text, str(path))
    except (OSError, UnicodeDecodeError, DhirError):
        return None
    entry = device_entry(data, device)
    json_format = description_format(Path(path)) == ".json"
    found = None if entry is None else file_lines(text, json_format).find(entry, key)
    return None if found is None else SourceLoc(str(path), *found)


def _in_file(noted: _Found, path: Path, text: str) -> DhirError:
    """A problem of the description in `path` at the line of its entry (and key) there;
    one of the whole description names the file alone."""
    entry, problem = noted
    key = problem.key
    found = None
    if entry or key is not None:
        at_value = problem.at_value
        found = file_lines(text, description_format(path) == ".json").find(entry, key, at_value)
    if found is None:
        return DhirError([Diagnostic(f"{path}: {problem}")])
    return DhirError([Diagnostic(str(problem), SourceLoc(str(path), *found))], {str(path): text})


def write_system(system: System, path: Path) -> None:
    path = Path(path)
    text = to_json(system) if description_format(path) == ".json" else to_toml(system)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as error:
        raise DhirError([Diagnostic(f"cannot write {path}: {error.strerror}")]) from None


def description_format(path: Path) -> str:
    """ ".toml" or ".json", from `path`'s suffix; a DhirError for anything else."""
    suffix = path.suffix.lower()
    if suffix not in FORMATS and path.is_dir():  # not "not 'no suffix'; rename it"
        raise DhirError([Diagnostic(f"{path} is a folder; name a .toml or .json file")])
    if suffix not in FORMATS:
        raise DhirError(
            [
                Diagnostic(
                    f"{path}: a machine description is a .toml or .json file, "
                    f"not '{suffix or 'no suffix'}'; rename it"
                )
            ]
        )
    return suffix


def _parser_for(path: Path) -> Callable[[str, str], object]:
    return parse_json if description_format(path) == ".json" else parse_toml


def to_json(system: System) -> str:
    return json.dumps(to_dict(system), indent=2) + "\n"


# --- a TOML writer for this structure: tables, arrays of tables, inline tables, scalars ---


def to_toml(system: System) -> str:
    data = to_dict(system)
    lines = ["# dhir machine description (docs/machine.md)", f"name = {_value(data['name'])}"]
    for name, link in data["links"].items():
        lines += ["", f"[links.{name}]", *_pairs(link)]
    for node in data["nodes"]:
        lines += ["", "[[nodes]]", *_pairs({k: v for k, v in node.items() if k != "devices"})]
        for device in node["devices"]:
            lines += ["", "[[nodes.devices]]", *_pairs(device)]
    return "\n".join(lines) + "\n"


def _pairs(table: dict[str, Any]) -> list[str]:
    return [f"{key} = {_value(value)}" for key, value in table.items()]


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)  # the shortest text that reads back equal; TOML takes 1e+16 too
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(_pairs(value)) + " }"
    raise TypeError(f"no TOML form for {value!r}")


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f",
            "\r": "\\r"}  # fmt: skip


def _string(text: str) -> str:
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'
