"""Backends: numpy (the reference executor), opencl (pyopencl), cuda (CuPy + NVRTC)."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .base import Backend

if TYPE_CHECKING:
    from ..compiler.target import Target

NAMES = ("numpy", "opencl", "cuda")

_EXTRA = {"opencl": "pip install 'nngpu[opencl]' (a GPU driver) or 'nngpu[opencl-cpu]' (PoCL, a CPU device)",
          "cuda": "pip install 'nngpu[cuda]' (CuPy 13 + NVRTC 13.0) or 'nngpu[cuda12]'"}


class BackendUnavailable(RuntimeError):
    """The backend exists but cannot run here: its package is missing or it sees no device."""


def resolve(name: str) -> str:
    """"auto" (or $NNGPU_BACKEND): CUDA when CuPy sees a GPU, else an OpenCL GPU, else an
    OpenCL CPU device, else numpy. Unknown names raise ValueError."""
    if name == "auto":
        name = os.environ.get("NNGPU_BACKEND", "auto")
    if name == "auto":
        from . import cuda, opencl

        if cuda.available():
            return "cuda"
        any_cl, gpu_cl = opencl.available()
        return "opencl" if any_cl else "numpy"
    if name not in NAMES:
        raise ValueError(f"unknown backend {name!r}; choose from {', '.join(NAMES)} or auto")
    return name


def create(name: str) -> Backend:
    """The backend object for a resolved name; BackendUnavailable (one line: why, and what to
    install) when it cannot run on this machine."""
    if name == "numpy":
        from .numpy import NumpyBackend

        return NumpyBackend()
    package = "pyopencl" if name == "opencl" else "cupy"
    try:
        if name == "opencl":
            from .opencl import OpenCLBackend

            return OpenCLBackend()
        from .cuda import CudaBackend

        return CudaBackend()
    except ImportError as e:
        if e.name and e.name.split(".")[0] == package:
            raise BackendUnavailable(f"backend {name}: {package} is not installed; {_EXTRA[name]}") from e
        raise BackendUnavailable(f"backend {name}: {package} cannot be imported: {_first_line(e)}") from e
    except Exception as e:  # no device, no driver, a broken install: the library's own message
        raise BackendUnavailable(f"backend {name} is not usable here: {_first_line(e)}") from e


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}".rstrip(": ")


def device_backends() -> list[str]:
    """The GPU-path backends usable on this machine (OpenCL, e.g. PoCL on CI; CUDA on a GPU)."""
    from . import cuda, opencl

    return [name for name, ok in (("opencl", opencl.available()[0]), ("cuda", cuda.available())) if ok]


def targets() -> dict[str, "Target"]:
    """Every kernel target by name: what `nngpu kernels --target` renders, no device needed."""
    from . import cuda, opencl

    return {t.name: t for t in (opencl.TARGET, cuda.TARGET)}
