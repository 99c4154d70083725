"""Every GPU in the box (issue 22, part 6): a `cuda:N` backend runs on its own GPU, whichever
GPU the calling thread has current, and leaves the thread's current GPU as it was. These run
where CuPy sees a GPU (ci/gpu-check.sh's unit step); the second test needs two GPUs."""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

import nngpu
from nngpu.backends import cuda
from nngpu.session import Session

cupy = pytest.importorskip("cupy", reason="CuPy (extra 'cuda') is not installed")
pytestmark = pytest.mark.skipif(not cuda.available(), reason="no CUDA GPU here")

DEMO = Path(nngpu.__file__).resolve().parent / "data" / "demo_cnn.json"


def _expected() -> tuple[dict, list[np.ndarray]]:
    with Session(DEMO, "numpy") as reference:
        inputs = reference.named.example_inputs
        reference.run(inputs)
        return inputs, reference.output_arrays()


def _runs_right(name: str, inputs: dict, expected: list[np.ndarray], errors: list, times: int = 5) -> None:
    try:
        with Session(DEMO, name) as session:
            for _ in range(times):
                session.run(inputs)
                for got, want in zip(session.output_arrays(), expected):
                    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)   # cuBLAS sums in its own order
    except Exception as e:  # reported by the test's thread
        errors.append(f"{name}: {type(e).__name__}: {e}")


def test_every_gpu_runs_the_demo_model_from_threads_at_once():
    count = cupy.cuda.runtime.getDeviceCount()
    inputs, expected = _expected()
    errors: list[str] = []
    threads = [threading.Thread(target=_runs_right, args=(f"cuda:{k}", inputs, expected, errors))
               for k in range(count) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and not any(t.is_alive() for t in threads)
    for k, described in enumerate(cuda.devices()):
        backend = cuda.CudaBackend(k)
        assert backend.description == described and backend.alloc(16).device.id == k
        assert backend.for_plan().stream.device_id == k


@pytest.mark.skipif(cuda.available() and cupy.cuda.runtime.getDeviceCount() < 2, reason="one GPU here")
def test_a_thread_with_another_gpu_current_runs_on_the_backends_and_keeps_its_own():
    inputs, expected = _expected()
    errors: list[str] = []
    with cupy.cuda.Device(1):
        _runs_right("cuda:0", inputs, expected, errors)
        assert cupy.cuda.runtime.getDevice() == 1
        assert cuda.CudaBackend(0).alloc(16).device.id == 0
    with cupy.cuda.Device(0):
        _runs_right("cuda:1", inputs, expected, errors)
        assert cupy.cuda.runtime.getDevice() == 0
    assert not errors
