"""The backend protocol: device buffers, copies, kernel compilation (disk-cached) and launch.

A backend knows nothing about models: the compiler hands it C source and launch sizes. Buffers
are opaque handles; `upload` / `download` move bytes between them and host numpy arrays (views
of shared-memory pools, so a pool is copied once, with no staging copy in between)."""
from __future__ import annotations

import hashlib
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..hal.types import DeviceType


@dataclass
class DeviceValue:
    """A tensor value resident in device memory: an IBuffer's storage on a GPU backend."""

    buf: object
    shape: tuple[int, ...]
    dtype: np.dtype
    backend: object

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def to_host(self) -> np.ndarray:
        host = np.empty(self.shape, dtype=self.dtype)
        self.backend.download(self.buf, host)
        return host


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = Path(base) / "nngpu"
    path.mkdir(parents=True, exist_ok=True)
    return path


def kernel_template(name: str) -> str:
    """A hand-written kernel from the top-level kernels/ folder (or the installed copy)."""
    here = Path(__file__).resolve()
    for base in (here.parents[2] / "kernels", here.parents[1] / "kernels"):
        if (base / name).exists():
            return (base / name).read_text()
    raise FileNotFoundError(f"kernel template {name} not found")


def cache_key(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


class Backend(ABC):
    name: str
    dialect: str            # "opencl" | "cuda": which C the renderer writes for it
    device_type: DeviceType
    description: str

    @abstractmethod
    def alloc(self, nbytes: int) -> Any: ...

    @abstractmethod
    def free(self, buf: Any) -> None: ...

    @abstractmethod
    def upload(self, buf: Any, host: np.ndarray) -> None: ...

    @abstractmethod
    def download(self, buf: Any, host: np.ndarray) -> None: ...

    @abstractmethod
    def copy(self, dst: Any, src: Any, nbytes: int) -> None:
        """Device-to-device copy of the first `nbytes` bytes."""

    @abstractmethod
    def compile(self, source: str, name: str, options: tuple[str, ...] = ()) -> Any: ...

    @abstractmethod
    def launch(self, kernel: Any, global_size: int, args: list[Any], local_size: int | None = None) -> None: ...

    @abstractmethod
    def synchronize(self) -> None: ...

    @abstractmethod
    def gemm(self, a: Any, b: Any, c: Any, m: int, n: int, k: int) -> None:
        """C[m, n] = A[m, k] @ B[k, n]: row-major float32 buffers (a library call where the
        platform has one)."""

    def scalar_arg(self, value: int | float, kind: str) -> Any:
        """A kernel scalar argument: kind "i32" or "f32"."""
        return np.int32(value) if kind == "i32" else np.float32(value)
