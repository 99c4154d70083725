"""What several commands share: opening a device and a model with one-line errors, checking
output paths before the work starts."""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import CLIError, missing_extra

if TYPE_CHECKING:
    from ..driver.device import Device
    from ..named_model import NamedModel


def open_device(backend: str, name: str | None = None) -> "Device":
    """The Device on `backend` (named `name`), or a CLIError saying why it cannot be had here."""
    from ..backends import BackendUnavailable
    from ..driver.device import Device

    try:
        return Device(backend, name)
    except BackendUnavailable as e:
        raise CLIError(str(e), 1) from e
    except ValueError as e:  # an unknown name
        raise CLIError(str(e)) from e


def resolve_backend(backend: str) -> str:
    """The backend `backend` names ("auto" reads $NNGPU_BACKEND), or a CLIError for an unknown
    name, worded as for --backend."""
    from ..backends import resolve

    try:
        return resolve(backend)
    except ValueError as e:
        raise CLIError(str(e)) from e


def open_model(path: str | None, fallback: bool = False, device: "Device | None" = None) -> "NamedModel":
    """The model at `path` (the bundled demo when None), or a CLIError. A .tflite model with
    operators the driver cannot run is split into partitions when `fallback`, refused otherwise;
    `device` has its getSupportedOperations heard too."""
    from ..named_model import ModelLoadError, load_model
    from ..tflite.errors import TFLiteImportError, TFLitePackageMissing

    source = Path(path) if path else DEMO_MODEL
    try:
        return load_model(source, fallback, device)
    except ModelLoadError as e:
        raise CLIError(str(e)) from e
    except TFLitePackageMissing as e:
        raise missing_extra("reading .tflite models", "tflite") from e
    except TFLiteImportError as e:
        raise CLIError(f"{source.name}: {e}") from e


DEMO_MODEL = Path(__file__).resolve().parents[1] / "data" / "demo_cnn.json"


def writable_file(path: str, flag: str) -> Path:
    """`path` as a file this process can create, checked before any work is done."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise CLIError(f"{flag} {path}: is a folder, give a file name")
    if not parent.is_dir():
        raise CLIError(f"{flag} {path}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise CLIError(f"{flag} {path}: not writable")
    return p


def writable_dir(path: str, flag: str) -> Path:
    """`path` as a folder (created if missing) this process can write, checked up front."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise CLIError(f"{flag} {path}: exists and is not a folder")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CLIError(f"{flag} {path}: cannot create it: {e.strerror}") from e
    if not os.access(p, os.W_OK):
        raise CLIError(f"{flag} {path}: not writable")
    return p


def positive(text: str) -> int:
    """argparse type: an integer >= 1."""
    return _bounded_int(text, 1)


def non_negative(text: str) -> int:
    """argparse type: an integer >= 0."""
    return _bounded_int(text, 0)


def _bounded_int(text: str, low: int, high: int | None = None) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"{value} is below {low}")
    if high is not None and value > high:
        raise argparse.ArgumentTypeError(f"{value} is above {high}")
    return value


def int_in(low: int, high: int):
    """argparse type: an integer from low to high."""
    return lambda text: _bounded_int(text, low, high)
