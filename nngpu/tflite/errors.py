"""Errors of the TFLite importer (ImportError subclasses, so callers can catch one family)."""
from __future__ import annotations


class TFLiteImportError(ImportError):
    """The .tflite model cannot be expressed as an NNAPI model."""


class TFLiteFormatError(TFLiteImportError):
    """The file is not a readable .tflite flatbuffer (or the parser package is missing)."""


class TFLitePackageMissing(TFLiteFormatError):
    """The flatbuffer parser package (`tflite`, the extra nngpu[tflite]) is not installed."""


class UnsupportedOperatorError(TFLiteImportError):
    """An operator with no NNAPI counterpart (or options NNAPI cannot express), by name and index."""

    def __init__(self, op_name: str, index: int, reason: str = ""):
        self.op_name = op_name
        self.index = index
        self.reason = reason
        detail = f": {reason}" if reason else ": no NNAPI counterpart"
        super().__init__(f"operator #{index} {op_name}{detail}")


__all__ = ["TFLiteFormatError", "TFLitePackageMissing", "TFLiteImportError", "UnsupportedOperatorError"]
