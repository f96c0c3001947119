"""The CPU each rank's code is built for (dhir.toolchain.cpu): from the options, the machine
description, or this machine; and what clang says it has."""

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dhir.ir.diagnostics import DhirError, collected_warnings
from dhir.machine.dlti import from_dlti, to_dlti
from dhir.machine.files import from_dict, parse_toml, to_toml
from dhir.targets import host_arch
from dhir.toolchain.cpu import NATIVE, cpu_facts, cpu_flags, cpu_for
from dhir.toolchain.options import RunOptions
from dhir.toolchain.tools import find_llvm_tools


def _system(*nodes: tuple[str, str | None], arch: str | None = None) -> Any:
    listed = []
    for number, (host, cpu) in enumerate(nodes):
        device: dict[str, object] = {
            "name": f"cpu{number}",
            "arch": arch or host_arch(),
            "cores": 2,
            "memory_bytes": 2**30,
        }
        if cpu is not None:
            device["cpu"] = cpu
        listed.append({"name": f"n{number}", "host": host, "devices": [device]})
    return from_dict({"name": "test", "nodes": listed}, "test")


def test_without_a_description_this_machines_cpu() -> None:
    assert cpu_for(None) == NATIVE


def test_one_node_is_this_machine_whatever_its_host() -> None:
    assert cpu_for(_system(("far.example.org", None))) == NATIVE


def test_the_cpu_a_description_gives() -> None:
    assert cpu_for(_system(("localhost", "znver4"), ("far", "znver4"))) == "znver4"


def test_nodes_with_different_cpus_get_the_baseline_with_a_warning() -> None:
    with collected_warnings() as warnings:
        cpu = cpu_for(_system((socket.gethostname(), None), ("far.example.org", None)))
    assert cpu == "x86-64"
    (warning,) = warnings
    assert "different CPUs" in warning.message and "native on n0" in warning.message


def test_a_node_of_another_arch_is_refused() -> None:
    other = "aarch64" if host_arch() != "aarch64" else "x86_64"
    with pytest.raises(DhirError, match=f"is {other}, this machine"):
        cpu_for(_system(("localhost", None), ("far", None), arch=other))


def test_a_description_keeps_its_cpu_through_files_and_dlti() -> None:
    system = _system(("localhost", "x86-64-v3"))
    again = from_dict(parse_toml(to_toml(system), "again"), "again")
    assert again == system and again.nodes[0].devices[0].cpu == "x86-64-v3"
    assert from_dlti(to_dlti(system)).nodes[0].devices[0].cpu == "x86-64-v3"


def test_bad_cpu_names_are_refused() -> None:
    with pytest.raises(DhirError, match="cpu must be an LLVM CPU name"):
        _system(("localhost", "two words"))
    with pytest.raises(DhirError, match="bad CPU 'a;b'"):
        RunOptions(cpu="a;b")


def test_a_cpu_clang_does_not_know_lists_those_it_does() -> None:
    with pytest.raises(DhirError) as error:
        cpu_facts(find_llvm_tools().clang, "no-such-cpu")
    message = str(error.value)
    assert "cannot build for CPU 'no-such-cpu'" in message and "znver4" in message


def test_flags_by_arch() -> None:
    assert cpu_flags("znver4", "x86_64") == (
        "-march=znver4",
        "-mno-avx512bf16",
        "-mno-avxneconvert",
        "-mno-avx512fp16",
    )
    assert cpu_flags("neoverse-v2", "aarch64") == ("-mcpu=neoverse-v2",)


def test_a_build_for_a_cpu_with_avx512_fp16_computes_f16_in_f32() -> None:
    """Sapphire Rapids has AVX512-FP16: f16 maximumf computed in f16 kept a signalling
    NaN the interpreter (and every CPU without it) quiets."""
    clang = str(find_llvm_tools().clang)
    command = [clang, *cpu_flags("sapphirerapids", "x86_64"), "-dM", "-E", "-x", "c", "/dev/null"]
    macros = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    assert "#define __AVX512F__ 1" in macros and "#define __F16C__ 1" in macros
    assert "__AVX512FP16__" not in macros and "__AVX512BF16__" not in macros


def test_native_and_a_named_cpu_key_the_cache_apart() -> None:
    clang = find_llvm_tools().clang
    assert cpu_facts(clang, NATIVE).digest != cpu_facts(clang, "x86-64").digest


def test_cli_unknown_cpu_is_an_error_without_traceback(tmp_path: Path) -> None:
    program = tmp_path / "p.mlir"
    program.write_text("func.func @main() {\n  return\n}\n")
    done = subprocess.run(
        [sys.executable, "-m", "dhir", "run", str(program), "--cpu", "no-such-cpu"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert "cannot build for CPU 'no-such-cpu'" in done.stderr
    assert "Traceback" not in done.stderr


def _described(arch: str, extra: str = "") -> str:
    """A program whose machine description (one CPU of `arch`) is a module attribute,
    written on line 2."""
    return (
        "module attributes {\n"
        "  dlti.target_system_spec = #dlti.target_system_spec<\n"
        f'    "cpu0" = #dlti.target_device_spec<"arch" = "{arch}", "node" = "n1"{extra}>>\n'
        "} {\n"
        "  func.func @main() {\n"
        "    return\n"
        "  }\n"
        "}\n"
    )


def _compile(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "dhir", "compile", *args, "-o", str(tmp_path / "exe")]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def test_a_module_description_of_another_arch_is_reported_at_its_line(tmp_path: Path) -> None:
    other = "aarch64" if host_arch() != "aarch64" else "x86_64"
    program = tmp_path / "p.mlir"
    program.write_text(_described(other))
    done = _compile(tmp_path, str(program))
    assert done.returncode == 1
    assert f"\n{program}:2:3: error: node n1's CPU cpu0 is {other}" in done.stderr


def test_a_module_description_naming_an_unknown_cpu_is_reported_at_its_line(
    tmp_path: Path,
) -> None:
    program = tmp_path / "p.mlir"
    program.write_text(_described(host_arch(), ', "cpu" = "no-such-cpu"'))
    done = _compile(tmp_path, str(program))
    assert done.returncode == 1
    assert f"\n{program}:2:3: error: cannot build for CPU 'no-such-cpu'" in done.stderr


def test_a_system_file_of_another_arch_is_named_in_the_error(tmp_path: Path) -> None:
    other = "aarch64" if host_arch() != "aarch64" else "x86_64"
    program = tmp_path / "p.mlir"
    program.write_text("func.func @main() {\n  return\n}\n")
    system = tmp_path / "cluster.toml"
    system.write_text(
        f'[[nodes]]\nname = "n1"\n[[nodes.devices]]\nname = "cpu0"\narch = "{other}"\n'
    )
    done = _compile(tmp_path, str(program), "--system", str(system))
    assert done.returncode == 1
    assert f"\n{system}:5:1: error: node n1's CPU cpu0 is {other}" in done.stderr
    assert f'\narch = "{other}"\n^' in done.stderr  # the line quoted


def test_a_system_file_naming_an_unknown_cpu_is_reported_at_its_line(tmp_path: Path) -> None:
    """docs/machine.md: description errors are at the file:line:col of the value at fault;
    a `cpu` clang does not know named the file alone (`error: m.toml: cannot build ...`)."""
    program = tmp_path / "p.mlir"
    program.write_text("func.func @main() {\n  return\n}\n")
    system = _unknown_cpu_system(tmp_path)
    done = _compile(tmp_path, str(program), "--system", str(system))
    assert done.returncode == 1
    assert f"\n{system}:6:1: error: device 'cpu0': cannot build for CPU 'no-such-cpu'" in (
        done.stderr
    )
    assert '\ncpu = "no-such-cpu"\n^' in done.stderr


def _unknown_cpu_system(folder: Path) -> Path:
    """A one-device description (m.toml) whose `cpu`, on line 6, clang does not know."""
    system = folder / "m.toml"
    system.write_text(
        f'[[nodes]]\nname = "n1"\n[[nodes.devices]]\nname = "cpu0"\narch = "{host_arch()}"\n'
        'cpu = "no-such-cpu"\n'
    )
    return system


# Entries mlir-opt-22 rewrites before dhir builds them: a shard program (partitioned) and
# an entry on tensors (bufferized), each on one rank.
THROUGH_MLIR_OPT = {
    "shard": (
        "shard.grid @grid(shape = 1)\n"
        "func.func @main(%a: tensor<4xf64>) -> tensor<4xf64> {\n"
        "  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding\n"
        "  %b = shard.shard %a to %s : tensor<4xf64>\n"
        "  return %b : tensor<4xf64>\n"
        "}\n"
    ),
    "tensors": (
        "func.func @main(%a: tensor<4xf64>) -> tensor<4xf64> {\n"
        "  %b = arith.addf %a, %a : tensor<4xf64>\n"
        "  return %b : tensor<4xf64>\n"
        "}\n"
    ),
}


@pytest.mark.parametrize("kind", sorted(THROUGH_MLIR_OPT))
def test_a_description_error_after_mlir_opt_is_at_the_users_line(tmp_path: Path, kind: str) -> None:
    """An error about the description found once mlir-opt-22 had rewritten the program
    was at `<mlir-opt: partition @main (a shard program)>:1:1`, mlir-opt's text, which the
    user never sees: the description read back from it was no longer the one dhir knew
    where it came from. It is at the `--system` file's line, and at the program's."""
    program = tmp_path / "p.mlir"
    program.write_text(THROUGH_MLIR_OPT[kind])
    system = _unknown_cpu_system(tmp_path)
    done = _compile(tmp_path, str(program), "--system", str(system))
    assert done.returncode == 1
    assert "<mlir-opt" not in done.stderr
    assert f"\n{system}:6:1: error: device 'cpu0': cannot build for CPU 'no-such-cpu'" in (
        done.stderr
    )
    described = _described(host_arch(), ', "cpu" = "no-such-cpu"')
    body = THROUGH_MLIR_OPT[kind].replace("\n", "\n  ")
    program.write_text(described.replace("  func.func @main() {\n    return\n  }\n", f"  {body}\n"))
    done = _compile(tmp_path, str(program))
    assert done.returncode == 1
    assert "<mlir-opt" not in done.stderr
    assert f"\n{program}:2:3: error: " in done.stderr and "no-such-cpu" in done.stderr
