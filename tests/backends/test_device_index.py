"""`--backend NAME:N` names device N of a backend that lists its devices (`nngpu info` prints
them): every OpenCL device here opens by index and runs a model as the default one does; an index
past the devices, or on a backend with one implicit device, is one line saying why; the cuda
backend names its GPUs (tests/backends/test_cuda_devices.py runs them, where there are GPUs)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import nngpu
from nngpu import backends
from nngpu.backends import opencl
from nngpu.cli import main
from nngpu.session import Session

DEMO = Path(nngpu.__file__).resolve().parent / "data" / "demo_cnn.json"


@pytest.mark.parametrize("name, why", [("opencl:x", "the device index after ':' must be a number"),
                                       ("numpy:1", "numpy has one device, named numpy"),
                                       ("metal:0", "unknown backend 'metal:0'")])
def test_names_that_name_no_device(name, why):
    with pytest.raises(ValueError, match=why):
        backends.resolve(name)


@pytest.mark.skipif("opencl" not in backends.device_backends(), reason="no OpenCL device here")
def test_every_opencl_device_opens_by_index_and_runs_the_same(capsys):
    listed = opencl.devices()
    assert listed
    outputs = []
    for k, described in enumerate(listed):
        if opencl.unusable(k) is not None:
            continue   # a device that lists but cannot compile (see opencl.unusable)
        with Session(DEMO, f"opencl:{k}") as session:
            name = session.device.backend.device.name.strip()
            assert described.startswith(name) and session.device.backend_name == f"opencl:{k}"
            session.run(session.named.example_inputs)
            outputs.append(session.output_arrays())
    for other in outputs[1:]:
        for a, b in zip(outputs[0], other):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    with pytest.raises(backends.BackendUnavailable, match=f"no OpenCL device {len(listed)}: this machine has "
                                                          f"{len(listed)}") as e:
        backends.create(f"opencl:{len(listed)}")
    assert "\n" not in str(e.value)
    assert main(["info", "--backend", "numpy"]) == 0
    assert f"    opencl:0  {listed[0]}" in capsys.readouterr().out.splitlines()


def test_cuda_names_its_gpus(monkeypatch):
    cupy = pytest.importorskip("cupy", reason="CuPy (extra 'cuda') is not installed")
    from nngpu.backends import cuda

    monkeypatch.setattr(cupy.cuda.runtime, "is_hip", False)
    monkeypatch.setattr(cupy.cuda.runtime, "getDeviceCount", lambda: 2)
    monkeypatch.setattr(cupy.cuda.runtime, "getDeviceProperties",
                        lambda k: {"name": f"GPU {k}".encode(), "major": 9, "minor": 0})
    assert cuda.devices() == ["GPU 0 (sm_90)", "GPU 1 (sm_90)"]
    with pytest.raises(backends.BackendUnavailable, match="no CUDA device 5: this machine has 2"):
        backends.create("cuda:5")
