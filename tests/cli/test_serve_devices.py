"""`nngpu serve --device A --device B`: one IDevice per device, each under its own name. A client
names one as it connects (nngpu.connect(path, device=NAME)) or gets the first; each runs models
on its own backend with the bytes of the in-process reference; a name the service does not serve,
a device chosen after the client made something, and a command line that names a device twice or
mixes --backend with --device are each refused with one line saying why."""
import numpy as np
import pytest

import nngpu
from nngpu import backends
from nngpu.backends import opencl
from nngpu.driver.callbacks import PreparedModelCallback
from nngpu.hal.types import ErrorStatus, ExecutionPreference, MeasureTiming
from tests.driver.conftest import A, B, add_model, add_request
from tests.service.conftest import Served, short_dir  # noqa: F401 (fixture)

needs_opencl = pytest.mark.skipif("opencl" not in backends.device_backends(), reason="no OpenCL device here")


def _sum_on(device) -> np.ndarray:
    """A + B, prepared and run on `device`."""
    cb = PreparedModelCallback()
    assert device.prepareModel_1_1(add_model(), ExecutionPreference.FAST_SINGLE_ANSWER, cb) == ErrorStatus.NONE
    assert cb.wait(60) and cb.status == ErrorStatus.NONE
    r = add_request()
    status, _shapes, _t = cb.prepared_model.executeSynchronously(r.request, MeasureTiming.NO)
    assert status == ErrorStatus.NONE
    return np.frombuffer(r.outputs.map()[: A.nbytes].tobytes(), A.dtype).reshape(A.shape)


def _refused(s: Served, fragment: str) -> None:
    assert s.exit() == 2
    err = s.stderr().strip()
    assert len(err.splitlines()) == 1 and fragment in err, err


@needs_opencl
def test_each_device_is_served_under_its_own_name(short_dir):
    s = Served(short_dir / "s.sock", "--device", "numpy", "--device", "opencl")
    try:
        assert "nngpu-numpy (numpy), nngpu-opencl (opencl) on" in s.stderr()
        with nngpu.connect(s.path) as first:
            assert (first.name, first.served) == ("nngpu-numpy", ("nngpu-numpy", "nngpu-opencl"))
            assert "(numpy:" in first.getVersionString()[1]
            np.testing.assert_array_equal(_sum_on(first), A + B)
        with nngpu.connect(s.path, device="nngpu-opencl") as chosen:
            assert chosen.name == "nngpu-opencl" and "(opencl:" in chosen.getVersionString()[1]
            np.testing.assert_array_equal(_sum_on(chosen), A + B)
        with nngpu.connect(s.path, hal="aidl", device="nngpu-opencl") as aidl:
            assert "(opencl:" in aidl.getVersionString()
    finally:
        assert s.stop() == 0


@needs_opencl
def test_every_opencl_device_by_index(short_dir):
    usable = [k for k in range(len(opencl.devices())) if opencl.unusable(k) is None]
    if len(usable) < 2:
        pytest.skip("fewer than 2 usable OpenCL devices here")
    s = Served(short_dir / "s.sock", *[a for k in usable for a in ("--device", f"opencl:{k}")])
    try:
        for k in usable:
            with nngpu.connect(s.path, device=f"nngpu-opencl-{k}") as device:
                assert f"(opencl:{k}:" in device.getVersionString()[1]
                np.testing.assert_array_equal(_sum_on(device), A + B)
    finally:
        assert s.stop() == 0


def test_a_device_not_served_and_a_late_choice_are_refused(short_dir):
    s = Served(short_dir / "s.sock", "--device", "numpy")
    try:
        with pytest.raises(LookupError, match="no device 'nngpu-cuda-7' here; served: nngpu-numpy"):
            nngpu.connect(s.path, device="nngpu-cuda-7")
        with pytest.raises(LookupError, match="no device 'xxx"):
            nngpu.connect(s.path, device="x" * 1000)   # longer than the wire carries
        with nngpu.connect(s.path, device="nngpu-numpy") as device:
            cb = PreparedModelCallback()   # held: a collected model is released in the service
            assert device.prepareModel_1_1(add_model(), ExecutionPreference.FAST_SINGLE_ANSWER, cb) == ErrorStatus.NONE
            assert cb.wait(60) and cb.status == ErrorStatus.NONE
            reply = device._link._conn.call("select", {"device": "nngpu-numpy"})
            assert reply["status"] == ErrorStatus.INVALID_ARGUMENT
            assert "before it prepares or allocates anything" in reply["error"]
            assert cb.prepared_model is not None
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("args, why", [
    (["--device", "numpy", "--device", "numpy"], "--device numpy: numpy is served already"),
    (["--device", "numpy", "--backend", "numpy"], "--backend names one device, --device one or more"),
    (["--device", "metal"], "unknown backend 'metal'"),
    (["--device", "numpy:1"], "numpy has one device, named numpy"),
    (["--device", "numpy"] * 65, "--device: at most 64 devices, not 65"),
])
def test_a_command_line_that_names_devices_wrongly_is_one_line(short_dir, args, why):
    _refused(Served(short_dir / "s.sock", *args, wait=False), why)
