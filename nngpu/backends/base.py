"""The backend interface, in three parts: allocation and copies, compilation (one disk cache for
every backend), and launch.

A backend knows nothing about models: the compiler hands it C source and launch sizes. Buffers
are opaque handles; `upload` / `download` move bytes between them and host numpy arrays (views
of shared-memory pools, so a pool is copied once, with no staging copy in between)."""
from __future__ import annotations

import hashlib
import logging
import os
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..hal.types import DeviceType

log = logging.getLogger("nngpu.backends")


@dataclass
class DeviceValue:
    """A tensor value resident in a backend buffer: an IBuffer's storage."""

    buf: object
    shape: tuple[int, ...]
    dtype: np.dtype
    backend: "Backend"

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def to_host(self) -> np.ndarray:
        host = np.empty(self.shape, dtype=self.dtype)
        self.backend.download(self.buf, host)
        return host


def cache_dir(create: bool = True) -> Path:
    """Where compiled kernels are kept: $NNGPU_CACHE_DIR, else $XDG_CACHE_HOME/nngpu/kernels
    (apart from the downloaded models beside it)."""
    if os.environ.get("NNGPU_CACHE_DIR"):
        path = Path(os.environ["NNGPU_CACHE_DIR"])
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = Path(base) / "nngpu" / "kernels"
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


CACHE_SUFFIX = ".bin"  # every cache entry; `nngpu cache clear` removes only these


def _write_atomically(path: Path, data: bytes) -> None:
    """Write through a private temporary file and rename it into place, so that another process
    sharing the cache never reads a half-written binary."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        log.warning("cannot write kernel cache %s", path)
        tmp.unlink(missing_ok=True)


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
    dialect: str | None     # "opencl" | "cuda": which C the renderer writes for it; None: no kernels
    device_type: DeviceType
    description: str
    kernels_per_unit: int | None = None   # kernels per compiled program (None: a segment's all)

    def __init__(self) -> None:
        self._programs: dict[str, Any] = {}
        self._compile_lock = threading.Lock()

    # ---- allocation and copies ------------------------------------------------------------------
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

    # ---- compilation ----------------------------------------------------------------------------
    def compile(self, source: str, names: list[str]) -> list[Any]:
        """The launchable kernels `names` of one translation unit: from memory, else from the
        disk cache (keyed by source, device and options), else built and written there."""
        key = cache_key(self.name, self.cache_identity(), source)
        with self._compile_lock:
            program = self._programs.get(key)
            if program is None:
                path = cache_dir() / f"{key}{CACHE_SUFFIX}"
                program = self._load_cached(path)
                if program is None:
                    binary, program = self.build(source)
                    _write_atomically(path, binary)
                self._programs[key] = program
            return [self.kernel(program, name) for name in names]

    def _load_cached(self, path: Path) -> Any:
        if not path.exists():
            return None
        try:
            return self.load(path.read_bytes())
        except Exception:  # a stale or foreign binary: rebuild from source
            log.info("kernel cache entry %s is unusable; rebuilding", path.name)
            return None

    def cache_identity(self) -> str:
        """What besides the source decides the binary: device, driver, compiler options."""
        return ""

    def build(self, source: str) -> tuple[bytes, Any]:
        """Compile `source`: (the binary to cache, the loaded program)."""
        raise NotImplementedError(f"the {self.name} backend compiles no kernels")

    def load(self, binary: bytes) -> Any:
        """The loaded program of a cached binary."""
        raise NotImplementedError(f"the {self.name} backend compiles no kernels")

    def kernel(self, program: Any, name: str) -> Any:
        """The launchable kernel `name` of a loaded program."""
        raise NotImplementedError(f"the {self.name} backend compiles no kernels")

    # ---- launch -------------------------------------------------------------------------------
    def launch(self, kernel: Any, global_size: int, args: list[Any]) -> None:
        raise NotImplementedError(f"the {self.name} backend launches no kernels")

    def gemm(self, a: Any, b: Any, c: Any, m: int, n: int, k: int) -> None:
        """C[m, n] = A[m, k] @ B[k, n]: row-major float32 buffers (a library call where the
        platform has one)."""
        raise NotImplementedError(f"the {self.name} backend has no GEMM")

    def synchronize(self) -> None:
        """Wait for everything enqueued."""
