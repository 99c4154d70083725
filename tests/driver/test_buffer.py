"""IDevice::allocate and IBuffer (1.3): role rules, copies, and executions on device memory."""
import math

import numpy as np
import pytest

from nngpu.backends import device_backends
from nngpu.backends.base import DeviceValue
from nngpu.driver.callbacks import PreparedModelCallback
from nngpu.driver.device import Device
from nngpu.hal import (
    BufferDesc,
    BufferRole,
    DataLocation,
    ErrorStatus,
    ExecutionPreference,
    MeasureTiming,
    MemoryPool,
    OperandType as T,
    OperationType as Op,
    OptionalTimePoint,
    OptionalTimeoutDuration,
    Request,
    RequestArgument,
)
from nngpu.memory import allocate_shared
from nngpu.modelutil import as_model_1_3
from nngpu.testing import output, scalar, single_op_model, tensor

from ..compiler.model_builder import ModelBuilder

SHAPE = (2, 3)


def prepare(device, t=T.TENSOR_FLOAT32, dims=SHAPE, scale=0.0, zp=0):
    z = np.zeros(dims, np.float32 if t == T.TENSOR_FLOAT32 else np.uint8)
    ins = [tensor(t, z, scale, zp), tensor(t, z, scale, zp), scalar(T.INT32, 0)]
    model = as_model_1_3(single_op_model(Op.ADD, ins, [output(t, list(dims), scale, zp)]))
    cb = PreparedModelCallback()
    device.prepareModel_1_3(model, ExecutionPreference.FAST_SINGLE_ANSWER, 1, OptionalTimePoint(), [], [], bytes(32), cb)
    status, prepared = cb.get(30)
    assert status == ErrorStatus.NONE
    return prepared


@pytest.fixture(scope="module", params=["numpy", *device_backends()])
def dev(request):
    return Device(request.param)


@pytest.fixture(scope="module")
def pm(dev):
    return prepare(dev)


def ok(dev, pm, roles_in, roles_out, desc=None):
    return dev.allocate(desc or BufferDesc([]), [pm] if not isinstance(pm, list) else pm, roles_in, roles_out)


def test_allocate_gives_positive_distinct_tokens(dev, pm):
    s1, b1, t1 = ok(dev, pm, [BufferRole(0, 0, 1.0)], [])
    s2, b2, t2 = ok(dev, pm, [], [BufferRole(0, 0, 0.5)])
    assert s1 == s2 == ErrorStatus.NONE and t1 > 0 and t2 > 0 and t1 != t2


@pytest.mark.parametrize("case", [
    "no-roles", "bad-model-index", "bad-io-index", "zero-frequency", "big-frequency", "nan-frequency",
    "same-role-twice", "foreign-prepared-model", "desc-dims-conflict", "desc-rank-conflict",
])
def test_allocate_rejects(dev, pm, case):
    roles_in, roles_out, desc, models = [BufferRole(0, 0, 1.0)], [], BufferDesc([]), [pm]
    if case == "no-roles":
        roles_in = []
    elif case == "bad-model-index":
        roles_in = [BufferRole(1, 0, 1.0)]
    elif case == "bad-io-index":
        roles_in = [BufferRole(0, 2, 1.0)]
    elif case == "zero-frequency":
        roles_in = [BufferRole(0, 0, 0.0)]
    elif case == "big-frequency":
        roles_in = [BufferRole(0, 0, 1.5)]
    elif case == "nan-frequency":
        roles_in = [BufferRole(0, 0, math.nan)]
    elif case == "same-role-twice":
        roles_in = [BufferRole(0, 0, 1.0), BufferRole(0, 0, 0.5)]
    elif case == "foreign-prepared-model":
        models = [prepare(Device("numpy"))]
    elif case == "desc-dims-conflict":
        desc = BufferDesc([2, 4])
    elif case == "desc-rank-conflict":
        desc = BufferDesc([2, 3, 1])
    assert dev.allocate(desc, models, roles_in, roles_out) == (ErrorStatus.INVALID_ARGUMENT, None, 0)


@pytest.mark.parametrize("other", ["type", "scale", "zero_point", "rank", "dims"])
def test_allocate_rejects_conflicting_roles(dev, other):
    base = prepare(dev, T.TENSOR_QUANT8_ASYMM, SHAPE, 0.5, 3)
    kwargs = {"type": dict(t=T.TENSOR_FLOAT32), "scale": dict(t=T.TENSOR_QUANT8_ASYMM, scale=0.25, zp=3),
              "zero_point": dict(t=T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=4),
              "rank": dict(t=T.TENSOR_QUANT8_ASYMM, dims=(2, 3, 1), scale=0.5, zp=3),
              "dims": dict(t=T.TENSOR_QUANT8_ASYMM, dims=(2, 4), scale=0.5, zp=3)}[other]
    second = prepare(dev, **kwargs)
    status = dev.allocate(BufferDesc([]), [base, second], [BufferRole(0, 0, 1.0)], [BufferRole(1, 0, 1.0)])
    assert status == (ErrorStatus.INVALID_ARGUMENT, None, 0)
    same = prepare(dev, T.TENSOR_QUANT8_ASYMM, SHAPE, 0.5, 3)
    assert dev.allocate(BufferDesc([]), [base, same], [BufferRole(0, 0, 1.0)], [BufferRole(1, 0, 1.0)])[0] == ErrorStatus.NONE


def test_allocate_rejects_dimensions_for_a_scalar_role(dev):
    b = ModelBuilder()
    x, act = b.input(T.TENSOR_FLOAT32, SHAPE), b.input(T.INT32, [])
    b.output(b.op(Op.ADD, [x, x, act], T.TENSOR_FLOAT32, SHAPE))
    model = b.build()
    cb = PreparedModelCallback()
    dev.prepareModel_1_3(model, ExecutionPreference.FAST_SINGLE_ANSWER, 1, OptionalTimePoint(), [], [], bytes(32), cb)
    status, scalar_pm = cb.get(30)
    assert status == ErrorStatus.NONE
    role = [BufferRole(0, 1, 1.0)]  # the activation, an INT32 scalar input
    assert dev.allocate(BufferDesc([1]), [scalar_pm], role, []) == (ErrorStatus.INVALID_ARGUMENT, None, 0)
    assert dev.allocate(BufferDesc([]), [scalar_pm], role, [])[0] == ErrorStatus.NONE


def test_copies(dev, pm):
    _, buf, _ = ok(dev, pm, [BufferRole(0, 0, 1.0)], [])
    dst = allocate_shared(24)
    assert buf.copyTo(dst) == ErrorStatus.GENERAL_FAILURE  # uninitialized
    src = allocate_shared(24)
    src.array(np.float32)[:] = np.arange(6)
    assert buf.copyFrom(src, []) == ErrorStatus.NONE
    assert buf.copyTo(dst) == ErrorStatus.NONE
    assert list(dst.array(np.float32)) == list(range(6))
    assert buf.copyTo(allocate_shared(20)) == ErrorStatus.INVALID_ARGUMENT      # size mismatch
    assert buf.copyFrom(allocate_shared(20), []) == ErrorStatus.INVALID_ARGUMENT
    assert buf.copyTo(dst) == ErrorStatus.GENERAL_FAILURE  # a failed copyFrom uninitializes
    assert buf.copyFrom(src, [3, 2]) == ErrorStatus.INVALID_ARGUMENT            # dimension mismatch
    assert buf.copyFrom(src, [2, 3]) == ErrorStatus.NONE
    assert buf.copyFrom("not memory", []) == ErrorStatus.INVALID_ARGUMENT


def test_copy_from_needs_dims_when_the_buffer_has_none(dev):
    pm = prepare(dev, dims=(0, 0))
    _, buf, _ = dev.allocate(BufferDesc([]), [pm], [BufferRole(0, 0, 1.0)], [])
    src = allocate_shared(24)
    assert buf.copyFrom(src, []) == ErrorStatus.INVALID_ARGUMENT
    assert buf.copyFrom(src, [2, 0]) == ErrorStatus.INVALID_ARGUMENT
    assert buf.copyFrom(src, [3, 2]) == ErrorStatus.NONE


def _run(pm, inputs, outputs, pools):
    req = Request(inputs, outputs, pools)
    return pm.executeSynchronously_1_3(req, MeasureTiming.NO, OptionalTimePoint(), OptionalTimeoutDuration())


def test_execution_chained_through_device_memory_matches_pools(dev, pm, monkeypatch):
    a = np.arange(6, dtype=np.float32).reshape(SHAPE)
    b = np.full(SHAPE, 2.0, np.float32)
    inp = allocate_shared(48)
    inp.map()[:] = np.concatenate([a.ravel(), b.ravel()]).tobytes()
    arg = lambda pool, off, n: RequestArgument(False, DataLocation(pool, off, n), [])  # noqa: E731
    token_arg = RequestArgument(False, DataLocation(1, 0, 0), [])
    _, mid, mid_token = dev.allocate(BufferDesc([]), [pm], [BufferRole(0, 0, 1.0)], [BufferRole(0, 0, 1.0)])
    # Step 1: (a + b) into device memory.
    transfers = _count_transfers(dev, monkeypatch)
    status, shapes, _ = _run(pm, [arg(0, 0, 24), arg(0, 24, 24)], [token_arg],
                             [MemoryPool(hidlMemory=inp), MemoryPool(token=mid_token)])
    assert transfers.pop("download", 0) == 0  # the result did not come back to the host
    assert status == ErrorStatus.NONE and shapes[0].dimensions == list(SHAPE)
    if dev.backend.target is not None:  # a device plan: the intermediate stays in device memory
        assert isinstance(mid._value, DeviceValue) and mid._value.buf is mid._storage
    # Step 2: (device memory + b) into a shared pool.
    out = allocate_shared(24)
    transfers.clear()
    status, _, _ = _run(pm, [RequestArgument(False, DataLocation(1, 0, 0), []), arg(0, 24, 24)], [arg(2, 0, 24)],
                        [MemoryPool(hidlMemory=inp), MemoryPool(token=mid_token), MemoryPool(hidlMemory=out)])
    assert status == ErrorStatus.NONE
    if dev.backend.target is not None:  # the device input was copied on the device, not uploaded
        # and where the backend registers the pools (driver/pool_registry.py), theirs too; where
        # it rebinds kernel arguments the kernel reads the device memory in place instead (b, at
        # offset 24, off the alignment of a buffer of its own, is still copied)
        registered = dev._pools.registration(out) is not None
        device_input = 0 if dev.backend.rebinds else 1
        assert transfers == ({"copy": 2 + device_input} if registered else
                             {"upload": 1, "download": 1, **({"copy": 1} if device_input else {})})
    # The same two steps through shared pools only.
    tmp, ref = allocate_shared(24), allocate_shared(24)
    _run(pm, [arg(0, 0, 24), arg(0, 24, 24)], [arg(1, 0, 24)], [inp, tmp])
    _run(pm, [arg(0, 0, 24), arg(1, 24, 24)], [arg(2, 0, 24)], [tmp, inp, ref])
    np.testing.assert_array_equal(out.array(np.float32), ref.array(np.float32))
    np.testing.assert_array_equal(out.array(np.float32).reshape(SHAPE), a + 2 * b)


_TRANSFERS = {"upload": "upload", "stage_in": "upload", "download": "download", "download_async": "download",
              "download_into": "download", "stage_out": "download", "copy": "copy"}


def _count_transfers(dev, monkeypatch) -> dict:
    """Counts the host<->device transfers and device copies of the device's backend class, the
    plans' own queues included (observation only: the real calls run). Under a graph capture
    (CUDA) a call is recorded, not run: it counts each time the graph is launched instead."""
    counts: dict[str, int] = {}
    recording: list[dict[str, int]] = []   # the capture open on this test's thread, if any
    cls = type(dev.backend)
    for name, kind in _TRANSFERS.items():
        real = getattr(cls, name)

        def counted(self, *args, _real=real, _kind=kind):
            into = recording[-1] if recording else counts
            into[_kind] = into.get(_kind, 0) + 1
            return _real(self, *args)

        monkeypatch.setattr(cls, name, counted)
    if cls.graphs:
        real_capture = cls.capture

        def captured(self, steps, _real=real_capture):
            recorded: dict[str, int] = {}
            recording.append(recorded)
            try:
                launch = _real(self, steps)
            finally:
                recording.pop()

            def launched():
                for kind, n in recorded.items():
                    counts[kind] = counts.get(kind, 0) + n
                return launch()

            return launched

        monkeypatch.setattr(cls, "capture", captured)
    return counts
