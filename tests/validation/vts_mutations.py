"""The VTS ValidateModel mutations (hardware/interfaces/neuralnetworks/*/vts/functional), applied
to corpus models: each yields (label, mutated model, preference) for a model that must be
rejected with INVALID_ARGUMENT. Mutations that cannot apply to a model are skipped, as in VTS."""
from __future__ import annotations

import copy
from functools import lru_cache
from typing import Callable, Iterator

from nngpu.json_models import TestCase, build_model, default_corpus_dir, load_cases
from nngpu.hal.types import (
    DataLocation,
    ExecutionPreference,
    Model,
    Operand,
    OperandExtraParams,
    OperandLifeTime as L,
    OperandType as T,
    OperandTypeRange,
    Operation,
    OperationType as Op,
    OperationTypeRange,
    SymmPerChannelQuantParams,
)
from nngpu.modelutil import fully_specified, nbytes_of

# Spread over versions, ops, operand types (quant, per-channel, float16, bool8), relaxed models,
# multi-operation graphs (_all_inputs_as_internal) and zero-sized temporaries.
SAMPLE = [
    ("V1_0", "add"),
    ("V1_0", "add_quant8_all_inputs_as_internal"),
    ("V1_0", "conv_quant8"),
    ("V1_0", "avg_pool_float_1"),
    ("V1_0", "concat_float_2"),
    ("V1_0", "softmax_float_1"),
    ("V1_0", "fully_connected_float_all_inputs_as_internal"),
    ("V1_1", "div_relaxed"),
    ("V1_1", "mean_quant8_1"),
    ("V1_1", "strided_slice"),
    ("V1_2", "add_v1_2_zero_sized"),
    ("V1_2", "conv2d_per_channel"),
    ("V1_2", "cast_float16_to_quant8"),
    ("V1_2", "equal_simple_float16"),
    ("V1_2", "dequantize_v1_2_3d_per_channel_first_dim"),
]

Mutated = tuple[str, Model, int]
FAST = int(ExecutionPreference.FAST_SINGLE_ANSWER)


@lru_cache(maxsize=1)
def sample_cases() -> tuple[TestCase, ...]:
    wanted = set(SAMPLE)
    root = default_corpus_dir()
    found = {(c.version, c.name): c for c in load_cases(root, ("V1_0", "V1_1", "V1_2"))
             if (c.version, c.name) in wanted}
    missing = wanted - set(found)
    assert not missing, f"sample cases missing from the corpus: {missing}"
    return tuple(found[k] for k in SAMPLE)


@lru_cache(maxsize=None)
def sample_model(version: str, name: str) -> Model:
    case = next(c for c in sample_cases() if (c.version, c.name) == (version, name))
    return build_model(case, flat=True)


def clone(m: Model) -> Model:
    """A deep copy of the graph that shares the (unpicklable) memory pools."""
    return Model(copy.deepcopy(m.operands), copy.deepcopy(m.operations), list(m.inputIndexes),
                 list(m.outputIndexes), bytes(m.operandValues), list(m.pools),
                 m.relaxComputationFloat32toFloat16, copy.deepcopy(m.extensionNameToPrefix))


def variant(m: Model, edit: Callable[[Model], None]) -> Model:
    out = clone(m)
    edit(out)
    return out


def _append_value(m: Model, size: int) -> DataLocation:
    off = (len(m.operandValues) + 7) // 8 * 8
    m.operandValues = bytes(m.operandValues) + b"\0" * (off - len(m.operandValues) + size)
    return DataLocation(0, off, size)


def _writer_of(m: Model, idx: int) -> int | None:
    return next((k for k, op in enumerate(m.operations) if idx in op.outputs), None)


SCALARS = (T.FLOAT16, T.FLOAT32, T.INT32, T.UINT32, T.BOOL)


# ---- operand mutations ---------------------------------------------------------------------
INVALID_OPERAND_TYPES = [
    int(OperandTypeRange.FUNDAMENTAL_MIN) - 1,
    13 + 1,                                    # 1.2 FUNDAMENTAL_MAX + 1: a 1.3 type
    int(OperandTypeRange.FUNDAMENTAL_MAX) + 1,
    int(OperandTypeRange.OEM_MIN) - 1,
    int(OperandTypeRange.OEM_MAX) + 1,
    0xFFFF_FFFF,                               # an extension type nobody declared
]


def operand_type(m: Model) -> Iterator[Mutated]:
    for i in range(len(m.operands)):
        for t in INVALID_OPERAND_TYPES:
            yield f"operand {i} type {t}", variant(m, lambda x: setattr(x.operands[i], "type", t)), FAST


def operand_rank(m: Model) -> Iterator[Mutated]:
    for i, o in enumerate(m.operands):
        if o.type in SCALARS:
            yield f"scalar operand {i} rank 1", variant(m, lambda x: setattr(x.operands[i], "dimensions", [0])), FAST
            yield f"scalar operand {i} dims [1]", variant(m, lambda x: setattr(x.operands[i], "dimensions", [1])), FAST


def _invalid_scale(t: int) -> float | None:
    if t in (*SCALARS, T.TENSOR_BOOL8, T.TENSOR_FLOAT16, T.TENSOR_FLOAT32, T.TENSOR_QUANT8_SYMM_PER_CHANNEL):
        return 1.0
    if t == T.TENSOR_INT32:
        return -1.0
    if t in (T.TENSOR_QUANT8_SYMM, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_QUANT16_ASYMM,
             T.TENSOR_QUANT16_SYMM):
        return 0.0
    return None


def operand_scale(m: Model) -> Iterator[Mutated]:
    for i, o in enumerate(m.operands):
        s = _invalid_scale(o.type)
        if s is not None:
            yield f"operand {i} scale {s}", variant(m, lambda x: setattr(x.operands[i], "scale", s)), FAST
            if s == 0.0:
                yield f"operand {i} scale -1", variant(m, lambda x: setattr(x.operands[i], "scale", -1.0)), FAST


INVALID_ZERO_POINTS = {
    T.TENSOR_QUANT8_ASYMM: [-1, 256],
    T.TENSOR_QUANT8_ASYMM_SIGNED: [-129, 128],
    T.TENSOR_QUANT8_SYMM: [-129, -1, 1, 128],
    T.TENSOR_QUANT16_ASYMM: [-1, 65536],
    T.TENSOR_QUANT16_SYMM: [-32769, -1, 1, 32768],
}


def operand_zero_point(m: Model) -> Iterator[Mutated]:
    for i, o in enumerate(m.operands):
        if o.type in (T.OEM, T.TENSOR_OEM_BYTE):
            continue
        for zp in INVALID_ZERO_POINTS.get(o.type, [1]):
            yield f"operand {i} zeroPoint {zp}", variant(m, lambda x: setattr(x.operands[i], "zeroPoint", zp)), FAST


def _set_lifetime(x: Model, i: int, lifetime: L, update_lists: bool) -> None:
    o = x.operands[i]
    if update_lists:
        x.inputIndexes = [k for k in x.inputIndexes if k != i]
        x.outputIndexes = [k for k in x.outputIndexes if k != i]
        if lifetime == L.SUBGRAPH_INPUT:
            x.inputIndexes.append(i)
        elif lifetime == L.SUBGRAPH_OUTPUT:
            x.outputIndexes.append(i)
    o.lifetime = lifetime
    o.location = _append_value(x, nbytes_of(o.type, o.dimensions)) if lifetime == L.CONSTANT_COPY else DataLocation()


def _constant_size(o: Operand) -> int:
    return nbytes_of(o.type, o.dimensions) if fully_specified(o.type, o.dimensions) else 0


def operand_lifetime(m: Model) -> Iterator[Mutated]:
    """Change whether an operand should have a writer (index lists kept consistent)."""
    for i, o in enumerate(m.operands):
        if o.lifetime in (L.SUBGRAPH_OUTPUT, L.TEMPORARY_VARIABLE):
            new = [L.SUBGRAPH_INPUT] + ([L.CONSTANT_COPY] if _constant_size(o) else [])
        elif o.lifetime in (L.CONSTANT_COPY, L.CONSTANT_REFERENCE, L.SUBGRAPH_INPUT):
            new = [L.TEMPORARY_VARIABLE, L.SUBGRAPH_OUTPUT]
        else:
            new = []
        for lt in new:
            yield f"operand {i} lifetime {o.lifetime.name} -> {lt.name}", \
                variant(m, lambda x: _set_lifetime(x, i, lt, True)), FAST
    for i in range(len(m.operands)):
        for bad in (-1, 7):
            yield f"operand {i} lifetime value {bad}", \
                variant(m, lambda x: setattr(x.operands[i], "lifetime", bad)), FAST


def operand_input_output(m: Model) -> Iterator[Mutated]:
    """Change whether an operand is a model input / output / neither, keeping whether it has a
    writer, with the index lists left as they were; and list an input as an output."""
    for i, o in enumerate(m.operands):
        new = {L.CONSTANT_COPY: L.SUBGRAPH_INPUT, L.CONSTANT_REFERENCE: L.SUBGRAPH_INPUT,
               L.SUBGRAPH_OUTPUT: L.TEMPORARY_VARIABLE, L.TEMPORARY_VARIABLE: L.SUBGRAPH_OUTPUT}.get(o.lifetime)
        if o.lifetime == L.SUBGRAPH_INPUT and _constant_size(o):
            new = L.CONSTANT_COPY
        if new is not None:
            yield f"operand {i} {o.lifetime.name} -> {new.name} (lists unchanged)", \
                variant(m, lambda x: _set_lifetime(x, i, new, False)), FAST
    for k in range(len(m.inputIndexes)):
        def swap(x: Model, k=k) -> None:
            x.outputIndexes.append(x.inputIndexes.pop(k))
        yield f"model input {k} listed as an output", variant(m, swap), FAST
    for k in range(len(m.outputIndexes)):
        def swap_out(x: Model, k=k) -> None:
            x.inputIndexes.append(x.outputIndexes.pop(k))
        yield f"model output {k} listed as an input", variant(m, swap_out), FAST


def number_of_consumers(m: Model) -> Iterator[Mutated]:
    for i, o in enumerate(m.operands):
        wrong = [o.numberOfConsumers + 1] + ([o.numberOfConsumers - 1] if o.numberOfConsumers else [])
        for n in wrong:
            yield f"operand {i} numberOfConsumers {n}", \
                variant(m, lambda x: setattr(x.operands[i], "numberOfConsumers", n)), FAST


# ---- graph mutations -----------------------------------------------------------------------
def _append_copy(x: Model, k: int, output_edit: Callable[[Operation], None] | None = None) -> None:
    op = copy.deepcopy(x.operations[k])
    if output_edit:
        output_edit(op)
    for i in op.inputs:
        x.operands[i].numberOfConsumers += 1
    x.operations.append(op)


def add_writer(m: Model) -> Iterator[Mutated]:
    """A second operation writes an operand that already has a writer or a value."""
    for k, op in enumerate(m.operations):
        yield f"operation {k} duplicated after itself", variant(m, lambda x: _append_copy(x, k)), FAST
        for j, out in enumerate(op.outputs):
            known = [i for i, o in enumerate(m.operands) if o.type == m.operands[out].type
                     and o.lifetime in (L.SUBGRAPH_INPUT, L.CONSTANT_COPY, L.CONSTANT_REFERENCE)
                     and o.dimensions == m.operands[out].dimensions]
            for i in known[:1]:
                def edit(new_op: Operation, j=j, i=i) -> None:
                    new_op.outputs[j] = i
                yield f"operation {k} output {j} redirected onto operand {i}", \
                    variant(m, lambda x, k=k, edit=edit: _append_copy(x, k, edit)), FAST


def execution_order(m: Model) -> Iterator[Mutated]:
    """Move an operation in front of the writer of one of its inputs."""
    for k, op in enumerate(m.operations):
        writers = {_writer_of(m, i) for i in op.inputs} - {None}
        for w in sorted(writers):
            def move(x: Model, k=k, w=w) -> None:
                x.operations.insert(w, x.operations.pop(k))
            yield f"operation {k} moved before its input's writer {w}", variant(m, move), FAST


# VTS mutateOperationOperandTypeSkip: inputs that legitimately take several types.
def _operand_type_change_is_valid(m: Model, i: int, t: int) -> bool:
    if t == m.operands[i].type or t in (T.OEM, T.TENSOR_OEM_BYTE):
        return True
    flexible = (T.TENSOR_FLOAT16, T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
    for op in m.operations:
        if op.type == Op.LSH_PROJECTION and i == op.inputs[1]:
            return True
        if op.type in (Op.CAST, Op.ARGMAX, Op.ARGMIN) and t in flexible:
            return True
        if op.type in (Op.QUANTIZE, Op.RANDOM_MULTINOMIAL) and i == op.inputs[0] \
                and t in (T.TENSOR_FLOAT16, T.TENSOR_FLOAT32):
            return True
        if op.type == Op.QUANTIZE and i == op.outputs[0] and t in (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED):
            return True
        if op.type == Op.DEQUANTIZE:
            if i == op.inputs[0] and t in (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_QUANT8_SYMM,
                                           T.TENSOR_QUANT8_SYMM_PER_CHANNEL):
                return True
            if i == op.outputs[0] and t in (T.TENSOR_FLOAT16, T.TENSOR_FLOAT32):
                return True
        if op.type in (Op.CONV_2D, Op.DEPTHWISE_CONV_2D, Op.GROUPED_CONV_2D, Op.TRANSPOSE_CONV_2D) \
                and i == op.inputs[1] and t in (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_SYMM_PER_CHANNEL):
            return True
        if op.type == Op.AXIS_ALIGNED_BBOX_TRANSFORM and i == op.inputs[1] \
                and t in (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED):
            return True
    return False


def _retype(o: Operand, t: T) -> None:
    """VTS mutateOperand: the operand becomes a well-formed operand of type t."""
    dims = o.dimensions or [1]
    o.type = t
    o.extraParams = None
    if t in SCALARS or t == T.SUBGRAPH:
        o.dimensions, o.scale, o.zeroPoint = [], 0.0, 0
    elif t in (T.TENSOR_BOOL8, T.TENSOR_FLOAT16, T.TENSOR_FLOAT32):
        o.dimensions, o.scale, o.zeroPoint = dims, 0.0, 0
    elif t == T.TENSOR_INT32:
        o.dimensions, o.zeroPoint = dims, 0
    elif t == T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        o.dimensions, o.scale, o.zeroPoint = dims, 0.0, 0
        o.extraParams = OperandExtraParams(channelQuant=SymmPerChannelQuantParams([1.0] * dims[0], 0))
    else:
        o.dimensions, o.scale = dims, o.scale or 1.0


def operation_operand_type(m: Model) -> Iterator[Mutated]:
    for i in range(len(m.operands)):
        for t in T:
            if t <= T.SUBGRAPH and not _operand_type_change_is_valid(m, i, t):
                yield f"operand {i} retyped {t.name}", variant(m, lambda x: _retype(x.operands[i], t)), FAST


INVALID_OPERATION_TYPES = [
    -1,
    94 + 1,                                   # 1.2 FUNDAMENTAL_MAX + 1: a 1.3 operation
    int(OperationTypeRange.FUNDAMENTAL_MAX) + 1,
    int(OperationTypeRange.OEM_MIN) - 1,
    int(OperationTypeRange.OEM_MAX) + 1,
    0x1_0000,                                 # an extension operation nobody declared
]


def operation_type(m: Model) -> Iterator[Mutated]:
    for k in range(len(m.operations)):
        for t in INVALID_OPERATION_TYPES:
            yield f"operation {k} type {t}", variant(m, lambda x: setattr(x.operations[k], "type", t)), FAST


def operand_index(m: Model) -> Iterator[Mutated]:
    bad = len(m.operands)
    for k, op in enumerate(m.operations):
        for field in ("inputs", "outputs"):
            for j in range(len(getattr(op, field))):
                def edit(x: Model, k=k, field=field, j=j) -> None:
                    getattr(x.operations[k], field)[j] = bad
                yield f"operation {k} {field[:-1]} {j} -> operand {bad}", variant(m, edit), FAST
    for field in ("inputIndexes", "outputIndexes"):
        for j in range(len(getattr(m, field))):
            def edit_io(x: Model, field=field, j=j) -> None:
                getattr(x, field)[j] = bad
            yield f"{field}[{j}] -> operand {bad}", variant(m, edit_io), FAST


def remove_write(m: Model) -> Iterator[Mutated]:
    """The operation writes a fresh operand instead, so the original is never written."""
    for k, op in enumerate(m.operations):
        for j, out in enumerate(op.outputs):
            def edit(x: Model, k=k, j=j) -> None:
                new = copy.deepcopy(x.operands[x.operations[k].outputs[j]])
                new.numberOfConsumers, new.lifetime = 0, L.TEMPORARY_VARIABLE
                x.operands.append(new)
                x.operations[k].outputs[j] = len(x.operands) - 1
            yield f"operation {k} output {j} no longer written", variant(m, edit), FAST


# Inputs whose removal can leave the operation well-formed (VTS removeOperationInputSkip):
# CONCATENATION's tensor list, and optional trailing layout / axis parameters.
def _input_removal_may_stay_valid(op: Operation, j: int) -> bool:
    n = len(op.inputs)
    optional_last = {Op.DEPTHWISE_CONV_2D: (12, 9), Op.CONV_2D: (11, 8), Op.AVERAGE_POOL_2D: (11, 8),
                     Op.MAX_POOL_2D: (11, 8), Op.L2_POOL_2D: (11, 8), Op.RESIZE_BILINEAR: (4,),
                     Op.SPACE_TO_DEPTH: (3,), Op.DEPTH_TO_SPACE: (3,), Op.BATCH_TO_SPACE_ND: (3,),
                     Op.SPACE_TO_BATCH_ND: (4,), Op.L2_NORMALIZATION: (2,), Op.LOCAL_RESPONSE_NORMALIZATION: (6,),
                     Op.SOFTMAX: (3,)}
    if op.type == Op.CONCATENATION:
        return n > 2 and j != n - 1
    if op.type == Op.CONV_2D and (n, j) in ((13, 12), (10, 9)):
        return True
    return j == n - 1 and n in optional_last.get(op.type, ())


def _drop_index(values: list[int], idx: int) -> list[int]:
    return [v - (v > idx) for v in values if v != idx]


def remove_operand(m: Model) -> Iterator[Mutated]:
    for i in range(len(m.operands)):
        users = [(op, op.inputs.index(i)) for op in m.operations if i in op.inputs]
        if any(_input_removal_may_stay_valid(op, j) for op, j in users) or \
                any(op.type == Op.SPLIT and i in op.outputs for op in m.operations):
            continue

        def edit(x: Model, i=i) -> None:
            del x.operands[i]
            for op in x.operations:
                op.inputs, op.outputs = _drop_index(op.inputs, i), _drop_index(op.outputs, i)
            x.inputIndexes, x.outputIndexes = _drop_index(x.inputIndexes, i), _drop_index(x.outputIndexes, i)
        yield f"operand {i} removed", variant(m, edit), FAST


def remove_operation(m: Model) -> Iterator[Mutated]:
    for k in range(len(m.operations)):
        def edit(x: Model, k=k) -> None:
            for i in x.operations[k].inputs:
                x.operands[i].numberOfConsumers -= 1
            del x.operations[k]
        yield f"operation {k} removed", variant(m, edit), FAST


def remove_operation_input(m: Model) -> Iterator[Mutated]:
    for k, op in enumerate(m.operations):
        for j in range(len(op.inputs)):
            if _input_removal_may_stay_valid(op, j):
                continue

            def edit(x: Model, k=k, j=j) -> None:
                x.operands[x.operations[k].inputs[j]].numberOfConsumers -= 1
                del x.operations[k].inputs[j]
            yield f"operation {k} input {j} removed", variant(m, edit), FAST


def remove_operation_output(m: Model) -> Iterator[Mutated]:
    for k, op in enumerate(m.operations):
        for j in range(len(op.outputs)):
            def edit(x: Model, k=k, j=j) -> None:
                del x.operations[k].outputs[j]
            yield f"operation {k} output {j} removed", variant(m, edit), FAST


def remove_model_io(m: Model) -> Iterator[Mutated]:
    """An index dropped from inputIndexes / outputIndexes; the operand keeps its lifetime."""
    for field in ("inputIndexes", "outputIndexes"):
        for j in range(len(getattr(m, field))):
            def edit(x: Model, field=field, j=j) -> None:
                del getattr(x, field)[j]
            yield f"{field}[{j}] removed", variant(m, edit), FAST


def _new_scalar(x: Model, lifetime: L, consumers: int) -> int:
    x.operands.append(Operand(T.INT32, [], consumers, 0.0, 0, lifetime))
    return len(x.operands) - 1


def add_operation_input(m: Model) -> Iterator[Mutated]:
    for k, op in enumerate(m.operations):
        n = len(op.inputs)
        if (op.type, n) in ((Op.L2_NORMALIZATION, 1), (Op.LOCAL_RESPONSE_NORMALIZATION, 5), (Op.SOFTMAX, 2)):
            continue  # an optional INT32 axis may follow

        def edit(x: Model, k=k) -> None:
            i = _new_scalar(x, L.SUBGRAPH_INPUT, 1)
            x.operations[k].inputs.append(i)
            x.inputIndexes.append(i)
        yield f"operation {k} given an extra input", variant(m, edit), FAST


def add_operation_output(m: Model) -> Iterator[Mutated]:
    for k, op in enumerate(m.operations):
        if op.type == Op.SPLIT:
            continue

        def edit(x: Model, k=k) -> None:
            i = _new_scalar(x, L.SUBGRAPH_OUTPUT, 0)
            x.operations[k].outputs.append(i)
            x.outputIndexes.append(i)
        yield f"operation {k} given an extra output", variant(m, edit), FAST


def execution_preference(m: Model) -> Iterator[Mutated]:
    for p in (int(ExecutionPreference.LOW_POWER) - 1, int(ExecutionPreference.SUSTAINED_SPEED) + 1):
        yield f"execution preference {p}", clone(m), p


MUTATIONS: dict[str, Callable[[Model], Iterator[Mutated]]] = {
    "operand_type": operand_type,
    "operand_rank": operand_rank,
    "operand_scale": operand_scale,
    "operand_zero_point": operand_zero_point,
    "operand_lifetime": operand_lifetime,
    "operand_input_output": operand_input_output,
    "number_of_consumers": number_of_consumers,
    "add_writer": add_writer,
    "execution_order": execution_order,
    "operation_operand_type": operation_operand_type,
    "operation_type": operation_type,
    "operand_index": operand_index,
    "remove_write": remove_write,
    "remove_operand": remove_operand,
    "remove_operation": remove_operation,
    "remove_operation_input": remove_operation_input,
    "remove_operation_output": remove_operation_output,
    "remove_model_io": remove_model_io,
    "add_operation_input": add_operation_input,
    "add_operation_output": add_operation_output,
    "execution_preference": execution_preference,
}
