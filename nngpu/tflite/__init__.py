"""TFLite import: read a .tflite flatbuffer and build the equivalent NNAPI model.

    model, input_names, output_names = load_tflite("face_detection_short_range.tflite")
    imported = load_tflite(path)       # the same object also has .inputs/.outputs (shapes,
                                       # dtypes, quantization), .version (12 or 13), .folded
"""
from __future__ import annotations

from pathlib import Path

from .errors import TFLiteFormatError, TFLiteImportError, UnsupportedOperatorError
from .importer import ImportedModel, IOTensor, import_tflite


def load_tflite(path: str | Path, validate: bool = True) -> ImportedModel:
    """Import the .tflite file at `path`; raises TFLiteImportError (an ImportError) when it cannot."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise TFLiteFormatError(f"cannot read {path}: {e}") from e
    return import_tflite(data, validate)


__all__ = ["load_tflite", "import_tflite", "ImportedModel", "IOTensor", "TFLiteImportError",
           "TFLiteFormatError", "UnsupportedOperatorError"]
