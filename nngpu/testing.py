"""Build and run small models in tests: one-operation models from numpy values.

    out = run_op(OperationType.ADD,
                 [tensor(T.TENSOR_FLOAT32, a), tensor(T.TENSOR_FLOAT32, b), scalar(T.INT32, 0)],
                 [output(T.TENSOR_FLOAT32, [2, 3])])
Inputs given with `const=True` become CONSTANT_COPY operands, others model inputs; `omitted()`
is a NO_VALUE operand. Execution goes through the real Device / PreparedModel / shared pools.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .hal.types import (
    DataLocation,
    ErrorStatus,
    ExecutionPreference,
    MeasureTiming,
    Model,
    Operand,
    OperandExtraParams,
    OperandLifeTime,
    OperandType,
    Operation,
    Request,
    RequestArgument,
    SymmPerChannelQuantParams,
)
from .memory import allocate_shared
from .ops.lib.dtypes import dtype_of, is_tensor


@dataclass
class Value:
    type: OperandType
    value: np.ndarray | None
    dims: list[int]
    scale: float = 0.0
    zero_point: int = 0
    const: bool = False
    channel_quant: tuple[list[float], int] | None = None
    omitted: bool = False


def tensor(t: OperandType, value, scale: float = 0.0, zero_point: int = 0, const: bool = False,
           channel_quant: tuple[list[float], int] | None = None) -> Value:
    arr = np.asarray(value, dtype=dtype_of(t))
    return Value(t, arr, list(arr.shape), scale, zero_point, const, channel_quant)


def scalar(t: OperandType, value) -> Value:
    return Value(t, np.asarray(value, dtype=dtype_of(t)), [], const=True)


def omitted(t: OperandType, dims: list[int] | None = None) -> Value:
    return Value(t, None, dims or [], omitted=True)


@dataclass
class Out:
    type: OperandType
    dims: list[int]
    scale: float = 0.0
    zero_point: int = 0
    capacity: int | None = None  # bytes given to the output (default: what dims need, or 4 KiB)


def output(t: OperandType, dims: list[int] | None = None, scale: float = 0.0, zero_point: int = 0,
           capacity: int | None = None) -> Out:
    return Out(t, list(dims or []), scale, zero_point, capacity)


@dataclass
class OpResult:
    status: ErrorStatus
    outputs: list[np.ndarray] = field(default_factory=list)
    shapes: list[list[int]] = field(default_factory=list)


def single_op_model(op_type, inputs: list[Value], outputs: list[Out], relaxed: bool = False) -> Model:
    operands, values = [], bytearray()
    model_inputs = []
    for v in inputs:
        extra = None
        if v.channel_quant:
            extra = OperandExtraParams(channelQuant=SymmPerChannelQuantParams(list(v.channel_quant[0]), v.channel_quant[1]))
        if v.omitted:
            lifetime, loc = OperandLifeTime.NO_VALUE, DataLocation()
        elif v.const or not is_tensor(v.type):
            data = v.value.tobytes()
            off = (len(values) + 7) // 8 * 8
            values.extend(b"\0" * (off - len(values)))
            values.extend(data)
            lifetime, loc = OperandLifeTime.CONSTANT_COPY, DataLocation(0, off, len(data))
        else:
            lifetime, loc = OperandLifeTime.SUBGRAPH_INPUT, DataLocation()
            model_inputs.append(len(operands))
        operands.append(Operand(v.type, v.dims, 1, v.scale, v.zero_point, lifetime, loc, extra))
    first_out = len(operands)
    for o in outputs:
        operands.append(Operand(o.type, o.dims, 0, o.scale, o.zero_point, OperandLifeTime.SUBGRAPH_OUTPUT))
    outs = list(range(first_out, len(operands)))
    return Model(operands, [Operation(op_type, list(range(first_out)), outs)], model_inputs, outs,
                 bytes(values), [], relaxed)


def run_model(model: Model, inputs: list[np.ndarray], capacities: list[int], device=None, version: int = 12) -> OpResult:
    """Prepare and execute through the 1.2 entry points, or the 1.3 ones with version=13."""
    from .driver.callbacks import PreparedModelCallback
    from .driver.device import Device
    from .hal.types import OptionalTimeoutDuration, OptionalTimePoint, Priority
    from .modelutil import as_model_1_3

    device = device or Device("numpy")
    cb = PreparedModelCallback()
    if version >= 13:
        status = device.prepareModel_1_3(as_model_1_3(model), ExecutionPreference.FAST_SINGLE_ANSWER, Priority.MEDIUM,
                                         OptionalTimePoint(), [], [], bytes(32), cb)
    else:
        status = device.prepareModel_1_2(model, ExecutionPreference.FAST_SINGLE_ANSWER, [], [], bytes(32), cb)
    cb.wait(60)
    if status != ErrorStatus.NONE or cb.status != ErrorStatus.NONE:
        return OpResult(ErrorStatus(status if status != ErrorStatus.NONE else cb.status))
    prepared = cb.prepared_model
    blob = bytearray()
    in_args = []
    for arr in inputs:
        off = (len(blob) + 7) // 8 * 8
        blob.extend(b"\0" * (off - len(blob)))
        blob.extend(np.ascontiguousarray(arr).tobytes())
        in_args.append(RequestArgument(False, DataLocation(0, off, arr.nbytes), list(arr.shape)))
    in_pool = allocate_shared(max(len(blob), 1))
    in_pool.map()[: len(blob)] = blob
    out_args, off = [], 0
    for cap in capacities:
        out_args.append(RequestArgument(False, DataLocation(1, off, cap), []))
        off += (cap + 7) // 8 * 8
    out_pool = allocate_shared(max(off, 1))
    request = Request(in_args, out_args, [in_pool, out_pool])
    if version >= 13:
        status, shapes, _ = prepared.executeSynchronously_1_3(request, MeasureTiming.NO, OptionalTimePoint(),
                                                               OptionalTimeoutDuration())
    else:
        status, shapes, _ = prepared.executeSynchronously(request, MeasureTiming.NO)
    if status != ErrorStatus.NONE:
        return OpResult(ErrorStatus(status), [], [s.dimensions for s in shapes])
    results = []
    main = as_model_1_3(model).main
    for k, shape in enumerate(shapes):
        operand = main.operands[main.outputIndexes[k]]
        dt = dtype_of(operand.type)
        n = int(np.prod(shape.dimensions)) if shape.dimensions else 1
        results.append(out_pool.array(dt, out_args[k].location.offset, n).copy().reshape(shape.dimensions))
    return OpResult(ErrorStatus.NONE, results, [s.dimensions for s in shapes])


def run_op(op_type, inputs: list[Value], outputs: list[Out], relaxed: bool = False, device=None,
           version: int = 12) -> OpResult:
    """Run one operation through the driver (HAL 1.2 entry points, or 1.3 with version=13);
    OpResult.status is the first failing ErrorStatus."""
    model = single_op_model(op_type, inputs, outputs, relaxed)
    feeds = [v.value for v in inputs if not v.omitted and not v.const and is_tensor(v.type)]
    caps = []
    for o in outputs:
        if o.capacity is not None:
            caps.append(o.capacity)
        elif o.dims and all(d > 0 for d in o.dims):
            caps.append(max(int(np.prod(o.dims)) * dtype_of(o.type).itemsize, 1))
        else:
            caps.append(1 << 16)
    return run_model(model, feeds, caps, device, version)
