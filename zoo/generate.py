"""Write the zoo's .tflite models: `python zoo/generate.py OUT_DIR [--only NAME,...] [--full-size]`.

Run with .venv-zoo's python (tensorflow-cpu; tf_keras for the Keras 2 recurrent models, which
are left out with a note when it is missing). Every model has random weights from a seed taken
from its name, so a model is the same on every run. `--only committed` names the selection
committed in tests/data/zoo."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if __package__ in (None, ""):  # run as a script: make the `zoo` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

if TYPE_CHECKING:
    from zoo.convert import Maker

# What tests/data/zoo holds (reduced sizes, under 5 MB together); tests/tflite/test_zoo.py checks
# the folder against it, so this module imports tensorflow only when it makes models.
COMMITTED = ("mobilenet_v1", "mobilenet_v1_fp16", "mobilenet_v2_int8_u8", "mobilenet_v3_small_int8_i8",
             "lstm_keras2", "lstm_keras3", "gru_keras3", "transformer_encoder", "mirror_pad_resize",
             "argmax_topk", "dynamic_batch", "text_conv1d", "ssd_head_int8", "unet_small", "unet_upsampling",
             "unet_upsampling_int8", "mobilenet_v3_large_int8_u8")


def registry() -> dict[str, Maker]:
    """Every model's maker by name."""
    from zoo import graphs, sequence, vision

    return {**vision.MODELS, **sequence.MODELS, **graphs.MODELS}


def _names(only: str | None, known: dict[str, Maker]) -> list[str]:
    if only is None:
        return list(known)
    names: list[str] = []
    for name in only.split(","):
        names += list(COMMITTED) if name == "committed" else [name.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"generate: unknown model {unknown[0]!r}; known: {', '.join(known)}, committed")
    return names


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="zoo/generate.py", description="Write the zoo's .tflite models.")
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--only", help="comma-separated model names ('committed': the committed selection)")
    ap.add_argument("--full-size", action="store_true", help="224x224 inputs, alpha 1, 1000 classes")
    args = ap.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before tensorflow's first import
    from zoo.convert import Unavailable

    known = registry()
    names = _names(args.only, known)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    failed = 0
    for name in names:
        t0 = time.perf_counter()
        try:
            data = known[name](args.full_size)
        except Unavailable as e:
            print(f"{name}: skipped: {e}", flush=True)
            continue
        except Exception as e:  # one model's converter failure must not stop the others
            failed += 1
            print(f"{name}: FAILED: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", flush=True)
            continue
        (args.out_dir / f"{name}.tflite").write_bytes(data)
        print(f"{name}: {len(data) / 1024:.0f} KiB in {time.perf_counter() - t0:.1f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
