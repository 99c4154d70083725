"""The names, shapes and dtypes of a model's inputs and outputs (named_model.py puts them with a
model; the TFLite importer makes them)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .hal.types import Operand, OperandType


@dataclass
class IOTensor:
    """One model input or output. A 0 in `shape` is an extent the request decides."""

    name: str
    shape: list[int]
    dtype: np.dtype
    scale: float = 0.0
    zero_point: int = 0
    computed: np.dtype | None = None  # the narrower dtype the model computes (int64 indices as int32)
    signature: list[int] | None = None  # a TFLite input's shape_signature, where -1 leaves extents open

    def fits_signature(self, shape: tuple[int, ...]) -> bool:
        """Whether `shape` is another shape this input's signature allows (a TFLite resize)."""
        sig = self.signature
        return sig is not None and len(shape) == len(sig) and all(s < 0 or s == d for s, d in zip(sig, shape))


def io_tensor(name: str, operand: Operand) -> IOTensor:
    """The IOTensor of a model input or output operand."""
    from .ops.lib.dtypes import dtype_of

    return IOTensor(name, list(operand.dimensions), dtype_of(OperandType(operand.type)), operand.scale,
                    operand.zeroPoint)


class NamedIO:
    """`input_names` / `output_names` of anything with `inputs` and `outputs` IOTensor lists."""

    inputs: list[IOTensor]
    outputs: list[IOTensor]

    @property
    def input_names(self) -> list[str]:
        return [t.name for t in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [t.name for t in self.outputs]
