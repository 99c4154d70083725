"""CUDA backend (CuPy). Kernels are compiled with NVRTC to cubin for the device's architecture
and cached on disk; CuPy loads and launches them."""
from __future__ import annotations

import numpy as np

from ..hal.types import DeviceType
from .base import Backend

BLOCK = 256


def available() -> bool:
    try:
        import cupy

        return bool(cupy.cuda.is_available())
    except Exception:
        return False


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


class CudaBackend(Backend):
    name = "cuda"
    dialect = "cuda"
    device_type = DeviceType.GPU

    def __init__(self) -> None:
        import cupy

        super().__init__()
        self.cp = cupy
        dev = cupy.cuda.Device()
        self.arch = f"sm_{dev.compute_capability}"
        props = cupy.cuda.runtime.getDeviceProperties(dev.id)
        self.description = f"{props['name'].decode()} ({self.arch})"
        self.stream = cupy.cuda.Stream(non_blocking=True)

    def alloc(self, nbytes: int):
        return self.cp.empty(max(int(nbytes), 4), dtype=self.cp.uint8)

    def free(self, buf) -> None:
        del buf

    def upload(self, buf, host: np.ndarray) -> None:
        if host.nbytes:
            buf[: host.nbytes].set(np.ascontiguousarray(host).reshape(-1).view(np.uint8), stream=self.stream)

    def download(self, buf, host: np.ndarray) -> None:
        if host.nbytes:
            flat = host.reshape(-1).view(np.uint8)
            buf[: host.nbytes].get(stream=self.stream, out=flat)
            self.stream.synchronize()

    def copy(self, dst, src, nbytes: int) -> None:
        if nbytes:
            with self.stream:
                dst[:nbytes] = src[:nbytes]

    def cache_identity(self) -> str:
        return self.arch

    def build(self, source: str):
        cubin = compile_cubin(source, "unit", self.arch)
        return cubin, self.load(cubin)

    def load(self, binary: bytes):
        from cupy.cuda.function import Module

        module = Module()
        module.load(binary)
        return module

    def kernel(self, module, name: str):
        return module.get_function(name)

    def gemm(self, a, b, c, m: int, n: int, k: int) -> None:
        """cuBLAS through CuPy, on float32 views of the raw buffers."""
        cp = self.cp
        view = lambda buf, rows, cols: buf[: rows * cols * 4].view(cp.float32).reshape(rows, cols)  # noqa: E731
        with self.stream:
            cp.matmul(view(a, m, k), view(b, k, n), out=view(c, m, n))

    def launch(self, kernel, global_size: int, args: list) -> None:
        if global_size <= 0:
            return
        grid = (int(global_size) + BLOCK - 1) // BLOCK
        with self.stream:
            kernel((grid,), (BLOCK,), tuple(args))

    def synchronize(self) -> None:
        self.stream.synchronize()
