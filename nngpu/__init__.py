"""nngpu: a GPU-backed implementation of the Android Neural Networks HAL (1.0-1.3) in Python."""
__version__ = "0.1.0"


def __getattr__(name: str):
    # Lazy so that `import nngpu.hal` stays free of driver imports.
    if name == "Device":
        from .driver.device import Device

        return Device
    raise AttributeError(name)
