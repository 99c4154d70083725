"""TFLite tensor -> NNAPI operand type and quantization, as the NNAPI delegate maps them."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..hal.types import OperandType
from .errors import TFLiteImportError
from .reader import NP_DTYPES, Tensor

T = OperandType

# tflite.TensorType values used below.
FLOAT32, FLOAT16, INT32, UINT8, INT64, BOOL, INT16, INT8 = 0, 1, 2, 3, 4, 6, 7, 9


@dataclass
class OperandSpec:
    type: OperandType
    dims: list[int]
    scale: float = 0.0
    zero_point: int = 0
    channel_quant: tuple[list[float], int] | None = None
    value: np.ndarray | None = None   # constant value, converted to the operand's dtype


def nn_dims(shape: list[int]) -> list[int]:
    # TFLite scalars (rank 0) become [1]: a rank-0 NNAPI tensor would mean "unknown rank".
    return [int(d) for d in shape] if shape else [1]


def operand_spec(t: Tensor) -> OperandSpec:
    """The NNAPI operand for tensor t (raises TFLiteImportError for types NNAPI lacks)."""
    dims = nn_dims(t.shape)
    q = t.quant
    value = t.data
    if t.data is not None and t.sparsity is not None:
        raise TFLiteImportError(f"tensor {t.index} ({t.name}) is sparse and not consumed by DENSIFY")
    if t.type == FLOAT32:
        return OperandSpec(T.TENSOR_FLOAT32, dims, value=value)
    if t.type == FLOAT16:
        return OperandSpec(T.TENSOR_FLOAT16, dims, value=value)
    if t.type == BOOL:
        return OperandSpec(T.TENSOR_BOOL8, dims, value=None if value is None else value.astype(np.bool_))
    if t.type in (INT32, INT64):
        if t.type == INT64:
            if value is None:
                raise TFLiteImportError(f"tensor {t.index} ({t.name}): int64 tensors are not supported by NNAPI")
            if value.size and (value.min() < -2**31 or value.max() >= 2**31):
                raise TFLiteImportError(f"tensor {t.index} ({t.name}): int64 constant out of int32 range")
            value = value.astype(np.int32)
        scale = float(q.scales[0]) if q is not None and not q.per_channel else 0.0
        return OperandSpec(T.TENSOR_INT32, dims, scale, 0, value=value)
    if t.type in (UINT8, INT8, INT16):
        if q is None or not np.all(q.scales > 0):
            raise TFLiteImportError(f"tensor {t.index} ({t.name}): {t.type_name} tensor without quantization "
                                    f"parameters is not supported by NNAPI")
        if t.type == UINT8:
            return OperandSpec(T.TENSOR_QUANT8_ASYMM, dims, float(q.scales[0]), int(q.zero_points[0]), value=value)
        if t.type == INT16:
            return OperandSpec(T.TENSOR_QUANT16_SYMM, dims, float(q.scales[0]), 0, value=value)
        if q.per_channel:
            return OperandSpec(T.TENSOR_QUANT8_SYMM_PER_CHANNEL, dims, 0.0, 0,
                               ([float(s) for s in q.scales], q.dim), value)
        return OperandSpec(T.TENSOR_QUANT8_ASYMM_SIGNED, dims, float(q.scales[0]), int(q.zero_points[0]),
                           value=value)
    raise TFLiteImportError(f"tensor {t.index} ({t.name}): type {t.type_name} has no NNAPI operand type")


def numpy_dtype(t: Tensor) -> np.dtype:
    dt = NP_DTYPES.get(t.type)
    if dt is None:
        raise TFLiteImportError(f"tensor {t.index} ({t.name}): type {t.type_name} unsupported")
    return dt
