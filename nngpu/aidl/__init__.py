"""nngpu's AIDL face: the AIDL NNAPI HAL (android.hardware.neuralnetworks) as thin adapters over
the driver core that the HIDL face serves too. `AidlDevice(backend="numpy")` is an IDevice."""
from .callbacks import PreparedModelCallback
from .device import AidlDevice

__all__ = ["AidlDevice", "PreparedModelCallback"]
