#!/bin/bash
# Everything a lent GPU machine should run, built here in one folder and run there in one
# command (docs/gpu.md, "On a lent GPU machine"). The GPU machine has no LLVM 22 and no
# network: `build` compiles the programs here (LLVM 22, this checkout's .venv) and fetches
# the Python wheels dhir needs there; `run` needs only python3 with NumPy.
#
#   bash scripts/gpu_machine.sh build [DIR]      # here; DIR defaults to .gpu-machine
#   bash scripts/gpu_machine.sh run [DIR]        # there, from the repository's root
#   bash scripts/gpu_machine.sh rehearse [DIR]   # here: `run` without a GPU (see below)
#
# `run` runs the parts in order of priority, each under a time limit, and all of them
# within GPU_BUDGET seconds (540: a device call may last 590): a part that would start
# with too little time left is skipped, one that overruns is killed. After each part it
# appends the part's result and figures to SUMMARY.txt and packs every log into logs.tgz,
# both in $OUT (the device tool's folder, which returns at most 8 files) or DIR/logs, so
# whatever ran comes back even if a later part hangs. It exits non-zero if a part failed.
#
# `rehearse` runs the same parts here with this checkout's .venv, a fake CUDA driver
# (tests/gpu_fake/fake_cuda.c: device memory in host memory, no kernel runs) and no
# nvidia-smi: the CPU parts run as there, the GPU parts start, load their kernels and move
# their data, but their results differ (no kernel ran), the triad and the calibration find
# no GPU. It checks that the wheels install for Python 3.12 too. Logs: $OUT or DIR/rehearsal.
#
# Environment: GPU_CHIP (sm_90), GPU_CPU (the GPU machine's CPU for clang, x86-64-v3),
# GPU_CORES (16), RANDOM_PROGRAMS (60), GPU_BUDGET (540 seconds for `run`).
set -u

action=${1:-}
dir=${2:-.gpu-machine}
chip=${GPU_CHIP:-sm_90}
cpu=${GPU_CPU:-x86-64-v3}
cores=${GPU_CORES:-16}
random=${RANDOM_PROGRAMS:-60}
budget=${GPU_BUDGET:-540}
# What the wheels are fetched for: the GPU machine's Python.
platforms=(--python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
    --platform manylinux_2_17_x86_64)

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
    # The device tool carries the tree (tracked and untracked, not ignored) and the
    # carried folder: 64 MiB at most.
    local kib
    kib=$({ git ls-files -z --cached --others --exclude-standard; printf '%s\0' "$dir"; } |
        du -sc --apparent-size --block-size=1K --files0-from=- 2>/dev/null | tail -n 1 | cut -f1)
    echo "built $dir: $((kib / 1024)) MiB travel with the tree (at most 64);" \
        "there: bash $0 run $dir"
    [ "$kib" -lt $((62 * 1024)) ] || echo "$0: warning: too close to the 64 MiB a device" \
        "call carries: fewer RANDOM_PROGRAMS, or untracked files out of the tree" >&2
}

# The pure-Python and binary wheels dhir imports, for the GPU machine's Python 3.12.
wheels() {
    local spec
    spec=$(.venv/bin/python -m pip list --format=freeze 2>/dev/null |
        grep -iE '^(xdsl|islpy|immutabledict|ordered-set)==')
    # shellcheck disable=SC2086
    .venv/bin/python -m pip download -q --no-deps --only-binary=:all: "${platforms[@]}" \
        -d "$dir/wheels" $spec
}

failed=() passed=() skipped=()
# part NAME LIMIT PATTERN COMMAND...: run COMMAND with its output in NAME.log, for at most
# LIMIT seconds and never past the run's deadline; SUMMARY.txt gets its status and the
# lines of its log that PATTERN matches (its figures).
part() {
    local name=$1 limit=$2 pattern=$3
    shift 3
    local left=$((deadline - SECONDS - 10))
    if [ "$left" -lt 20 ]; then
        skipped+=("$name")
        echo "== $name: SKIPPED, ${left} s left of the budget" | tee -a "$summary"
        return
    fi
    [ "$limit" -le "$left" ] || limit=$left
    local began=$SECONDS
    timeout --kill-after=5 "$limit" "$@" >"$logs/$name.log" 2>&1
    local rc=$? status=passed
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        status="TIMED OUT after $limit s"
    elif [ $rc -ne 0 ]; then
        status=FAILED
    fi
    if [ "$status" = passed ]; then passed+=("$name"); else failed+=("$name"); fi
    {
        echo "== $name: $status (rc=$rc) in $((SECONDS - began)) s"
        grep -E -- "$pattern" "$logs/$name.log" | grep -vE '^(warning|dhir: rank [0-9]+ sent)' |
            head -n 60
        [ "$status" = passed ] || tail -n 3 "$logs/$name.log"
    } | tee -a "$summary"
    pack
}

# All logs in one file: the device tool returns at most 8 files.
pack() {
    tar czf "$results/.logs.tgz" -C "$logs" . && mv "$results/.logs.tgz" "$results/logs.tgz"
}

# Where the logs go and which python runs the parts; sets logs, results, summary, py.
setup() {
    [ -d "$dir" ] || { echo "$0: no $dir: build it first" >&2; exit 2; }
    results=${OUT:-$dir/$1}
    logs=$(mktemp -d /tmp/gpu-machine-logs.XXXXXX)
    summary=$results/SUMMARY.txt
    mkdir -p "$results" && : >"$summary"
    deadline=$((SECONDS + budget))
    export PYTHONUNBUFFERED=1
}

run() {
    setup logs
    echo "gpu_machine run, $(date -u '+%F %T') UTC, budget $budget s" | tee -a "$summary"
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/dhir-site \
        "$dir"/wheels/*.whl >"$logs/install.log" 2>&1 ||
        { cat "$logs/install.log" | tee -a "$summary"; pack; exit 1; }
    export PYTHONPATH=/tmp/dhir-site:$PWD
    py=python3
    parts
}

rehearse() {
    setup rehearsal
    echo "gpu_machine REHEARSAL (fake CUDA driver, no GPU), $(date -u '+%F %T') UTC," \
        "budget $budget s" | tee -a "$summary"
    # The wheels must install for the GPU machine's Python 3.12 (this one may be older).
    .venv/bin/python -m pip install -q --dry-run --no-index --no-deps --only-binary=:all: \
        "${platforms[@]}" --target "$logs/site" "$dir"/wheels/*.whl >"$logs/install.log" 2>&1 ||
        { cat "$logs/install.log" | tee -a "$summary"; pack; exit 1; }
    local fake
    fake=$(mktemp -d /tmp/gpu-machine-fake.XXXXXX)
    clang-22 -shared -fPIC -O1 -o "$fake/libcuda.so.1" tests/gpu_fake/fake_cuda.c || exit 1
    export DHIR_CUDA_DRIVER=$fake/libcuda.so.1 PYTHONPATH=$PWD
    py=$PWD/.venv/bin/python
    parts
}

# Every part, in order of priority: the triad (under a minute) and the GPU-marked tests'
# and differential programs first, then issue 31's split and messages, then issue 27's
# multi-core figures and the shard matmul, which the budget cuts first.
parts() {
    local runtime=$PWD/$dir/check/runtime
    (nvidia-smi; nvidia-smi topo -m; lscpu) >"$logs/machine.txt" 2>&1
    local gpu
    gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
    # One GPU: the multi-GPU paths run as ranks sharing it (peer copies through CUDA IPC).
    echo "machine: ${gpu:-no GPU (nvidia-smi)}; $(nvidia-smi -L 2>/dev/null | grep -c GPU)" \
        "GPUs; $(nproc) cores" | tee -a "$summary"
    local mpich=(env DHIR_MPICH_PREFIX="$runtime/mpich"
        LD_LIBRARY_PATH="$runtime/lib:$runtime/mpich/lib:${LD_LIBRARY_PATH:-}")
    # The triad first, on a quiet machine: run right after the check's programs it once
    # gave 0.76 of peak against 0.87 on a fresh machine (docs/gpu.md, "Testing").
    part triad 50 'gpu_triad|CUDA|goal' "${mpich[@]}" "$py" bench/gpu_triad.py \
        --exe "$dir/triad.exe" --iterations 2000
    part check 120 '^(FAIL|gpu_check:|ok   calibration)' \
        "$py" tests/gpu_check.py check "$dir/check" --jobs 8
    part split 110 '.' "$py" bench/gpu_split.py run "$dir/split" --runtime "$runtime" \
        --budget 90
    part messages 90 '.' "$py" bench/gpu_messages.py run "$dir/messages" --runtime "$runtime"
    part polybench 170 '.' "$py" bench/polybench/remote.py run "$dir/poly" \
        --runtime "$runtime" --numpy-kernels gemm,2mm
    part shard 40 '.' "${mpich[@]}" "$py" bench/shard_matmul.py --run "$dir/shard"
    {
        echo "== parts: ${#passed[@]} passed, ${#failed[@]} failed (${failed[*]:-none}), "`
            `"${#skipped[@]} skipped (${skipped[*]:-none}); $SECONDS s in all"
    } | tee -a "$summary"
    pack
    rm -rf "$logs"
    [ ${#failed[@]} -eq 0 ] && [ ${#skipped[@]} -eq 0 ]
}

case "$action" in
build) build ;;
run) run ;;
rehearse) rehearse ;;
*)
    echo "usage: $0 build|run|rehearse [DIR]" >&2
    exit 2
    ;;
esac
