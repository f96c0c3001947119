"""Machine descriptions as MLIR module attributes, for the compiler to read:

    module attributes {
      dlti.target_system_spec = #dlti.target_system_spec<
        "cpu0" = #dlti.target_device_spec<"arch" = "x86_64", "kind" = "cpu", "node" = "n0",
                                          "peak_gflops" = 2.0e+03 : f64, ...>,
        "gpu0" = #dlti.target_device_spec<"arch" = "sm_90", ...,
                   "host_link" = {bandwidth_gbs = 25.0 : f64, latency_us = 10.0 : f64}>>,
      dhir.machine = {name = "cluster", links = {network = {...}, intra_node = {...}},
                      nodes = [{name = "n0", host = "n0.example.org"}]}}

One DLTI device spec per device, with the keys of the file formats (docs/machine.md) plus
"node"; `dhir.target {device = "gpu0"}` finds its device here. Whole numbers are i64, other
numbers f64, true/false i1, lists arrays, tables dictionaries.

`dhir.machine` is a plain dictionary, not a `#dlti.map`: MLIR answers a DLTI query (such as
the "MPI:Implementation" its MPI lowering asks) from the first DLTI attribute of the module
in name order, and `dhir.machine` sorts before `dlti.map`.
"""

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from xdsl.dialects.builtin import (
    ArrayAttr,
    BytesAttr,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    StringAttr,
    f64,
    i64,
)
from xdsl.ir import Attribute
from xdsl.utils.exceptions import VerifyException

from dhir.dialects.dhir import TargetOp
from dhir.dialects.dlti import DLTIEntryMap, TargetDeviceSpecAttr, TargetSystemSpecAttr
from dhir.ir.by_identity import ByIdentity
from dhir.ir.diagnostics import (
    DhirError,
    Diagnostic,
    SourceLoc,
    error_at,
    loc_of,
    location_from_attr,
)
from dhir.ir.parser import entry_location
from dhir.machine.description import System
from dhir.machine.files import DEVICE_KEYS, device_loc, from_dict, to_dict

SYSTEM_ATTR = "dlti.target_system_spec"
MACHINE_ATTR = "dhir.machine"
DEFAULT_NODE = "node0"  # for device specs that name no node

# The file each description `attach` wrote came from (None: not from a file the user
# named), by its dlti.target_system_spec (in a tuple: a file of None is still a fact),
# for errors about it found later.
_ATTACHED = ByIdentity[tuple[str | None]]()


def to_dlti(system: System) -> dict[str, Attribute]:
    """The module attributes that describe `system`."""
    data = to_dict(system)
    devices: dict[str, Attribute] = {}
    for node in data["nodes"]:
        for device in node["devices"]:
            entries = {"arch": device["arch"], "kind": device["kind"], "node": node["name"]}
            entries |= {k: v for k, v in device.items() if k not in ("name", *entries)}
            devices[device["name"]] = TargetDeviceSpecAttr(
                {key: _attribute(value) for key, value in entries.items()}
            )
    nodes = [{k: v for k, v in n.items() if k != "devices"} for n in data["nodes"]]
    machine = {"name": data["name"], "links": data["links"], "nodes": nodes}
    return {SYSTEM_ATTR: TargetSystemSpecAttr(devices), MACHINE_ATTR: _attribute(machine)}


def attach(module: ModuleOp, system: System, where: str | None = None) -> None:
    """Describe `system` in `module`'s attributes (replacing a description already there);
    every `dhir.target {device = ...}` must still find its device. `where`: the file it
    was read from, which errors about it found later name (`at_description`)."""
    attributes = to_dlti(system)
    module.attributes.update(attributes)
    spec = attributes[SYSTEM_ATTR]
    _ATTACHED.put(spec, (where,))
    for op in module.walk():
        if isinstance(op, TargetOp) and op.device is not None:
            try:
                op.info()
            except VerifyException:
                known = ", ".join(d.name for d in system.devices)
                raise error_at(
                    op,
                    f'this target names device "{op.device.data}", which the machine '
                    f"description '{system.name}' does not have; it has {known}",
                ) from None


def from_dlti(attributes: Mapping[str, Attribute], where: str = "the module") -> System:
    """The description in a module's attributes: the devices of its dlti.target_system_spec
    and, when present, the links and nodes of its dhir.machine (typical values otherwise)."""
    spec = attributes.get(SYSTEM_ATTR)
    if not isinstance(spec, TargetSystemSpecAttr):
        raise _error(
            where,
            f"has no {SYSTEM_ATTR} attribute to read a machine description from; add "
            f'module attributes {{{SYSTEM_ATTR} = #dlti.target_system_spec<"cpu0" = '
            '#dlti.target_device_spec<"arch" = "x86_64", "cores" = 8 : i64>>}',
        )
    machine = _plain(attributes.get(MACHINE_ATTR, DictionaryAttr({})), where, MACHINE_ATTR)
    if not isinstance(machine, dict):
        raise _error(where, f"{MACHINE_ATTR} must be a dictionary, got {machine!r}")
    data = {k: v for k, v in machine.items() if k != "nodes"}
    data["nodes"] = list(_nodes(spec, machine.get("nodes", []), where).values())
    return from_dict(data, where)


def system_of(module: ModuleOp, where: str = "the module") -> System:
    with at_description(module):
        return from_dlti(module.attributes, where)


def check_description(module: ModuleOp) -> None:
    """Refuse a machine description in `module`'s attributes that cannot stand, at its
    line: the native backend reads it to build and place, and the interpreter, which reads
    nothing of it, refuses it alike (a program is refused by both or by neither)."""
    if SYSTEM_ATTR in module.attributes or MACHINE_ATTR in module.attributes:
        system_of(module)


def description_loc(module: ModuleOp, attribute: str = SYSTEM_ATTR) -> SourceLoc | None:
    """Where `module`'s machine description was written: its `attribute` entry (the
    dlti.target_system_spec, or dhir.machine) when the parser saw it
    (dhir.ir.parser.entry_location), else the module."""
    spec = module.attributes.get(attribute)
    written = None if spec is None else entry_location(spec)
    located = None if written is None else location_from_attr(written)
    return located or loc_of(module)


def described_at(module: ModuleOp, device: str, key: str | None = None) -> str | None:
    """Where `module`'s machine description is written, for messages about `device`'s
    `key`: the file `attach` read it from, at that key's line where found, or the line
    of the module's text that writes the description; None where nothing says."""
    attached, file = _attached(module)
    if not attached:
        loc = description_loc(module)
        return None if loc is None else str(loc)
    if file is None:
        return None
    found = device_loc(Path(file), device, key)
    return file if found is None else str(found)


def device_key_loc(module: ModuleOp, device: str, key: str) -> SourceLoc | None:
    """Where `device`'s `key` is written in the file `attach` read `module`'s machine
    description from; None for a description written elsewhere, or not found there."""
    attached, file = _attached(module)
    return device_loc(Path(file), device, key) if attached and file is not None else None


def description_named(module: ModuleOp) -> str | None:
    """How messages name `module`'s machine description: `'name' (file)`, the file `attach`
    read it from or where the module's text wrote it; None where it has none."""
    if SYSTEM_ATTR not in module.attributes:
        return None
    attached, file = _attached(module)
    where = file if attached else str(description_loc(module) or "")
    named = f"'{system_of(module).name}'"
    return f"{named} ({where})" if where else named


def _attached(module: ModuleOp) -> tuple[bool, str | None]:
    """Whether `attach` put `module`'s machine description there, and from which file."""
    spec = module.attributes.get(SYSTEM_ATTR)
    found = None if spec is None else _ATTACHED.get(spec)
    return (False, None) if found is None else (True, found[0])


@contextmanager
def at_description(module: ModuleOp) -> Iterator[None]:
    """Within: an error about the machine description (read from `module`'s attributes)
    that has no location gets the description's: the file `attach` read it from, or
    where the module's text wrote it (`description_loc`). (A description from the
    machine's own file or detection, $DHIR_SYSTEM, is named by no file here.)"""
    try:
        yield
    except DhirError as error:
        if all(d.loc is not None for d in error.diagnostics):
            raise
        diagnostics = [_at_description(d, module) for d in error.diagnostics]
        raise type(error)(diagnostics, error.sources) from None


def _at_description(diagnostic: Diagnostic, module: ModuleOp) -> Diagnostic:
    if diagnostic.loc is not None:
        return diagnostic
    attached, file = _attached(module)
    if not attached:  # written in the module's text
        about = MACHINE_ATTR if MACHINE_ATTR in diagnostic.message else SYSTEM_ATTR
        return replace(diagnostic, loc=description_loc(module, about))
    if file is None or diagnostic.message.startswith(f"{file}:"):
        return diagnostic
    return replace(diagnostic, message=f"{file}: {diagnostic.message}")


def _nodes(spec: TargetSystemSpecAttr, listed: object, where: str) -> dict[str, dict[str, Any]]:
    """The file-format node tables: dhir.machine's, in order, then those only devices name."""
    if not isinstance(listed, list) or not all(
        isinstance(n, dict) and isinstance(n.get("name"), str) for n in listed
    ):
        raise _error(where, f'{MACHINE_ATTR}: "nodes" must be a list of {{name = "...", ...}}')
    nodes = {n["name"]: {**n, "devices": []} for n in listed}
    for entry in spec.entries:
        name = _plain(entry.key, where, SYSTEM_ATTR)
        if not isinstance(entry.value, TargetDeviceSpecAttr):
            raise _error(where, f'{SYSTEM_ATTR} entry "{name}" is not a #dlti.target_device_spec')
        device = _plain(entry.value, where, f'{SYSTEM_ATTR} entry "{name}"')
        node = device.pop("node", DEFAULT_NODE)
        if not isinstance(node, str):
            raise _error(where, f'device "{name}": "node" must be a string, got {node!r}')
        # Other consumers may keep entries of their own in a device spec; they are not ours.
        known = {k: v for k, v in device.items() if k in DEVICE_KEYS}
        nodes.setdefault(node, {"name": node, "devices": []})["devices"].append(
            {**known, "name": name}
        )
    return nodes


def _attribute(value: object) -> Attribute:
    if isinstance(value, bool):
        return IntegerAttr(int(value), IntegerType(1))
    if isinstance(value, int):
        return IntegerAttr(value, i64)
    if isinstance(value, float):
        return FloatAttr(value, f64)
    if isinstance(value, str):
        return StringAttr(value)
    if isinstance(value, list):
        return ArrayAttr([_attribute(v) for v in value])
    if isinstance(value, dict):
        return DictionaryAttr({key: _attribute(v) for key, v in value.items()})
    raise TypeError(f"no attribute form for {value!r}")


def _plain(attr: Attribute, where: str, what: str) -> Any:
    """The plain value (str, int, float, bool, list, dict) of an attribute."""
    if isinstance(attr, StringAttr):
        return attr.data
    if isinstance(attr, BytesAttr):
        # xDSL prints anything outside printable ASCII as escapes ("\C3\A9"), and its
        # parser reads a string with escapes back as bytes.
        return attr.data.decode(errors="replace")
    if isinstance(attr, IntegerAttr):
        value = attr.value.data
        width = attr.type.width.data if isinstance(attr.type, IntegerType) else 64
        return bool(value) if width == 1 else value
    if isinstance(attr, FloatAttr):
        return float(attr.value.data)
    if isinstance(attr, ArrayAttr):
        return [_plain(a, where, what) for a in attr.data]
    if isinstance(attr, DictionaryAttr):
        return {k: _plain(v, where, f'{what} "{k}"') for k, v in attr.data.items()}
    if isinstance(attr, DLTIEntryMap):
        plain: dict[str, Any] = {}
        for entry in attr.entries:
            if not isinstance(entry.key, StringAttr):
                raise _error(where, f"{what}: keys must be strings, got {entry.key}")
            plain[entry.key.data] = _plain(entry.value, where, f'{what} "{entry.key.data}"')
        return plain
    raise _error(where, f"{what}: dhir cannot read {attr} (strings, numbers, arrays, maps only)")


def _error(where: str, message: str) -> DhirError:
    return DhirError([Diagnostic(f"{where}: {message}")])
