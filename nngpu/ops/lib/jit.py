"""Compiled CPU loops for the numpy plan's hot 8-bit passes, from Numba (the `cpu` extra).

A pass that numpy runs as five to nine whole-array ufunc passes (requantization: multiply, add,
correct, clamp, cast) is one loop here, vectorized by LLVM, doing the same float64 operations in
the same order, so the results are bit for bit numpy's. Without Numba, or with NNGPU_JIT=0,
`kernels()` is None and the callers keep their numpy passes. Numba is imported on first use
only (by a quantized layer's bind), so float models never pay for its import."""
from __future__ import annotations

import logging
import os
import threading
from types import ModuleType

log = logging.getLogger("nngpu.jit")

# The rows of a requantizer's per-channel terms, in the order the compiled loops read them.
TERMS = ("m", "offset", "m_high", "high_offset", "scale", "step", "bias")

_lock = threading.Lock()
_loaded: list[ModuleType | None] = []


def enabled() -> bool:
    """Whether the compiled loops may be used (NNGPU_JIT=0 turns them off, for comparison)."""
    return os.environ.get("NNGPU_JIT", "1") != "0"


def kernels() -> ModuleType | None:
    """The module of compiled loops (jit_kernels), or None: Numba missing or turned off."""
    if not enabled():
        return None
    with _lock:
        if not _loaded:
            try:
                from . import jit_kernels
            except ImportError as e:       # the extra is not installed: numpy passes it is
                log.info("compiled CPU loops unavailable (%s); numpy passes run", e)
                jit_kernels = None
            _loaded.append(jit_kernels)
        return _loaded[0]


def unavailable_reason() -> str | None:
    """Why the compiled loops are not used, or None when they are."""
    if not enabled():
        return "NNGPU_JIT=0"
    return None if kernels() is not None else "numba is not installed (pip install 'nngpu[cpu]')"
