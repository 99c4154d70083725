"""Operation families: each module registers its OpSpecs in nngpu.ops.registry.REGISTRY."""
from __future__ import annotations

import importlib
import pkgutil

_loaded = False

# Modules here that are helpers, not op families.
_NOT_FAMILIES = {"registry", "dtypes", "quant", "common"}


def load_all() -> None:
    """Import every op family module once (they register themselves)."""
    global _loaded
    if _loaded:
        return
    for info in pkgutil.iter_modules(__path__):
        if info.name not in _NOT_FAMILIES and not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
    _loaded = True
