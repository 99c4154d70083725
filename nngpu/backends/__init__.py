"""Backends, found by discovery: every module of this package that declares a PROVIDER (numpy,
the reference executor; opencl, pyopencl; cuda, CuPy + NVRTC). A new backend is one module with
its Provider, and its Target when it compiles kernels; nothing here names one."""
from __future__ import annotations

import functools
import importlib
import os
import pkgutil
from typing import TYPE_CHECKING

from .base import Backend, Provider

if TYPE_CHECKING:
    from ..compiler.target import Target

__all__ = ["Backend", "BackendUnavailable", "Provider", "create", "device_backends", "names", "providers",
           "resolve", "targets"]


class BackendUnavailable(RuntimeError):
    """The backend exists but cannot run here: its package is missing or it sees no device."""


@functools.cache
def providers() -> dict[str, Provider]:
    """Every backend module's provider by name: the reference first, then by name."""
    found: dict[str, Provider] = {}
    for module in pkgutil.iter_modules(__path__):
        provider = getattr(importlib.import_module(f"{__name__}.{module.name}"), "PROVIDER", None)
        if isinstance(provider, Provider):
            found[provider.name] = provider
    return dict(sorted(found.items(), key=lambda item: (bool(item[1].targets), item[0])))


def names() -> list[str]:
    return list(providers())


def resolve(name: str) -> str:
    """"auto" (or $NNGPU_BACKEND): the usable backend that prefers itself most here (CUDA when
    CuPy sees a GPU, else an OpenCL GPU, else an OpenCL CPU device, else numpy: see each
    Provider.preference). "NAME:N" names device N of a backend that lists its devices (nngpu
    info). Unknown names raise ValueError."""
    if name == "auto":
        name = os.environ.get("NNGPU_BACKEND", "auto")
    if name == "auto":
        ranked = [(p.preference(), n) for n, p in providers().items()]
        return max((rank, n) for rank, n in ranked if rank is not None)[1]
    _split(name)
    return name


def _split(name: str) -> tuple[Provider, int | None]:
    """The provider and device index of a backend name ("opencl", "opencl:1"); ValueError."""
    base, colon, index = name.partition(":")
    provider = providers().get(base)
    if provider is None:
        raise ValueError(f"unknown backend {name!r}; choose from {', '.join(providers())} or auto")
    if not colon:
        return provider, None
    if provider.devices is None:
        raise ValueError(f"backend {name!r}: {base} has one device, named {base}")
    if not index.isdigit():
        raise ValueError(f"backend {name!r}: the device index after ':' must be a number (nngpu info lists them)")
    return provider, int(index)


def create(name: str) -> Backend:
    """The backend object for a resolved name; BackendUnavailable (one line: why, and what to
    install) when it cannot run on this machine."""
    provider, index = _split(name)
    try:
        return provider.create() if index is None else provider.create(index)
    except ImportError as e:
        package = provider.package or ""
        if e.name and e.name.split(".")[0] == package:
            raise BackendUnavailable(f"backend {name}: {package} is not installed; {provider.install}") from e
        raise BackendUnavailable(f"backend {name}: {package or 'a module'} cannot be imported: {_first_line(e)}") from e
    except Exception as e:  # no device, no driver, a broken install: the library's own message
        raise BackendUnavailable(f"backend {name} is not usable here: {_first_line(e)}") from e


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}".rstrip(": ")


def device_backends() -> list[str]:
    """The backends usable on this machine that compile kernels (OpenCL, e.g. PoCL on CI; CUDA
    on a GPU)."""
    return [n for n, p in providers().items() if p.targets and p.preference() is not None]


def targets() -> dict[str, Target]:
    """Every kernel target by name: what `nngpu kernels --target` renders, no device needed."""
    return {t.name: t for p in providers().values() for t in p.targets}
