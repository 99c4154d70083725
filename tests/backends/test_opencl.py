"""The OpenCL plan's bound steps: kernel arguments set once at prepare, so each step owns its
kernel object (two prepared models with GEMMs on one device, executed in turn, keep their own
arguments); the device time per kernel from profiling events; whole work-groups on a CPU device."""
from __future__ import annotations

import re

import numpy as np
import pytest

from nngpu import profiling
from nngpu.backends import device_backends, opencl
from nngpu.backends.opencl import CPU_WORK_GROUP
from nngpu.compiler.steps import GemmStep, KernelStep
from nngpu.driver.callbacks import PreparedModelCallback
from nngpu.driver.device import Device
from nngpu.hal import ErrorStatus, ExecutionPreference
from nngpu.runtime.runners import DeviceCall

from ..compiler.test_gemm import CASES

pytestmark = pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")


def plan_of(device: Device, model):
    cb = PreparedModelCallback()
    device.prepareModel_1_2(model, ExecutionPreference.FAST_SINGLE_ANSWER, [], [], bytes(32), cb)
    status, prepared = cb.get(120)
    assert status == ErrorStatus.NONE
    return prepared.executor


def test_plans_sharing_a_device_keep_their_own_bound_arguments():
    device = Device("opencl")
    (conv, x1), (fc, x2) = CASES["conv3x3-same"](), CASES["fully-connected"]()
    plans = [plan_of(device, conv), plan_of(device, fc)]
    assert all(any(isinstance(s, GemmStep) for seg in p._last for s in seg.spec.steps) for p in plans)
    rng = np.random.default_rng(5)
    for _ in range(2):  # in turn, with new inputs each time
        for plan, x in zip(plans, (x1, x2)):
            value = rng.standard_normal(x.shape, dtype=np.float32)
            got = plan.execute([value])
            np.testing.assert_allclose(got[0], plan.reference.run([value])[0], rtol=1e-4, atol=1e-4)


def test_profiled_kernels_carry_their_device_time():
    plan = plan_of(Device("opencl"), CASES["conv1x1"]()[0])
    x = CASES["conv1x1"]()[1]
    steps = [s for seg in plan._last for s in seg.spec.steps if isinstance(s, (KernelStep, GemmStep))]
    with profiling.recording() as prof:
        got = plan.execute([x])
    events = [e for e in prof.events if e.cat in ("kernel", "gemm")]
    assert len(events) == len(steps)
    assert all(isinstance(e.args["device_ns"], int) and e.args["device_ns"] > 0 for e in events)
    assert all(e.args["device_ns"] <= e.end - e.start for e in events), "device time inside the step's span"
    np.testing.assert_allclose(got[0], plan.reference.run([x])[0], rtol=1e-4, atol=1e-4)


def test_cpu_devices_launch_whole_work_groups():
    """On a CPU device every 1-D kernel runs in work-groups of CPU_WORK_GROUP, the global size
    rounded up (each kernel returns past its size), and still answers right."""
    device = Device("opencl")
    if not device.backend.device.type & device.backend.cl.device_type.CPU:
        pytest.skip("a GPU's driver chooses its work-groups")
    model, x = CASES["conv3x3-ragged"]()   # sizes that 256 does not divide
    plan = plan_of(device, model)
    launches = [r.call for seg in plan._last for r in seg.runners if isinstance(r, DeviceCall)]
    kernels = [run for run in launches if len(run.args[2]) == 1]   # queue, kernel, global, local
    assert kernels and all(run.args[3] == (CPU_WORK_GROUP,) and run.args[2][0] % CPU_WORK_GROUP == 0
                           for run in kernels)
    np.testing.assert_allclose(plan.execute([x])[0], plan.reference.run([x])[0], rtol=1e-4, atol=1e-4)


_UNIT = "__kernel void twice(__global float* x) { x[get_global_id(0)] *= 2.0f; }\n"


def test_binaries_are_asked_of_pocl_only_for_a_compilation_cache(monkeypatch, tmp_path):
    """PoCL keeps its own kernel cache, and a binary costs it a compile of its own: a unit built
    on it leaves the disk cache empty and gives its binary when a compilation cache asks, one
    that a fresh device loads and runs. Elsewhere the binary goes to the disk cache at once."""
    from nngpu.backends.base import ProgramSet, compiling_for

    monkeypatch.setenv("NNGPU_CACHE_DIR", str(tmp_path))
    backend = Device("opencl").backend
    programs = ProgramSet()
    with compiling_for(programs):
        backend.compile(_UNIT + f"// {tmp_path}\n", ["twice"])   # a unit no other test built
    assert programs.built == 1
    assert bool(list(tmp_path.glob("*.bin"))) != backend.compiler_caches
    (binary,) = programs.binaries().values()
    other = Device("opencl").backend
    kernel = other.kernel(other.load(binary), "twice")
    buf = other.alloc(16)
    other.upload(buf, np.arange(4, dtype=np.float32))
    kernel.set_args(buf)
    other.cl.enqueue_nd_range_kernel(other.queue, kernel, (4,), None)
    got = np.empty(4, np.float32)
    other.download(buf, got)
    np.testing.assert_array_equal(got, [0, 2, 4, 6])


def test_a_program_without_the_kernel_asked_for_is_one_clear_error():
    """A compiler that builds cleanly and leaves a kernel out (pyopencl's PoCL wheel did, here)
    is named with the kernels it did give, not as clCreateKernel's INVALID_KERNEL_NAME."""
    backend = Device("opencl").backend
    (_, program) = backend.build("#ifdef NEVER\n" + _UNIT + "#endif\n__kernel void other(__global float* x) {}\n")
    with pytest.raises(RuntimeError, match=r"without kernel twice \(it has: other\)"):
        backend.kernel(program, "twice")


@pytest.mark.filterwarnings("ignore:Non-empty compiler output")   # the one that does not compile
@pytest.mark.parametrize("source, why", [
    (opencl.PROBE, None),
    ("#if 0\n" + opencl.PROBE + "\n#endif\n__kernel void nn_other(__global float *a) { a[0] = 1.0f; }",
     r"its compiler \(OpenCL .*\) gives programs without their kernels"),
    (opencl.PROBE.replace("exp(a[0])", "2.0f"), "runs kernels wrongly: exp\\(0\\) gave 2.0"),
    (opencl.PROBE.replace(";", ""), "cannot compile kernels: .*error"),
])
def test_the_device_probe_builds_launches_and_reads_a_kernel(source, why):
    """What opencl.unusable asks of the device it would pick: a program that lacks its kernel (as
    pyopencl's PoCL 3.0 wheel gave on an AMD EPYC) or computes wrongly makes the backend unusable,
    with the reason in one line."""
    import pyopencl as cl

    reason = opencl.probe_reason(cl, opencl._pick_device(cl), source)
    if why is None:
        assert reason is None
    else:
        assert reason is not None and "\n" not in reason
        assert re.search(why, reason), reason
