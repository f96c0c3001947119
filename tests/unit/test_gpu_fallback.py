"""--gpu-fallback=cpu: GPU tasks written as loops run as CPU tasks, with the results of
the sequential interpreter; a GPU task written as a gpu.launch is a clear error."""

import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from strategies import RandomSchedule, random_inputs, ranked_cases
from test_gpu_data import GPU_TARGETS, parallel

import dhir
from dhir import DhirError
from dhir.cli.main import main

pytestmark = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")
PROPOSAL = Path(__file__).parents[2] / "examples" / "proposal.mlir"


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ranked_cases((1, 3), 12, 4, GPU_TARGETS))
def test_fallback_equals_the_interpreter(case: tuple[int, RandomSchedule, int]) -> None:
    ranks, random_program, seed = case
    text = parallel(random_program).text()
    note(f"on {ranks} ranks, the program:\n{text}")
    inputs = random_inputs(random_program, seed)
    oracle = dhir.run(text, *inputs, backend="interp")
    native = dhir.run(text, *inputs, ranks=ranks, gpu_fallback="cpu", timeout=120)
    for got, want in zip(native, oracle):
        assert got.tobytes() == want.tobytes()


def test_explicit_launch_cannot_fall_back() -> None:
    a = np.zeros(20, np.int32)
    with pytest.raises(DhirError) as error:
        dhir.run(PROPOSAL, a, a, a, ranks=2, gpu_fallback="cpu")
    message = str(error.value)
    assert 'GPU task "task3" at' in message and "proposal.mlir:21:7" in message
    assert "'gpu.launch', which only a GPU runs" in message


def test_cli_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = tmp_path / "p.mlir"
    program.write_text(parallel(_one_gpu_task()).text())
    inputs = []
    for k in range(2):
        np.save(tmp_path / f"in{k}.npy", np.arange(4, dtype=np.int32) + k)
        inputs += ["--input", str(tmp_path / f"in{k}.npy")]
    status = main(["run", str(program), "-n", "2", "--gpu-fallback=cpu", "--print", *inputs])
    assert status == 0, capsys.readouterr().err
    assert "arg1" in capsys.readouterr().out
    exe = tmp_path / "prog"
    assert main(["compile", str(program), "-o", str(exe), "--gpu-fallback", "cpu"]) == 0


def _one_gpu_task() -> RandomSchedule:
    from strategies import RandomTask

    return RandomSchedule(2, 4, ('{arch = "sm_90"}',), (RandomTask(0, (0,), (1,), 0, 4),))
