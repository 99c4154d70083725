"""Enums and structs of the NNAPI HAL types.hal 1.0-1.3, with the spec's names and values.

Plain data only: no validation and no behaviour lives here. Where a struct changed between HAL
versions, the newest shape is the class and older shapes are documented on it; a field that an
older version lacks has a default, so 1.0-1.2 values are built with the same classes.

One module a job, all re-exported here (`from nngpu.hal.types import Model`): enums (enums and
constants), capabilities (what a device reports), model (operands, operations, models) and
execution (requests, results, timing, buffers, deadlines, the burst FMQ datums).
"""
from .capabilities import *  # noqa: F401,F403
from .enums import *  # noqa: F401,F403
from .execution import *  # noqa: F401,F403
from .model import *  # noqa: F401,F403
