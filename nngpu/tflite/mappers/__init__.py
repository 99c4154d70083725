"""TFLite operator -> NNAPI operation(s), following the TFLite NNAPI delegate's conventions.

One mapper per TFLite operator (the builtin name, or the custom code of a custom operator);
each takes an OpCtx (context.py) and emits one or more NNAPI operations. The families:
elementwise, conv, movement, reduce, recurrent, control_flow; common holds what they share
(requantization and lookup tables)."""
from __future__ import annotations

from . import control_flow, conv, elementwise, movement, recurrent, reduce
from .common import Mapper

MAPPERS: dict[str, Mapper] = {}
for _family in (elementwise, conv, movement, reduce, recurrent, control_flow):
    _clash = MAPPERS.keys() & _family.MAPPERS.keys()
    assert not _clash, f"operators mapped twice: {sorted(_clash)}"
    MAPPERS.update(_family.MAPPERS)

__all__ = ["MAPPERS", "Mapper"]
