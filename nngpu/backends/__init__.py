"""Backends: numpy (the reference executor), opencl (pyopencl), cuda (CuPy + NVRTC)."""
from __future__ import annotations

import os

from .base import Backend

NAMES = ("numpy", "opencl", "cuda")


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
    """The backend object for a resolved name."""
    if name == "numpy":
        from .numpy import NumpyBackend

        return NumpyBackend()
    if name == "opencl":
        from .opencl import OpenCLBackend

        return OpenCLBackend()
    from .cuda import CudaBackend

    return CudaBackend()


def device_backends() -> list[str]:
    """The GPU-path backends usable on this machine (OpenCL, e.g. PoCL on CI; CUDA on a GPU)."""
    from . import cuda, opencl

    return [name for name, ok in (("opencl", opencl.available()[0]), ("cuda", cuda.available())) if ok]
