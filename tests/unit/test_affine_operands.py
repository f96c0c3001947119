"""Affine map operands must be valid dimensions and symbols by MLIR's rules: dhir's
verifier refuses, with a located error, exactly what mlir-opt-22 refuses (it ran such
programs in the interpreter, and the native build failed in mlir-opt-22)."""

import shutil
import subprocess

import pytest

import dhir
from dhir import DhirError

needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")

# Where the operand comes from: (at the top of the function, in the loop, its name).
VALUES = {
    "argument": ("", "", "%n"),
    "top-level addi": ("%b = arith.addi %n, %n : index", "", "%b"),
    "constant in the loop": ("", "%b = arith.constant 3 : index", "%b"),
    "loop variable": ("", "", "%i"),
    "iteration argument": ("", "", "%acc"),
    "addi in the loop": ("", "%b = arith.addi %i, %i : index", "%b"),
    "load in the loop": ("", "%b = memref.load %m[%i] : memref<8xindex>", "%b"),
    "apply of the loop variable": ("", "%b = affine.apply affine_map<(d0) -> (d0 * 2)>(%i)", "%b"),
    "apply of the iteration argument": (
        "",
        "%b = affine.apply affine_map<(d0) -> (d0 * 2)>(%acc)",
        "%b",
    ),
    "delinearized loop variable": (
        "",
        "%b:2 = affine.delinearize_index %i into (2, 4) : index, index",
        "%b#0",
    ),
    "delinearized constant in the loop": (
        "",
        "%b:2 = affine.delinearize_index %c0 into (2, 4) : index, index",
        "%b#1",
    ),
    "linearized argument in the loop": (
        "",
        "%b = affine.linearize_index [%n, %c0] by (2, 4) : index",
        "%b",
    ),
    "dim of an argument": ("", "%b = memref.dim %dm, %c0 : memref<?xf32>", "%b"),
    "dim of an allocation in the loop": (
        "",
        "%al = memref.alloc(%i) : memref<?xf32>\n    %b = memref.dim %al, %c0 : memref<?xf32>",
        "%b",
    ),
    "loop result in the loop": (
        "",
        "%b = affine.for %j = 0 to 2 iter_args(%a = %i) -> (index) {\n"
        "      affine.yield %a : index\n    }",
        "%b",
    ),
}

# MLIR 22's wider rule: the result of a pure op (speculatable, without memory effects)
# of valid symbols is a valid symbol at any depth, as which ops are pure is MLIR's word.
PURE_VALUES = {
    "addi of symbols in the loop": ("", "%b = arith.addi %n, %c0 : index", "%b"),
    "muli of addi of symbols": (
        "",
        "%a = arith.addi %n, %n : index\n    %b = arith.muli %a, %n : index",
        "%b",
    ),
    "remui of symbols": ("", "%b = arith.remui %n, %n : index", "%b"),
    "floordivsi of symbols": ("", "%b = arith.floordivsi %n, %n : index", "%b"),
    "divui by a constant": (
        "%c2 = arith.constant 2 : index",
        "%b = arith.divui %n, %c2 : index",
        "%b",
    ),
    "divui by zero": ("", "%b = arith.divui %n, %c0 : index", "%b"),
    "divui by a symbol": ("", "%b = arith.divui %n, %n : index", "%b"),
    "divsi by minus one": (
        "%c2 = arith.constant -1 : index",
        "%b = arith.divsi %n, %c2 : index",
        "%b",
    ),
    "ceildivsi by a symbol": ("", "%b = arith.ceildivsi %n, %n : index", "%b"),
    "index_cast of an integer": ("", "%b = arith.index_cast %w32 : i32 to index", "%b"),
    # The index dialect: pure but for the divisions, whatever the divisor.
    **{
        f"index.{op} of symbols": ("", f"%b = index.{op} %n, %n", "%b")
        for op in ("add", "sub", "mul", "maxs", "minu", "shl", "shru", "and", "xor")
    },
    "index.divs by a constant": ("%c2 = index.constant 2", "%b = index.divs %n, %c2", "%b"),
    "index.remu of symbols": ("", "%b = index.remu %n, %n", "%b"),
    "index.casts of an integer": ("", "%b = index.casts %w32 : i32 to index", "%b"),
    "index.sizeof": ("", "%b = index.sizeof", "%b"),
    "index.constant": ("", "%b = index.constant 3", "%b"),
    "min of symbols": ("", "%b = affine.min affine_map<()[s0] -> (s0, 4)>()[%n]", "%b"),
    "scf.for of step 1": (
        "%c1 = arith.constant 1 : index",
        "%b = scf.for %j = %c0 to %n step %c1 iter_args(%a = %n) -> (index) {\n"
        "      %a2 = arith.addi %a, %j : index\n      scf.yield %a2 : index\n    }",
        "%b",
    ),
    "scf.for of step 2": (
        "%c2 = arith.constant 2 : index",
        "%b = scf.for %j = %c0 to %n step %c2 iter_args(%a = %n) -> (index) {\n"
        "      scf.yield %a : index\n    }",
        "%b",
    ),
    "affine.for of a load": (
        "",
        "%b = affine.for %j = 0 to 4 iter_args(%a = %n) -> (index) {\n"
        "      %l = affine.load %m[%j] : memref<8xindex>\n      affine.yield %l : index\n    }",
        "%b",
    ),
    "affine.if of symbols": (
        "",
        "%b = affine.if affine_set<()[s0] : (s0 >= 0)>()[%n] -> index {\n"
        "      affine.yield %n : index\n    } else {\n      affine.yield %c0 : index\n    }",
        "%b",
    ),
    "thread id": ("", "%b = gpu.thread_id x", "%b"),
    # A loop whose body holds only pure ops (an if without else: a region of no block).
    "affine.for of a broadcast and an if": (
        "",
        "%b = affine.for %j = 0 to 4 iter_args(%a = %n) -> (index) {\n"
        "      %v = vector.broadcast %a : index to vector<2xindex>\n"
        "      affine.if affine_set<(d0) : (d0 >= 0)>(%j) {\n      }\n"
        "      affine.yield %a : index\n    }",
        "%b",
    ),
    "affine.for of a parallel loop": (
        "%c1 = arith.constant 1 : index",
        "%b = affine.for %j = 0 to 4 iter_args(%a = %n) -> (index) {\n"
        "      affine.parallel (%p) = (0) to (4) {\n      }\n"
        "      scf.parallel (%p) = (%c0) to (%c1) step (%c1) {\n      }\n"
        "      affine.yield %a : index\n    }",
        "%b",
    ),
    "dim of a static allocation": (
        "",
        "%al = memref.alloc() : memref<4xf32>\n    %b = memref.dim %al, %c0 : memref<4xf32>",
        "%b",
    ),
    "dim of a static alloca": (
        "",
        "%al = memref.alloca() : memref<4xf32>\n    %b = memref.dim %al, %c0 : memref<4xf32>",
        "%b",
    ),
    "dim of a cast allocation": (
        "",
        "%al = memref.alloc(%n) : memref<?xf32>\n"
        "    %cs = memref.cast %al : memref<?xf32> to memref<?xf32>\n"
        "    %b = memref.dim %cs, %c0 : memref<?xf32>",
        "%b",
    ),
    "dim of a subview": (
        "",
        "%sv = memref.subview %dm[0] [%n] [1] : memref<?xf32> to memref<?xf32, strided<[1]>>\n"
        "    %b = memref.dim %sv, %c0 : memref<?xf32, strided<[1]>>",
        "%b",
    ),
    "dim of a subview of the loop variable": (
        "",
        "%sv = memref.subview %dm[0] [%i] [1] : memref<?xf32> to memref<?xf32, strided<[1]>>\n"
        "    %b = memref.dim %sv, %c0 : memref<?xf32, strided<[1]>>",
        "%b",
    ),
    "dim of a tensor argument": ("", "%b = tensor.dim %tn, %c0 : tensor<?xf32>", "%b"),
}

USES = {
    "load": "%x = affine.load %m[{v}] : memref<8xindex>",
    "load symbol": "%x = affine.load %m[symbol({v})] : memref<8xindex>",
    "store": "affine.store %c0, %m[{v} + 1] : memref<8xindex>",
    "for bound": "affine.for %k = max affine_map<(d0) -> (d0, 0)>({v}) to 8 {{\n    }}",
    "for symbol bound": "affine.for %k = 0 to {v} {{\n    }}",
    "if": "affine.if affine_set<(d0) : (d0 >= 0)>({v}) {{\n    }}",
    "if symbol": "affine.if affine_set<()[s0] : (s0 >= 0)>()[{v}] {{\n    }}",
    "vector_load": "%x = affine.vector_load %f[{v}] : memref<8xf32>, vector<2xf32>",
    "vector_store": "affine.vector_store %w, %f[{v}] : memref<8xf32>, vector<2xf32>",
    "parallel": "affine.parallel (%k) = (0) to ({v}) {{\n    }}",
    "min": "%x = affine.min affine_map<(d0) -> (d0, 4)>({v})",
    "max symbol": "%x = affine.max affine_map<()[s0] -> (s0, 4)>()[{v}]",
    "apply": "%x = affine.apply affine_map<(d0) -> (d0 + 1)>({v})",
    "apply symbol": "%x = affine.apply affine_map<()[s0] -> (s0 + 1)>()[{v}]",
}


def _program(value: str, use: str) -> str:
    top, inner, name = VALUES[value] if value in VALUES else PURE_VALUES[value]
    return f"""func.func @f(%m: memref<8xindex>, %f: memref<8xf32>, %n: index, %w: vector<2xf32>,
             %dm: memref<?xf32>, %w32: i32, %tn: tensor<?xf32>) {{
  %c0 = arith.constant 0 : index
  {top}
  %r = affine.for %i = 0 to 8 iter_args(%acc = %n) -> (index) {{
    {inner}
    {USES[use].format(v=name)}
    affine.yield %acc : index
  }}
  return
}}
"""


def _dhir_accepts(text: str) -> bool:
    try:
        dhir.parse_string(text, "prog.mlir").verify()
    except DhirError:
        return False
    return True


@needs_llvm
@pytest.mark.parametrize("use", USES)
def test_dhir_refuses_what_mlir_opt_refuses(use: str) -> None:
    for value in VALUES:
        text = _program(value, use)
        mlir = subprocess.run(["mlir-opt-22"], input=text, capture_output=True, text=True)
        assert _dhir_accepts(text) == (mlir.returncode == 0), (value, use, mlir.stderr)


@needs_llvm
@pytest.mark.parametrize("use", ["load symbol", "for symbol bound", "apply symbol", "load"])
def test_pure_ops_of_symbols_are_symbols_as_mlir_opt_says(use: str) -> None:
    for value in PURE_VALUES:
        text = _program(value, use)
        mlir = subprocess.run(["mlir-opt-22"], input=text, capture_output=True, text=True)
        assert _dhir_accepts(text) == (mlir.returncode == 0), (value, use, mlir.stderr)


def _task(use: str) -> str:
    return f"""func.func @main(%c: memref<6xf32>, %d: memref<2xf32>) {{
  dhir.schedule %c, %d {{
    %cpu = dhir.target {{kind = "cpu"}}
    %t = dhir.task %cpu, %c, %d {{
      %z = arith.constant 0 : index
      %top = affine.for %j = 0 to 2 iter_args(%a = %z) -> (index) {{
        %n = affine.apply affine_map<(d0) -> (d0 + 2)>(%a)
        affine.yield %n : index
      }}
      affine.for %i = 0 to 2 {{
        %q = affine.for %j = 0 to 2 iter_args(%a = %i) -> (index) {{
          affine.yield %a : index
        }}
        %v = affine.load %c[{use}] : memref<6xf32>
        affine.store %v, %d[%i] : memref<2xf32>
      }}
    }}
  }}
  return
}}
"""


def test_a_loop_result_inside_a_loop_is_a_located_error() -> None:
    with pytest.raises(DhirError, match=r"prog.mlir:14:.*cannot be used as a dimension id"):
        dhir.parse_string(_task("%q"), "prog.mlir").verify()


def test_a_loop_result_at_the_top_of_a_task_is_a_symbol() -> None:
    """A task's body is an affine scope, as a function's is."""
    dhir.parse_string(_task("%top"), "prog.mlir").verify()


def test_a_symbol_error_names_what_a_symbol_may_be() -> None:
    text = _program("load in the loop", "for symbol bound")
    with pytest.raises(
        DhirError,
        match=r"prog.mlir:\d+:\d+: error: operand 0 cannot be used as a "
        r"symbol .*or a pure op such as arith.addi of such values",
    ):
        dhir.parse_string(text, "prog.mlir").verify()


def _chain(length: int, start: str, link: str, use: str) -> str:
    """A task whose loop builds `length` values, each of the last one twice, and uses
    the last in an affine map."""
    values = [f"      %x{k} = {link.format(f'%x{k - 1}')}" for k in range(1, length + 1)]
    return "\n".join(
        [
            "func.func @main(%a: memref<64xf64>, %m: memref<1xindex>) {",
            "  dhir.schedule %a, %m {",
            '    %cpu = dhir.target {kind = "cpu"}',
            "    %t = dhir.task %cpu, %a, %m {",
            "      %c0 = arith.constant 0 : index",
            "      %top = memref.load %m[%c0] : memref<1xindex>",
            "      affine.for %i = 0 to 2 {",
            f"      %x0 = {start}",
            *values,
            f"      {use.format(f'%x{length}')}",
            "      }",
            "    }",
            "  }",
            "  return",
            "}",
        ]
    )


CHAINS = {
    "symbols": (
        "arith.addi %top, %c0 : index",
        "arith.addi {0}, {0} : index",
        "affine.for %j = 0 to {0} {{\n      }}",
    ),
    "dims": (
        "affine.apply affine_map<(d0) -> (d0)>(%i)",
        "affine.apply affine_map<(d0, d1) -> (d0 - d1)>({0}, {0})",
        "%v = affine.load %a[{0}] : memref<64xf64>",
    ),
}


@pytest.mark.parametrize("kind", CHAINS)
def test_each_value_of_a_map_operand_is_judged_once(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chain of values that each use the last twice took 2**length steps to judge (a
    chain of 28 did not verify in two minutes)."""
    from dhir.dialects import affine

    judged: list[object] = []
    is_index = affine._is_index  # pyright: ignore[reportPrivateUsage]

    def counted(value: object) -> bool:
        judged.append(value)
        return is_index(value)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(affine, "_is_index", counted)
    dhir.parse_string(_chain(16, *CHAINS[kind]), "prog.mlir").verify()
    assert len(judged) < 16 * 20
