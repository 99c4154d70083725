"""How operand types are stored in kernel buffers (float16 as 16-bit words, bool8 as bytes)."""
from __future__ import annotations

import numpy as np

from ..hal.types import OperandType as T

STORAGE = {
    T.TENSOR_FLOAT32: "float", T.TENSOR_FLOAT16: "half", T.TENSOR_INT32: "int", T.TENSOR_BOOL8: "bool8",
    T.TENSOR_QUANT8_ASYMM: "u8", T.TENSOR_QUANT8_ASYMM_SIGNED: "i8", T.TENSOR_QUANT8_SYMM: "i8",
    T.TENSOR_QUANT8_SYMM_PER_CHANNEL: "i8", T.TENSOR_QUANT16_SYMM: "i16", T.TENSOR_QUANT16_ASYMM: "u16",
}
STORAGE_DTYPE = {"float": np.dtype(np.float32), "half": np.dtype(np.float16), "int": np.dtype(np.int32),
                 "bool8": np.dtype(np.bool_), "u8": np.dtype(np.uint8), "i8": np.dtype(np.int8),
                 "i16": np.dtype(np.int16), "u16": np.dtype(np.uint16)}

# The storages of a float32 value: float32, or float16 where a relaxed model's temporary is stored
# so (compiler/relaxed_storage.py), which a template or a fold then takes as its element type
FLOAT32_STORAGES = frozenset({"float", "half"})

_RAISE = object()


def storage_of(operand_type: int, default=_RAISE) -> str | None:
    """The buffer storage of a tensor operand type (KeyError, or `default`, for the others)."""
    if operand_type in STORAGE:
        return STORAGE[operand_type]
    if default is _RAISE:
        raise KeyError(f"operand type {operand_type} has no device storage")
    return default
