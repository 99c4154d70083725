"""nngpu: a GPU-backed implementation of the Android Neural Networks HAL (1.0-1.3) in Python.

`nngpu.Session` runs a model on numpy arrays by name; `nngpu.ModelBuilder` writes a model;
`nngpu.Device` is the HAL IDevice; `nngpu.connect(PATH)` is one served by `nngpu serve`."""
__version__ = "0.1.0"

# Lazy, so that `import nngpu.hal` stays free of driver imports.
_LAZY = {"Device": ("driver.device", "Device"), "Session": ("session", "Session"),
         "ModelBuilder": ("builder", "ModelBuilder"), "connect": ("service.proxy", "connect")}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(f".{module}", __name__), attr)
    raise AttributeError(f"module 'nngpu' has no attribute {name!r}")


__all__ = ["Device", "Session", "ModelBuilder", "connect", "__version__"]
