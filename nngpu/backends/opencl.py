"""OpenCL backend (pyopencl): the first GPU platform device, else a CPU device (e.g. PoCL)."""
from __future__ import annotations

import contextlib
import copy
import functools
import os
import signal
import threading
from typing import Callable

import numpy as np

from ..compiler.render import CStyleRenderer
from ..compiler.target import Target
from ..hal.types import DeviceType
from ..ir.schedule import Grid, Schedule
from .base import Backend, Provider
from .opencl_gemm import CPU_GEMM_PACK_BYTES, cpu_gemm_row_stride, gemm_unit, step_source

# Work-items per work-group of the other kernels on a CPU device: groups of 64 rather than 256
# share the small layers' few hundred work-items between the threads (hand landmarks' depthwise
# layers of 336-1344: 2-6 groups of 256), 5% faster on PoCL, the other models the same.
CPU_WORK_GROUP = 64


class OpenCLRenderer(CStyleRenderer):
    kernel_prefix = "__kernel void"
    buffer_qualifier = "__global "
    gid = "get_global_id(0)"
    group_id = "get_group_id(0)"
    local_id = "get_local_id(0)"
    barrier = "barrier(CLK_LOCAL_MEM_FENCE);"
    local_qualifier = "__local"
    # PoCL unrolls no loop itself: a transposed convolution's 16-channel dot loop ran 2x faster so
    unroll = '_Pragma("unroll")'

    def load(self, ptr: str, storage: str, index: str) -> str:
        return f"vload_half({index}, {ptr})" if storage == "half" else super().load(ptr, storage, index)

    def store(self, ptr: str, storage: str, index: str, value: str) -> str:
        if storage == "half":
            return f"vstore_half_rte({value}, {index}, {ptr});"
        return super().store(ptr, storage, index, value)

    # vectors: a comparison of float vectors gives int lanes of -1 or 0, what select() reads
    def vector_type(self, kind: str, n: int) -> str:
        return f"{kind}{n}"

    def vector_load(self, ptr: str, index: str, n: int) -> str:
        return f"vload{n}(0, {ptr} + {index})"

    def vector_store(self, ptr: str, index: str, value: str, n: int) -> str:
        return f"vstore{n}({value}, 0, {ptr} + {index});"

    def vector_select(self, cond: str, a: str, b: str) -> str:
        return f"select({b}, {a}, {cond})"

    def broadcast(self, scalar: str, kind: str, n: int) -> str:
        return f"(({kind}{n})({scalar}))"


def _target(name: str, schedule: Schedule, templates: dict[str, str],
            gemm_row_stride: Callable[[int], int] | None = None, gemm_min_work: int = 1 << 16,
            gemm_pack_bytes: int = 0, half: bool = False, cpu: bool = False) -> Target:
    return Target(
        name, OpenCLRenderer(), ".cl", schedule,
        templates={"depthwise": "depthwise.cl", "im2col": "im2col.cl", "max_pool": "max_pool.cl",
                   "resize_bilinear": "resize_bilinear.cl", **templates},
        gemm_epilogue=True,   # kernels/gemm.cl's EPILOGUE
        gemm_min_work=gemm_min_work, gemm_row_stride=gemm_row_stride, gemm_pack_bytes=gemm_pack_bytes,
        relaxed_storage=half, gemm_half_inputs=half, gemm_half_output=half,
        gemm_source=functools.partial(step_source, cpu))


# A GPU's driver chooses its work-groups, but a slice's statistic (softmax's maximum and sum, a
# mean) takes a work-group of 256. On a CPU device work-groups are CPU_WORK_GROUP (PoCL's own
# choice ran the MediaPipe face detector 12% slower, with a longer tail), and one work-item walks
# each statistic's slice: its local memory is ordinary memory, its barriers cost.
# (A work-group of 16 or 64 per statistic there ran EfficientNet B0's MEANs 20% faster on PoCL
# but no model measurably faster: the group's strided loads become gathers.)
# On a CPU device, sums over strided slices (a global average pool) take kernels/column_sum.cl,
# a work-item summing a vector of neighbouring outputs, and float elementwise kernels run 16
# lanes a work-item in explicit vectors (ir/vectorize.py): PoCL vectorises neither one-output
# loop across work-items, and calls a scalar exp per work-item (EfficientNet B0's swish 3x slower).
# A relaxed model's float32 temporaries are stored as float16 there (vload_half and vstore_half_rte
# are core OpenCL: no cl_khr_fp16 needed), half the memory traffic; its tiled GEMM reads float16
# matrices and its epilogue stores a float16 C (kernels/gemm.cl AB_T, C_T). A CPU device keeps
# float32 (OpenCLBackend.relaxed_precision).
TARGET = _target("opencl", Schedule(group=None, reduce_group=256), {}, half=True)


# Its GEMMs are explicit-vector micro-kernels, the generated convolution a scalar loop per output:
# on PoCL the face detector's 1x1 convolutions of about 2^20 multiply-adds run 2.5x faster as
# GEMMs, and MobileNet v3's squeeze-and-excite layers of 2^12 to 2^17 (a 1x1 convolution of one
# pixel, weights read once) 3-4x faster (240 -> 64 channels: 15.6 -> 3.9 us in the pipeline), the
# elementwise kernel after each folded in. (A GPU's tiled GEMM keeps 2^16: not measured on one.)
CPU_TARGET = _target("opencl-cpu", Schedule(group=CPU_WORK_GROUP, vector=16),
                     {"column_sum": "column_sum.cl", "conv": "conv.cl", "squeeze_excite": "squeeze_excite.cl"},
                     gemm_row_stride=cpu_gemm_row_stride, gemm_min_work=1 << 12, gemm_pack_bytes=CPU_GEMM_PACK_BYTES,
                     cpu=True)


def _all_devices(cl) -> list:
    """Every platform's devices, in order: what `opencl:N` counts."""
    return [d for p in cl.get_platforms() for d in p.get_devices()]


def _pick_device(cl, index: int | None = None):
    """Device `index` of _all_devices (`opencl:N`), else the first GPU, else the first device."""
    devices = _all_devices(cl)
    if not devices:
        raise RuntimeError("no OpenCL device")
    if index is not None:
        if index >= len(devices):
            raise RuntimeError(f"no OpenCL device {index}: this machine has {len(devices)} (nngpu info lists them)")
        return devices[index]
    gpus = [d for d in devices if d.type & cl.device_type.GPU]
    return (gpus or devices)[0]


def devices() -> list[str]:
    """The OpenCL devices here, in `opencl:N` order (none where pyopencl is missing)."""
    try:
        import pyopencl as cl

        with _signals_held():
            found = _all_devices(cl)
    except Exception:
        return []
    kind = lambda d: "GPU" if d.type & cl.device_type.GPU else "CPU" if d.type & cl.device_type.CPU else "other"  # noqa: E731
    return [f"{d.name.strip()} ({d.platform.name.strip()}, {kind(d)})" for d in found]


@contextlib.contextmanager
def _signals_held():
    """SIGINT and SIGTERM held off the calling thread while it runs: PoCL's worker threads, which
    finish compiling a kernel at its first launch, inherit the mask of the thread that first
    reaches the platform, and Ctrl-C landing in a compile makes it fail and print "1 error
    generated." beside "nngpu: interrupted" (the prepare pool's threads hold them too)."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def available() -> tuple[bool, bool]:
    """(any OpenCL device, a GPU one) — False, False when pyopencl is missing or the device
    cannot compile a kernel (see unusable)."""
    try:
        import pyopencl as cl

        with _signals_held():
            devices = _all_devices(cl)
    except Exception:
        return False, False
    if not devices or unusable() is not None:
        return False, False
    return True, any(d.type & cl.device_type.GPU for d in devices)


PROBE = "__kernel void nn_probe(__global float *a) { a[0] = exp(a[0]); }"


@functools.cache
def unusable(index: int | None = None) -> str | None:
    """Why the device the backend would pick (device `index`) cannot run an OpenCL C kernel,
    or None. PoCL 3.0 (the one pyopencl's wheels carry, on LLVM 14) names a CPU newer than its
    LLVM "generic", which clang then refuses ("unknown target CPU"), and on an AMD EPYC without
    Debian's PoCL it built programs cleanly and left every kernel out: a device that lists fine
    may not compile, or may compile nothing, so the probe builds, launches and reads a kernel."""
    import pyopencl as cl

    answer: list[str | None] = []

    def probe() -> None:  # in a thread of its own, holding the signals: see _signals_held
        with _signals_held():
            answer.append(probe_reason(cl, _pick_device(cl, index), PROBE))

    worker = threading.Thread(target=probe, name="nngpu-opencl-probe", daemon=True)
    worker.start()
    worker.join()
    return answer[0] if answer else "the OpenCL device probe failed"


def kernel_names(cl, program) -> list[str]:
    """The kernels a built program has."""
    return [n for n in program.get_info(cl.program_info.KERNEL_NAMES).split(";") if n]


def probe_reason(cl, device, source: str) -> str | None:
    """Why `device` cannot build `source` and run its kernel nn_probe on [0.0] (giving
    exp(0) = 1), or None."""
    try:
        context = cl.Context([device])
        program = cl.Program(context, source).build()
        if "nn_probe" not in kernel_names(cl, program):
            return (f"the OpenCL device cannot compile kernels: its compiler "
                    f"({device.platform.version.strip()}) gives programs without their kernels")
        queue = cl.CommandQueue(context)
        value = np.zeros(1, np.float32)
        buf = cl.Buffer(context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=value)
        cl.Kernel(program, "nn_probe")(queue, (1,), None, buf)
        cl.enqueue_copy(queue, value, buf, is_blocking=True)
    except Exception as e:
        lines = [s.strip() for s in str(e).splitlines() if "error" in s.lower() and s.strip()]
        return f"the OpenCL device cannot compile kernels: {(lines or [type(e).__name__])[-1]}"
    if value[0] != 1.0:
        return f"the OpenCL device runs kernels wrongly: exp(0) gave {value[0]}"
    return None


class OpenCLBackend(Backend):
    name = "opencl"
    # Correctly rounded float division and sqrt: QUANTIZE and the float reference need it, and
    # OpenCL otherwise allows 2.5 ulp.
    OPTIONS = ("-cl-fp32-correctly-rounded-divide-sqrt",)
    # A cold PoCL build of a MediaPipe model takes seconds: programs of 16 kernels let the
    # progress bar advance (and give an ETA) at about 6 % more build time than one program.
    kernels_per_unit = 16

    def __init__(self, index: int | None = None) -> None:
        import pyopencl as cl

        super().__init__()
        with _signals_held():
            self.device = _pick_device(cl, index)   # an index past the devices: why, first
        reason = unusable(index)
        if reason is not None:
            raise RuntimeError(reason)
        self.cl = cl
        with _signals_held():
            self.context = cl.Context([self.device])
            self.queue = cl.CommandQueue(self.context)
        self.device_type = DeviceType.GPU if self.device.type & cl.device_type.GPU else DeviceType.CPU
        self.target = CPU_TARGET if self.device.type & cl.device_type.CPU else TARGET
        self.description = f"{self.device.name.strip()} ({self.device.platform.name.strip()})"
        # PoCL keeps compiled kernels in $XDG_CACHE_HOME/pocl, and writes a binary by compiling
        # every kernel once more for no work-group size in particular, each compile as long as
        # the one at the kernel's first launch (a MediaPipe model's cold prepare: 40 % binaries)
        self.compiler_caches = ("Portable Computing Language" in self.device.platform.name
                                and os.environ.get("POCL_KERNEL_CACHE", "1") != "0")
        self._timing_queue = None   # made when profiling first asks for device times
        self._reads: list = []      # download_async events, held to the next synchronize: pyopencl
                                    # waits for a transfer whose event it drops

    def for_plan(self) -> "OpenCLBackend":
        plan = copy.copy(self)   # shares the context, device and compiled programs
        plan.queue = self.cl.CommandQueue(self.context)
        plan._timing_queue, plan._reads = None, []
        return plan

    def alloc(self, nbytes: int):
        return self.cl.Buffer(self.context, self.cl.mem_flags.READ_WRITE, size=max(int(nbytes), 4))

    def free(self, buf) -> None:
        buf.release()

    def upload(self, buf, host: np.ndarray) -> None:
        if host.nbytes:
            self.cl.enqueue_copy(self.queue, buf, np.ascontiguousarray(host), is_blocking=False)

    def download(self, buf, host: np.ndarray) -> None:
        if host.nbytes:
            self.cl.enqueue_copy(self.queue, host, buf, is_blocking=True)

    def download_async(self, buf, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        host = np.empty(shape, dtype=dtype)
        if host.nbytes:
            self._reads.append(self.cl.enqueue_copy(self.queue, host, buf, is_blocking=False))
        return host

    def download_into(self, buf, host: np.ndarray, offset: int = 0) -> None:
        if host.nbytes:
            self._reads.append(self.cl.enqueue_copy(self.queue, host, buf, src_offset=int(offset), is_blocking=False))

    def copy(self, dst, src, nbytes: int, dst_offset: int = 0, src_offset: int = 0) -> None:
        if nbytes:  # offsets, not sub-buffers: these need CL_DEVICE_MEM_BASE_ADDR_ALIGN
            self.cl.enqueue_copy(self.queue, dst, src, byte_count=int(nbytes), dst_offset=int(dst_offset),
                                 src_offset=int(src_offset))

    def relaxed_precision(self) -> str:
        if self.target.relaxed_storage:
            return ("float32 temporaries are stored as float16 (half the memory traffic) and the kernels compute "
                    "float32 from them; the tiled GEMMs read float16 patch matrices and weights and sum in float32")
        fp16 = "cl_khr_fp16" in self.device.extensions.split()
        return ("all float32: a CPU device" + ("" if fp16 else ", with no float16 arithmetic (no cl_khr_fp16)")
                + ", whose caches hold the temporaries: float16 storage would only add conversions")

    def cache_identity(self) -> str:
        d = self.device
        return " ".join((d.name, d.platform.version, d.driver_version, *self.OPTIONS))

    def build(self, source: str):
        program = self.cl.Program(self.context, source).build(list(self.OPTIONS))
        return None if self.compiler_caches else self.binary(program), program

    def binary(self, program) -> bytes:
        return program.get_info(self.cl.program_info.BINARIES)[0]

    def load(self, binary: bytes):
        return self.cl.Program(self.context, [self.device], [binary]).build(list(self.OPTIONS))

    def kernel(self, program, name: str):
        try:
            return self.cl.Kernel(program, name)  # its own object: segments set their own arguments
        except self.cl.LogicError as e:
            built = kernel_names(self.cl, program)
            if name in built:
                raise
            # pyopencl's wheel PoCL (3.0, LLVM 14) did this on an AMD EPYC: a clean build, no kernels
            raise RuntimeError(f"the OpenCL compiler ({self.device.platform.version.strip()}) gave a program "
                               f"without kernel {name} (it has: {', '.join(built) or 'none'}); with pyopencl's "
                               "PoCL wheel, install the system's PoCL (Debian: pocl-opencl-icd)") from e

    # A bound step is cl.enqueue_nd_range_kernel with its queue first (`timed` swaps that queue);
    # the kernel object holds the arguments, set once here: each step has its own object.
    def bind(self, kernel, grid: Grid, args: list):
        if grid.total <= 0:
            return functools.partial(_nothing, self.queue)
        kernel.set_args(*args)
        return functools.partial(self.cl.enqueue_nd_range_kernel, self.queue, kernel, grid.threads, grid.group)

    def bind_gemm(self, a, b, c, m: int, n: int, k: int, b_transposed: bool = False,
                  epilogue: tuple | None = None, then: tuple[str, list] | None = None, ldb: int | None = None,
                  scale=None, relaxed: bool = False, half: bool = False, half_c: bool = False,
                  half_scale: bool = False):
        # float32 sums, relaxed or not; `half`: float16 A and B, widened as the GPU kernels read them
        cpu = self.target.name == CPU_TARGET.name   # by name: a variant of the CPU target is one too
        source, name, grid = gemm_unit(cpu, m, n, b_transposed, epilogue is not None,
                                       epilogue is not None and len(epilogue) > 3, then and then[0], ldb,
                                       scale is not None, half, half_c, half_scale)
        kernel = self.compile(source, [name])[0]  # a new object of the built program
        # (bias, lo, hi[, residual, lo2, hi2]): buffers as they are, bounds as float
        extra = [x if i % 3 == 0 else np.float32(x) for i, x in enumerate(epilogue or ())]
        kernel.set_args(a, b, c, np.int32(m), np.int32(n), np.int32(k), *extra, *(then[1] if then else ()),
                        *([] if scale is None else [scale]))
        return functools.partial(self.cl.enqueue_nd_range_kernel, self.queue, kernel, grid.threads, grid.group)

    rebinds = True

    def rebind(self, call, index: int, buf) -> None:
        if call.func is not _nothing:   # an empty grid launches no kernel
            call.args[1].set_arg(index, buf)

    def region(self, buf, offset: int, nbytes: int):
        """A sub-buffer, where `offset` is a multiple of the device's base address alignment."""
        if offset == 0:
            return buf
        if offset % (self.device.mem_base_addr_align // 8):
            return None
        return buf.get_sub_region(offset, nbytes)

    def timed(self, run) -> int:
        """On a second queue with PROFILING_ENABLE, after the plan's queue has drained."""
        if self._timing_queue is None:
            self._timing_queue = self.cl.CommandQueue(
                self.context, properties=self.cl.command_queue_properties.PROFILING_ENABLE)
        self.queue.finish()
        event = run.func(self._timing_queue, *run.args[1:])
        if event is None:
            return 0
        event.wait()
        return int(event.profile.end - event.profile.start)

    def synchronize(self) -> None:
        self.queue.finish()
        self._reads.clear()

    def constant_buffer(self, host: np.ndarray):
        """CL_MEM_USE_HOST_PTR over the constant's host bytes on a device that shares host memory
        (PoCL, an integrated GPU): the weights are not copied into buffers of the device's own, so a
        model's constants are held once, by the model (kernels only load elements, so any element
        alignment serves)."""
        if not host.nbytes or not self.device.host_unified_memory:
            return None
        flags = self.cl.mem_flags.READ_ONLY | self.cl.mem_flags.USE_HOST_PTR
        return self.cl.Buffer(self.context, flags, hostbuf=host.reshape(-1).view(np.uint8))

    def register_host(self, view: np.ndarray):
        """CL_MEM_USE_HOST_PTR over the pool's own pages, on a device that shares host memory
        (a CPU device, an integrated GPU): it reads and writes them in place, so host writes
        between executions need no map / unmap to be seen. A discrete GPU may cache the buffer
        in its own memory, which only mapping would bring back in step: it gets None."""
        if not view.flags.writeable or not view.nbytes or not self.device.host_unified_memory:
            return None
        flags = self.cl.mem_flags.READ_WRITE | self.cl.mem_flags.USE_HOST_PTR
        return self.cl.Buffer(self.context, flags, hostbuf=view.reshape(-1).view(np.uint8))

    def release_host(self, handle) -> None:
        self.queue.finish()  # no enqueued copy may still use the pages
        handle.release()


def _nothing(queue) -> None:
    """An empty launch (a zero-size tensor): nothing to enqueue."""


def _preference() -> int | None:
    any_device, gpu = available()
    return (2 if gpu else 1) if any_device else None


PROVIDER = Provider("opencl", OpenCLBackend, _preference, package="pyopencl",
                    install="pip install 'nngpu[opencl]' (a GPU driver) or 'nngpu[opencl-cpu]' (PoCL, a CPU device)",
                    targets=(TARGET, CPU_TARGET), devices=devices)
