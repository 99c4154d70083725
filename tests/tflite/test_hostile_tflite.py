"""A hostile .tflite is refused in one line: seeded mutations of small models (byte flips, a
4-byte field set to a large or negative value, truncations, duplicated spans) each go through
`nngpu run` on numpy, in a child process with a memory limit and a per-case timeout. Every one
either runs or is refused with one clear line: no internal error, crash, hang or running out of
memory. A few hundred cases run by default; --full-cts runs the full size."""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tflite", reason="the `tflite` flatbuffer package is not installed")

from nngpu.tflite.errors import TFLiteFormatError  # noqa: E402
from nngpu.tflite.reader import read_tflite  # noqa: E402

from .mutate import cases  # noqa: E402
from .tflbuild import FLOAT32, INT8, TFLModel  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "tests" / "data" / "tflite").glob("*.tflite")) + \
    [ROOT / "tests" / "data" / "zoo" / n for n in ("argmax_topk.tflite", "text_conv1d.tflite", "lstm_keras2.tflite",
                                                    "mirror_pad_resize.tflite", "dynamic_batch.tflite")]
CASE_TIMEOUT_S = 60


def _batch(made: list[dict]) -> list[dict]:
    """Each case's result from the runner; a child that dies or stalls is replaced, and its
    case recorded as a crash or a hang."""
    results, pending = [], list(made)
    while pending:
        child = subprocess.Popen([sys.executable, "-m", "tests.tflite.mutate"], cwd=ROOT, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                 env={**os.environ, "OMP_NUM_THREADS": "1"})
        try:
            while pending:
                case = pending[0]
                child.stdin.write(json.dumps(case) + "\n")
                child.stdin.flush()
                ready, _, _ = select.select([child.stdout], [], [], CASE_TIMEOUT_S)
                line = child.stdout.readline() if ready else ""
                pending.pop(0)
                if not line:
                    status = "hang" if not ready else f"crash (exit {child.wait(10)})"
                    results.append({**case, "rc": status, "traceback": False, "err": ""})
                    break
                results.append({**case, **json.loads(line)})
        finally:
            child.kill()
            child.wait()
    return results


def _bad(r: dict) -> bool:
    return r["rc"] not in (0, 1, 2) or r["traceback"] or "internal error" in r["err"] or (r["rc"] and not r["err"])


def test_mutated_models_run_or_are_refused_in_one_line(tmp_path, request):
    count = 2000 if request.config.getoption("--full-cts") else 400
    results = _batch(cases(SOURCES, count, seed=31, out_dir=tmp_path))
    bad = [r for r in results if _bad(r)]
    ran = sum(r["rc"] == 0 for r in results)
    assert ran > 0 and ran < len(results)     # both kinds of endings are exercised
    assert not bad, "\n".join(f"{Path(r['path']).name} ({r['what']}): {r['rc']}: {r['err']}" for r in bad[:20])


def _add_model(**changes) -> bytes:
    """y = x + x, with the indexes or quantization a test breaks."""
    m = TFLModel()
    x = m.tensor("x", [2, 3], INT8 if "scale" in changes else FLOAT32, scale=changes.get("scale"))
    y = m.tensor("y", [2, 3], INT8 if "scale" in changes else FLOAT32, scale=changes.get("scale"))
    m.op("ADD", changes.get("op_inputs", [x, x]), changes.get("op_outputs", [y]))
    return m.build(changes.get("inputs", [x]), changes.get("outputs", [y]))


@pytest.mark.parametrize("changes, message", [
    ({"outputs": [7]}, "graph output 0 is tensor 7 of 2"),
    ({"inputs": [-3]}, "graph input 0 is tensor -3 of 2"),
    ({"inputs": [0, 0]}, "the graph inputs list a tensor twice: [0, 0]"),
    ({"op_inputs": [0, 9]}, "operator 0 (ADD) input 1 is tensor 9 of 2"),
    ({"op_outputs": [0]}, "operator 0 (ADD) writes tensor 0, which is a graph input"),
    ({"op_inputs": [0, 1]}, "operator 0 (ADD) input 1 is tensor 1 (y), which has no value"),
    ({"scale": float("nan")}, "tensor 0 (x): quantization scale [nan] is not a finite non-negative number"),
])
def test_a_broken_index_or_field_is_named(changes, message):
    with pytest.raises(TFLiteFormatError) as e:
        read_tflite(_add_model(**changes))
    assert message in str(e.value)


def test_a_shape_past_nnapis_uint32_size_is_refused():
    m = TFLModel()
    x, y = m.tensor("x", [1 << 16, 1 << 15]), m.tensor("y", [1 << 16, 1 << 15])
    m.op("ADD", [x, x], [y])
    with pytest.raises(TFLiteFormatError, match=r"tensor 0 \(x\): shape \[65536, 32768\] holds 8589934592 bytes"):
        read_tflite(m.build([x], [y]))
