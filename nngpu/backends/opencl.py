"""OpenCL backend (pyopencl): the first GPU platform device, else a CPU device (e.g. PoCL)."""
from __future__ import annotations

import numpy as np

from ..hal.types import DeviceType
from .base import Backend, kernel_template

GEMM_ROWS = 8  # rows of C per work-item, as in kernels/gemm.cl


def _pick_device(cl):
    devices = [d for p in cl.get_platforms() for d in p.get_devices()]
    if not devices:
        raise RuntimeError("no OpenCL device")
    gpus = [d for d in devices if d.type & cl.device_type.GPU]
    return (gpus or devices)[0]


def available() -> tuple[bool, bool]:
    """(any OpenCL device, a GPU one) — False, False when pyopencl is missing."""
    try:
        import pyopencl as cl

        devices = [d for p in cl.get_platforms() for d in p.get_devices()]
    except Exception:
        return False, False
    return bool(devices), any(d.type & cl.device_type.GPU for d in devices)


class OpenCLBackend(Backend):
    name = "opencl"
    dialect = "opencl"
    # Correctly rounded float division and sqrt: QUANTIZE and the float reference need it, and
    # OpenCL otherwise allows 2.5 ulp.
    OPTIONS = ("-cl-fp32-correctly-rounded-divide-sqrt",)
    # A cold PoCL build of a MediaPipe model takes seconds: programs of 16 kernels let the
    # progress bar advance (and give an ETA) at about 6 % more build time than one program.
    kernels_per_unit = 16

    def __init__(self) -> None:
        import pyopencl as cl

        super().__init__()
        self.cl = cl
        self.device = _pick_device(cl)
        self.context = cl.Context([self.device])
        self.queue = cl.CommandQueue(self.context)
        self.device_type = DeviceType.GPU if self.device.type & cl.device_type.GPU else DeviceType.CPU
        self.description = f"{self.device.name.strip()} ({self.device.platform.name.strip()})"
        self._gemm = None

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

    def copy(self, dst, src, nbytes: int) -> None:
        if nbytes:
            self.cl.enqueue_copy(self.queue, dst, src, byte_count=int(nbytes))

    def cache_identity(self) -> str:
        d = self.device
        return " ".join((d.name, d.platform.version, d.driver_version, *self.OPTIONS))

    def build(self, source: str):
        program = self.cl.Program(self.context, source).build(list(self.OPTIONS))
        return program.get_info(self.cl.program_info.BINARIES)[0], program

    def load(self, binary: bytes):
        return self.cl.Program(self.context, [self.device], [binary]).build(list(self.OPTIONS))

    def kernel(self, program, name: str):
        return self.cl.Kernel(program, name)  # its own object: segments set their own arguments

    def prepare_gemm(self) -> None:
        self._gemm = self.compile(kernel_template("gemm.cl"), ["nn_gemm"])[0]

    def gemm(self, a, b, c, m: int, n: int, k: int) -> None:
        if self._gemm is None:
            self.prepare_gemm()
        size = (n, (m + GEMM_ROWS - 1) // GEMM_ROWS)
        self._gemm(self.queue, size, None, a, b, c, np.int32(m), np.int32(n), np.int32(k))

    def launch(self, kernel, global_size: int, args: list) -> None:
        if global_size > 0:
            kernel(self.queue, (int(global_size),), None, *args)

    def synchronize(self) -> None:
        self.queue.finish()
