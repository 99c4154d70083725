"""OpenCL kernels ask for a reduction's loop to be unrolled when its trip count is a constant of
at most 16 (PoCL unrolls none itself); longer and run-time bounds stay loops, and CUDA's source
is as before. The arithmetic is the same in the same order, so the result is: a 16-tap sum on
the OpenCL device here gives numpy's float32 left-to-right sum bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.backends import create, device_backends
from nngpu.backends.cuda import TARGET as CUDA
from nngpu.backends.opencl import TARGET as OPENCL
from nngpu.ir.expr import Buffer, Load, Loop, Var, reduce_sum
from nngpu.ir.kernel import Kernel

HINT = '_Pragma("unroll") for'


def _row_sums(length, outputs: int = 4) -> Kernel:
    """outputs[i] = x[i * 16 + 0] + ... + x[i * 16 + length - 1] (length: a constant or a Var)."""
    i, j, x = Var("i", "int"), Var("j", "int"), Buffer(0, "float")
    return Kernel("nn_rows", Buffer(1, "float"), (outputs,), i, reduce_sum([Loop(j, length)], Load(x, i * 16 + j)))


def test_short_constant_loops_are_unrolled_on_opencl_only():
    assert HINT in OPENCL.render(_row_sums(16))
    assert HINT not in OPENCL.render(_row_sums(17))
    assert HINT not in OPENCL.render(_row_sums(Var("n", "int")))
    assert "unroll" not in CUDA.render(_row_sums(16))


@pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")
def test_an_unrolled_sum_keeps_its_order():
    backend = create("opencl")
    kernel = _row_sums(16)
    source = backend.target.render(kernel)
    assert HINT in source
    compiled = backend.compile(source, [kernel.name])[0]
    x = np.random.default_rng(2).standard_normal(64).astype(np.float32) * np.float32(1e4)
    bufs = [backend.alloc(x.nbytes), backend.alloc(16)]
    backend.upload(bufs[0], x)
    backend.bind(compiled, backend.target.schedule.launch(kernel), bufs)()
    got = np.empty(4, np.float32)
    backend.download(bufs[1], got)
    want = np.zeros(4, np.float32)
    for j in range(16):   # float32, one term at a time
        want += x.reshape(4, 16)[:, j]
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
