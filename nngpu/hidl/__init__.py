"""The HIDL face (NNAPI HAL 1.0-1.3): each versioned IDevice and IPreparedModel method as the
driver core's call of that version. The AIDL face (nngpu.aidl) adapts the same core calls."""
