"""Task times measured by `dhir run --profile`: read, checked, and asked for by task name
and device. The cost model uses them instead of its estimates on devices of the kind (and
arch) they were measured on."""

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from dhir.ir.diagnostics import DhirError, as_written, decode_source, parse_json, read_file
from dhir.ir.file_lines import Entry, EntryError, did_you_mean, locate
from dhir.targets import UnknownArchError, kind_of_arch


@dataclass(frozen=True)
class Measurement:
    """Seconds per run of a task, measured on a device of `kind` (and `arch`)."""

    seconds: float
    kind: str = "cpu"
    arch: str | None = None


@dataclass
class Profile:
    """Measured task times, by task name (see dhir.ir.tasks.task_ids); JSON as `dhir run --profile`
    writes it: {"format": 1, "tasks": {"main.schedule0.task0": seconds, ...}, "ranks": N,
    "devices": {"main.schedule0.task0": {"kind": "cpu", "arch": "x86_64", "rank": 0}},
    "calls": {...}, "schedules": {"main.schedule0": seconds, ...}}. Only "tasks" is
    required (another "format" is refused); a task without "devices" was measured on a
    CPU. `schedules` holds each schedule's measured wall time per run (the slowest rank's),
    when the profile has it."""

    tasks: dict[str, Measurement] = field(default_factory=dict)
    schedules: dict[str, float] = field(default_factory=dict)

    def seconds(self, task: str, kind: str, arch: str | None) -> float | None:
        """The measured time of `task` on a device of `kind` and `arch` (None: any), if
        there is one."""
        found = self.tasks.get(task)
        if found is None or found.kind != kind:
            return None
        if found.arch is not None and arch is not None and found.arch != arch:
            return None
        return found.seconds


def unmatched(profile: Profile, tasks: Iterable[str]) -> list[str]:
    """The profile's task entries that describe none of `tasks` (the names `task_ids`
    gives now, after dhir-split): names no task has, and the pieces of a task that was
    cut into other pieces when measured (another rank count or `dhir.split`), whose
    sizes differ from those of the pieces now."""
    names = set(tasks)
    now, then = _pieces(names), _pieces(profile.tasks)
    return [
        name
        for name in profile.tasks
        if name not in names or (_whole(name) in then and then[_whole(name)] != now[_whole(name)])
    ]


# The reason `why_unmatched` gives for names no task has.
NO_TASK = "no task has these names"


def why_unmatched(stale: Iterable[str], tasks: Iterable[str]) -> dict[str, list[str]]:
    """The entries of `unmatched(profile, tasks)` grouped by why none describes a task:
    the task is cut into other pieces now, runs whole now, or no task has the name."""
    names = set(tasks)
    now = _pieces(names)
    reasons: dict[str, list[str]] = {}
    for name in stale:
        whole = _whole(name)
        if whole in now:
            reason = f"{whole} is cut into {len(now[whole])} pieces now"
        elif whole in names:
            reason = f"{whole} runs whole now"
        else:
            reason = NO_TASK
        reasons.setdefault(reason, []).append(name)
    return reasons


_PIECE = ".piece"


def _whole(name: str) -> str:
    """The name of the task that `name` is a piece of (`name` itself for a whole task)."""
    return name.rpartition(_PIECE)[0] if _PIECE in name else name


def _pieces(names: Iterable[str]) -> dict[str, set[str]]:
    """For each task cut into pieces, the names of its pieces."""
    out: dict[str, set[str]] = {}
    for name in names:
        if _PIECE in name:
            out.setdefault(_whole(name), set()).add(name)
    return out


def load_profile(path: str | Path) -> Profile:
    """Read a profile; a missing or malformed file is a DhirError."""
    try:
        text = decode_source(read_file(path), str(path), bom=True)
    except OSError as error:
        raise _profile_error(path, f"cannot read it: {error.strerror}") from None
    except DhirError as error:
        raise _not_json(path, error) from None
    try:
        data = parse_json(text, str(path))
    except DhirError as error:
        raise _not_json(path, error) from None
    try:
        return profile_from_json(data, str(path))
    except EntryError as error:
        raise locate(error, text, json_format=True) from None


def _not_json(path: object, error: DhirError) -> DhirError:
    """`error` about the profile `path`'s JSON, saying what the file was read for."""
    for diagnostic in error.diagnostics:
        what = "it" if diagnostic.loc is not None else path  # the location names the file
        why = diagnostic.message.removeprefix(f"{path}: ")
        diagnostic.message = f"cannot use {what} as task costs: {why}"
    return DhirError(error.diagnostics, error.sources)


# The largest time (or size) taken: sums of many must stay finite (1e308 + 1e308 is inf).
LARGEST = 1e30
_SECONDS = f"need seconds >= 0, at most {LARGEST:g}"


def _seconds(value: object) -> bool:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return number and 0 <= value <= LARGEST  # type: ignore[operator]


# The "format" `dhir run --profile` writes (dhir/transforms/instrument.py) and this reads.
FORMAT = 1


# What a profile holds (as `dhir run --profile` writes it), and a "devices" entry.
_KEYS = ("format", "ranks", "tasks", "calls", "devices", "schedules")
_DEVICE_KEYS = ("kind", "arch", "rank", "device")


def profile_from_json(data: object, where: str = "the profile") -> Profile:
    tasks = data.get("tasks") if isinstance(data, dict) else None
    if not isinstance(tasks, dict):
        why = 'it needs a "tasks" object: {"tasks": {"<task>": seconds}}'
        raise _profile_error(where, why, (), "tasks" if isinstance(data, dict) else None)
    _check_format(data.get("format", FORMAT), where)  # type: ignore[union-attr]
    # A misspelt key would be ignored: "device" for "devices" would take GPU times as CPU's.
    _check_keys(data, _KEYS, "a profile", where)  # type: ignore[arg-type]
    devices = data.get("devices", {}) if isinstance(data, dict) else {}
    if not isinstance(devices, dict):
        why = f'"devices" must be an object: {{"<task>": {_DEVICE}}}'
        raise _profile_error(where, why, (), "devices", True)
    profile = Profile()
    for name, seconds in tasks.items():
        if not _seconds(seconds):
            why = f'task "{name}" has time {as_written(seconds)}; {_SECONDS}'
            raise _profile_error(where, why, ("tasks",), name, True)
        kind, arch = _measured_on(name, devices.get(name, {}), where)
        profile.tasks[name] = Measurement(float(seconds), kind, arch)
    profile.schedules = _schedule_times(data.get("schedules", {}), where)  # type: ignore[union-attr]
    return profile


def _check_format(version: object, where: str) -> None:
    """A profile of another format (another dhir's) may mean other things by the same
    keys: refused rather than read as this one. A profile by hand may leave it out."""
    if version != FORMAT or isinstance(version, bool):
        raise _profile_error(
            where,
            f"it is a profile of format {json.dumps(version)}; this dhir reads format {FORMAT} "
            '(as dhir run --profile writes it, or with no "format")',
            (),
            "format",
            True,
        )


_DEVICE = '{"kind": "cpu" or "gpu", "arch": "<arch>", "rank": R}'


def _measured_on(name: str, device: object, where: str) -> tuple[str, str | None]:
    """The kind and arch a task's "devices" entry says it was measured on. A malformed
    entry is an error: ignored, it would apply the time to devices it was not measured on."""
    entry = ("devices", name)
    if not isinstance(device, dict):
        why = f'devices of task "{name}" must be an object: {_DEVICE}'
        raise _profile_error(where, why, ("devices",), name, True)
    _check_keys(device, _DEVICE_KEYS, f'the devices entry of task "{name}"', where, entry)  # type: ignore[arg-type]
    kind, arch = device.get("kind", "cpu"), device.get("arch")
    if kind not in ("cpu", "gpu"):
        why = (
            f'task "{name}" has kind {as_written(kind)}; it must be "cpu" or "gpu"'
            f"{did_you_mean(kind, ('cpu', 'gpu'))}"
        )
        raise _profile_error(where, why, entry, "kind", True)
    if arch is not None and not isinstance(arch, str):
        why = f'task "{name}" has arch {as_written(arch)}; it must be a string'
        raise _profile_error(where, why, entry, "arch", True)
    if arch is not None and _kind_of(arch) not in (None, kind):
        why = f'task "{name}" has arch "{arch}", a {_kind_of(arch)} arch, but kind "{kind}"'
        raise _profile_error(where, why, entry, "arch", True)
    return kind, arch


def _kind_of(arch: str) -> str | None:
    """The kind of an arch dhir knows; None for others (a profile may come from any CPU)."""
    try:
        return str(kind_of_arch(arch))
    except UnknownArchError:
        return None


def _schedule_times(schedules: object, where: str) -> dict[str, float]:
    if not isinstance(schedules, dict):
        why = '"schedules" must be an object: {"<schedule>": seconds}'
        raise _profile_error(where, why, (), "schedules", True)
    times: dict[str, float] = {}
    for name, seconds in schedules.items():
        if not _seconds(seconds):
            why = f'schedule "{name}" has time {as_written(seconds)}; {_SECONDS}'
            raise _profile_error(where, why, ("schedules",), name, True)
        times[str(name)] = float(seconds)
    return times


def _check_keys(
    table: dict[object, object], known: tuple[str, ...], what: str, where: str, entry: Entry = ()
) -> None:
    unknown = [key for key in table if key not in known]
    if unknown:
        raise _profile_error(
            where,
            f"{what} has the unknown key {json.dumps(unknown[0])}"
            f"{did_you_mean(unknown[0], known)}; it may have {', '.join(known)}",
            entry,
            str(unknown[0]),
        )


def _profile_error(
    path: object,
    why: str,
    entry: Entry = (),
    key: str | None = None,
    at_value: bool = False,
) -> EntryError:
    """`why` the profile `path` cannot be used, about `key` of `entry` in it."""
    alone = f"cannot use {path} as task costs: {why}"
    return EntryError(str(path), f"cannot use it as task costs: {why}", entry, key, at_value, alone)
