"""The numpy backend: host memory as the device. It compiles no kernels, so a prepared model on
it runs the reference interpreter; its buffers hold IBuffer values."""
from __future__ import annotations

import numpy as np

from ..hal.types import DeviceType
from .base import Backend, Provider


class NumpyBackend(Backend):
    name = "numpy"
    target = None
    device_type = DeviceType.CPU
    description = f"numpy {np.__version__}"

    def relaxed_precision(self) -> str:
        return "all float32: the numpy reference computes float32"

    def alloc(self, nbytes: int) -> np.ndarray:
        return np.empty(max(int(nbytes), 1), dtype=np.uint8)

    def free(self, buf: np.ndarray) -> None:
        del buf

    def upload(self, buf: np.ndarray, host: np.ndarray) -> None:
        buf[: host.nbytes] = np.ascontiguousarray(host).reshape(-1).view(np.uint8)

    def download(self, buf: np.ndarray, host: np.ndarray) -> None:
        host.reshape(-1).view(np.uint8)[:] = buf[: host.nbytes]

    def download_into(self, buf: np.ndarray, host: np.ndarray, offset: int = 0) -> None:
        host.reshape(-1).view(np.uint8)[:] = buf[offset: offset + host.nbytes]

    def copy(self, dst: np.ndarray, src: np.ndarray, nbytes: int, dst_offset: int = 0, src_offset: int = 0) -> None:
        dst[dst_offset:dst_offset + nbytes] = src[src_offset:src_offset + nbytes]

    def register_host(self, view: np.ndarray) -> np.ndarray:
        return view.reshape(-1).view(np.uint8)  # host memory is this backend's device memory

    def release_host(self, handle: np.ndarray) -> None:
        del handle


PROVIDER = Provider("numpy", NumpyBackend, preference=lambda: 0)   # the reference runs anywhere
