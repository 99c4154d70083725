#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU (driver 580 or newer): install the CUDA, test
# and TFLite extras and ai-edge-litert; run the CUDA graph / NVRTC / GEMM tests, the MediaPipe
# models on CUDA against TFLite (correctness), the IBuffer tests on CUDA, the CUDA conformance
# sweep, graph replay against step-by-step launching, the latency against TFLite and, per model,
# the CUDA latency and launches per execution, float32 and relaxed (float16 temporaries and GEMMs);
# print one summary table. Every step has a time limit and all of them together fit in BUDGET seconds
# (default 540: 9 minutes). Logs go to $OUT (default ./gpu-check-out).
#
#   bash ci/gpu-check.sh                 # makes .venv-gpu and installs into it
#   (offline: run ci/gpu-bundle.sh first where pip works, and carry .gpu-bundle/ to the machine)
#   PY=.venv/bin/python bash ci/gpu-check.sh   # use an environment that has the extras already
#
# Exit status: 0 when every step passed, 1 when one failed or ran out of time, 2 when the
# environment cannot run the check (no install, CuPy sees no GPU), with one line saying why.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu-check-out}"
BUDGET="${BUDGET:-540}"
mkdir -p "$OUT"
export XDG_CACHE_HOME="${XDG_CACHE_HOME:-$PWD/.cache}"
START=$SECONDS
ROWS=()
FAILED=0

if [ -d .gpu-bundle/models ]; then
    export NNGPU_MODELS="$PWD/.gpu-bundle/models"
fi
if [ -d .gpu-bundle/kernels ]; then
    # the kernels ci/gpu-bundle.sh compiled ahead (`nngpu cache build`): the sweep loads them
    export NNGPU_CACHE_DIR="$PWD/.gpu-bundle/kernels"
fi
if [ -z "${PY:-}" ] && [ -d .gpu-bundle/wheels ]; then
    # The bundle of ci/gpu-bundle.sh (the lent machine reaches nothing): the system's Python with
    # its own CuPy, numpy and pytest, the bundled wheels beside it, this checkout on the path.
    echo "== install from .gpu-bundle ($(date +%T))"
    if ! python3 -m pip install -q --no-index --no-deps --target .gpu-bundle/site .gpu-bundle/wheels/*.whl \
            > "$OUT/install.txt" 2>&1; then
        tail -5 "$OUT/install.txt"
        echo "gpu-check: cannot install the wheels of .gpu-bundle (log: $OUT/install.txt)"
        exit 2
    fi
    export PYTHONPATH="$PWD:$PWD/.gpu-bundle/site${PYTHONPATH:+:$PYTHONPATH}"
    PY=python3
elif [ -z "${PY:-}" ]; then
    echo "== install ($(date +%T))"
    if ! { python3 -m venv .venv-gpu && .venv-gpu/bin/python -m pip install -q -e '.[test,cuda,tflite]' \
            'ai-edge-litert>=2.3'; } > "$OUT/install.txt" 2>&1; then
        tail -5 "$OUT/install.txt"
        echo "gpu-check: cannot install .[test,cuda,tflite] and ai-edge-litert (offline? run ci/gpu-bundle.sh where pip works and bring .gpu-bundle; log: $OUT/install.txt)"
        exit 2
    fi
    PY=.venv-gpu/bin/python
fi

"$PY" - <<'PY' || exit 2
import sys
try:
    import cupy
    ok = cupy.cuda.is_available()
except Exception as e:  # no CuPy, no driver, a broken install
    sys.exit(f"gpu-check: CuPy cannot run here: {type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}")
if not ok:
    sys.exit("gpu-check: CuPy sees no GPU (cupy.cuda.is_available() is False); nothing to check")
props = cupy.cuda.runtime.getDeviceProperties(0)
print(f"GPU: {props['name'].decode()}, CUDA runtime {cupy.cuda.runtime.runtimeGetVersion()}")
PY

# step NAME SECONDS LOG CMD...: run CMD under min(SECONDS, what is left of BUDGET); one table row
step() {
    local name=$1 limit=$2 log=$3 t0=$SECONDS
    shift 3
    local left=$((BUDGET - (SECONDS - START)))
    [ "$limit" -gt "$left" ] && limit=$left
    printf '\n== %s (%s, at most %ss)\n' "$name" "$(date +%T)" "$limit"
    local status rc
    if [ "$limit" -le 5 ]; then
        status=skipped; echo "no time left" > "$log"
    else
        timeout "$limit" "$@" > "$log" 2>&1
        rc=$?
        case $rc in 0) status=ok ;; 124) status=TIMEOUT ;; *) status=FAIL ;; esac
    fi
    [ "$status" = ok ] || FAILED=1
    tail -3 "$log"
    local last
    last=$(grep -E "passed|failed|error|operation instances" "$log" | tail -1 | tr -s ' ')
    ROWS+=("$(printf '%-32s %-8s %5ss  %s' "$name" "$status" "$((SECONDS - t0))" "${last:0:100}")")
}

export NNGPU_BENCH_ROUNDS="${NNGPU_BENCH_ROUNDS:-10}"
step "CUDA graph, NVRTC, GEMM, GPUs tests" 95 "$OUT/unit.txt" \
    "$PY" -m pytest -q -n 4 tests/compiler/test_replay.py tests/compiler/test_nvrtc_unit.py \
    tests/compiler/test_capture.py tests/compiler/test_gemm.py tests/backends/test_cuda_devices.py \
    tests/backends/test_cublas_gemm.py tests/compiler/test_relaxed_storage.py \
    -k "cuda or replay or nvrtc or capture or path or cublas"
step "MediaPipe on CUDA vs TFLite" 90 "$OUT/models.txt" \
    "$PY" -m pytest -q tests/tflite/test_models.py -k "cuda or import"
step "IBuffer tests on CUDA" 45 "$OUT/ibuffer.txt" "$PY" -m pytest -q tests/driver/test_buffer.py -k cuda
step "CUDA conformance sweep (sync)" 140 "$OUT/cts-cuda.txt" \
    "$PY" -m nngpu cts -q --backend cuda --path sync --json "$OUT/cts-cuda.jsonl"
step "graph replay vs step by step" 50 "$OUT/bench-plan.txt" \
    "$PY" -m pytest -q bench/test_bench_device_plan.py -k cuda --benchmark-json="$OUT/bench-plan.json"
step "latency vs TFLite" 75 "$OUT/bench-tflite.txt" \
    "$PY" -m pytest -q bench/test_bench_tflite.py -k "test_tflite or cuda" --benchmark-json="$OUT/bench-tflite.json"
step "per model: latency, launches, relaxed" 45 "$OUT/model-latency.txt" "$PY" ci/model_latency.py --backend cuda

{
    printf '\n== summary (%ss in all)\n' "$((SECONDS - START))"
    printf '%-32s %-8s %6s  %s\n' step status time "last line"
    printf '%s\n' "${ROWS[@]}"
    grep -E "^FAILED" "$OUT/cts-cuda.txt" "$OUT/unit.txt" "$OUT/models.txt" "$OUT/ibuffer.txt" 2>/dev/null | head -10
    sed -n '/^CUDA plan/,/^$/p' "$OUT/bench-plan.txt"
    sed -n '/^nngpu \/ TFLite/,/^$/p' "$OUT/bench-tflite.txt"
    printf '\nCUDA per model (ci/model_latency.py):\n'
    cat "$OUT/model-latency.txt" 2>/dev/null
} | tee "$OUT/summary.txt"
exit $FAILED
