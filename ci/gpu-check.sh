#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU (driver 580 or newer): install the CUDA
# extra, run the GPU tests, the CUDA conformance sweep and the benchmarks, print a summary.
# Sized to finish well inside 10 minutes; results go to $OUT (default ./gpu-check-out).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu-check-out}"
mkdir -p "$OUT"
export XDG_CACHE_HOME="${XDG_CACHE_HOME:-$PWD/.cache}"
step() { printf '\n== %s (%s)\n' "$1" "$(date +%T)"; }

step "install"
python3 -m venv .venv-gpu
.venv-gpu/bin/python -m pip install -q -e '.[test,cuda]' || exit 1
.venv-gpu/bin/python - <<'PY' || exit 1
import cupy
assert cupy.cuda.is_available(), "CuPy sees no GPU"
print(cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(), "CUDA runtime", cupy.cuda.runtime.runtimeGetVersion())
PY

step "GPU tests"
timeout 150 .venv-gpu/bin/python -m pytest -q tests/compiler tests/driver/test_buffer.py 2>&1 | tail -5 | tee "$OUT/tests.txt"

step "CUDA conformance sweep (sync)"
timeout 240 .venv-gpu/bin/nngpu cts --backend cuda --path sync --json "$OUT/cts-cuda.jsonl" > "$OUT/cts-cuda.txt" 2>&1
grep -E "operation instances|wall time|passed, " "$OUT/cts-cuda.txt"
grep -E "^FAILED" "$OUT/cts-cuda.txt" | head -20

step "benchmarks"
timeout 150 .venv-gpu/bin/python -m pytest -q bench/test_bench_compiler.py --benchmark-columns=median,iqr,rounds \
    --benchmark-json="$OUT/bench.json" 2>&1 | grep -E "^(test_|-|Name|\s*$)|passed|failed" | tee "$OUT/bench.txt"

step "summary"
tail -1 "$OUT/cts-cuda.txt"
tail -1 "$OUT/tests.txt"
