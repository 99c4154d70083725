"""A target's schedule frames each generated kernel and gives the grid its backend launches, so
the two agree by construction: several outputs a thread, any group size, on OpenCL (PoCL) and on
the host-compiled CUDA harness, give the same bits as one output a thread."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import nngpu
from nngpu import backends
from nngpu.backends.cuda import TARGET as CUDA
from nngpu.backends.opencl import TARGET as OPENCL
from nngpu.compiler.lower import device_plan, lower_model
from nngpu.ir.expr import Buffer, Load, Loop, Var, reduce_sum
from nngpu.ir.kernel import Kernel
from nngpu.ir.schedule import Grid, Schedule
from nngpu.json_models import build_model, load_file
from nngpu.modelutil import as_model_1_3
from nngpu.runtime.interpreter import GraphRunner

from ..compiler.test_fusion import chain_model
from ..compiler.test_gemm import CASES
from ..cuda_host.host_backend import HostCudaBackend
from ..ops.test_shape_functions import case_inputs

DEMO = Path(nngpu.__file__).resolve().parent / "data" / "demo_cnn.json"
ODD = Schedule(group=32, per_thread=3)


def test_grids():
    assert Schedule(group=256).grid(300) == Grid((512,), (256,))
    assert Schedule(group=None).grid(300) == Grid((300,), None)
    assert Schedule(group=64, per_thread=4).grid(1000) == Grid((256,), (64,))   # 250 threads, 4 groups
    assert Schedule(group=64, per_thread=4).flat(1000) == Grid((1024,), (64,))  # a template: a thread an item
    assert Schedule(group=None).flat(7) == Grid((7,), None) and Schedule().grid(0).total == 0


@pytest.mark.parametrize("bad", [dict(per_thread=0), dict(group=0), dict(group=None, declare_group=True)])
def test_a_schedule_needs_sizes_it_can_launch(bad):
    with pytest.raises(ValueError):
        Schedule(**bad)


def test_the_frame_follows_the_schedule():
    spec = lower_model(GraphRunner(as_model_1_3(chain_model())), OPENCL)
    kernel = spec.kernels[0].kernel
    one = OPENCL.renderer.render(kernel, Schedule(group=None))
    assert f"if (i >= {kernel.size}) return;" in one
    looped = OPENCL.renderer.render(kernel, ODD)
    stride = ODD.grid(kernel.size).total
    assert f"i < {kernel.size}; i += {stride}) {{" in looped and "return;" not in looped
    cuda = lower_model(GraphRunner(as_model_1_3(chain_model())), CUDA).kernels[0]
    assert cuda.source.startswith('extern "C" __global__ void __launch_bounds__(256) ')
    assert cuda.grid == Grid((-(-kernel.size // 256) * 256,), (256,))


def _models():
    case = load_file(DEMO)[0]
    demo = as_model_1_3(build_model(case))
    conv, x = CASES["conv3x3-ragged"]()
    chain = as_model_1_3(chain_model(shape=[3, 701]))
    return {"demo": (demo, case_inputs(case, demo)), "conv": (as_model_1_3(conv), [x]),
            "chain": (chain, [np.linspace(-3, 3, 3 * 701, dtype=np.float32).reshape(3, 701)])}


def _run(backend, model, inputs):
    with np.errstate(all="ignore"):
        return [np.asarray(o) for o in device_plan(GraphRunner(model), backend).execute(list(inputs))]


def _bits(arrays):
    return [a.tobytes() for a in arrays]


@pytest.mark.parametrize("name", ["demo", "conv", "chain"])
def test_several_outputs_a_thread_give_the_same_bits_on_the_host_cuda_harness(name):
    model, inputs = _models()[name]
    plain = _run(HostCudaBackend(), model, inputs)
    looped = HostCudaBackend()
    looped.target = dataclasses.replace(CUDA, schedule=ODD)
    assert _bits(_run(looped, model, inputs)) == _bits(plain)


@pytest.mark.skipif("opencl" not in backends.device_backends(), reason="no OpenCL device here")
@pytest.mark.parametrize("name", ["demo", "conv", "chain"])
def test_several_outputs_a_thread_give_the_same_bits_on_opencl(name):
    model, inputs = _models()[name]
    backend = backends.create("opencl")
    plain = _run(backend, model, inputs)
    backend.target = dataclasses.replace(backend.target, schedule=ODD)
    assert _bits(_run(backend, model, inputs)) == _bits(plain)


def _row_sums(wrap):
    """A kernel over 4 outputs, each the sum of a 1,000-long row, its value `wrap(sum, i)`."""
    i, j, x = Var("i", "long"), Var("j", "long"), Buffer(0, "float")
    total = reduce_sum([Loop(j, 1000)], Load(x, i * 1000 + j))
    return Kernel("nn_rows", Buffer(1, "float"), (4,), i, wrap(total, i))


def test_a_work_group_shares_only_a_reduction_every_thread_reaches():
    gpu = Schedule(group=256, reduce_group=256)
    assert gpu.block_reduce(_row_sums(lambda s, i: s / 1000.0)) is not None
    assert gpu.launch(_row_sums(lambda s, i: s)) == Grid((4 * 256,), (256,))
    # inside a select branch only some outputs compute it: the group's barriers would not meet
    assert gpu.block_reduce(_row_sums(lambda s, i: (i > 1).where(s, 0.0))) is None
    assert Schedule(group=256).block_reduce(_row_sums(lambda s, i: s)) is None   # a CPU target: none
