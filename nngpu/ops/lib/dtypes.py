"""How each operand type is stored: numpy dtype and element size."""
from __future__ import annotations

import math

import numpy as np

from ...hal.types import OperandType as T

DTYPES: dict[int, np.dtype] = {
    T.FLOAT32: np.dtype(np.float32),
    T.INT32: np.dtype(np.int32),
    T.UINT32: np.dtype(np.uint32),
    T.TENSOR_FLOAT32: np.dtype(np.float32),
    T.TENSOR_INT32: np.dtype(np.int32),
    T.TENSOR_QUANT8_ASYMM: np.dtype(np.uint8),
    T.BOOL: np.dtype(np.bool_),
    T.TENSOR_QUANT16_SYMM: np.dtype(np.int16),
    T.TENSOR_FLOAT16: np.dtype(np.float16),
    T.TENSOR_BOOL8: np.dtype(np.bool_),
    T.FLOAT16: np.dtype(np.float16),
    T.TENSOR_QUANT8_SYMM_PER_CHANNEL: np.dtype(np.int8),
    T.TENSOR_QUANT16_ASYMM: np.dtype(np.uint16),
    T.TENSOR_QUANT8_SYMM: np.dtype(np.int8),
    T.TENSOR_QUANT8_ASYMM_SIGNED: np.dtype(np.int8),
    T.TENSOR_OEM_BYTE: np.dtype(np.uint8),
}

SCALAR_TYPES = frozenset({T.FLOAT32, T.INT32, T.UINT32, T.BOOL, T.FLOAT16, T.SUBGRAPH, T.OEM})
FLOAT_TENSORS = frozenset({T.TENSOR_FLOAT32, T.TENSOR_FLOAT16})
QUANT_TENSORS = frozenset({
    T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_QUANT8_SYMM,
    T.TENSOR_QUANT8_SYMM_PER_CHANNEL, T.TENSOR_QUANT16_SYMM, T.TENSOR_QUANT16_ASYMM,
})


def dtype_of(operand_type: int) -> np.dtype:
    return DTYPES[operand_type]


def nbytes(shape: tuple[int, ...], dtype: np.dtype) -> int:
    """The bytes of a dense array (math.prod, not np.prod: this is on executions' hot paths)."""
    return math.prod(shape) * dtype.itemsize


def is_tensor(operand_type: int) -> bool:
    return operand_type not in SCALAR_TYPES


def element_size(operand_type: int) -> int:
    return DTYPES[operand_type].itemsize if operand_type in DTYPES else 0


def quant_range(operand_type: int) -> tuple[int, int]:
    info = np.iinfo(DTYPES[operand_type])
    return int(info.min), int(info.max)
