"""Small, logic-only helpers over HAL model data shared by validation, the driver and the CTS."""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from .hal.types import Model, Model_1_3, Operand, OperandLifeTime, Subgraph
from .ops.lib.dtypes import DTYPES, dtype_of, is_tensor


def as_model_1_3(model: Model | Model_1_3) -> Model_1_3:
    """A 1.0-1.2 flat Model seen as a 1.3 Model with one main subgraph (no copy of data)."""
    if isinstance(model, Model_1_3):
        return model
    main = Subgraph(model.operands, model.operations, model.inputIndexes, model.outputIndexes)
    return Model_1_3(main, [], model.operandValues, model.pools,
                     model.relaxComputationFloat32toFloat16, model.extensionNameToPrefix)


def relaxed_model(model: Model | Model_1_3) -> Model | Model_1_3:
    """The model with relaxComputationFloat32toFloat16 set: float32 may be computed at float16
    range and precision (a shallow copy: the graph and values are shared)."""
    return dataclasses.replace(model, relaxComputationFloat32toFloat16=True)


def count_consumers(operands: list[Operand], operations: list) -> None:
    """Set each operand's numberOfConsumers to how many operation inputs read it, for builders
    that assemble a subgraph operation by operation."""
    for operand in operands:
        operand.numberOfConsumers = 0
    for operation in operations:
        for i in operation.inputs:
            operands[i].numberOfConsumers += 1


def num_elements(dims) -> int:
    return int(math.prod(dims)) if len(dims) else 1


def nbytes_of(operand_type: int, dims) -> int:
    """Bytes of a value of this type and shape (scalars: one element)."""
    if operand_type not in DTYPES:
        return 0
    return dtype_of(operand_type).itemsize * (num_elements(dims) if is_tensor(operand_type) else 1)


def fully_specified(operand_type: int, dims) -> bool:
    """True when every extent is known (a tensor of unknown rank is never fully specified)."""
    if not is_tensor(operand_type):
        return True
    return len(dims) > 0 and all(d > 0 for d in dims)


def merge_dims(model_dims, request_dims) -> list[int] | None:
    """Combine an operand's model dimensions with a request's; None if they conflict."""
    if not request_dims:
        return list(model_dims)
    if model_dims and len(model_dims) != len(request_dims):
        return None
    if not model_dims:
        return list(request_dims)
    out = []
    for m, r in zip(model_dims, request_dims):
        if m and r and m != r:
            return None
        out.append(m or r)
    return out


def read_constant(model: Model_1_3, operand: Operand) -> np.ndarray:
    """The value of a CONSTANT_COPY / CONSTANT_REFERENCE operand as a numpy array: a read-only view
    of operandValues when that is immutable `bytes` (a model's weights are then held once),
    else a copy."""
    loc = operand.location
    if operand.lifetime == OperandLifeTime.CONSTANT_COPY:
        arr = np.frombuffer(memoryview(model.operandValues)[loc.offset : loc.offset + loc.length], np.uint8)
        if not isinstance(model.operandValues, bytes):
            arr = arr.copy()
    else:  # a copy too; pread where the pool is not sealed (nngpu.memory)
        arr = model.pools[loc.poolIndex].read(loc.offset, loc.length)
    arr = arr.view(dtype_of(operand.type))
    if is_tensor(operand.type):
        return arr.reshape(operand.dimensions)
    return arr.reshape(())
