#!/usr/bin/env bash
# Build the model zoo and compare it with TFLite: bash zoo/run.sh [OUT_DIR]
#   - makes .venv-zoo (tensorflow-cpu, the `zoo` extra; tf-keras for the Keras 2 recurrent
#     models) when it has no tensorflow, then writes every model with zoo/generate.py;
#   - reports them with .venv's python (nngpu + ai-edge-litert): numpy, plus opencl when present.
# ZOO_BACKENDS (default numpy,opencl), ZOO_RUNS (default 5) and ZOO_ARGS (e.g. "--full-size")
# pass through.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/nngpu/zoo}
zoo_python=$root/.venv-zoo/bin/python
report_python=$root/.venv/bin/python

if [ ! -x "$report_python" ]; then
  echo "zoo/run.sh: no $report_python: make it first (README: pip install -e '.[ci]')" >&2
  exit 2
fi
if ! "$zoo_python" -c "import tensorflow" 2>/dev/null; then
  python3 -m venv "$root/.venv-zoo"
  "$root/.venv-zoo/bin/pip" install -q "$root[zoo]"
fi
if ! "$zoo_python" -c "import tf_keras" 2>/dev/null; then
  # tf-keras must match tensorflow's version; --no-deps keeps it from pulling in the GPU `tensorflow`.
  tf_version=$("$zoo_python" -c "import tensorflow as tf; print(tf.__version__)" 2>/dev/null)
  "$root/.venv-zoo/bin/pip" install -q --no-deps "tf-keras==$tf_version" \
    || echo "zoo/run.sh: no tf-keras $tf_version: the Keras 2 recurrent models are left out" >&2
fi

# shellcheck disable=SC2086  # ZOO_ARGS is a list of options
TF_CPP_MIN_LOG_LEVEL=2 "$zoo_python" "$root/zoo/generate.py" "$out" ${ZOO_ARGS:-} \
  || echo "zoo/run.sh: some models did not convert (above); reporting the others" >&2
backends=numpy
if [ -n "${ZOO_BACKENDS:-}" ]; then
  backends=$ZOO_BACKENDS
elif "$report_python" -c "from nngpu.driver.device import Device; Device('opencl')" 2>/dev/null; then
  backends=numpy,opencl
fi
cd "$root"
exec "$report_python" -m zoo.report "$out" --backend "$backends" --runs "${ZOO_RUNS:-5}"
