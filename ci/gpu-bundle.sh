#!/usr/bin/env bash
# What ci/gpu-check.sh needs on a GPU machine that reaches no network (the lent H200: Python 3.12
# with CuPy, numpy and pytest already there): the wheels of the TFLite importer and interpreter
# for that Python, the five MediaPipe models, and the CUDA kernels the check compiles (the
# bundled corpus, the models and the demo model, built here by NVRTC for GPU_ARCH, default sm_90: no GPU needed;
# PY: a Python with nngpu's cuda and tflite extras, default .venv/bin/python), in .gpu-bundle/
# (git-ignored). Carry that folder there and run the check:  bash ci/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUNDLE=.gpu-bundle
PYVER="${GPU_PYTHON_VERSION:-3.12}"
rm -rf "$BUNDLE" && mkdir -p "$BUNDLE/wheels" "$BUNDLE/models"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
    --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 -d "$BUNDLE/wheels" \
    'tflite>=2.18' 'ai-edge-litert>=2.3' backports.strenum
NNGPU_MODELS="$PWD/$BUNDLE/models" bash ci/fetch-models.sh > /dev/null
NNGPU_CACHE_DIR="$PWD/$BUNDLE/kernels" "${PY:-.venv/bin/python}" -m nngpu cache build -q \
    --arch "${GPU_ARCH:-sm_90}" --corpus tests/data/nnapi-cts "$BUNDLE"/models/*.tflite nngpu/data/demo_cnn.json
du -sh "$BUNDLE"
