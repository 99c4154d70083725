"""The AIDL NNAPI HAL (android.hardware.neuralnetworks, versions 1-4): types and interfaces."""
