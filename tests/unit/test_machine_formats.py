"""Machine descriptions in TOML, JSON and DLTI: random descriptions round-trip through each,
the documented example reads, and bad files get clear errors."""

import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.dialects.dlti import TargetDeviceSpecAttr, TargetSystemSpecAttr

from dhir.analysis.profile import load_profile
from dhir.api import parse_string, print_module
from dhir.cli.schedule import read_graph
from dhir.dialects.dhir import TargetOp
from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.machine.description import GUESSABLE, MAX_INT, Device, Link, Node, System
from dhir.machine.dlti import attach, from_dlti, system_of, to_dlti
from dhir.machine.files import (
    from_dict,
    parse_json,
    parse_toml,
    read_system,
    to_dict,
    to_json,
    to_toml,
)
from dhir.placement.constraints import read_constraints
from dhir.targets import CPU_ARCHS, NVIDIA_SM

DOCS = Path(__file__).parents[2] / "docs" / "machine.md"

names = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.:+-]{0,10}", fullmatch=True)
positive = st.floats(min_value=0.0, exclude_min=True, allow_nan=False, allow_infinity=False)
links = st.builds(Link, st.one_of(st.just(0.0), positive), positive, st.booleans())
guessed = st.lists(st.sampled_from(GUESSABLE), unique=True).map(tuple)
curves = st.lists(st.integers(1, MAX_INT), min_size=2, max_size=6, unique=True).flatmap(
    lambda sizes: st.tuples(*(st.tuples(st.just(size), positive) for size in sorted(sizes)))
)
gpu_archs = st.sampled_from([f"sm_{n}" for n in NVIDIA_SM] + ["sm_90a", "sm_100f"])


@st.composite
def devices(draw: st.DrawFn, name: str, kind: str) -> Device:
    common = {
        "name": name,
        "peak_gflops": draw(positive),
        "mem_bw_gbs": draw(positive),
        "memory_bytes": draw(st.integers(1, MAX_INT)),
        "guessed": draw(guessed),
    }
    if kind == "cpu":
        arch = draw(st.sampled_from(CPU_ARCHS))
        return Device(
            arch=arch,
            cores=draw(st.integers(1, 4096)),
            ranks=draw(st.integers(1, 64)),
            core_bw_curve=draw(st.none() | curves),
            **common,
        )
    return Device(arch=draw(gpu_archs), host_link=draw(links), **common)


@st.composite
def systems(draw: st.DrawFn) -> System:
    kinds = draw(
        st.lists(st.lists(st.sampled_from(["cpu", "gpu"]), max_size=3), min_size=1, max_size=4)
    )
    kinds = [["cpu", *node] for node in kinds]  # every node has a host CPU
    count = sum(len(node) for node in kinds)
    device_names = iter(draw(st.lists(names, min_size=count, max_size=count, unique=True)))
    # Distinct node names and hosts; each node is reached by its name or by a host name.
    n = len(kinds)
    labels = draw(st.lists(names, min_size=2 * n, max_size=2 * n, unique=True))
    nodes = []
    for node_name, host, node_kinds in zip(labels[:n], labels[n:], kinds):
        node_devices = tuple(draw(devices(next(device_names), kind)) for kind in node_kinds)
        host = draw(st.sampled_from([host, node_name]))
        nodes.append(Node(node_name, draw(st.permutations(node_devices)), host=host))
    return System(tuple(nodes), draw(links), draw(links), name=draw(st.text(max_size=12)))


@settings(max_examples=80, deadline=None)
@given(systems())
def test_toml_round_trip(system: System) -> None:
    text = to_toml(system)
    assert from_dict(parse_toml(text, "t.toml"), "t.toml") == system


@settings(max_examples=80, deadline=None)
@given(systems())
def test_json_round_trip(system: System) -> None:
    assert from_dict(parse_json(to_json(system), "t.json"), "t.json") == system


@settings(max_examples=25, deadline=None)
@given(systems())
def test_dlti_round_trip_through_printed_mlir(system: System) -> None:
    module = ModuleOp([])
    attach(module, system)
    assert from_dlti(module.attributes) == system
    reparsed = parse_string(print_module(module), "m.mlir")
    assert system_of(reparsed) == system


def test_files_on_disk(tmp_path: Path) -> None:
    system = read_system(_docs_example(tmp_path))
    for name in ("s.toml", "s.json"):
        from dhir.machine.files import write_system

        write_system(system, tmp_path / "sub" / name)
        assert read_system(tmp_path / "sub" / name) == system


@pytest.mark.parametrize("name", ["s.toml", "s.json"])
def test_a_file_starting_with_a_byte_order_mark_reads(tmp_path: Path, name: str) -> None:
    # Some Windows editors write one; TOML said "Invalid statement (at line 1, column 1)".
    from dhir.machine.files import write_system

    system = read_system(_docs_example(tmp_path))
    path = tmp_path / name
    write_system(system, path)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert read_system(path) == system


def _docs_example(tmp_path: Path) -> Path:
    """The complete example of docs/machine.md, as a file."""
    match = re.search(r"```toml\n(# A complete example.*?)```", DOCS.read_text(), re.DOTALL)
    assert match is not None, "docs/machine.md lost its complete TOML example"
    path = tmp_path / "example.toml"
    path.write_text(match.group(1))
    return path


def test_the_documented_example_reads_as_documented(tmp_path: Path) -> None:
    system = read_system(_docs_example(tmp_path))
    assert [n.name for n in system.nodes] == ["node0", "node1"]
    assert [d.name for d in system.rank_devices()] == [
        "node0.cpu", "node0.gpu0", "node0.gpu1", "node1.cpu", "node1.cpu", "node1.gpu0",
    ]  # fmt: skip
    assert system.device("node1.gpu0").guessed == ("peak_gflops", "mem_bw_gbs")
    assert system.nodes[0].host == "gpu-a.example.org"
    assert not system.network.guessed and system.intra_node.latency_us == 0.4


def test_dlti_device_specs_are_what_dhir_target_reads() -> None:
    """`dhir.target {device = "..."}` finds the device and its arch in the written spec."""
    system = from_dict(
        {"nodes": [{"name": "n0", "devices": [
            {"name": "cpu0", "arch": "x86_64", "cores": 4},
            {"name": "gpu0", "arch": "sm_90"},
        ]}]},
        "inline",
    )  # fmt: skip
    module = parse_string(
        "func.func @f(%a: memref<4xf32>) {\n"
        "  dhir.schedule %a {\n"
        '    %g = dhir.target {device = "gpu0"}\n'
        '    %c = dhir.target {device = "cpu0"}\n'
        "    %t = dhir.task %g, %a {\n    }\n"
        "  }\n  return\n}\n",
        verify=False,
    )
    attach(module, system)
    module.verify()
    targets = [op.info() for op in module.walk() if isinstance(op, TargetOp)]
    assert [(str(t.kind), t.arch) for t in targets] == [("gpu", "sm_90"), ("cpu", "x86_64")]
    spec = module.attributes["dlti.target_system_spec"]
    assert isinstance(spec, TargetSystemSpecAttr)
    gpu0 = spec["gpu0"]
    assert isinstance(gpu0, TargetDeviceSpecAttr)
    assert gpu0["node"] == StringAttr("n0") and gpu0["kind"] == StringAttr("gpu")


def test_a_bare_system_spec_gets_typical_values() -> None:
    module = parse_string(
        'module attributes {dlti.target_system_spec = #dlti.target_system_spec<"c" = '
        '#dlti.target_device_spec<"arch" = "aarch64", "cores" = 16 : i64, '
        '"l2_cache_size_in_bytes" = 1048576 : i64>, "g" = #dlti.target_device_spec<'
        '"arch" = "sm_80">>} {}'
    )
    system = system_of(module)
    assert [n.name for n in system.nodes] == ["node0"]
    assert system.device("c").cores == 16 and system.network.guessed
    assert system.device("g").guessed == ("peak_gflops", "mem_bw_gbs", "memory_bytes")
    # The written spec is complete. (xDSL 0.74's DLTI attributes all compare equal: compare text.)
    written = str(to_dlti(system)["dlti.target_system_spec"])
    assert '"peak_gflops" = ' in written and written != str(
        module.attributes["dlti.target_system_spec"]
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nodes = 3", "nodes: missing or not a list"),
        ("name = 'x'", "nodes: missing or not a list"),
        (
            "nodez = []",
            "the description: unknown key 'nodez' \\(did you mean 'nodes'\\?\\); known keys: "
            "name, links, nodes",
        ),
        ("[[nodes]]\nname = 'n'", "nodes\\[0\\] \\('n'\\).devices: missing or not a list"),
        (
            "[[nodes]]\nname = 'n'\n[[nodes.devices]]\nname = 'c'\narch = 'x86_64'\npeak_gflop = 1",
            "nodes\\[0\\] \\('n'\\).devices\\[0\\] \\('c'\\): unknown key 'peak_gflop' "
            "\\(did you mean 'peak_gflops'\\?\\); known keys:",
        ),
        (
            "[[nodes]]\nname = 'n'\n[[nodes.devices]]\nname = 'c'\narch = 'x86_64'\ncores = -2",
            "device 'c': cores must be a positive whole number, got -2",
        ),
        (  # not "memory_bytes must be ...", the memory guessed for so many cores
            "[[nodes]]\nname = 'n'\n[[nodes.devices]]\nname = 'c'\narch = 'x86_64'\n"
            "cores = 9223372036854775807\n"
            "[[nodes.devices]]\nname = 'd'\narch = 'x86_64'\ncores = 99999999999999999999",
            "device 'd': cores must be a positive whole number at most 9223372036854775807 "
            r"\(a signed 64-bit integer\), got 99999999999999999999",
        ),
        (
            "[[nodes]]\nname = 'n'\n[[nodes.devices]]\nname = 'c'\narch = 'x86_64'\ncores = 2.5",
            "cores must be a whole number, got 2.5",
        ),
        (
            "[[nodes]]\nname = 'n'\n[[nodes.devices]]\nname = 'c'\narch = 'pdp11'",
            "device 'c': unknown arch \"pdp11\"; known archs are CPU: x86_64",
        ),
        (
            "[[nodes]]\nname = 'n'\n[[nodes.devices]]\nname = 'c'\narch = 'sm_90'\nkind = 'cpu'",
            'arch "sm_90" is a gpu, but kind says cpu',
        ),
        (
            "[[nodes]]\nname = 'n'\n[[nodes.devices]]\nname = 'c'\narch = 'x86_64'\n"
            "peak_gflops = 'fast'",
            'peak_gflops must be a number, got "fast"',
        ),
        (
            "[links.network]\nlatency_us = -1.0\nbandwidth_gbs = 1.0\n"
            "[[nodes]]\nname = 'n'\n[[nodes.devices]]\nname = 'c'\narch = 'x86_64'",
            "links.network: latency_us must be a non-negative number, got -1.0",
        ),
        (
            "[links.network]\nlatency_us = 1.0\n"
            "[[nodes]]\nname = 'n'\n[[nodes.devices]]\nname = 'c'\narch = 'x86_64'",
            "links.network: missing bandwidth_gbs",
        ),
        (
            "[[nodes]]\nname = 'n'\n[[nodes.devices]]\nname = 'c'\narch = 'x86_64'\n"
            "guessed = 'all'",
            "guessed: missing or not a list",
        ),
        (
            "[[nodes]]\nname = 'n'\n[[nodes.devices]]\nname = 'c'\narch = 'x86_64'\n"
            "core_bw_curve = [1, 2]",
            "core_bw_curve must be a list of at least 2 \\[footprint bytes, GB/s\\] pairs",
        ),
        (
            "[[nodes]]\nname = 'n'\n[[nodes.devices]]\nname = 'c'\narch = 'x86_64'\n"
            "core_bw_curve = [[1024, 'fast'], [2048, 1.0]]",
            'core_bw_curve: GB/s must be a number, got "fast"',
        ),
        (
            "[[nodes]]\nname = 'n'\n[[nodes.devices]]\nname = 'c'\narch = 'x86_64'\n"
            "core_bw_curve = [[1024, 5.0], [512, 1.0]]",
            "footprints increasing",
        ),
        ("nodes = [", "bad.toml:1:10: error: not valid TOML"),
    ],
)
def test_bad_files_say_where_and_what(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(DhirError, match=message) as error:
        read_system(path)
    # At the entry's line where it has one (test_bad_files_point_at_the_line), else the file.
    assert str(error.value).startswith((f"error: {path}", f"{path}:"))


_CPU = "[[nodes]]\nname = 'n'\n[[nodes.devices]]\nname = 'c'\narch = 'x86_64'\n"


@pytest.mark.parametrize(
    ("name", "text", "at", "message"),
    [
        ("m.toml", _CPU + "cores = -3\n", "6:1", "device 'c': cores must be a positive"),
        ("m.toml", _CPU + "memory_bytes = 0\n", "6:1", "memory_bytes must be a positive"),
        ("m.toml", _CPU + "speed = 3\n", "6:1", "unknown key 'speed'"),
        (
            "m.toml",
            _CPU + "core_bw_curve = [\n  [2048, 5.0],\n  [1024, 1.0],\n]\ncores = 0\n",
            "10:1",
            "cores must be a positive",
        ),
        (
            "m.toml",
            _CPU.replace("arch = 'x86_64'\n", "arch = 'sm_90'\ncores = 2\n"),
            "6:1",
            "cores is for CPUs",
        ),
        (
            "m.toml",
            "[links.network]\nlatency_us = 1.0\nbandwidth_gbs = -2\n" + _CPU,
            "3:1",
            "links.network: bandwidth_gbs must be a positive",
        ),
        (
            "m.toml",
            _CPU + "[[nodes]]\nname = 'm'\n[[nodes.devices]]\nname = 'g'\n"
            "arch = 'sm_90'\nhost_link = {latency_us = 1.0}\n",
            "11:1",
            "missing bandwidth_gbs",
        ),
        ("m.toml", _CPU + "[[nodes]]\nname = 'm'\n", "6:1", "nodes[1] ('m').devices: missing"),
        ("m.toml", _CPU + "ranks = 99999999999\n", "6:9", "runs 99999999999 ranks"),
        (
            "m.toml",
            _CPU
            + "ranks = 40000\n"
            + _CPU.replace("'n'", "'m'").replace("'c'", "'d'")
            + "ranks = 40000\n",
            "12:9",
            "runs 80000 ranks (the sum of its devices' ranks); dhir runs at most 65536: give "
            "device 'd' fewer",
        ),
        (
            "m.json",
            '{"nodes": [{"name": "n", "devices": [\n  {"name": "c", "arch": "x86_64",\n'
            '   "cores": -3}]}]}',
            "3:4",
            "cores must be a positive",
        ),
        (
            "m.json",
            '{"nodes": [{"name": "n", "devices": [\n  {"name": "c", "arch": "sm_90",'
            ' "host_link": {"latency_us": 1, "cores": 2}}]}]}',
            "2:65",
            "unknown key 'cores'",
        ),
    ],
)
def test_bad_files_point_at_the_line(
    tmp_path: Path, name: str, text: str, at: str, message: str
) -> None:
    """Errors in a description file named the file but not where in it."""
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(DhirError) as error:
        read_system(path)
    # Each error of the file is reported (the curve's order and the cores, at 10:1).
    (diagnostic,) = [d for d in error.value.diagnostics if message in d.message]
    assert f"{diagnostic.loc}: error: " in str(error.value)
    assert str(diagnostic.loc) == f"{path}:{at}"


def test_a_whole_description_error_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    path.write_text("nodes = []\n")
    with pytest.raises(DhirError, match=f"^error: {re.escape(str(path))}: .*has no nodes"):
        read_system(path)


@pytest.mark.parametrize(
    ("name", "text", "at", "message"),
    [
        ("m.toml", _CPU + _CPU.replace("'n'", "'m'"), "9:8", "two devices are named 'c'"),
        ("m.toml", _CPU + _CPU.replace("'c'", "'d'"), "7:8", "two nodes are named 'n'"),
        (
            "m.toml",
            _CPU + _CPU.replace("'n'\n", "'m'\nhost = 'n'\n").replace("'c'", "'d'"),
            "8:8",
            "two nodes have host 'n'",
        ),
        (
            "m.json",
            '{"nodes": [{"name": "n", "devices": [{"name": "c", "arch": "x86_64"},\n'
            '  {"name": "c", "arch": "x86_64"}]}]}',
            "2:12",
            "two devices are named 'c'",
        ),
    ],
)
def test_a_name_given_twice_is_at_the_second(
    tmp_path: Path, name: str, text: str, at: str, message: str
) -> None:
    """Two devices (or nodes, or hosts) of one name were errors naming the file alone."""
    path = tmp_path / name
    diagnostic = _only_error(path, text)
    assert str(diagnostic.loc) == f"{path}:{at}"
    assert diagnostic.message.startswith(message)


def _only_error(path: Path, text: str) -> Diagnostic:
    """The one error of the description `text` written to `path`."""
    path.write_text(text)
    with pytest.raises(DhirError) as error:
        read_system(path)
    (diagnostic,) = error.value.diagnostics
    return diagnostic


@pytest.mark.parametrize(
    ("device", "message"),
    [
        ('"cores": true', "cores must be a whole number, got true"),
        ('"cores": null', "cores must be a whole number, got null"),
        ('"ranks": false', "ranks must be a whole number, got false"),
        ('"cpu": [null]', "cpu must be a string, got [null]"),
        ('"core_bw_curve": {"a": 1}', 'core_bw_curve must be .* got {"a": 1}'),
    ],
)
def test_bad_json_values_are_quoted_as_json(tmp_path: Path, device: str, message: str) -> None:
    """They were quoted as Python prints them: `got True`, `got None`, `{'a': 1}`."""
    path = tmp_path / "bad.json"
    text = '{"nodes": [{"name": "n", "devices": [{"name": "c", "arch": "x86_64", DEVICE}]}]}'
    path.write_text(text.replace("DEVICE", device))
    with pytest.raises(DhirError, match=re.escape(message).replace(r"\.\*", ".*")):
        read_system(path)


def test_bad_paths(tmp_path: Path) -> None:
    with pytest.raises(DhirError, match="a .toml or .json file, not '.yaml'"):
        read_system(tmp_path / "m.yaml")
    with pytest.raises(DhirError, match="cannot read the machine description .*missing.json"):
        read_system(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(DhirError, match="bad.json:1:2: error: not valid JSON"):
        read_system(tmp_path / "bad.json")


def test_json_numbers_beyond_floats_are_errors() -> None:
    device = {"name": "c", "arch": "x86_64", "peak_gflops": 10**400}
    with pytest.raises(DhirError, match="peak_gflops must be a finite number"):
        from_dict({"nodes": [{"name": "n", "devices": [device]}]}, "big.json")


def test_bad_dlti_says_what_is_wrong() -> None:
    with pytest.raises(DhirError, match="has no dlti.target_system_spec attribute"):
        system_of(ModuleOp([]))
    module = parse_string(
        'module attributes {dlti.target_system_spec = #dlti.target_system_spec<"c" = '
        '#dlti.target_device_spec<"arch" = "x86_64", "cores" = 0 : i64>>} {}'
    )
    with pytest.raises(DhirError, match="device 'c': cores must be a positive whole number"):
        system_of(module)


def test_written_toml_is_plain_to_read() -> None:
    system = from_dict({"nodes": [{"name": "n", "devices": [{"name": "c", "arch": "x86_64"}]}]}, "")
    text = to_toml(system)
    assert '[[nodes.devices]]\nname = "c"\nkind = "cpu"\narch = "x86_64"\n' in text
    assert to_dict(system)["links"]["network"]["guessed"] is True


@pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")
def test_mlir_opt_lowers_mpi_in_a_described_module(tmp_path: Path) -> None:
    """MLIR answers the MPI lowering's DLTI query from the module's first DLTI attribute in
    name order: the description must not stand in front of dlti.map."""
    attrs = to_dlti(read_system(_docs_example(tmp_path)))
    text = (
        "module attributes {"
        + ", ".join(f"{name} = {value}" for name, value in attrs.items())
        + ', dlti.map = #dlti.map<"MPI:Implementation" = "MPICH">} {\n'
        "  func.func @rank() -> i32 {\n"
        "    %c = mpi.comm_world : !mpi.comm\n"
        "    %r = mpi.comm_rank(%c) : i32\n"
        "    return %r : i32\n  }\n}\n"
    )
    path = tmp_path / "m.mlir"
    path.write_text(text)
    result = subprocess.run(
        ["mlir-opt-22", "--convert-to-llvm", str(path)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "failed DLTI query" not in result.stderr
    assert "MPI_Comm_rank" in result.stdout and "dhir.machine = {" in result.stdout


def test_dhir_opt_prints_the_attributes(tmp_path: Path) -> None:
    module = ModuleOp([])
    attach(module, read_system(_docs_example(tmp_path)))
    path = tmp_path / "m.mlir"
    path.write_text(print_module(module))
    result = subprocess.run(
        [sys.executable, "-m", "dhir.cli.dhir_opt", str(path)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert system_of(parse_string(result.stdout)) == read_system(_docs_example(tmp_path))


def test_attaching_a_description_without_a_named_device_is_an_error() -> None:
    module = parse_string(
        'module attributes {dlti.target_system_spec = #dlti.target_system_spec<"gpu0" = '
        '#dlti.target_device_spec<"arch" = "sm_90">>} {\n'
        "func.func @f(%a: memref<4xf32>) {\n"
        "  dhir.schedule %a {\n"
        '    %g = dhir.target {device = "gpu0"}\n'
        "    %t = dhir.task %g, %a {\n    }\n"
        "  }\n  return\n}\n}\n",
        "prog.mlir",
    )
    system = from_dict({"name": "cpus", "nodes": [{"name": "n", "devices": [
        {"name": "cpu0", "arch": "x86_64", "cores": 2}]}]}, "cpus.toml")  # fmt: skip
    with pytest.raises(DhirError, match='prog.mlir:4:10: error: this target names device "gpu0", '
                       "which the machine description 'cpus' does not have; it has cpu0"):  # fmt: skip
        attach(module, system)


def test_a_module_description_with_too_many_ranks_is_reported_at_its_line() -> None:
    text = (
        "module attributes {\n"
        "  dlti.target_system_spec = #dlti.target_system_spec<\n"
        '    "cpu0" = #dlti.target_device_spec<"arch" = "x86_64", "ranks" = 1000002 : i64>>\n'
        "} {\n"
        "}\n"
    )
    with pytest.raises(DhirError) as raised:
        system_of(parse_string(text, "p.mlir"))
    (diagnostic,) = raised.value.diagnostics
    assert str(diagnostic.loc) == "p.mlir:2:3"
    assert "runs 1000002 ranks" in diagnostic.message


def test_a_bad_dhir_machine_attribute_is_reported_at_its_line() -> None:
    text = (
        "module attributes {\n"
        "  dlti.target_system_spec = #dlti.target_system_spec<\n"
        '    "cpu0" = #dlti.target_device_spec<"arch" = "x86_64">>,\n'
        "  dhir.machine = {nodes = 3}\n"
        "} {\n"
        "}\n"
    )
    with pytest.raises(DhirError) as raised:
        system_of(parse_string(text, "p.mlir"))
    (diagnostic,) = raised.value.diagnostics
    assert str(diagnostic.loc) == "p.mlir:4:3"
    assert '"nodes" must be a list' in diagnostic.message


def test_a_device_spec_with_a_key_twice_is_reported_at_its_attribute() -> None:
    """xDSL checks a DLTI spec as it builds it; the error was at the module's first line."""
    text = (
        "module attributes {\n"
        "  dlti.target_system_spec = #dlti.target_system_spec<\n"
        '    "cpu0" = #dlti.target_device_spec<"arch" = "x86_64", "cores" = 2 : i64,\n'
        '      "cores" = 8 : i64>>\n'
        "} {\n"
        "}\n"
    )
    with pytest.raises(DhirError) as raised:
        parse_string(text, "p.mlir")
    (diagnostic,) = raised.value.diagnostics
    assert str(diagnostic.loc) == "p.mlir:2:3"
    assert "duplicate DLTI entry key" in diagnostic.message


@pytest.mark.parametrize(
    ("attributes", "line", "message"),
    [
        (', "cores" = -3 : i64>>', 2, "device 'cpu0': cores must be a positive whole number"),
        (">>,\n  dhir.machine = {nodes = 3}", 4, 'dhir.machine: "nodes" must be a list'),
    ],
)
def test_both_backends_refuse_a_bad_module_description_alike(
    tmp_path: Path, attributes: str, line: int, message: str
) -> None:
    """The interpreter, which reads nothing of the description, ran such a program."""
    program = tmp_path / "p.mlir"
    program.write_text(
        "module attributes {\n"
        "  dlti.target_system_spec = #dlti.target_system_spec<\n"
        f'    "cpu0" = #dlti.target_device_spec<"arch" = "x86_64"{attributes}\n'
        "} {\n"
        "  func.func @main() {\n"
        "    return\n"
        "  }\n"
        "}\n"
    )
    refusals = []
    for backend in ("native", "interp"):
        done = subprocess.run(
            [sys.executable, "-m", "dhir", "run", str(program), "-n", "1", "--backend", backend],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 1, done.stderr
        refusals.append(done.stderr)
    assert refusals[0] == refusals[1]
    assert f"{program}:{line}:3: error: the module: {message}" in refusals[1]
    assert "Traceback" not in refusals[1]


def test_a_bad_module_description_is_refused_even_with_system_replacing_it(
    tmp_path: Path,
) -> None:
    """docs/machine.md: refused "even with --system replacing it"; `dhir compile` did, but
    `dhir run --system` attached the file's description first and ran the program."""
    program = tmp_path / "p.mlir"
    program.write_text(
        "module attributes {\n"
        "  dlti.target_system_spec = #dlti.target_system_spec<\n"
        '    "cpu0" = #dlti.target_device_spec<"arch" = "x86_64", "cores" = -3 : i64>>\n'
        "} {\n"
        "  func.func @main() {\n"
        "    return\n"
        "  }\n"
        "}\n"
    )
    system = tmp_path / "one.toml"
    system.write_text(
        'name = "one"\n\n[[nodes]]\nname = "n0"\n\n[[nodes.devices]]\nname = "cpu0"\n'
        'arch = "x86_64"\ncores = 1\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "dhir", "run", str(program), "--system", str(system), "-q"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr
    assert f"{program}:2:3: error: the module: device 'cpu0': cores must be a positive" in (
        done.stderr
    )


def _readers() -> list[tuple[str, Callable[[Path], object]]]:
    return [
        ("m.toml", read_system),
        ("m.json", read_system),
        ("c.toml", read_constraints),
        ("c.json", read_constraints),
        ("p.json", load_profile),
        ("g.json", read_graph),
    ]


@pytest.mark.parametrize(("name", "read"), _readers())
def test_malformed_files_are_errors_at_their_line(
    tmp_path: Path, name: str, read: Callable[[Path], object]
) -> None:
    # A TOML or JSON syntax error: at its file:line:col, the line quoted, as MLIR's are.
    path = tmp_path / name
    bad = '{\n  "tasks": {"a": 1,}\n}\n' if name.endswith(".json") else "[[pin]]\nrank = = 1\n"
    path.write_text(bad)
    with pytest.raises(DhirError) as error:
        read(path)
    at = "2:20" if name.endswith(".json") else "2:8"
    shown = str(error.value)
    assert shown.startswith(f"{path}:{at}: error: "), shown
    assert bad.splitlines()[1] in shown.splitlines()


@pytest.mark.parametrize(("name", "read"), _readers())
def test_deeply_nested_files_are_errors(
    tmp_path: Path, name: str, read: Callable[[Path], object]
) -> None:
    # Python's readers recurse once per level: this was an internal RecursionError.
    path = tmp_path / name
    path.write_text("[" * 100_000 if name.endswith(".json") else "a = " + "[" * 100_000)
    with pytest.raises(DhirError, match="nested too deeply"):
        read(path)


_PLAIN = {
    "m.toml": _CPU,
    "m.json": '{"nodes": [{"name": "n", "devices": [{"name": "c", "arch": "x86_64"}]}]}',
    "c.toml": '[[pin]]\ntasks = "a"\nrank = 0\n',
    "c.json": '{"pin": [{"tasks": "a", "rank": 0}]}',
    "p.json": '{"tasks": {"a": 1.0}}',
    "g.json": '{"devices": ["a"], "tasks": {"x": {"cost": {"a": 1}}}, "edges": []}',
}


@pytest.mark.parametrize(("name", "read"), _readers())
def test_a_file_that_starts_with_a_bom_reads_as_one_without(
    tmp_path: Path, name: str, read: Callable[[Path], object]
) -> None:
    # Windows editors write one; --costs and --graph refused it ("Unexpected UTF-8 BOM").
    plain, marked = tmp_path / name, tmp_path / "bom" / name
    marked.parent.mkdir()
    plain.write_text(_PLAIN[name])
    marked.write_text("\ufeff" + _PLAIN[name])
    assert repr(read(marked)).replace(str(marked), str(plain)) == repr(read(plain))


@pytest.mark.parametrize(
    ("name", "text", "at", "message"),
    [
        ("m.toml", _CPU.replace("'n'", "'bad name!'"), "2:8", "node name 'bad name!' is not"),
        ("m.toml", _CPU.replace("'c'", "'.c'"), "4:8", "device name '.c' is not"),
        (
            "m.toml",
            _CPU.replace("'n'\n", "'n'\nhost = 'a b'\n"),
            "3:8",
            "node 'n': host name 'a b' is not",
        ),
        (
            "m.json",
            '{"nodes": [\n {"name": "bad name!",\n  "devices": [{"name": "c", "arch": "x86_64"}]}]}',
            "2:11",
            "node name 'bad name!' is not",
        ),
    ],
)
def test_a_bad_name_is_at_its_line(
    tmp_path: Path, name: str, text: str, at: str, message: str
) -> None:
    """A node's bad name (or host) was reported at its `[[nodes]]` line."""
    path = tmp_path / name
    diagnostic = _only_error(path, text)
    assert str(diagnostic.loc) == f"{path}:{at}"
    assert diagnostic.message.startswith(message)


# Four errors in one file: a misspelt key, a negative rate, a wrong type, a missing name.
_FOUR_ERRORS = {
    "m.toml": (
        "name = 'x'\n[[nodes]]\nname = 'n'\n[[nodes.devices]]\nname = 'c'\narch = 'x86_64'\n"
        "peak_gflop = 10.0\nmem_bw_gbs = -5.0\ncores = 'two'\n"
        "[[nodes.devices]]\narch = 'x86_64'\n"
    ),
    "m.json": (
        '{"name": "x", "nodes": [{"name": "n", "devices": [\n'
        '  {"name": "c", "arch": "x86_64",\n'
        '   "peak_gflop": 10.0,\n'
        '   "mem_bw_gbs": -5.0,\n'
        '   "cores": "two"},\n'
        '  {"arch": "x86_64"}]}]}\n'
    ),
}
_FOUR_AT = {"m.toml": ["7:1", "8:1", "9:9", "10:1"], "m.json": ["3:4", "4:4", "5:13", "6:3"]}


@pytest.mark.parametrize("name", sorted(_FOUR_ERRORS))
def test_every_error_of_a_description_is_reported_at_its_line(tmp_path: Path, name: str) -> None:
    """A description with several errors reported the first alone: fixing one to meet the
    next took a run each."""
    path = tmp_path / name
    path.write_text(_FOUR_ERRORS[name])
    with pytest.raises(DhirError) as error:
        read_system(path)
    said = [(str(d.loc), d.message) for d in error.value.diagnostics]
    assert [loc for loc, _ in said] == [f"{path}:{at}" for at in _FOUR_AT[name]], said
    messages = [message for _, message in said]
    assert "unknown key 'peak_gflop' (did you mean 'peak_gflops'?)" in messages[0]
    assert "device 'c': mem_bw_gbs must be a positive number, got -5.0" in messages[1]
    assert 'cores must be a whole number, got "two"' in messages[2]
    assert "devices[1]: missing name" in messages[3]


def test_every_error_of_a_module_s_description_is_reported() -> None:
    spec = (
        '"c" = #dlti.target_device_spec<"arch" = "x86_64", "cores" = -3 : i64, '
        '"mem_bw_gbs" = -1.0 : f64, "speed" = 3 : i64>'
    )
    with pytest.raises(DhirError) as error:
        from_dlti({"dlti.target_system_spec": _spec_attr(spec)})
    messages = [d.message for d in error.value.diagnostics]
    assert len(messages) == 2, messages  # DLTI is open: "speed" is another consumer's
    assert any("cores must be a positive whole number, got -3" in m for m in messages)
    assert any("mem_bw_gbs must be a positive number, got -1.0" in m for m in messages)


def _spec_attr(entries: str) -> TargetSystemSpecAttr:
    module = parse_string(
        f"module attributes {{dlti.target_system_spec = #dlti.target_system_spec<{entries}>}} {{}}"
    )
    spec = module.attributes["dlti.target_system_spec"]
    assert isinstance(spec, TargetSystemSpecAttr)
    return spec


def test_a_file_the_reader_cannot_go_on_in_says_so(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    diagnostic = _only_error(path, "name = \n[[nodes]]\ncores = -1\n")
    assert str(diagnostic.loc) == f"{path}:1:8"
    assert "the file is read no further, so what follows is not checked yet" in diagnostic.message
