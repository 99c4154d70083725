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

from ...backends.base import cache_dir as _cache_dir

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
    if _loaded:                            # the hot path: loaded once, read without the lock
        return _loaded[0]
    with _lock:
        if not _loaded:
            _loaded.append(_load())
        return _loaded[0]


def _load() -> ModuleType | None:
    """Numba and the loops, their compiled forms cached beside nngpu's kernels (NUMBA_CACHE_DIR,
    when set, wins); None, with the reason logged, where Numba is missing or cannot load them."""
    try:
        import numba
    except ImportError as e:               # the extra is not installed: numpy passes it is
        log.info("compiled CPU loops unavailable (%s); numpy passes run", e)
        return None
    if not os.environ.get("NUMBA_CACHE_DIR"):
        try:
            numba.config.CACHE_DIR = str(_cache_dir() / "numba")
        except OSError as e:               # no nngpu cache: Numba's own place, if it has one
            log.info("no kernel cache folder for the compiled loops (%s)", e)
    try:
        from . import jit_kernels
    except Exception as e:  # e.g. no writable place to cache them: numpy passes, same bits
        log.warning("compiled CPU loops unavailable (%s: %s); numpy passes run", type(e).__name__, e)
        return None
    return jit_kernels


def unavailable_reason() -> str | None:
    """Why the compiled loops are not used, or None when they are."""
    if not enabled():
        return "NNGPU_JIT=0"
    return None if kernels() is not None else "numba is not installed (pip install 'nngpu[cpu]')"
