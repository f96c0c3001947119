"""Tasks calling the user's own C code (`--link`, `-l`, `-L`; dhir.toolchain.linking): every
kind of file links, a missing function is an error at its call, and a changed file
rebuilds."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dhir
from dhir.ir.diagnostics import DhirError
from dhir.toolchain.linking import (
    LinkInputs,
    is_shared,
    missing_symbol_hint,
    runtime_library_hint,
)

DATA = Path(__file__).parent / "data" / "link"
PROGRAM = DATA / "views.mlir"


def inputs() -> list[np.ndarray]:
    return [np.arange(32, dtype=np.float64).reshape(8, 4), np.arange(16, dtype=np.float64)]


def expected(scale: float = 1.0) -> list[np.ndarray]:
    a, b = inputs()
    a[:4] *= 2.0 * scale
    a[4:] *= 3.0 * scale
    return [a, b + 1.0]


def compile_c(folder: Path, kind: str, scale: float = 1.0) -> Path:
    """kernel.c built as `kind` (o, a or so) in `folder`; its rows scaled `scale` times
    more than the program says (to see a changed object rebuild)."""
    source = (DATA / "kernel.c").read_text()
    if scale != 1.0:
        source = source.replace("*= factor", f"*= factor * {scale}")
    (folder / "kernel.c").write_text(source)
    obj = folder / "kernel.o"
    clang = ["clang-22", "-O2", "-fPIC", "-c", str(folder / "kernel.c"), "-o", str(obj)]
    subprocess.run(clang, check=True)
    if kind == "o":
        return obj
    if kind == "a":
        subprocess.run(["ar", "rcs", str(folder / "libkernel.a"), str(obj)], check=True)
        obj.unlink()
        return folder / "libkernel.a"
    shared = folder / "libkernel.so"
    subprocess.run(["clang-22", "-shared", str(obj), "-o", str(shared)], check=True)
    obj.unlink()
    return shared


def assert_equal(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("kind", ["o", "a", "so"])
@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_a_task_calls_c_from_each_kind_of_file(tmp_path: Path, kind: str, ranks: int) -> None:
    """A row block of a memref passed as a view (llvm.emit_c_interface), another as a
    bare pointer; the shared library is found at run time through its rpath. Round robin
    puts the three tasks on three ranks: what C writes is sent back as a whole memref."""
    linked = compile_c(tmp_path, kind)
    got = dhir.run(str(PROGRAM), *inputs(), ranks=ranks, placement="round-robin", link=[linked])
    assert_equal(got, expected())


@pytest.mark.mlir
@pytest.mark.mpi
def test_libraries_by_name_in_a_folder(tmp_path: Path) -> None:
    compile_c(tmp_path, "so")
    got = dhir.run(str(PROGRAM), *inputs(), ranks=2, link=["-lkernel", f"-L{tmp_path}"])
    assert_equal(got, expected())


@pytest.mark.mlir
@pytest.mark.mpi
def test_openmpi_links_them_too(tmp_path: Path) -> None:
    try:
        got = dhir.run(
            str(PROGRAM), *inputs(), ranks=2, mpi="openmpi", link=[compile_c(tmp_path, "a")]
        )
    except DhirError as error:
        if "OpenMPI" in str(error) and "install" in str(error):
            pytest.skip(f"OpenMPI is not installed: {error}")
        raise
    assert_equal(got, expected())


@pytest.mark.mlir
def test_a_function_no_file_defines_is_an_error_at_its_call(tmp_path: Path) -> None:
    with pytest.raises(DhirError) as error:
        dhir.run(str(PROGRAM), *inputs(), ranks=2)
    lines = [str(d.loc) + ": " + d.message for d in error.value.diagnostics]
    text = PROGRAM.read_text().splitlines()
    call = next(k for k, line in enumerate(text, 1) if "func.call @scale_rows" in line)
    task = "in task t0"
    # Declared with llvm.emit_c_interface: it says which symbol C must define.
    symbol = "(as _mlir_ciface_scale_rows, for llvm.emit_c_interface)"
    assert lines[0].startswith(f"{PROGRAM}:{call}:7: calls scale_rows {symbol} {task}, which no")
    assert "--link FILE or -l NAME" in lines[0]
    assert lines[1].split(": ", 1)[1].startswith("calls add_one")


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("backend", ["native", "interp"])
def test_the_error_for_a_missing_function_names_the_files_looked_in(
    tmp_path: Path, backend: str
) -> None:
    """It named the function, its call and its task, not where it was looked for."""
    library = compile_c(tmp_path, "a")
    module = dhir.parse_string(PROGRAM.read_text().replace("@add_one", "@add_two"), "v.mlir")
    with pytest.raises(DhirError) as error:
        dhir.run(module, *inputs(), backend=backend, link=[library])
    system = "libm, MLIR's runner utils and libc"
    system = system if backend == "interp" else f"MPI's library, {system}"
    said = str(error.value).replace("'func.call' ", "")
    assert said.startswith(
        "v.mlir:25:7: error: calls add_two in task t2, which no file the program links "
        f"defines (looked in {library.resolve()}, then {system}); pass"
    )


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("backend", ["native", "interp"])
def test_a_function_declared_in_the_other_form_says_how_to_declare_it(
    tmp_path: Path, backend: str
) -> None:
    """kernel.c defines _mlir_ciface_scale_rows and add_one: declared the other way round
    (without llvm.emit_c_interface, and with it), each call was "no file defines it",
    with the advice to link the file that was linked."""
    library = compile_c(tmp_path, "o")
    program = PROGRAM.read_text()
    program = program.replace("f64) attributes {llvm.emit_c_interface}", "f64)")
    program = program.replace(
        "@add_one(i64, i64)", "@add_one(i64, i64) attributes {llvm.emit_c_interface}"
    )
    module = dhir.parse_string(program, "v.mlir")
    with pytest.raises(DhirError) as error:
        dhir.run(module, *inputs(), backend=backend, link=[library])
    said = str(error.value)
    assert "calls scale_rows in task t0, which no file" in said
    assert (
        "a linked file defines _mlir_ciface_scale_rows, MLIR's C interface to it: declare "
        "@scale_rows with attributes {llvm.emit_c_interface}"
    ) in said
    if backend == "native":  # the interpreter stops at the first call
        assert "calls add_one (as _mlir_ciface_add_one, for llvm.emit_c_interface)" in said
        assert "a linked file defines add_one itself, without MLIR's C interface" in said
    assert "pass the object file" not in said


# add_one in C++, with what only C++'s library defines (operator new[] and delete[]).
CXX_ADD_ONE = """
extern "C" void add_one(long data, long n) {
  double *x = (double *)data, *copy = new double[n];
  for (long i = 0; i < n; ++i) copy[i] = x[i] + 1.0;
  for (long i = 0; i < n; ++i) x[i] = copy[i];
  delete[] copy;
}
"""


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("backend", ["native", "interp"])
def test_cxx_code_without_its_library_says_to_link_it(tmp_path: Path, backend: str) -> None:
    """The link failed with the linker's `operator new[]` (native code) or the loader's
    `undefined symbol: _Znam` (the interpreter, which named the library /proc/self/fd/N),
    and nothing said that C++'s library was missing."""
    kernel = compile_c(tmp_path, "o")
    (tmp_path / "add.cc").write_text(CXX_ADD_ONE)
    cxx = tmp_path / "add.o"
    clang = ["clang-22", "-x", "c++", "-O1", "-fPIC", "-c", str(tmp_path / "add.cc")]
    subprocess.run([*clang, "-o", str(cxx)], check=True)
    # kernel.o defines add_one too: take the C++ one alone.
    subprocess.run(["objcopy", "-N", "add_one", str(kernel)], check=True)
    with pytest.raises(DhirError) as error:
        dhir.run(str(PROGRAM), *inputs(), backend=backend, link=[kernel, cxx])
    said = str(error.value)
    assert "linked C++ code needs C++'s library: add -l stdc++" in said
    assert "/proc/self/fd" not in said
    got = dhir.run(str(PROGRAM), *inputs(), backend=backend, link=[kernel, cxx, "-lstdc++"])
    assert_equal(got, expected())


@pytest.mark.parametrize(
    "said",
    [
        "ld.lld: error: undefined symbol: operator new[](unsigned long)",
        "/usr/bin/ld: add.o: in function `add_one': undefined reference to `operator delete[](void*)'",
        "undefined symbol: _Znam",
        "undefined symbol: _ZdlPvm",
        "undefined reference to `std::__throw_bad_alloc()'",
        "undefined symbol: _ZSt17__throw_bad_allocv",
        "undefined symbol: _ZNSolsEd",
        "undefined symbol: _ZTVN10__cxxabiv117__class_type_infoE",
        "undefined reference to `vtable for __cxxabiv1::__si_class_type_info'",
        "undefined reference to `__cxa_begin_catch'",
        "undefined symbol: __gxx_personality_v0",
        "undefined reference to symbol '_ZdlPvm@@CXXABI_1.3.9'",
    ],
)
def test_cxx_library_symbols_get_the_hint(said: str) -> None:
    assert "add -l stdc++" in runtime_library_hint(said)


@pytest.mark.parametrize(
    "said",
    [
        # A C++ function, class or symbol of the user's that no linked file defines: the
        # fix is the file that defines it, not C++'s library.
        "ld.lld: error: undefined symbol: _Z6smoothPdl",
        "/usr/bin/ld: a.o: undefined reference to `smooth(double*, long)'",
        "undefined symbol: _ZN6solver4stepEv",
        "undefined reference to `vtable for Solver'",
        "undefined symbol: _ZTV6Solver",
        "undefined symbol: _Zork",
        "undefined symbol: _mlir_ciface_std_like",
        "undefined reference to `kernel_gfortran'",
    ],
)
def test_other_undefined_symbols_get_no_library_hint(said: str) -> None:
    assert runtime_library_hint(said) == ""


HELPER_MISSING = """
void helper(double *x, long n);
void add_one(long data, long n) { helper((double *)data, n); }
"""


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("backend", ["native", "interp"])
def test_a_symbol_linked_code_uses_that_no_file_defines_says_what_to_do(
    tmp_path: Path, backend: str
) -> None:
    """A linked file calling a function no file defines (not one the program declares)
    failed with the linker's or loader's words alone: `undefined reference to
    `helper'`, `undefined symbol: helper`."""
    kernel = compile_c(tmp_path, "o")
    subprocess.run(["objcopy", "-N", "add_one", str(kernel)], check=True)
    (tmp_path / "helper.c").write_text(HELPER_MISSING)
    user = tmp_path / "helper.o"
    clang = ["clang-22", "-O1", "-fPIC", "-c", str(tmp_path / "helper.c"), "-o", str(user)]
    subprocess.run(clang, check=True)
    with pytest.raises(DhirError) as error:
        dhir.run(str(PROGRAM), *inputs(), backend=backend, link=[kernel, user])
    assert (
        "(linked code uses helper, which no file the program links defines: pass the object "
        "file or library that does with --link FILE or -l NAME)"
    ) in str(error.value)


@pytest.mark.parametrize(
    ("said", "names"),
    [
        ("/usr/bin/ld: k.o: in function `add_one':\nk.c:(.text+0x1): undefined reference to `helper'", "helper"),
        ("ld.lld: error: undefined symbol: smooth(double*, long)\n>>> referenced by k.c", "smooth(double*, long)"),
        ("undefined reference to symbol 'cblas_dgemm@@LIBCBLAS'", "cblas_dgemm"),
        ("undefined symbol: a\nundefined symbol: b\nundefined symbol: a\nundefined symbol: c\nundefined symbol: d", "a, b, c, ..."),
    ],
)  # fmt: skip
def test_missing_symbol_hint_names_the_symbols(said: str, names: str) -> None:
    assert missing_symbol_hint(said).startswith(f" (linked code uses {names}, which no file")


def test_other_link_errors_get_no_missing_symbol_hint() -> None:
    assert missing_symbol_hint("relocation R_X86_64_32 against `.rodata' can not be used") == ""


@pytest.mark.mlir
@pytest.mark.mpi
def test_a_changed_object_rebuilds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DHIR_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    first = compile_c(tmp_path / "one", "o")
    assert_equal(dhir.run(str(PROGRAM), *inputs(), ranks=2, link=[first]), expected())
    # The same path, other contents: the executable's cache key follows the contents.
    second = compile_c(tmp_path / "two", "o", scale=2.5)
    first.write_bytes(second.read_bytes())
    assert_equal(dhir.run(str(PROGRAM), *inputs(), ranks=2, link=[first]), expected(2.5))


def test_words_as_a_c_compiler_reads_them(tmp_path: Path) -> None:
    (tmp_path / "k.o").write_bytes(b"")
    (tmp_path / "libz2.so.1").write_bytes(b"")
    linked = LinkInputs.from_words([tmp_path / "k.o", str(tmp_path / "libz2.so.1"), "-lm"])
    assert linked.files == (tmp_path / "k.o", tmp_path / "libz2.so.1")
    assert linked.names == ("m",) and linked.found[0].name.startswith("libm.")
    flags = linked.flags()
    assert flags[:3] == [str(tmp_path / "k.o"), str(tmp_path / "libz2.so.1"), "-lm"]
    assert f"-Wl,-rpath,{tmp_path}" in flags
    assert not LinkInputs() and linked
    names = ["libk.so", "libk.so.1.2", "my.sol.o", "libk.a", "k.o"]
    assert [is_shared(Path(name)) for name in names] == [True, True, False, False, False]


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["nowhere.o"], "cannot link nowhere.o: no such file"),
        (["kernel.c"], "cannot link .*kernel.c: not a kind of file dhir links"),
        (["-Lnowhere"], "-Lnowhere: no such folder"),
        (["-lnosuchlibrary"], "cannot find -lnosuchlibrary: no libnosuchlibrary.so or "),
        (["-l../x"], "-l../x is not a library name"),
        (["."], r"cannot link \.: it is a directory; .* \(-L DIR adds a folder\)"),
    ],
)
def test_bad_words_are_refused_before_any_work(
    words: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(DATA)
    with pytest.raises(DhirError, match=message):
        LinkInputs.from_words(words)


def test_an_object_given_twice_is_refused_a_library_is_not(tmp_path: Path) -> None:
    """The linker fails on an object's definitions taken twice, in native code as in the
    interpreter's library: say so before any work."""
    for name in ("k.o", "libk.a", "libk.so"):
        (tmp_path / name).write_bytes(b"")
    with pytest.raises(DhirError, match=r"cannot link .*k\.o: given twice; pass each object"):
        LinkInputs.from_words(
            [tmp_path / "k.o", tmp_path / "libk.a", tmp_path / ".." / tmp_path.name / "k.o"]
        )
    twice = [tmp_path / "libk.a", tmp_path / "libk.so", tmp_path / "libk.a", tmp_path / "libk.so"]
    assert LinkInputs.from_words(twice).files == tuple(twice)


@pytest.mark.mlir
@pytest.mark.mpi
def test_the_command_line(tmp_path: Path) -> None:
    linked = compile_c(tmp_path, "so")
    a, b = inputs()
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    files = ["--input", str(tmp_path / "a.npy"), "--input", str(tmp_path / "b.npy")]
    out = tmp_path / "out"
    words = ["-l", "kernel", "-L", str(tmp_path)]
    run = [sys.executable, "-m", "dhir.cli.main", "run", str(PROGRAM), "-n", "2"]
    done = subprocess.run([*run, *files, *words, "--output-dir", str(out)], capture_output=True)
    assert done.returncode == 0, done.stderr
    assert_equal([np.load(out / "arg0.npy"), np.load(out / "arg1.npy")], expected())
    exe = tmp_path / "prog"
    compile_ = [sys.executable, "-m", "dhir.cli.main", "compile", str(PROGRAM), "-n", "2"]
    done = subprocess.run([*compile_, "--link", str(linked), "-o", str(exe)], capture_output=True)
    assert done.returncode == 0, done.stderr
    again = subprocess.run(
        [sys.executable, "-m", "dhir.cli.main", "run", str(exe), *files, "--link", str(linked)],
        capture_output=True,
        text=True,
    )
    assert again.returncode == 1 and "--link cannot change an executable" in again.stderr
    interp = out.parent / "interp"
    done = subprocess.run(
        [*run, *files, *words, "--backend", "interp", "--output-dir", str(interp)],
        capture_output=True,
    )
    assert done.returncode == 0, done.stderr
    assert_equal([np.load(interp / "arg0.npy"), np.load(interp / "arg1.npy")], expected())


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("kind", ["o", "a", "so"])
def test_the_interpreter_calls_them_too(tmp_path: Path, kind: str) -> None:
    """Bit for bit what native code computes: views, bare pointers, a memref's
    descriptor as separate arguments, scalars in and out."""
    linked = compile_c(tmp_path, kind)
    got = dhir.run(str(PROGRAM), *inputs(), backend="interp", link=[linked])
    assert_equal(got, expected())
    scalars = DATA / "scalars.mlir"
    args = [np.arange(16, dtype=np.float64) / 3, np.zeros(1), np.array([-21], np.int32)]
    native = dhir.run(str(scalars), *args, ranks=2, placement="round-robin", link=[linked])
    interp = dhir.run(str(scalars), *args, backend="interp", link=[linked])
    assert_equal(interp, native)
    assert interp[1][0] == sum(args[0].tolist()) and interp[2][0] == -42


@pytest.mark.mlir
@pytest.mark.mpi
def test_a_name_several_files_define_resolves_as_the_linker_resolves_it(tmp_path: Path) -> None:
    """kernel.c's twice doubles, the object's triples: an object wins over a shared library
    wherever it comes, a shared library over a later archive (the linker pulls no member
    for a name already defined), in the interpreter as in native code."""
    shared = compile_c(tmp_path, "so")
    (tmp_path / "thrice.c").write_text("int twice(int x) { return 3 * x; }\n")
    obj = tmp_path / "thrice.o"
    subprocess.run(["clang-22", "-fPIC", "-c", tmp_path / "thrice.c", "-o", obj], check=True)
    archive = tmp_path / "libthrice.a"
    subprocess.run(["ar", "rcs", archive, obj], check=True)
    args = [np.zeros(16), np.zeros(1), np.array([5], np.int32)]
    program = str(DATA / "scalars.mlir")
    for link, want in [([obj, shared], 15), ([shared, obj], 15), ([shared, archive], 10)]:
        interp = dhir.run(program, *args, backend="interp", link=link)
        assert interp[2][0] == want, link
        assert_equal(interp, dhir.run(program, *args, link=link))


@pytest.mark.mlir
def test_a_library_of_the_same_name_in_another_folder_is_another(tmp_path: Path) -> None:
    """-lkernel from one folder, then from another in the same process: the interpreter
    loads the second (its libkernel.so has no soname, so the path tells them apart)."""
    for folder, scale in [("one", 1.0), ("two", 2.5)]:
        (tmp_path / folder).mkdir()
        compile_c(tmp_path / folder, "so", scale)
        link = ["-lkernel", f"-L{tmp_path / folder}"]
        assert_equal(
            dhir.run(str(PROGRAM), *inputs(), backend="interp", link=link), expected(scale)
        )


@pytest.mark.mlir
def test_bf16_and_f16_memrefs_pass_their_16_bit_elements(tmp_path: Path) -> None:
    """The interpreter holds bf16 in float32: C still sees (and writes) bf16's bits, through
    a strided view, as in native code."""
    obj = tmp_path / "halves.o"
    subprocess.run(["clang-22", "-fPIC", "-c", DATA / "halves.c", "-o", obj], check=True)
    program = str(DATA / "halves.mlir")
    h = np.array([1.5, -2.25, 3.0, 0.1, 65504.0, -0.0], np.float16)
    args = [h, np.zeros(9, np.int16), np.zeros(6, np.float32)]
    interp = dhir.run(program, *args, backend="interp", link=[obj])
    bf16 = [0xC010, 0x3DCD, 0x8000]  # elements 1, 3, 5 in bf16: -2.25, 0.1 rounded, -0.0
    assert interp[1][:3].view(np.uint16).tolist() == bf16
    assert interp[1][3:].tolist() == h.view(np.int16).tolist()
    np.testing.assert_array_equal(interp[0], -h)
    assert interp[2].tolist() == [1.5, 2.25, 3.0, -0.10009765625, 65536.0, 0.0]
    native = dhir.run(program, *args, link=[obj])
    for got, want in zip(interp, native, strict=True):
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_a_bf16_memref_s_address_is_refused_by_the_interpreter() -> None:
    """It holds bf16 in f32: C handed that address would read f32, not bf16."""
    program = (DATA / "halves.mlir").read_text()
    line = "%w = memref.cast %v"
    program = program.replace(
        line,
        "%ptr = memref.extract_aligned_pointer_as_index %buf : memref<6xbf16> -> index\n      "
        + line,
    )
    args = [np.zeros(6, np.float16), np.zeros(9, np.int16), np.zeros(6, np.float32)]
    with pytest.raises(DhirError, match=r"halves.mlir:\d+:\d+: .*address of a bf16 memref"):
        dhir.run(dhir.parse_string(program, "halves.mlir"), *args, backend="interp")


@pytest.mark.mlir
def test_what_the_interpreter_cannot_call_is_an_error_at_the_call(tmp_path: Path) -> None:
    linked = compile_c(tmp_path, "o")
    # twice returning f16, which ctypes has no type for (its result left unused).
    program = (DATA / "scalars.mlir").read_text().replace("(i32) -> i32", "(i32) -> f16")
    module = dhir.parse_string(program.replace("memref.store %y", "// "), "scalars.mlir")
    args = [np.zeros(16), np.zeros(1), np.zeros(1, np.int32)]
    message = r"scalars.mlir:\d+:\d+: .*returns f16: the interpreter takes one i1, i8 to i64,"
    with pytest.raises(DhirError, match=message + " index, f32, f64 or !llvm.ptr result"):
        dhir.run(module, *args, backend="interp", link=[linked])
    # Both backends name the task of the call, as docs/commands.md shows, and say the same
    # of the first such call, at the same place (native code names all of them).
    said = []
    for backend in ("interp", "native"):
        with pytest.raises(DhirError) as error:
            dhir.run(str(DATA / "scalars.mlir"), *args, backend=backend)
        said.append(str(error.value).replace("'func.call' ", "").splitlines()[0])
    assert "calls sum_plain in task t0, which no file the program links" in said[0]
    # Each names the libraries it looks in: the interpreter not MPI's.
    assert said[0].replace(" libm, ", " MPI's library, libm, ") == said[1]


LIBM = """
func.func private @cbrt(f64) -> f64
func.func @main(%x: memref<4xf64>) {
  dhir.schedule %x {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %x {
      %c0 = arith.constant 0 : index
      %v = memref.load %x[%c0] : memref<4xf64>
      %r = func.call @cbrt(%v) : (f64) -> f64
      memref.store %r, %x[%c0] : memref<4xf64>
    }
  }
  return
}
"""


@pytest.mark.mlir
@pytest.mark.mpi
def test_libm_by_name_though_its_file_is_a_linker_script() -> None:
    """Debian's libm.so is a text file naming the real library: the interpreter links it
    as native code does, by name or as a file (native code links -lm anyway)."""
    x = np.array([27.0, 2.0, 0.0, -8.0])
    interp = dhir.run(LIBM, x, backend="interp", link=["-lm"])
    assert_equal(interp, dhir.run(LIBM, x, ranks=2))
    assert interp[0][0] == pytest.approx(3.0)
    script = LinkInputs.from_words(["-lm"]).found[0]  # the file itself, as native code takes it
    assert_equal(dhir.run(LIBM, x, backend="interp", link=[script]), interp)


@pytest.mark.mlir
@pytest.mark.mpi
def test_libc_and_libm_need_no_link(tmp_path: Path) -> None:
    """Native code always links them, so the interpreter resolves names from them too, after
    the files the program links (here none, then an object that defines neither)."""
    program = LIBM.replace(
        "@cbrt(f64) -> f64", "@cbrt(f64) -> f64\nfunc.func private @labs(i64) -> i64"
    )
    program = program.replace(
        "memref.store %r, %x[%c0] : memref<4xf64>",
        """memref.store %r, %x[%c0] : memref<4xf64>
      %c1 = arith.constant 1 : index
      %w = memref.load %x[%c1] : memref<4xf64>
      %i = arith.fptosi %w : f64 to i64
      %a = func.call @labs(%i) : (i64) -> i64
      %f = arith.sitofp %a : i64 to f64
      memref.store %f, %x[%c1] : memref<4xf64>""",
    )
    x = np.array([27.0, -7.0, 0.0, 1.0])
    native = dhir.run(program, x, ranks=2)
    assert native[0][0] == pytest.approx(3.0) and native[0][1:].tolist() == [7.0, 0.0, 1.0]
    assert_equal(dhir.run(program, x, backend="interp"), native)
    linked = [compile_c(tmp_path, "o")]
    assert_equal(dhir.run(program, x, backend="interp", link=linked), native)


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("backend", ["native", "interp"])
def test_mlirs_runner_utils_need_no_link(tmp_path: Path, backend: str) -> None:
    """Native code links them (memrefCopy, printF64): the interpreter asked for a file
    that defines rtclock, with or without files of the program's."""
    program = LIBM.replace("@cbrt(f64) -> f64", "@rtclock() -> f64")
    program = program.replace("func.call @cbrt(%v) : (f64)", "func.call @rtclock() : ()")
    for link in ([], [compile_c(tmp_path, "o")]):
        got = dhir.run(program, np.zeros(4), ranks=2, backend=backend, link=link)
        assert got[0][0] > 0 and got[0][1:].tolist() == [0.0, 0.0, 0.0]


EXAMPLES = Path(__file__).parents[2] / "examples" / "link"


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("mpi", ["mpich", "openmpi"])
def test_the_examples_on_one_to_three_ranks(tmp_path: Path, mpi: str) -> None:
    """examples/run_link.py's programs: row blocks to C, and OpenBLAS's dgemm from NumPy's
    wheel, native equal to the interpreter bit for bit and to NumPy within rounding."""
    kernel = tmp_path / "rows.o"
    subprocess.run(["clang-22", "-fPIC", "-c", EXAMPLES / "rows.c", "-o", kernel], check=True)
    rng = np.random.default_rng(3)
    a = rng.random((8, 16))
    cases = [("rows.mlir", [a], [kernel], [a / a.sum(axis=1, keepdims=True)])]
    libs = Path(np.__file__).parent.parent / "numpy.libs"
    openblas = sorted(libs.glob("libscipy_openblas*.so"))
    if openblas:
        x, y = rng.random((32, 32)), rng.random((32, 32))
        cases.append(("dgemm.mlir", [x, y, np.zeros((32, 32))], openblas[:1], [x, y, x @ y]))
    for name, args, link, want in cases:
        reference = dhir.run(EXAMPLES / name, *args, backend="interp", link=link)
        for got, close in zip(reference, want, strict=True):
            np.testing.assert_allclose(got, close)
        for ranks in (1, 2, 3):
            try:
                native = dhir.run(EXAMPLES / name, *args, ranks=ranks, mpi=mpi, link=link)
            except DhirError as error:
                if mpi == "openmpi" and "install" in str(error):
                    pytest.skip(f"OpenMPI is not installed: {error}")
                raise
            assert_equal(native, reference)


NARROW_C = """
#include <stdint.h>
int64_t widen8(int8_t x) { return x; }
int64_t widen16(int16_t x) { return x; }
int64_t widenb(_Bool x) { return x; }
"""
NARROW = """
func.func private @widen8(i8) -> i64
func.func private @widen16(i16) -> i64
func.func private @widenb(i1) -> i64
func.func @main(%x: memref<3xi64>) {
  dhir.schedule %x {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %x {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %v = memref.load %x[%c0] : memref<3xi64>
      %a = arith.trunci %v : i64 to i8
      %r0 = func.call @widen8(%a) : (i8) -> i64
      memref.store %r0, %x[%c0] : memref<3xi64>
      %m2 = arith.constant -2 : i16
      %r1 = func.call @widen16(%m2) : (i16) -> i64
      memref.store %r1, %x[%c1] : memref<3xi64>
      %w = memref.load %x[%c2] : memref<3xi64>
      %odd = arith.trunci %w : i64 to i1
      %r2 = func.call @widenb(%odd) : (i1) -> i64
      memref.store %r2, %x[%c2] : memref<3xi64>
    }
  }
  return
}
"""


@pytest.mark.mlir
@pytest.mark.mpi
def test_narrow_integers_reach_c_widened_as_c_widens_them(tmp_path: Path) -> None:
    """i8 and i16 arrive as int8_t and int16_t (by their sign), i1 as bool, in both
    backends: native code once passed an i8 -1 as 255."""
    (tmp_path / "narrow.c").write_text(NARROW_C)
    obj = tmp_path / "narrow.o"
    subprocess.run(["clang-22", "-O2", "-fPIC", "-c", tmp_path / "narrow.c", "-o", obj], check=True)
    x = np.array([-1, 0, 3], dtype=np.int64)
    want = [np.array([-1, -2, 1], dtype=np.int64)]
    assert_equal(dhir.run(NARROW, x, backend="interp", link=[obj]), want)
    assert_equal(dhir.run(NARROW, x, link=[obj]), want)


@pytest.mark.mlir
@pytest.mark.parametrize(
    ("source", "symbol", "owner"),
    [
        ("double sqrt(double x) { return x + 1.0; }", "sqrt", "the math library"),
        ("int write(int x) { return 3 * x; }", "write", "the C library"),
        ("long dhir_rt_comm_rank(long x) { return x; }", "dhir_rt_comm_rank", "dhir's runtime"),
    ],
)
@pytest.mark.parametrize("kind", ["o", "a"])
def test_code_defining_a_library_name_is_refused_by_both_backends(
    tmp_path: Path, source: str, symbol: str, owner: str, kind: str
) -> None:
    """libm's `sqrt` defined by the user's code was taken for the builtin natively and
    called as the user's in the interpreter; a `write` of the user's was called by MPI
    (the run hung), a `dhir_rt_` name stopped the link. Each is refused before any work,
    naming the file, the name and the fix."""
    (tmp_path / "mine.c").write_text(source)
    obj = tmp_path / "mine.o"
    subprocess.run(["clang-22", "-fPIC", "-c", tmp_path / "mine.c", "-o", obj], check=True)
    if kind == "a":
        subprocess.run(["ar", "rcs", tmp_path / "libmine.a", obj], check=True)
        obj = tmp_path / "libmine.a"
    args = [np.zeros((8, 4)), np.zeros(16)]
    where = rf"{obj}(\[mine.o\])?: it defines `{symbol}`, .*{owner}.*Rename yours"
    for backend in ("native", "interp"):
        with pytest.raises(DhirError, match=where):
            dhir.run(str(PROGRAM), *args, backend=backend, link=[obj])


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("backend", ["native", "interp"])
def test_what_linked_code_prints_is_shown(tmp_path: Path, backend: str) -> None:
    """The interpreter let linked code's printf through; native runs kept what the ranks
    printed in the run's log, shown only when the run failed."""
    source = (DATA / "kernel.c").read_text().replace("#include <stdint.h>", "#include <stdio.h>")
    source = source.replace("return 2 * x;", 'printf("twice %d\\n", x); return 2 * x;')
    source = "#include <stdint.h>\n" + source
    (tmp_path / "k.c").write_text(source)
    obj = tmp_path / "k.o"
    subprocess.run(["clang-22", "-O2", "-fPIC", "-c", tmp_path / "k.c", "-o", obj], check=True)
    args = [np.arange(16.0), np.zeros(1), np.array([-21], np.int32)]
    files: list[str] = []
    for k, array in enumerate(args):
        np.save(tmp_path / f"in{k}.npy", array)
        files += ["--input", str(tmp_path / f"in{k}.npy")]
    run = [sys.executable, "-m", "dhir.cli.main", "run", str(DATA / "scalars.mlir"), "-n", "2"]
    words = [*files, "--link", str(obj), "--backend", backend, "--output-dir", str(tmp_path)]
    done = subprocess.run([*run, *words], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "twice -21\n", done.stdout


@pytest.mark.mlir
@pytest.mark.mpi
def test_an_object_not_position_independent_gets_the_same_hint_in_both_backends(
    tmp_path: Path,
) -> None:
    """The interpreter's failed link said "compile objects with -fPIC"; native code's (the
    linker says "recompile with -fPIE" there) gave the linker's text alone."""
    source = (DATA / "kernel.c").read_text()
    table = "int32_t factors[2] = {2, 2};\nint32_t twice(int32_t x) { return factors[x & 1] * x; }"
    (tmp_path / "k.c").write_text(
        source.replace("int32_t twice(int32_t x) { return 2 * x; }", table)
    )
    obj = tmp_path / "k.o"
    subprocess.run(["clang-22", "-O2", "-fno-pic", "-c", tmp_path / "k.c", "-o", obj], check=True)
    args = [np.arange(16.0), np.zeros(1), np.array([5], np.int32)]
    for backend in ("native", "interp"):
        with pytest.raises(DhirError, match=r"compile objects with -fPIC"):
            dhir.run(str(DATA / "scalars.mlir"), *args, backend=backend, link=[obj])


ENTRY = """func.func @NAME(%b: memref<8xf64>) {
  dhir.schedule %b {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %b {
      %c0 = arith.constant 0 : index
      %one = arith.constant 1.0 : f64
      memref.store %one, %b[%c0] : memref<8xf64>
    }
  }
  return
}
"""


@pytest.mark.mlir
@pytest.mark.parametrize("name", ["write", "exp", "MPI_Step"])
def test_an_entry_named_like_a_library_function_is_refused(name: str) -> None:
    """Native code defines the entry under its name: an entry `@write` took the C
    library's place for MPI (the run hung on one rank, MPI failed on two), an `@exp` was
    what the program's own math.exp would call. Refused at the entry, before any work."""
    program = dhir.parse_string(ENTRY.replace("NAME", name), "entry.mlir")
    with pytest.raises(DhirError, match=rf"entry.mlir:1:1: .*entry function is named `{name}`"):
        dhir.run(program, np.zeros(8), entry=name, timeout=20)
    # The interpreter defines no symbol: it runs the entry as written.
    got = dhir.run(program, np.zeros(8), entry=name, backend="interp")
    assert got[0][0] == 1.0


UNRANKED = """func.func private @first(memref<*xf64>) -> f64 attributes {llvm.emit_c_interface}
func.func @main(%b: memref<8xf64>) {
  dhir.schedule %b {
    %t = dhir.task target = "cpu", %b {
      %u = memref.cast %b : memref<8xf64> to memref<*xf64>
      %x = func.call @first(%u) : (memref<*xf64>) -> f64
      %c1 = arith.constant 1 : index
      memref.store %x, %b[%c1] : memref<8xf64>
    }
  }
  return
}
"""
FIRST = """#include <stdint.h>
struct unranked { int64_t rank; double **descriptor; };
double _mlir_ciface_first(struct unranked *u) { return u->descriptor[1][0] + u->rank; }
"""


@pytest.mark.mlir
@pytest.mark.mpi
def test_an_unranked_memref_runs_natively_and_the_interpreter_says_why_not(
    tmp_path: Path,
) -> None:
    """The interpreter said it passes "memrefs" of a memref<*xf64> it refused."""
    (tmp_path / "first.c").write_text(FIRST)
    obj = tmp_path / "first.o"
    subprocess.run(["clang-22", "-fPIC", "-c", tmp_path / "first.c", "-o", obj], check=True)
    module = dhir.parse_string(UNRANKED, "u.mlir")
    got = dhir.run(module, np.full(8, 2.0), link=[obj])
    assert got[0][1] == 3.0  # the first element plus the rank
    with pytest.raises(DhirError, match=r"u.mlir:6:12: .*memrefs of a known rank \(not an unr"):
        dhir.run(module, np.full(8, 2.0), link=[obj], backend="interp")


def test_without_numpy_s_openblas_the_error_names_every_mode_that_calls_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It said "build without --fast-math=reassoc", though --fast-math fast calls OpenBLAS
    too; it now names the modes that do not."""
    from dhir.toolchain.linking import blas_library

    (tmp_path / "numpy").mkdir()
    monkeypatch.setattr(np, "__file__", str(tmp_path / "numpy" / "__init__.py"))
    with pytest.raises(DhirError) as error:
        blas_library()
    message = str(error.value)
    assert f"no OpenBLAS in {tmp_path / 'numpy.libs'}" in message
    assert "--fast-math reassoc or fast" in message
    assert message.endswith("or build with --fast-math none or contract")


RANKED_C = """
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
/* Each rank's own answers: 3 steps on rank 0, 8 on rank 1 (no rank: 0, the interpreter). */
static int rank(void) {
  const char *r = getenv("PMI_RANK");
  if (r == NULL) r = getenv("OMPI_COMM_WORLD_RANK");
  return r == NULL ? 0 : atoi(r);
}
int64_t steps(void) { return 3 + 5 * rank(); }
bool more(int64_t t) { return t < 2 + 4 * rank(); }
double weight(void) { return 0.5 + rank(); }
"""

# Two time loops around a schedule whose tasks run on ranks 1 and 0: a step count and a
# condition from the C above, and a weight the tasks use.
RANKED_LOOPS = """
func.func private @steps() -> i64
func.func private @more(i64) -> i1
func.func private @weight() -> f64
func.func @main(%u: memref<16xf64>, %v: memref<16xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n64 = func.call @steps() : () -> i64
  %n = arith.index_cast %n64 : i64 to index
  %w = func.call @weight() : () -> f64
  scf.for %t = %c0 to %n step %c1 {
    func.call @smooth(%u, %v, %w) : (memref<16xf64>, memref<16xf64>, f64) -> ()
  }
  %zero = arith.constant 0 : i64
  %one = arith.constant 1 : i64
  %end = scf.while (%t = %zero) : (i64) -> i64 {
    %go = func.call @more(%t) : (i64) -> i1
    scf.condition(%go) %t : i64
  } do {
  ^bb0(%t: i64):
    func.call @smooth(%u, %v, %w) : (memref<16xf64>, memref<16xf64>, f64) -> ()
    %next = arith.addi %t, %one : i64
    scf.yield %next : i64
  }
  return
}
func.func private @smooth(%u: memref<16xf64>, %v: memref<16xf64>, %w: f64) {
  dhir.schedule %u, %v {
    %cpu = dhir.target {kind = "cpu"}
    %a = dhir.task %cpu, %u, %v attributes {dhir.rank = 1} {
      %c1 = arith.constant 1 : index
      %c15 = arith.constant 15 : index
      scf.for %i = %c1 to %c15 step %c1 {
        %im = arith.subi %i, %c1 : index
        %ip = arith.addi %i, %c1 : index
        %x = memref.load %u[%im] : memref<16xf64>
        %y = memref.load %u[%ip] : memref<16xf64>
        %s = arith.addf %x, %y : f64
        %m = arith.mulf %s, %w : f64
        memref.store %m, %v[%i] : memref<16xf64>
      }
    }
    %b = dhir.task %cpu, %v, %u attributes {dhir.rank = 0} {
      %c1 = arith.constant 1 : index
      %c15 = arith.constant 15 : index
      scf.for %i = %c1 to %c15 step %c1 {
        %x = memref.load %v[%i] : memref<16xf64>
        memref.store %x, %u[%i] : memref<16xf64>
      }
    }
  }
  return
}
"""


@pytest.mark.mlir
@pytest.mark.mpi
def test_ranks_take_rank_0_s_answers_of_c_that_host_code_calls(tmp_path: Path) -> None:
    """C that answered each rank differently made the ranks run time loops of other step
    counts: 3 on rank 0, 8 on rank 1, and exit 0 with a result no sequential run gives.
    dhir-agree-calls gives every rank rank 0's answer, as one call has one."""
    (tmp_path / "ranked.c").write_text(RANKED_C)
    obj = tmp_path / "ranked.o"
    subprocess.run(["clang-22", "-fPIC", "-c", tmp_path / "ranked.c", "-o", obj], check=True)
    args = [(np.arange(16.0) ** 2) % 7, np.zeros(16)]
    want = dhir.run(RANKED_LOOPS, *args, backend="interp", link=[obj])
    u, v = [a.copy() for a in args]
    for _ in range(3 + 2):  # rank 0's: steps() 3, more() true for t < 2
        v[1:15] = (u[:14] + u[2:]) * 0.5
        u[1:15] = v[1:15]
    assert_equal(want, [u, v])
    assert_equal(dhir.run(RANKED_LOOPS, *args, ranks=2, link=[obj]), want)


# RANKED_LOOPS with the step count and the condition got through the program's own
# functions, which only host code calls.
RANKED_OWN = (
    RANKED_LOOPS.replace("call @steps()", "call @count()").replace(
        "call @more(%t)", "call @going(%t)"
    )
    + """
func.func private @count() -> i64 {
  %n = func.call @steps() : () -> i64
  return %n : i64
}
func.func private @going(%t: i64) -> i1 {
  %go = func.call @more(%t) : (i64) -> i1
  return %go : i1
}
"""
)


@pytest.mark.mlir
@pytest.mark.mpi
def test_ranks_take_rank_0_s_answers_of_c_that_host_code_s_own_functions_call(
    tmp_path: Path,
) -> None:
    """The program's own functions that host code calls and that call C ran other step
    counts on other ranks still, and the run failed in a broadcast; they run on every
    rank, so their calls take rank 0's answers too."""
    (tmp_path / "ranked.c").write_text(RANKED_C)
    obj = tmp_path / "ranked.o"
    subprocess.run(["clang-22", "-fPIC", "-c", tmp_path / "ranked.c", "-o", obj], check=True)
    args = [(np.arange(16.0) ** 2) % 7, np.zeros(16)]
    want = dhir.run(RANKED_LOOPS, *args, backend="interp", link=[obj])
    assert_equal(dhir.run(RANKED_OWN, *args, backend="interp", link=[obj]), want)
    assert_equal(dhir.run(RANKED_OWN, *args, ranks=2, link=[obj]), want)
