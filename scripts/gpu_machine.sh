#!/bin/bash
# Everything a lent GPU machine should run, built here in one folder and run there in one
# command (docs/gpu.md, "On a lent GPU machine"). The GPU machine has no LLVM 22 and no
# network: `build` compiles the programs here (LLVM 22, this checkout's .venv) and fetches
# the Python wheels dhir needs there; `run` needs only python3 with NumPy.
#
#   bash scripts/gpu_machine.sh build [DIR]   # here; DIR defaults to .gpu-machine
#   bash scripts/gpu_machine.sh run [DIR]     # there, from the repository's root
#
# `run` writes one log per part to $OUT (the device tool's folder) or DIR/logs, prints a
# summary line per part, and exits non-zero if a check failed. Each part has a time limit,
# so that the whole run ends within 9.5 minutes (a device call may last 10). Environment:
# GPU_CHIP (sm_90), GPU_CPU (the GPU machine's CPU for clang, x86-64-v3), GPU_CORES (16),
# RANDOM_PROGRAMS (60).
set -u

action=${1:-}
dir=${2:-.gpu-machine}
chip=${GPU_CHIP:-sm_90}
cpu=${GPU_CPU:-x86-64-v3}
cores=${GPU_CORES:-16}
random=${RANDOM_PROGRAMS:-60}

build() {
    local py=.venv/bin/python
    [ -x "$py" ] || { echo "$0: no .venv here: run scripts/setup.sh first" >&2; exit 2; }
    rm -rf "$dir" && mkdir -p "$dir" || exit 1
    set -e
    $py tests/gpu_check.py build "$dir/check" --random "$random" --chip "$chip"
    $py bench/gpu_triad.py --compile-only -o "$dir/triad.exe" --cpu "$cpu"
    $py bench/gpu_split.py build "$dir/split" --cpu "$cpu" --arch "$chip"
    $py bench/gpu_messages.py build "$dir/messages" --cpu "$cpu" --arch "$chip"
    $py bench/polybench/remote.py build "$dir/poly" --cpu "$cpu" --cores "$cores" \
        --kernels gemm,2mm,jacobi-2d,heat-3d,fdtd-2d --ranks 1,2,4,16
    $py bench/shard_matmul.py --build "$dir/shard" --cpu "$cpu" --grids 1x1,2x2,4x4
    wheels
    set +e
    echo "built $dir ($(du -sh "$dir" | cut -f1)); there: bash $0 run $dir"
}

# The pure-Python and binary wheels dhir imports, for the GPU machine's Python 3.12.
wheels() {
    local spec
    spec=$(.venv/bin/python -m pip list --format=freeze 2>/dev/null |
        grep -iE '^(xdsl|islpy|immutabledict|ordered-set)==')
    # shellcheck disable=SC2086
    .venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        -d "$dir/wheels" $spec
}

failed=0
part() {
    local name=$1 limit=$2
    shift 2
    local began=$SECONDS
    timeout --kill-after=10 "$limit" "$@" >"$logs/$name.log" 2>&1
    local rc=$?
    [ $rc -eq 0 ] || failed=1
    echo "== $name: rc=$rc in $((SECONDS - began)) s; last lines:"
    tail -n 6 "$logs/$name.log"
}

run() {
    [ -d "$dir" ] || { echo "$0: no $dir: build it first" >&2; exit 2; }
    logs=${OUT:-$dir/logs}
    mkdir -p "$logs"
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/dhir-site \
        "$dir"/wheels/*.whl || exit 1
    export PYTHONPATH=/tmp/dhir-site:$PWD PYTHONUNBUFFERED=1
    local runtime=$PWD/$dir/check/runtime
    (nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; lscpu) \
        >"$logs/machine.txt" 2>&1
    part check 90 python3 tests/gpu_check.py check "$dir/check" --jobs 8
    local mpich=(env DHIR_MPICH_PREFIX="$runtime/mpich"
        LD_LIBRARY_PATH="$runtime/lib:$runtime/mpich/lib:${LD_LIBRARY_PATH:-}")
    part triad 45 "${mpich[@]}" python3 bench/gpu_triad.py --exe "$dir/triad.exe" \
        --iterations 2000
    part messages 90 python3 bench/gpu_messages.py run "$dir/messages" --runtime "$runtime"
    part split 120 python3 bench/gpu_split.py run "$dir/split" --runtime "$runtime" \
        --budget 100
    part polybench 180 python3 bench/polybench/remote.py run "$dir/poly" --runtime "$runtime" \
        --numpy-repeats 1
    part shard 40 "${mpich[@]}" python3 bench/shard_matmul.py --run "$dir/shard"
    return $failed
}

case "$action" in
build) build ;;
run) run ;;
*)
    echo "usage: $0 build|run [DIR]" >&2
    exit 2
    ;;
esac
