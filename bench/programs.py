"""The dhir programs the benchmarks run, written as text."""

WTIME = "func.func private @MPI_Wtime() -> f64"


def _timed_main(args: str, schedule_operands: str, body: list[str]) -> str:
    """`@main` timing its schedule with MPI_Wtime into its last argument `%time`."""
    return "\n".join(
        [
            WTIME,
            f"func.func @main({args}, %time: memref<1xf64>) {{",
            "  %start = func.call @MPI_Wtime() : () -> f64",
            f"  dhir.schedule {schedule_operands} {{",
            '    %cpu = dhir.target {kind = "cpu"}',
            *body,
            "  }",
            "  %end = func.call @MPI_Wtime() : () -> f64",
            "  %seconds = arith.subf %end, %start : f64",
            "  %z = arith.constant 0 : index",
            "  memref.store %seconds, %time[%z] : memref<1xf64>",
            "  return",
            "}",
            "",
        ]
    )


def hop_chain(hops: int) -> str:
    """`hops` tasks, alternating between ranks 0 and 1, each adding 1 to x[0]: every
    task depends on the one before, on the other rank."""
    body: list[str] = []
    for k in range(hops):
        body += [
            f"    %t{k} = dhir.task %cpu, %x attributes {{dhir.rank = {k % 2} : i64}} {{",
            "      %i = arith.constant 0 : index",
            "      %one = arith.constant 1.0 : f64",
            "      %v = memref.load %x[%i] : memref<1xf64>",
            "      %w = arith.addf %v, %one : f64",
            "      memref.store %w, %x[%i] : memref<1xf64>",
            "    }",
        ]
    return _timed_main("%x: memref<1xf64>", "%x", body)


def dag20(n: int, reps: int) -> str:
    """bench/c/dag20.c's DAG: task k on rank k % 2 sets X[k%4] = X[k%4]*0.5 + X[(k+3)%4]*0.25,
    `reps` sweeps over n elements."""
    t = f"memref<{n}xf64>"
    body: list[str] = []
    for k in range(20):
        dst, src = k % 4, (k + 3) % 4
        body += [
            f"    %t{k} = dhir.task %cpu, %x{dst}, %x{src} {{",
            "      %c0 = arith.constant 0 : index",
            "      %c1 = arith.constant 1 : index",
            f"      %n = arith.constant {n} : index",
            f"      %reps = arith.constant {reps} : index",
            "      %half = arith.constant 0.5 : f64",
            "      %quarter = arith.constant 0.25 : f64",
            "      scf.for %r = %c0 to %reps step %c1 {",
            "        scf.for %i = %c0 to %n step %c1 {",
            f"          %d = memref.load %x{dst}[%i] : {t}",
            f"          %s = memref.load %x{src}[%i] : {t}",
            "          %dh = arith.mulf %d, %half : f64",
            "          %sq = arith.mulf %s, %quarter : f64",
            "          %sum = arith.addf %dh, %sq : f64",
            f"          memref.store %sum, %x{dst}[%i] : {t}",
            "        }",
            "      }",
            "    }",
        ]
    args = ", ".join(f"%x{b}: {t}" for b in range(4))
    return _timed_main(args, "%x0, %x1, %x2, %x3", body)


def many_tasks(tasks: int, buffers: int = 8, literals: bool = False) -> str:
    """A schedule of `tasks` small tasks over `buffers` buffers, for compile times. With
    `literals`, every task has its own constants (an index and a scale), as generated
    programs' tasks do (tile offsets, loop bounds)."""
    t = "memref<64xf32>"
    lines = [
        "func.func @main(" + ", ".join(f"%b{i}: {t}" for i in range(buffers)) + ") {",
        "  dhir.schedule " + ", ".join(f"%b{i}" for i in range(buffers)) + " {",
        '    %cpu = dhir.target {kind = "cpu"}',
    ]
    for k in range(tasks):
        src, dst = k % buffers, (k * 7 + 3) % buffers
        lines.append(f"    %t{k} = dhir.task %cpu, %b{src}, %b{dst} {{")
        if literals:
            lines += [
                f"      %i = arith.constant {k % 64} : index",
                f"      %s = arith.constant {k}.5 : f32",
                f"      %v = memref.load %b{src}[%i] : {t}",
                "      %w = arith.mulf %v, %s : f32",
                f"      memref.store %w, %b{dst}[%i] : {t}",
            ]
        else:
            lines += [
                "      %i = arith.constant 0 : index",
                f"      %v = memref.load %b{src}[%i] : {t}",
                f"      memref.store %v, %b{dst}[%i] : {t}",
            ]
        lines.append("    }")
    lines += ["  }", "  return", "}", ""]
    return "\n".join(lines)


def matmul_tasks(tasks: int, buffers: int = 8, loops: bool = False) -> str:
    """`tasks` tasks, each a small matmul of two of `buffers` 16x16 buffers into a third,
    for the optimizer's share of compile times: a linalg.matmul each, or with `loops` its
    scf.for nest written out."""
    t = "memref<16x16xf32>"
    lines = [
        "func.func @main(" + ", ".join(f"%b{i}: {t}" for i in range(buffers)) + ") {",
        "  dhir.schedule " + ", ".join(f"%b{i}" for i in range(buffers)) + " {",
        '    %cpu = dhir.target {kind = "cpu"}',
    ]
    for k in range(tasks):
        a, b, c = k % buffers, (k + 1) % buffers, (k * 3 + 2) % buffers
        c = c if c not in (a, b) else (c + 3) % buffers
        lines.append(f"    %t{k} = dhir.task %cpu, %b{a}, %b{b}, %b{c} {{")
        if loops:
            lines += [
                "      %c0 = arith.constant 0 : index",
                "      %c1 = arith.constant 1 : index",
                "      %n = arith.constant 16 : index",
                "      scf.for %i = %c0 to %n step %c1 {",
                "        scf.for %j = %c0 to %n step %c1 {",
                "          scf.for %k = %c0 to %n step %c1 {",
                f"            %x = memref.load %b{a}[%i, %k] : {t}",
                f"            %y = memref.load %b{b}[%k, %j] : {t}",
                f"            %z = memref.load %b{c}[%i, %j] : {t}",
                "            %p = arith.mulf %x, %y : f32",
                "            %s = arith.addf %z, %p : f32",
                f"            memref.store %s, %b{c}[%i, %j] : {t}",
                "          }",
                "        }",
                "      }",
            ]
        else:
            lines.append(f"      linalg.matmul ins(%b{a}, %b{b} : {t}, {t}) outs(%b{c} : {t})")
        lines.append("    }")
    lines += ["  }", "  return", "}", ""]
    return "\n".join(lines)


def compute_bound(n: int, inner: int) -> str:
    """One task: an scf.parallel over n elements, each iterating a dependent
    multiply-add `inner` times (compute-bound: no memory traffic in the loop)."""
    t = f"memref<{n}xf64>"
    body = [
        "    %work = dhir.task %cpu, %x {",
        "      %c0 = arith.constant 0 : index",
        "      %c1 = arith.constant 1 : index",
        f"      %n = arith.constant {n} : index",
        f"      %inner = arith.constant {inner} : index",
        "      %k = arith.constant 0.999999 : f64",
        "      %h = arith.constant 0.5 : f64",
        "      scf.parallel (%i) = (%c0) to (%n) step (%c1) {",
        f"        %v = memref.load %x[%i] : {t}",
        "        %r = scf.for %j = %c0 to %inner step %c1 iter_args(%a = %v) -> (f64) {",
        "          %m = arith.mulf %a, %k : f64",
        "          %s = arith.addf %m, %h : f64",
        "          scf.yield %s : f64",
        "        }",
        f"        memref.store %r, %x[%i] : {t}",
        "      }",
        "    }",
    ]
    return _timed_main(f"%x: {t}", "%x", body)


def neighbour_tasks(tasks: int) -> str:
    """Issue 25's compile-time program: `tasks` tasks, each with its own constants; task k
    reads b[k] and b[k+1] and writes a[k], so every task is independent of the others
    but each pair of tasks shares a memref."""
    a, b = f"memref<{tasks}xf32>", f"memref<{tasks + 1}xf32>"
    lines = [
        f"func.func @main(%a: {a}, %b: {b}) {{",
        "  dhir.schedule %a, %b {",
        '    %cpu = dhir.target {kind = "cpu"}',
    ]
    for k in range(tasks):
        lines += [
            f"    %t{k} = dhir.task %cpu, %a, %b {{",
            f"      %i = arith.constant {k} : index",
            f"      %j = arith.constant {k + 1} : index",
            f"      %x = memref.load %b[%i] : {b}",
            f"      %y = memref.load %b[%j] : {b}",
            "      %s = arith.addf %x, %y : f32",
            f"      memref.store %s, %a[%i] : {a}",
            "    }",
        ]
    lines += ["  }", "  return", "}", ""]
    return "\n".join(lines)
