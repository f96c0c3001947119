"""The dhir dialect: schedules of tasks, each bound to a target.

    dhir.schedule %a, %b, %c {
      %cpu = dhir.target {arch = "x86_64"}
      %t = dhir.task %cpu, %a, %b, %c {
        ...ordinary MLIR that uses %a, %b, %c directly...
      }
    }

Headers carry no types: every operand is already defined, so its type is known.
"""

import difflib
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache

from xdsl.dialects import scf
from xdsl.dialects.builtin import (
    UNKNOWN_LOC,
    AnyFloat,
    DenseArrayBase,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    StringAttr,
    i1,
    i32,
)
from xdsl.dialects.dlti import TargetDeviceSpecAttr, TargetSystemSpecAttr
from xdsl.ir import (
    Attribute,
    Block,
    Dialect,
    Operation,
    ParametrizedAttribute,
    Region,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    opt_operand_def,
    opt_prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import IsTerminator, Pure, SingleBlockImplicitTerminator
from xdsl.utils.exceptions import VerifyException

from dhir.dialects.scf import ExecuteRegionOp
from dhir.ir.build import init_op
from dhir.ir.diagnostics import location_from_attr, value_name
from dhir.ir.walk import enclosing
from dhir.targets import DeviceKind, TargetInfo, UnknownArchError, kind_of_arch, parse_target_string


class VerifyExceptionAt(VerifyException):
    """A verification error about an op nested in the one being verified, so the
    diagnostic points at the nested op's source location."""

    def __init__(self, op: Operation, message: str) -> None:
        super().__init__(message)
        self.op = op


# Placement records its decision on each task as `dhir.rank = R : i64`; a rank written
# there by the user (or a test) is honoured, so any placement can be forced.
RANK_ATTR = "dhir.rank"

# The dhir.* attributes each op takes: the user's first, then those dhir's passes write
# (dhir-split's dhir.piece, dhir-split-devices' dhir.rows, dhir-gpu-kernels'
# dhir.gpu_rows, dhir-annotate-dependences' six), which dhir-opt prints and reads back.
# Any other is a typo (dhir.rnak) that nothing would read: refused, not ignored.
USER_TASK_ATTRS = (RANK_ATTR, "dhir.split", "dhir.reassociate")
# What dhir-annotate-dependences writes on each task, for reading only.
DEPENDENCE_ANNOTATIONS = (
    "dhir.id",
    "dhir.reads",
    "dhir.writes",
    "dhir.read_regions",
    "dhir.write_regions",
    "dhir.after",
)
TASK_ATTRS = frozenset(
    {*USER_TASK_ATTRS, "dhir.piece", "dhir.rows", "dhir.gpu_rows", *DEPENDENCE_ANNOTATIONS}
)
SCHEDULE_ATTRS = frozenset({"dhir.shardings"})
# What a typo of a task's attribute may have meant: its name, or a user's dhir.* key
# written without `dhir.`.
_PLAIN_TASK_ATTRS = {"name": "name", **{key.removeprefix("dhir."): key for key in USER_TASK_ATTRS}}


def _verify_dhir_attrs(
    op: Operation, known: frozenset[str], users: Sequence[str], every: bool = False
) -> None:
    """Refuse a dhir.* attribute of `op` not in `known` (`every`: any attribute)."""
    for key in op.attributes:
        if not (every or key.startswith("dhir.")) or key in known:
            continue
        nearest = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
        guess = f" (did you mean {nearest[0]}?)" if nearest else ""
        takes = f"takes {', '.join(users)}" if users else "takes no dhir.* attribute"
        raise VerifyException(
            f"{op.name} has an attribute {key} that dhir does not know{guess}; {op.name} "
            f"{takes}: remove it or correct its name"
        )


def _one_edit_apart(key: str, word: str) -> bool:
    """Whether `key` is `word` in other case, with two letters swapped, or with one
    letter more or fewer: a typo, not an attribute of the user's own (`note`)."""
    key = key.lower()
    if key == word or sorted(key) == sorted(word):
        return True
    shorter, longer = sorted((key, word), key=len)
    if len(longer) - len(shorter) != 1:
        return False
    return any(longer[:i] + longer[i + 1 :] == shorter for i in range(len(longer)))


def _verify_plain_task_attrs(op: Operation) -> None:
    """Refuse an attribute without `dhir.` that names one dhir reads on a task: `rank`
    for `dhir.rank` (the task was placed anywhere), `nmae` for `name` (left unnamed)."""
    for key in op.attributes:
        if key == "name" or key.startswith("dhir."):
            continue
        for word, attr in _PLAIN_TASK_ATTRS.items():
            if _one_edit_apart(key, word):
                raise VerifyException(
                    f"{op.name} has an attribute {key} that dhir does not read (did you "
                    f"mean {attr}?); a task's name is name, and dhir.task takes "
                    f"{', '.join(USER_TASK_ATTRS)}: correct its name, or rename it if it "
                    "is your own"
                )


@irdl_attr_definition
class TargetType(ParametrizedAttribute, TypeAttribute):
    """The value of a `dhir.target`: where a task may run."""

    name = "dhir.target"


@irdl_attr_definition
class TokenType(ParametrizedAttribute, TypeAttribute):
    """The result of a `dhir.task`, standing for its completion."""

    name = "dhir.token"


_TOKEN = (TokenType(),)  # every task's result type (attributes are immutable)


_TARGET_KEYS = ("arch", "kind", "spec", "device")
_TARGET_HELP = (
    'give it an arch ({arch = "x86_64"}, {arch = "sm_90"}), a kind ({kind = "gpu"}), '
    'a DLTI device spec ({spec = #dlti.target_device_spec<"arch" = "sm_90">}) or a '
    'device of the module\'s dlti.target_system_spec ({device = "gpu0"})'
)


@irdl_op_definition
class TargetOp(IRDLOperation):
    """Where tasks may run: a specific arch, or a kind of device for placement to pick."""

    name = "dhir.target"

    arch = opt_prop_def(StringAttr)
    kind = opt_prop_def(StringAttr)
    spec = opt_prop_def(TargetDeviceSpecAttr)
    device = opt_prop_def(StringAttr)
    result = result_def(TargetType)

    traits = traits_def(Pure())

    def __init__(
        self,
        *,
        arch: str | None = None,
        kind: str | None = None,
        spec: TargetDeviceSpecAttr | None = None,
        device: str | None = None,
    ) -> None:
        props: dict[str, Attribute | None] = {
            "arch": StringAttr(arch) if arch is not None else None,
            "kind": StringAttr(kind) if kind is not None else None,
            "spec": spec,
            "device": StringAttr(device) if device is not None else None,
        }
        super().__init__(properties=props, result_types=[TargetType()])

    def info(self) -> TargetInfo:
        """The resolved target; raises VerifyException when it cannot be resolved."""
        # Through the properties dictionary, not IRDL's accessors: passes ask this of
        # every task, and the accessors cost more than the answer.
        props = self.properties
        spec, device = props.get("spec"), props.get("device")
        if isinstance(spec, TargetDeviceSpecAttr):
            return _info_from_entries(spec, "the DLTI device spec")
        if isinstance(device, StringAttr):
            return _info_from_entries(self._system_device(device.data), "the device")
        arch, kind = props.get("arch"), props.get("kind")
        return _info_from_strings(
            arch.data if isinstance(arch, StringAttr) else None,
            kind.data if isinstance(kind, StringAttr) else None,
        )

    def _system_device(self, name: str) -> TargetDeviceSpecAttr:
        systems = [s for s in _enclosing_attrs(self, "dlti.target_system_spec")]
        for system in systems:
            if isinstance(system, TargetSystemSpecAttr):
                try:
                    device = system[name]
                except KeyError:
                    continue
                if isinstance(device, TargetDeviceSpecAttr):
                    return device
        raise VerifyException(
            f'device "{name}" is not in any enclosing dlti.target_system_spec; '
            "add it to the module: module attributes {dlti.target_system_spec = "
            f'#dlti.target_system_spec<"{name}" = #dlti.target_device_spec<"arch" = ...>>}}'
        )

    def verify_(self) -> None:
        # Its entries are properties (arch, kind, spec, device); nothing reads any other.
        _verify_dhir_attrs(self, frozenset(_TARGET_KEYS), _TARGET_KEYS, every=True)
        given = [key for key in _TARGET_KEYS if self.properties.get(key) is not None]
        if not given:
            raise VerifyException(f"dhir.target names no device; {_TARGET_HELP}")
        if len(given) > 1 and set(given) != {"arch", "kind"}:
            raise VerifyException(
                f"dhir.target takes one of arch/kind, spec or device, not {' and '.join(given)}"
            )
        self.info()

    @classmethod
    def parse(cls, parser: Parser) -> "TargetOp":
        at = parser.pos
        attrs = parser.parse_optional_attr_dict()
        props = {key: attrs.pop(key) for key in _TARGET_KEYS if key in attrs}
        for key, value in props.items():  # else xDSL's "5 : i64 should be of base attribute"
            wanted = TargetDeviceSpecAttr if key == "spec" else StringAttr
            if not isinstance(value, wanted):
                form = "a #dlti.target_device_spec<...>" if key == "spec" else "a string"
                parser.raise_error(
                    f"dhir.target's {key} must be {form}, got {value}; {_TARGET_HELP}", at
                )
        op = cls.create(properties=props, attributes=attrs, result_types=[TargetType()])
        return op

    def print(self, printer: Printer) -> None:
        entries = {k: v for k, v in self.properties.items() if k in _TARGET_KEYS}
        entries.update(self.attributes)
        if entries:
            printer.print_string(" ")
            printer.print_attr_dict(entries)


def _enclosing_attrs(op: Operation, name: str) -> Iterator[Attribute]:
    current = op.parent_op()
    while current is not None:
        if name in current.attributes:
            yield current.attributes[name]
        current = current.parent_op()


def _info_from_entries(spec: TargetDeviceSpecAttr, what: str) -> TargetInfo:
    strings: dict[str, str | None] = {"arch": None, "kind": None}
    for key in strings:
        try:
            value = spec[key]
        except KeyError:
            continue
        if not isinstance(value, StringAttr):
            raise VerifyException(f'"{key}" of {what} must be a string, got {value}')
        strings[key] = value.data
    if strings["arch"] is None and strings["kind"] is None:
        raise VerifyException(f'{what} has neither an "arch" nor a "kind" entry')
    return _info_from_strings(strings["arch"], strings["kind"])


@cache  # pure, and asked once per task by several passes
def _info_from_strings(arch: str | None, kind: str | None) -> TargetInfo:
    try:
        arch_kind = kind_of_arch(arch) if arch is not None else None
    except UnknownArchError as error:
        raise VerifyException(str(error)) from None
    if kind is not None and kind not in tuple(DeviceKind):
        kinds = ", ".join(f'"{k}"' for k in DeviceKind)
        raise VerifyException(f'unknown device kind "{kind}"; known kinds are {kinds}')
    if arch_kind is not None and kind is not None and kind not in (arch_kind, "any"):
        raise VerifyException(f'arch "{arch}" is a {arch_kind}, not a {kind}')
    if arch_kind is not None:
        return TargetInfo(arch_kind, arch)
    return TargetInfo(DeviceKind(kind))


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Ends a schedule or task body; implicit in the custom syntax."""

    name = "dhir.yield"

    traits = traits_def(IsTerminator())

    def __init__(self) -> None:
        super().__init__()

    def verify_(self) -> None:
        if not isinstance(self.parent_op(), TaskOp | ScheduleOp):
            raise VerifyException("dhir.yield ends only dhir.task and dhir.schedule bodies")

    @classmethod
    def parse(cls, parser: Parser) -> "YieldOp":
        at = parser.pos
        if parser.parse_optional_unresolved_operand() is not None:
            parser.raise_error(
                "dhir.yield takes no values: tasks and schedules return nothing; store "
                "results in a memref the task lists",
                at,
            )
        op = cls()
        op.attributes.update(parser.parse_optional_attr_dict())
        return op

    def print(self, printer: Printer) -> None:
        if self.attributes:
            printer.print_string(" ")
            printer.print_attr_dict(self.attributes)


_SCHEDULE_OPERAND_HELP = (
    "schedule operands must be ranked memrefs of integers, floats or index, "
    "or scalars of those types"
)


@irdl_op_definition
class ScheduleOp(IRDLOperation):
    """A group of tasks whose result is that of running them one by one in order."""

    name = "dhir.schedule"

    args = var_operand_def()
    body = region_def("single_block")

    traits = traits_def(SingleBlockImplicitTerminator(YieldOp))

    def __init__(self, args: Sequence[SSAValue], body: Region) -> None:
        _ensure_terminator(body)
        super().__init__(operands=[args], regions=[body])

    def tasks(self) -> Iterator["TaskOp"]:
        """The schedule's tasks, in order. Passes ask this of a schedule of 10,000 tasks
        some twenty times: the ops are read as xDSL 0.74 links them, not through
        `block.ops` (an iterator call and a property a step), and a task is told by its
        class first (an IRDL `isinstance` goes through `ABCMeta`). As with `block.ops`,
        the first op is read at once and the next one before a task is handed out, so
        the caller may move it."""
        return _tasks_from(self.body.block._first_op)  # pyright: ignore[reportPrivateUsage]

    def _verify_names(self) -> None:
        # Task names key profiles, traces and placement constraints: one per task.
        seen: set[str] = set()
        for task in self.tasks():
            name = task.attributes.get("name")
            if not isinstance(name, StringAttr) or "dhir.piece" in task.attributes:
                continue
            if name.data in seen:
                loc = location_from_attr(task.location)
                where = f" (the second at {loc})" if loc is not None else ""
                raise VerifyException(
                    f'two tasks of this schedule are named "{name.data}"{where}; give each '
                    "task a name of its own"
                )
            seen.add(name.data)

    def verify_(self) -> None:
        _verify_dhir_attrs(self, SCHEDULE_ATTRS, sorted(SCHEDULE_ATTRS))
        self._verify_names()
        outer = _enclosing_dhir_op(self)
        if outer is not None:
            raise _nesting_error(self, outer)
        for index, arg in enumerate(self.args):
            if not _is_schedulable_type(arg.type):
                raise VerifyException(
                    f"schedule operand #{index} ({value_name(arg)}) has type {arg.type}, "
                    f"which dhir cannot distribute; {_SCHEDULE_OPERAND_HELP}"
                )
        for op in self.body.block.ops:
            if not isinstance(op, TargetOp | TaskOp | YieldOp):
                raise VerifyExceptionAt(
                    op,
                    f"'{op.name}' cannot stand directly in a dhir.schedule, which holds only "
                    "dhir.target and dhir.task ops; move it into a task, or before the schedule",
                )

    @classmethod
    def parse(cls, parser: Parser) -> "ScheduleOp":
        args = _parse_header_operands(parser, allow_empty=True)
        attrs = parser.parse_optional_attr_dict_with_keyword()
        body = _parse_body(parser)
        op = cls(args, body)
        if attrs is not None:
            op.attributes.update(attrs.data)
        return op

    def print(self, printer: Printer) -> None:
        if self.args:
            printer.print_string(" ")
            printer.print_list(self.args, printer.print_operand)
        _print_attrs_and_body(printer, self.attributes, self.body)


# Task bodies whose ops are known to pass TaskOp's checks (clones of a body that
# passes them, see dhir/ir/region_cache.py); set by the verifier while it runs, since
# checking thousands of clones again is a large part of verifying a big schedule.
_CHECKED_BODIES: ContextVar[frozenset[Region]] = ContextVar("checked_bodies", default=frozenset())


@contextmanager
def checked_task_bodies(bodies: Iterable[Region]) -> Iterator[None]:
    """Within this, TaskOp's verifier does not re-check the ops of these bodies."""
    token = _CHECKED_BODIES.set(frozenset(bodies))
    try:
        yield
    finally:
        _CHECKED_BODIES.reset(token)


def _verify_printable(name: StringAttr | None) -> None:
    """Control characters in a task's name: the task table the runs keep has a line per task
    with tab-separated fields, so a tab or newline there became a space, and the profile
    (`--profile`) named the task otherwise than `dhir schedule` and `--costs` do."""
    if name is not None and any(unicodedata.category(c) == "Cc" for c in name.data):
        raise VerifyException(
            "a task's name must not hold control characters (tabs, newlines, ...), "
            f"which no table or profile can show as written; got {name}"
        )


@irdl_op_definition
class TaskOp(IRDLOperation):
    """One unit of work: its target, the memrefs it touches, and a body using them."""

    name = "dhir.task"

    # Left unconstrained here so verify_ can say in plain words what is wrong.
    target = opt_operand_def()
    memrefs = var_operand_def()
    target_name = opt_prop_def(StringAttr, prop_name="target")
    body = region_def("single_block")
    token = result_def(TokenType)

    traits = traits_def(SingleBlockImplicitTerminator(YieldOp))
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(
        self,
        target: SSAValue | str,
        memrefs: Sequence[SSAValue],
        body: Region,
    ) -> None:
        _single_block(body)
        _ensure_terminator(body)
        operands = [target, *memrefs] if isinstance(target, SSAValue) else list(memrefs)
        properties: dict[str, Attribute] = {
            "operandSegmentSizes": _segment_sizes(len(operands) - len(memrefs), len(memrefs))
        }
        if isinstance(target, str):
            properties["target"] = StringAttr(target)
        # Neither IRDL's generic constructor nor Operation's, which are slower (a large
        # parse builds thousands of these; every property is given); verify_ checks the
        # same.
        init_op(self, operands, _TOKEN, properties, {}, UNKNOWN_LOC, (body,))

    def target_info(self) -> TargetInfo:
        """Where this task may run (the module must have verified)."""
        name = self.properties.get("target")
        if isinstance(name, StringAttr):
            return _target_from_string(name.data)
        owner = self.operands[0].owner  # the target operand comes first (verified)
        assert isinstance(owner, TargetOp)
        return owner.info()

    def verify_(self) -> None:
        self.verify_task()

    def verify_task(self) -> None:
        """dhir.task's own checks, without IRDL's generic ones (operand segments, the
        result's type, one block ending in dhir.yield), which verify_ runs first: the
        verifier skips those for tasks whose body the parser cloned, since dhir's
        parser builds such a task only as they require (see dhir/ir/region_cache.py)."""
        self._verify_placement_in_schedule()
        _verify_dhir_attrs(self, TASK_ATTRS, USER_TASK_ATTRS)
        _verify_plain_task_attrs(self)
        self._verify_rank()
        self._verify_name()
        target, name, memrefs = self._header()
        info = self._verify_target(target, name)
        schedule = self.parent_op()
        assert isinstance(schedule, ScheduleOp)
        listed_by_schedule = schedule.args
        for index, value in enumerate(memrefs):
            _verify_task_memref(value, index + (target is not None), listed_by_schedule)
        if self.body in _CHECKED_BODIES.get():
            return
        if self.body.block.args:
            raise VerifyException(
                "a dhir.task body takes no block arguments (nothing would bind them); "
                "use the schedule's operands and values defined in the body"
            )
        listed = set(memrefs)
        for op in self.body.walk():
            self._verify_body_op(op, listed, info)

    def _header(self) -> tuple[SSAValue | None, StringAttr | None, tuple[SSAValue, ...]]:
        """(target operand, target name, memrefs), read once: IRDL's accessors recompute
        the operand segments at every use, which cost a tenth of verifying a schedule."""
        sizes = self.properties["operandSegmentSizes"]
        assert isinstance(sizes, DenseArrayBase)  # IRDL verified the segments first
        targets = _SEGMENT_TARGETS.get(id(sizes))
        if targets is None:
            targets = sizes.get_values()[0]
        operands = tuple(self.operands)
        name = self.properties.get("target")
        target = operands[0] if targets else None
        return target, name if isinstance(name, StringAttr) else None, operands[targets:]

    def _verify_name(self) -> None:
        # Anything but a non-empty string would be ignored, and the SSA name used.
        name = self.attributes.get("name")
        if name is None or (isinstance(name, StringAttr) and name.data):
            _verify_printable(name)
            return
        raise VerifyException(
            f'a task\'s name must be a non-empty string (name = "fill"), got {name}'
        )

    def _verify_rank(self) -> None:
        # Anything but an integer would be ignored, and the task placed elsewhere.
        rank = self.attributes.get(RANK_ATTR)
        if rank is None or (
            isinstance(rank, IntegerAttr)
            and isinstance(rank.type, IntegerType | IndexType)
            and rank.type != i1
        ):
            return
        raise VerifyException(
            f"{RANK_ATTR} must be an integer, the MPI rank to run the task on "
            f"({RANK_ATTR} = 1 : i64), got {rank}"
        )

    def _verify_placement_in_schedule(self) -> None:
        outer = _enclosing_dhir_op(self)
        if isinstance(outer, TaskOp):
            raise _nesting_error(self, outer)
        if not isinstance(self.parent_op(), ScheduleOp):
            raise VerifyException(
                "dhir.task must stand directly inside a dhir.schedule; "
                "wrap it: dhir.schedule %a, ... { %t = dhir.task ... }"
            )

    def _verify_target(self, target: SSAValue | None, name: StringAttr | None) -> TargetInfo:
        if (target is None) == (name is None):
            raise VerifyException(
                "dhir.task needs exactly one target: an operand (dhir.task %cpu, ...) "
                'or an inline name (dhir.task target = "cpu", ...)'
            )
        if name is not None:
            try:
                return _target_from_string(name.data)
            except UnknownArchError as error:
                raise VerifyException(f"{error}, or a kind: cpu, gpu, any") from None
        assert target is not None
        if not isinstance(target.owner, TargetOp):
            raise VerifyException(
                f"the first operand of dhir.task must be its target, a value made by "
                f"dhir.target, but {value_name(target)} is {_describe(target)}; "
                'write dhir.task %cpu, %a, ... with %cpu = dhir.target {arch = "x86_64"}'
            )
        return target.owner.info()

    def _verify_body_op(self, op: Operation, listed: set[SSAValue], info: TargetInfo) -> None:
        if isinstance(op, TaskOp | ScheduleOp):
            # Reported here, before the nested op's operands look like stray uses.
            raise _nesting_error(op, self)
        if info.kind == DeviceKind.CPU and op.dialect_name() == "gpu":
            raise VerifyExceptionAt(
                op,
                f"'{op.name}' needs a GPU, but this task's target is {info} (a CPU); "
                'bind the task to a GPU target such as dhir.target {arch = "sm_90"} '
                "or write the work as loops (scf.parallel)",
            )
        for value in op.operands:
            if defined_inside(value, self):
                continue
            if isinstance(value.type, TargetType | TokenType):
                raise VerifyExceptionAt(
                    op,
                    f"'{op.name}' uses {value_name(value)}, a {value.type} value; "
                    "task bodies cannot use dhir targets or task tokens",
                )
            if isinstance(value.type, MemRefType) and value not in listed and not _on_device(value):
                raise VerifyExceptionAt(
                    op,
                    f"'{op.name}' uses {value_name(value)}, a memref defined outside this "
                    "dhir.task that the task does not list; add it to the task's operands "
                    f"(dhir.task <target>, ..., {value_name(value)})",
                )

    @classmethod
    def parse(cls, parser: Parser) -> "TaskOp":
        return _parse_task(parser)

    def print(self, printer: Printer) -> None:
        _print_task(self, printer)


# dhir-gpu-data (dhir/transforms/gpu_data.py) marks the op making a device copy of a
# schedule operand with this attribute; GPU tasks use such copies without listing them,
# since they are private to one rank's device and never travel between ranks.
DEVICE_BUFFER_ATTR = "dhir.device_buffer"

# A call into dhir's runtime that reads and writes no memory of the program (a timer, a
# barrier): analyses of the host code around schedules may look through it.
HOOK_ATTR = "dhir.hook"


def _on_device(value: SSAValue) -> bool:
    owner = value.owner
    return isinstance(owner, Operation) and DEVICE_BUFFER_ATTR in owner.attributes


def _verify_task_memref(value: SSAValue, position: int, schedule_args: Sequence[SSAValue]) -> None:
    if not isinstance(value.type, MemRefType):
        raise VerifyException(
            f"dhir.task operand #{position} ({value_name(value)}) has type {value.type}; "
            "a task lists only the memrefs it touches (scalars are used directly)"
        )
    if value not in schedule_args:
        raise VerifyException(
            f"dhir.task lists {value_name(value)}, which is not an operand of the "
            "enclosing dhir.schedule; add it to the schedule's operands"
        )


def _nesting_error(op: Operation, outer: Operation) -> VerifyExceptionAt:
    if isinstance(op, TaskOp):
        message = (
            "dhir.task cannot be nested inside another dhir.task; "
            "make it a separate task of the schedule"
        )
    else:
        message = (
            f"dhir.schedule cannot be nested inside a {outer.name}; "
            "schedules go in ordinary host code (a function body, a loop)"
        )
    return VerifyExceptionAt(op, message)


def _enclosing_dhir_op(op: Operation) -> Operation | None:
    return enclosing(op, (TaskOp, ScheduleOp))


def defined_inside(value: SSAValue, ancestor: Operation) -> bool:
    """Whether `value` is made by an op nested in `ancestor` (or a block argument there)."""
    owner = value.owner
    op = owner if isinstance(owner, Operation) else owner.parent_op()
    while op is not None:
        if op is ancestor:
            return True
        op = op.parent_op()
    return False


def _is_schedulable_type(type_: Attribute) -> bool:
    if isinstance(type_, MemRefType):
        return _is_scalar_type(type_.element_type)
    return _is_scalar_type(type_)


def _is_scalar_type(type_: Attribute) -> bool:
    return isinstance(type_, IntegerType | IndexType | AnyFloat)


def _describe(value: SSAValue) -> str:
    owner = value.owner
    if isinstance(owner, Operation):
        return f"a {value.type} made by '{owner.name}'"
    return f"a block argument of type {value.type}"


# --- custom syntax helpers -----------------------------------------------------------


def _parse_defined_operand(parser: Parser) -> SSAValue | None:
    """`%name`, already defined; header operands carry no type, so no forward use."""
    operand = parser.parse_optional_unresolved_operand()
    if operand is None:
        return None
    values = parser.ssa_values.get(operand.operand_name)
    if values is None or operand.index >= len(values):
        parser.raise_error(
            f"use of undefined value %{operand.operand_name}; dhir headers name values "
            "defined earlier",
            operand.span,
        )
    return values[operand.index]


# A header's operands as a schedule's or task's are mostly written (`%cpu, %a, %b`, then
# its attributes or body): read at once from the text, not token by token (a tenth of
# parsing a large schedule). Anything else (comments, `%r#1`, an undefined name, a
# mistake) is left to the general path below, which reads and reports it as before.
_PLAIN_HEADER = re.compile(r"%[\w$.\-]+(?:\s*,\s*%[\w$.\-]+)*(?=\s*(?:\{|attributes\b))", re.ASCII)


def _plain_header_operands(parser: Parser) -> list[SSAValue] | None:
    """The operands of a plain header (see _PLAIN_HEADER) at the parser's position, the
    parser moved past them; None, the parser not moved, for any other."""
    text = parser.lexer.input.content
    if not isinstance(text, str):
        return None
    match = _PLAIN_HEADER.match(text, parser.pos)
    if match is None:
        return None
    values: list[SSAValue] = []
    for name in match.group().split(","):
        defined = parser.ssa_values.get(name.strip()[1:])
        if not defined:
            return None
        values.append(defined[0])
    parser._resume_from(match.end())  # pyright: ignore[reportPrivateUsage]
    return values


def _parse_header_operands(parser: Parser, allow_empty: bool) -> list[SSAValue]:
    plain = _plain_header_operands(parser)
    if plain is not None:
        return plain
    first = _parse_defined_operand(parser)
    if first is None:
        if not allow_empty:
            parser.raise_error("expected an operand (%name)")
        return []
    values = [first]
    while parser.parse_optional_punctuation(",") is not None:
        value = _parse_defined_operand(parser)
        if value is None:
            parser.raise_error("expected an operand (%name) after ','")
        values.append(value)
    return values


def _parse_body(parser: Parser) -> Region:
    body = parser.parse_optional_region()
    if body is None:
        parser.raise_error("expected ', %operand', 'attributes {...}' or the body '{ ... }' here")
    return body


_target_from_string = cache(parse_target_string)


# The target count of each attribute _segment_sizes made, by the attribute's id (each
# is kept by its cache): verifying thousands of tasks unpacked it from bytes each time.
_SEGMENT_TARGETS: dict[int, int] = {}


@cache
def _segment_sizes(targets: int, memrefs: int) -> DenseArrayBase:
    sizes = DenseArrayBase.from_list(i32, [targets, memrefs])
    _SEGMENT_TARGETS[id(sizes)] = targets
    return sizes


def _single_block(body: Region) -> None:
    """A task body of several blocks (branches with cf ops, as MLIR allows) becomes one
    block holding them in an `scf.execute_region`, which means the same: control enters
    at the first block and leaves where a block yields."""
    if len(body.blocks) < 2:
        return
    blocks = list(body.blocks)
    for block in blocks:
        last = block.last_op
        if isinstance(last, YieldOp) and not last.operands:
            last.detach()
            last.erase()
            block.add_op(scf.YieldOp())
        body.detach_block(block)
    region = ExecuteRegionOp.build(result_types=[[]], regions=[Region(blocks)])
    body.add_block(Block([region]))


def _ensure_terminator(body: Region) -> None:
    if not body.blocks:
        body.add_block(Block())
    if len(body.blocks) > 1:
        return  # the verifier reports it
    block = body.block
    if not isinstance(block.last_op, YieldOp):
        block.add_op(YieldOp())


def _print_attrs_and_body(printer: Printer, attributes: dict[str, Attribute], body: Region) -> None:
    printer.print_op_attributes(attributes, print_keyword=True)
    printer.print_string(" ")
    terminator = body.block.last_op
    plain_yield = isinstance(terminator, YieldOp) and not terminator.attributes
    printer.print_region(body, print_block_terminators=not plain_yield)


def _parse_task(parser: Parser) -> TaskOp:
    target: SSAValue | str
    if parser.parse_optional_keyword("target") is not None:
        parser.parse_punctuation("=")
        target = parser.parse_str_literal(' for the target name (e.g. "cpu", "sm_90")')
        header = parser.pos
        memrefs = (
            _parse_header_operands(parser, allow_empty=False)
            if parser.parse_optional_punctuation(",") is not None
            else []
        )
        operands = memrefs
    else:
        header = parser.pos
        operands = _parse_header_operands(parser, allow_empty=False)
        target, memrefs = operands[0], operands[1:]
    at = parser.pos
    attrs = parser.parse_optional_attr_dict_with_keyword()
    reserved = sorted(set(attrs.data) & _TASK_PROPERTIES) if attrs is not None else []
    if reserved:
        # Written generically, they would read back as the task's own properties.
        parser.raise_error(
            f"'{reserved[0]}' is a property of dhir.task, not an attribute to give it; "
            'name the target in the header (dhir.task target = "cpu", ...)',
            at,
        )
    # dhir's own parser parses each distinct body once (dhir/ir/region_cache.py).
    cache = getattr(parser, "task_bodies", None)
    body = _parse_body(parser) if cache is None else cache.parse(parser, header, operands)
    if body is None:
        body = _parse_body(parser)
    op = TaskOp(target, memrefs, body)
    if attrs is not None:
        op.attributes.update(attrs.data)
    return op


_TASK_PROPERTIES = frozenset({"target", "operandSegmentSizes"})


def _print_task(op: TaskOp, printer: Printer) -> None:
    printer.print_string(" ")
    if op.target_name is not None:
        printer.print_string("target = ")
        printer.print_attribute(op.target_name)
        if op.memrefs:
            printer.print_string(", ")
    elif op.target is not None:
        printer.print_operand(op.target)
        if op.memrefs:
            printer.print_string(", ")
    printer.print_list(op.memrefs, printer.print_operand)
    _print_attrs_and_body(printer, op.attributes, op.body)


DHIR = Dialect("dhir", [ScheduleOp, TaskOp, TargetOp, YieldOp], [TargetType, TokenType])


def _tasks_from(op: Operation | None) -> Iterator[TaskOp]:
    """The tasks among `op` and the ops after it (ScheduleOp.tasks)."""
    while op is not None:
        following = op._next_op  # pyright: ignore[reportPrivateUsage]
        if type(op) is TaskOp or isinstance(op, TaskOp):
            yield op
        op = following


def walk_outside_tasks(op: Operation) -> Iterator[Operation]:
    """`op` and the ops nested in it, in pre-order, without entering task bodies
    (tasks are yielded): for passes looking for functions, schedules or tasks, since
    the bodies of a large schedule hold most of a module's ops.

    Some twenty passes and analyses walk a whole module so: blocks are read as xDSL 0.74
    stores them (`_last_op`, `_prev_op`), since `list(block.ops)` goes through a
    schedule's 10,000 tasks twice (`len` counts them first), each step a property and
    an iterator call, and a task is told by its class first (an IRDL `isinstance` goes
    through `ABCMeta`): 12.5 -> 3.5 ms a walk of issue 25's program."""
    pending = [op]
    while pending:
        current = pending.pop()
        yield current
        if type(current) is TaskOp or isinstance(current, TaskOp):
            continue
        for region in reversed(current.regions):
            for block in reversed(region.blocks):
                last = block._last_op  # pyright: ignore[reportPrivateUsage]
                while last is not None:
                    pending.append(last)
                    last = last._prev_op  # pyright: ignore[reportPrivateUsage]


__all__ = [
    "DHIR",
    "ScheduleOp",
    "TargetOp",
    "TargetType",
    "TaskOp",
    "TokenType",
    "VerifyExceptionAt",
    "YieldOp",
    "walk_outside_tasks",
]
