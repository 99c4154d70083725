"""Operation families: each module registers its OpSpecs in nngpu.ops.registry.REGISTRY."""
from __future__ import annotations

import importlib
import pkgutil
import threading

_loaded = False
_lock = threading.Lock()


def load_all() -> None:
    """Import every family module here once: each registers its operations (registry and node
    register nothing, and the shared helpers in lib/ are imported by the families that use them)."""
    global _loaded
    with _lock:
        if _loaded:
            return
        for info in pkgutil.iter_modules(__path__):
            if not info.ispkg and not info.name.startswith("_"):
                importlib.import_module(f"{__name__}.{info.name}")
        _loaded = True
