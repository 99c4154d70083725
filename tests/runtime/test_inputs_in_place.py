"""An input given as a device value (a registered pool's region, an IBuffer) is read by the kernels
where it is, on a backend that rebinds kernel arguments (OpenCL): no copy, and a client's rewrite
of its pool between executions is what the next execution sees. A value the backend cannot make
an argument of (an offset off the device's alignment), and a host value, are copied into the
plan's own buffer, and the kernels read that one again. A GEMM reads its A in place, a view
(RESHAPE) its source. Each execution's outputs are numpy's, and the pool is never written."""
from __future__ import annotations

import numpy as np
import pytest

import nngpu
from nngpu.backends import create, device_backends
from nngpu.backends.base import DeviceValue
from nngpu.compiler.lower import device_plan
from nngpu.memory import allocate_shared
from nngpu.runtime.interpreter import GraphRunner
from nngpu.runtime.runners import Upload

pytestmark = pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")

RNG = np.random.default_rng(7)
W = RNG.standard_normal((32, 64)).astype(np.float32)


def _add():
    b = nngpu.ModelBuilder()
    x, y = b.input("x", np.float32, [4, 64]), b.input("y", np.float32, [4, 64])
    b.output("z", b.add(x, y, activation="RELU"))
    return b.build(), lambda x, y: np.maximum(x + y, 0)


def _gemm_and_view():
    """x is a GEMM's A (a fully connected layer) and, reshaped, an ADD's operand."""
    b = nngpu.ModelBuilder()
    x, y = b.input("x", np.float32, [4, 64]), b.input("y", np.float32, [8, 32])
    b.output("f", b.fully_connected(x, b.constant(W)))
    b.output("s", b.add(b.reshape(x, [8, 32]), y))
    return b.build(), lambda x, y: (x @ W.T, x.reshape(8, 32) + y)


MODELS = {"add": _add, "gemm_and_view": _gemm_and_view}


def _outputs(plan, inputs) -> list[np.ndarray]:
    return [np.array(v) for v in plan.execute(inputs)]


@pytest.mark.parametrize("name", MODELS)
def test_device_inputs_are_read_in_place(name, monkeypatch):
    named, reference = MODELS[name]()
    plan = device_plan(GraphRunner(named.model), create("opencl"))
    backend = plan.backend
    assert backend.rebinds
    calls: dict[str, int] = {}
    for method in ("copy", "upload"):
        real = getattr(type(backend), method)
        monkeypatch.setattr(type(backend), method,
                            lambda self, *a, _real=real, _m=method: calls.__setitem__(_m, calls.get(_m, 0) + 1)
                            or _real(self, *a))
    memory = allocate_shared(4096)   # pages of their own, as a request's pool
    pool = np.frombuffer(memory.map(), np.uint8)
    handle = backend.register_host(pool)
    align = backend.device.mem_base_addr_align // 8

    def given(offsets: list[int], seed: int) -> tuple[list[DeviceValue], list[np.ndarray]]:
        arrays = [np.random.default_rng(seed + k).standard_normal(t.shape).astype(np.float32)
                  for k, t in enumerate(named.inputs)]
        for a, off in zip(arrays, offsets):
            pool[off:off + a.nbytes] = a.view(np.uint8).reshape(-1)
        return [DeviceValue(handle, a.shape, a.dtype, backend, off) for a, off in zip(arrays, offsets)], arrays

    def check(values, arrays, copies: int, uploads: int = 0) -> None:
        calls.clear()
        before = pool.copy()
        wants = reference(*arrays)
        for got, want in zip(_outputs(plan, values), wants if isinstance(wants, tuple) else [wants], strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        assert calls == {k: v for k, v in (("copy", copies), ("upload", uploads)) if v}
        np.testing.assert_array_equal(pool, before)   # no kernel writes an input

    try:
        second = -(-1024 // align) * align             # past the first input (1 KiB), aligned
        in_place = [0, second]
        check(*given(in_place, 1), copies=0)
        check(*given(in_place, 2), copies=0)          # the pool rewritten: the kernels see it
        check(*given([0, second + 4], 3), copies=1)   # y off the alignment: copied, x in place
        check(*given([second + 4, 0], 4), copies=1)   # and the other way round
        _, arrays = given(in_place, 5)
        check(arrays, arrays, copies=0, uploads=2)    # host values: uploaded, read from the plan's buffers
        check(*given(in_place, 6), copies=0)          # in place again
        assert all(u.readers for s in plan._last for u in s.runners if isinstance(u, Upload))
    finally:
        backend.release_host(handle)
