"""CUDA backend (CuPy). Kernels are compiled with NVRTC to cubin for the device's architecture
and cached on disk; CuPy loads and launches them."""
from __future__ import annotations

import copy
import functools
import threading

import numpy as np

from ..compiler.render import CStyleRenderer
from ..compiler.target import Target
from ..hal.types import DeviceType
from ..ir.schedule import Grid, Schedule
from .base import Backend, Provider, cache_key
from .cublas_gemm import GEMM_DEFAULT, R_32F, check_bounds, row_major_gemm
from .cuda_tiled_gemm import TiledGemmBinding, step_source

BLOCK = 256   # threads a block: every generated kernel declares it (__launch_bounds__)
_ONE, _ZERO = np.ones(1, np.float32), np.zeros(1, np.float32)   # GemmEx's alpha and beta, read on the host

# The hardware's conversions (one cvt instruction each, round to nearest even) on the device; the
# same arithmetic in software where the source is compiled for the host (tests/cuda_host). Guarded:
# a GEMM's unit holds it, and so may the folded kernel it calls (backends/cuda_tiled_gemm.py).
_CUDA_HALF = r"""
#ifndef NN_CUDA_HALF
#define NN_CUDA_HALF
#if defined(__CUDA_ARCH__)
__device__ __forceinline__ float nn_half_to_float(unsigned short h) {
    float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ unsigned short nn_float_to_half(float f) {
    unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
#else
__device__ __forceinline__ float nn_half_to_float(unsigned short h) {
    unsigned int sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
    if (exp == 0) {
        if (mant == 0) { bits = sign; }
        else { exp = 113; while (!(mant & 0x400u)) { mant <<= 1; --exp; } mant &= 0x3ffu; bits = sign | (exp << 23) | (mant << 13); }
    } else if (exp == 31) { bits = sign | 0x7f800000u | (mant << 13); }
    else { bits = sign | ((exp + 112) << 23) | (mant << 13); }
    return __uint_as_float(bits);
}
__device__ __forceinline__ unsigned short nn_float_to_half(float f) {
    unsigned int x = __float_as_uint(f), sign = (x >> 16) & 0x8000u, absx = x & 0x7fffffffu;
    if (absx > 0x7f800000u) return (unsigned short)(sign | 0x7e00u);           /* NaN */
    if (absx >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);          /* overflow to inf */
    if (absx < 0x38800000u) {                                                   /* subnormal or zero */
        unsigned int shift = 113 - (absx >> 23);
        if (shift > 24) return (unsigned short)sign;
        unsigned int mant = (absx & 0x7fffffu) | 0x800000u;
        unsigned int r = mant >> (shift + 13), rem = mant & ((1u << (shift + 13)) - 1u), halfway = 1u << (shift + 12);
        if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
        return (unsigned short)(sign | r);
    }
    unsigned int r = ((absx - 0x38000000u) >> 13), rem = absx & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;                      /* round to nearest even */
    return (unsigned short)(sign | r);
}
#endif
#endif"""


class CUDARenderer(CStyleRenderer):
    kernel_prefix = 'extern "C" __global__ void'
    restrict = "__restrict__"
    gid = "(blockIdx.x * (long long)blockDim.x + threadIdx.x)"
    helper_qualifier = "__device__ __forceinline__"
    long_type = "long long"
    long_suffix = "LL"
    storage_types = {**CStyleRenderer.storage_types, "half": "unsigned short", "bool8": "unsigned char",
                     "u8": "unsigned char", "i8": "signed char", "u16": "unsigned short"}

    group_id = "blockIdx.x"
    local_id = "threadIdx.x"
    barrier = "__syncthreads();"
    local_qualifier = "__shared__"

    def kernel_head(self, declared: int | None) -> str:
        # the block size every launch uses: the compiler may then budget registers for it
        return self.kernel_prefix + (f" __launch_bounds__({declared})" if declared else "")

    def prelude(self, storages: set[str]) -> list[str]:
        return [_CUDA_HALF.strip("\n")] if "half" in storages else []

    def load(self, ptr: str, storage: str, index: str) -> str:
        return f"nn_half_to_float({ptr}[{index}])" if storage == "half" else super().load(ptr, storage, index)

    def store(self, ptr: str, storage: str, index: str, value: str) -> str:
        if storage == "half":
            return f"{ptr}[{index}] = nn_float_to_half({value});"
        if storage == "bool8":
            return f"{ptr}[{index}] = (unsigned char)(({value}) ? 1 : 0);"
        return super().store(ptr, storage, index, value)


# A convolution is a GEMM from 2^21 multiply-adds (unmeasured on a GPU so far). A GEMM with an
# epilogue (a bias and activation, a residual, a folded kernel, a float16 C) is kernels/gemm.cu's,
# C stored once (cuda_tiled_gemm.py); a bare one is cuBLAS's.
# A slice's statistic (softmax's maximum and sum, a mean) takes a block of BLOCK threads.
_RENDERER = CUDARenderer()
TARGET = Target("cuda", _RENDERER, ".cu", Schedule(group=BLOCK, declare_group=True, reduce_group=BLOCK),
                gemm_epilogue=True, gemm_min_work=1 << 21, relaxed_storage=True, gemm_half_inputs=True,
                gemm_half_output=True, gemm_source=functools.partial(step_source, _RENDERER))


# With a ROCm build of CuPy there is no sm_XX to compile for, no cubin and no stream capture:
# the backend refuses to start rather than fail every compile (`auto` then picks OpenCL).
HIP_REASON = ("CuPy is a ROCm (HIP) build: the CUDA backend compiles NVRTC cubins and captures CUDA graphs, "
              "which HIP lacks; on an AMD GPU use the opencl backend")


def available() -> bool:
    try:
        import cupy

        return bool(cupy.cuda.is_available()) and not cupy.cuda.runtime.is_hip
    except Exception:
        return False


def devices() -> list[str]:
    """The GPUs CuPy sees, in `cuda:N` order (none without CuPy, a driver or a GPU)."""
    try:
        import cupy

        if cupy.cuda.runtime.is_hip:
            return []
        return [describe(k) for k in range(cupy.cuda.runtime.getDeviceCount())]
    except Exception:
        return []


def describe(index: int) -> str:
    """GPU `index` as `nngpu info` and the device's version string name it: its name and arch."""
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(index)
    return f"{props['name'].decode()} (sm_{props['major']}{props['minor']})"


def compile_cubin(source: str, name: str, arch: str = "sm_90", options: tuple[str, ...] = ()) -> bytes:
    """NVRTC: CUDA C → cubin for `arch` (works without a GPU)."""
    from cupy.cuda import nvrtc

    prog = nvrtc.createProgram(source, f"{name}.cu", [], [])
    opts = [f"--gpu-architecture={arch}", "--std=c++17", *options]
    try:
        nvrtc.compileProgram(prog, opts)
    except nvrtc.NVRTCError as e:
        log = nvrtc.getProgramLog(prog)
        raise RuntimeError(f"NVRTC failed for {name}: {e}\n{log}") from e
    try:
        return nvrtc.getCUBIN(prog)
    finally:
        nvrtc.destroyProgram(prog)


def unit_cache_key(arch: str, source: str) -> str:
    """The kernel cache's key for a translation unit compiled for `arch`: the one a CudaBackend
    on a device of that architecture looks up (Backend.compile), so units compiled ahead where
    no GPU is (`nngpu cache build`) are loaded there instead of compiled."""
    return cache_key(CudaBackend.name, arch, source)


# cudaError codes (runtime and driver alike) after which the context is unusable: an illegal
# address, instruction or PC, a misaligned access, a launch that failed or timed out, a hardware
# stack error, an uncorrectable ECC error, devices unavailable.
_STICKY = frozenset({700, 702, 714, 715, 716, 717, 718, 719, 214, 46})


def _on_device(method):
    """The method, run with its backend's GPU current on the calling thread, and the thread's own
    current GPU back afterwards: CuPy allocates, creates streams and events, loads modules and
    picks cuBLAS handles on the current device, and any thread (a prepare or execution thread, a
    client's own that made another GPU current) may call."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with self.gpu:
            return method(self, *args, **kwargs)
    return run


class CudaBackend(TiledGemmBinding, Backend):
    name = "cuda"
    target = TARGET
    device_type = DeviceType.GPU

    def __init__(self, index: int | None = None) -> None:
        import cupy

        if cupy.cuda.runtime.is_hip:
            raise RuntimeError(HIP_REASON)
        index = index or 0
        count = cupy.cuda.runtime.getDeviceCount()
        if index >= count:
            raise RuntimeError(f"no CUDA device {index}: this machine has {count} (nngpu info lists them)")
        super().__init__()
        self.cp = cupy
        self.gpu = cupy.cuda.Device(index)   # entered by every method that calls CuPy (_on_device)
        self.arch = f"sm_{self.gpu.compute_capability}"
        self.description = describe(index)
        with self.gpu:
            self.stream = cupy.cuda.Stream(non_blocking=True)
        self._gemm_ready = threading.local()   # CuPy keeps a cuBLAS handle per thread and GPU

    def is_sticky(self, error: BaseException) -> bool:
        """A CUDA error that poisons the context: every later call fails with it."""
        return type(error).__name__ in ("CUDARuntimeError", "CUDADriverError") and \
            getattr(error, "status", None) in _STICKY

    @_on_device
    def for_plan(self) -> "CudaBackend":
        plan = copy.copy(self)   # shares the device and compiled modules
        plan.stream = self.cp.cuda.Stream(non_blocking=True)
        return plan

    @_on_device
    def alloc(self, nbytes: int):
        return self.cp.empty(max(int(nbytes), 4), dtype=self.cp.uint8)

    def free(self, buf) -> None:
        del buf

    @_on_device
    def upload(self, buf, host: np.ndarray) -> None:
        if host.nbytes:
            buf[: host.nbytes].set(np.ascontiguousarray(host).reshape(-1).view(np.uint8), stream=self.stream)

    @_on_device
    def download(self, buf, host: np.ndarray) -> None:
        if host.nbytes:
            flat = host.reshape(-1).view(np.uint8)
            buf[: host.nbytes].get(stream=self.stream, out=flat)
            self.stream.synchronize()

    @_on_device
    def copy(self, dst, src, nbytes: int, dst_offset: int = 0, src_offset: int = 0) -> None:
        if nbytes:
            with self.stream:
                dst[dst_offset:dst_offset + nbytes] = src[src_offset:src_offset + nbytes]

    def relaxed_precision(self) -> str:
        return ("float32 temporaries are stored as float16 (half the memory traffic) and the generated kernels "
                "compute float32 from them; the GEMMs multiply float16 temporaries by weights stored float16 and sum "
                "in float32 (a bare GEMM's cuBLAS call takes float16 inputs, on tensor cores)")

    def cache_identity(self) -> str:
        return self.arch

    def build(self, source: str):
        cubin = compile_cubin(source, "unit", self.arch)
        return cubin, self.load(cubin)

    @_on_device
    def load(self, binary: bytes):
        from cupy.cuda.function import Module

        module = Module()
        module.load(binary)
        return module

    @_on_device
    def kernel(self, module, name: str):
        return module.get_function(name)

    @_on_device
    def prepare_gemm(self) -> None:
        """This thread's cuBLAS handle and workspace, now: a graph capturing a GEMM may allocate
        nothing. A real 2x2 product through gemm()'s own call; once per thread, since CuPy's
        handles are per thread."""
        if getattr(self._gemm_ready, "done", False):
            return
        a, c = self.cp.ones(16, dtype=self.cp.uint8), self.cp.empty(16, dtype=self.cp.uint8)
        self.gemm(a, a, c, 2, 2, 2)
        self.stream.synchronize()
        self._gemm_ready.done = True

    @_on_device
    def gemm(self, a, b, c, m: int, n: int, k: int, b_transposed: bool = False, relaxed: bool = False,
             half: bool = False) -> None:
        """cuBLAS's GemmEx on the raw buffers (cublas_gemm.py: B given transposed is cuBLAS's own
        transpose operation, not a copy); float16 inputs only where the model is relaxed, float16
        matrices with `half`. Called directly, not through CuPy's matmul, whose compute type
        follows $CUPY_TF32 instead."""
        from cupy_backends.cuda.libs import cublas

        call = row_major_gemm(a, b, c, m, n, k, b_transposed, relaxed, half)
        check_bounds(call, lambda buf: buf.nbytes)   # cuBLAS takes pointers and would read past an end
        handle = self.cp.cuda.device.get_cublas_handle()
        with self.stream:   # gemmEx puts the handle on the current stream
            cublas.gemmEx(handle, call.transa, call.transb, call.m, call.n, call.k, _ONE.ctypes.data,
                          call.a.data.ptr, call.ab_type, call.lda, call.b.data.ptr, call.ab_type, call.ldb,
                          _ZERO.ctypes.data, call.c.data.ptr, R_32F, call.ldc, call.compute, GEMM_DEFAULT)

    @_on_device
    def launch(self, kernel, grid: Grid, args: list) -> None:
        if grid.total <= 0:
            return
        blocks = tuple(t // g for t, g in zip(grid.threads, grid.group))
        with self.stream:
            kernel(blocks, grid.group, tuple(args))

    @_on_device
    def download_into(self, buf, host: np.ndarray, offset: int = 0) -> None:
        if host.nbytes:
            buf[offset: offset + host.nbytes].get(stream=self.stream, out=host.reshape(-1).view(np.uint8))

    @_on_device
    def download_async(self, buf, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """Into a new pinned array (pageable memory would make the copy synchronous)."""
        import cupyx

        host = cupyx.empty_pinned(shape, dtype=dtype)
        self.stage_out(host, buf, host.nbytes)
        return host

    @_on_device
    def timed(self, run) -> int:
        cuda = self.cp.cuda
        start, end = cuda.Event(), cuda.Event()
        start.record(self.stream)
        run()
        end.record(self.stream)
        end.synchronize()
        return int(cuda.get_elapsed_time(start, end) * 1e6)

    # ---- CUDA graphs ------------------------------------------------------------------------------
    graphs = True

    @_on_device
    def capture(self, steps: list):
        """Stream capture of the bound steps (recorded, not run), replayed by one graph launch;
        cuBLAS is set up on this thread first (a capture may be taken on any execution thread)."""
        self.prepare_gemm()
        self.stream.synchronize()
        with self.stream:
            self.stream.begin_capture()
            try:
                for step in steps:
                    step()
            finally:
                graph = self.stream.end_capture()
        return functools.partial(self._replay, graph)

    @_on_device
    def _replay(self, graph) -> None:
        graph.launch(self.stream)

    @_on_device
    def pinned(self, nbytes: int) -> np.ndarray:
        import cupyx

        return cupyx.empty_pinned(max(int(nbytes), 1), dtype=np.uint8)

    @_on_device
    def stage_in(self, buf, staging: np.ndarray, nbytes: int) -> None:
        if nbytes:
            rt = self.cp.cuda.runtime
            rt.memcpyAsync(buf.data.ptr, staging.ctypes.data, int(nbytes), rt.memcpyHostToDevice, self.stream.ptr)

    @_on_device
    def stage_out(self, staging: np.ndarray, buf, nbytes: int) -> None:
        if nbytes:
            rt = self.cp.cuda.runtime
            rt.memcpyAsync(staging.ctypes.data, buf.data.ptr, int(nbytes), rt.memcpyDeviceToHost, self.stream.ptr)

    def address(self, buf) -> int:
        return int(buf.data.ptr)

    @_on_device
    def synchronize(self) -> None:
        self.stream.synchronize()

    @_on_device
    def register_host(self, view: np.ndarray):
        """cudaHostRegister (page-locked, mapped): a uint8 CuPy array aliasing the pool's pages
        through their device pointer, so copies to and from it are DMA from the pool itself."""
        if not view.flags.writeable or not view.nbytes:
            return None
        cp, rt = self.cp, self.cp.cuda.runtime
        portable, mapped = 1, 2  # cudaHostRegister flags (CuPy names none)
        host = view.reshape(-1).view(np.uint8)
        ptr = host.ctypes.data
        rt.hostRegister(ptr, host.nbytes, portable | mapped)
        # the memory's owner keeps the pages mapped while the array lives
        mem = cp.cuda.UnownedMemory(rt.pointerGetAttributes(ptr).devicePointer, host.nbytes, host)
        return cp.ndarray((host.nbytes,), cp.uint8, cp.cuda.MemoryPointer(mem, 0))

    @_on_device
    def release_host(self, handle) -> None:
        self.stream.synchronize()  # no enqueued copy may still use the pages
        rt = self.cp.cuda.runtime
        rt.hostUnregister(rt.pointerGetAttributes(handle.data.ptr).hostPointer)


PROVIDER = Provider("cuda", CudaBackend, lambda: 3 if available() else None, package="cupy",
                    install="pip install 'nngpu[cuda]' (CuPy for CUDA 13 + NVRTC 13.0) or 'nngpu[cuda12]'",
                    targets=(TARGET,), devices=devices)
