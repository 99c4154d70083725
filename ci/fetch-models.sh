#!/usr/bin/env bash
# Download the mediapipe wheel with pip and extract the five test models into the model cache
# ($NNGPU_MODELS, else $XDG_CACHE_HOME/nngpu/models). Usage: ci/fetch-models.sh [DEST]
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] && PY=.venv/bin/python
exec "$PY" -m nngpu.tflite.models "$@"
