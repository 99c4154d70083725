"""Individual model and request rules of types.hal 1.0-1.3, on small hand-built models."""
from __future__ import annotations

import copy

import numpy as np
import pytest

from nngpu.json_models import build_model, build_request, default_corpus_dir, load_cases
from nngpu.driver.device import Device
from nngpu.hal.types import (
    DataLocation,
    ErrorStatus,
    ExtensionNameAndPrefix,
    MemoryPool,
    Model,
    Model_1_3,
    Operand,
    OperandExtraParams,
    OperandLifeTime as L,
    OperandType as T,
    OperationType as Op,
    Request,
    RequestArgument,
    SymmPerChannelQuantParams,
)
from nngpu.memory import allocate_shared
from nngpu.ops.registry import HalVersion, OpError, lookup
from nngpu.testing import output, scalar, single_op_model, tensor
from nngpu.validation import (
    ValidationError,
    validate_execution_preference,
    validate_model,
    validate_priority,
    validate_request,
)

X = np.zeros((2, 3), np.float32)


def add_model(t: T = T.TENSOR_FLOAT32, relaxed: bool = False) -> Model:
    """ADD(input 0, constant 1, activation 2) -> output 3."""
    x = X.astype(np.float16) if t == T.TENSOR_FLOAT16 else X
    return single_op_model(Op.ADD, [tensor(t, x), tensor(t, x, const=True), scalar(T.INT32, 0)],
                           [output(t, [2, 3])], relaxed)


def per_channel_model(scales=(0.5, 0.25), channel_dim: int = 0) -> Model:
    q = np.zeros((2, 3), np.int8)
    return single_op_model(Op.DEQUANTIZE, [tensor(T.TENSOR_QUANT8_SYMM_PER_CHANNEL, q,
                                                  channel_quant=(list(scales), channel_dim))],
                           [output(T.TENSOR_FLOAT32, [2, 3])])


def invalid(model, match: str | None = None) -> None:
    with pytest.raises(ValidationError, match=match):
        validate_model(model)


def edited(model: Model, edit) -> Model:
    m = copy.deepcopy(model)
    edit(m)
    return m


# ---- versions ------------------------------------------------------------------------------
def test_version_is_the_lowest_that_expresses_the_model():
    assert validate_model(add_model()) == HalVersion.V1_0
    assert validate_model(add_model(relaxed=True)) == HalVersion.V1_1
    assert validate_model(add_model(T.TENSOR_FLOAT16)) == HalVersion.V1_2
    assert validate_model(per_channel_model()) == HalVersion.V1_2
    unknown_rank = edited(add_model(), lambda m: setattr(m.operands[3], "dimensions", []))
    assert validate_model(unknown_rank) == HalVersion.V1_2
    named = edited(add_model(), lambda m: m.extensionNameToPrefix.append(ExtensionNameAndPrefix("a.b", 1)))
    assert validate_model(named) == HalVersion.V1_2


def test_entry_point_rejects_a_model_of_a_later_version():
    dev = Device("numpy")
    assert dev.getSupportedOperations(add_model(relaxed=True))[0] == ErrorStatus.INVALID_ARGUMENT
    assert dev.getSupportedOperations_1_1(add_model(relaxed=True)) == (ErrorStatus.NONE, [True])
    assert dev.getSupportedOperations_1_1(add_model(T.TENSOR_FLOAT16))[0] == ErrorStatus.INVALID_ARGUMENT
    assert dev.getSupportedOperations_1_2(add_model(T.TENSOR_FLOAT16)) == (ErrorStatus.NONE, [True])


def test_op_rule_that_holds_from_a_later_version_raises_the_version(monkeypatch):
    spec = lookup(Op.ADD)

    def only_from_1_2(ctx):
        if ctx.version < HalVersion.V1_2:
            raise OpError("needs 1.2")
    monkeypatch.setattr(spec, "validate", only_from_1_2)
    assert validate_model(add_model()) == HalVersion.V1_2


def test_op_rule_that_crashes_is_invalid_not_an_exception(monkeypatch):
    monkeypatch.setattr(lookup(Op.ADD), "validate", lambda ctx: 1 / 0)
    invalid(add_model(), "ZeroDivisionError")


def test_oem_and_unregistered_operations_are_unsupported_not_invalid():
    m = edited(add_model(), lambda m: setattr(m.operations[0], "type", Op.OEM_OPERATION))
    assert validate_model(m) == HalVersion.V1_0
    assert Device("numpy").getSupportedOperations(m) == (ErrorStatus.NONE, [False])


# ---- operands ------------------------------------------------------------------------------
@pytest.mark.parametrize("t", [-1, 16, 9999, 10002, 0x10000, "TENSOR_FLOAT32", None, 3.0, True])
def test_operand_type_outside_the_enum(t):
    invalid(edited(add_model(), lambda m: setattr(m.operands[3], "type", t)), "operand 3")


@pytest.mark.parametrize("field,value", [
    ("dimensions", None), ("dimensions", [-1, 3]), ("dimensions", [2.0, 3]), ("dimensions", [1 << 32, 3]),
    ("numberOfConsumers", -1), ("numberOfConsumers", None), ("scale", "0"), ("scale", None),
    ("zeroPoint", 0.5), ("zeroPoint", 1 << 31), ("lifetime", None), ("lifetime", 99), ("location", None),
    ("extraParams", "none"),
])
def test_malformed_operand_fields(field, value):
    invalid(edited(add_model(), lambda m: setattr(m.operands[1], field, value)), "operand 1")


@pytest.mark.parametrize("edit", [
    lambda m: setattr(m, "operands", None),
    lambda m: setattr(m, "operations", "ADD"),
    lambda m: setattr(m.operations[0], "inputs", None),
    lambda m: setattr(m.operations[0], "outputs", [3.0]),
    lambda m: setattr(m, "inputIndexes", [None]),
    lambda m: setattr(m, "operandValues", "text"),
    lambda m: setattr(m, "pools", [object()]),
    lambda m: setattr(m, "pools", None),
    lambda m: setattr(m, "relaxComputationFloat32toFloat16", "yes"),
    lambda m: setattr(m, "extensionNameToPrefix", [("a", 1)]),
    lambda m: m.operands.__setitem__(0, "operand"),
    lambda m: m.operations.__setitem__(0, None),
], ids=lambda f: "")
def test_malformed_model_structures_are_invalid_not_crashes(edit):
    m = edited(add_model(), edit)
    invalid(m)
    assert Device("numpy").getSupportedOperations_1_2(m) == (ErrorStatus.INVALID_ARGUMENT, [])


@pytest.mark.parametrize("model", [None, 42, "model", Request([], [])])
def test_not_a_model(model):
    invalid(model)


def test_scalar_has_rank_zero_and_constant_tensor_a_known_shape():
    invalid(edited(add_model(), lambda m: setattr(m.operands[2], "dimensions", [1])), "scalar")
    invalid(edited(add_model(), lambda m: setattr(m.operands[1], "dimensions", [])), "constant tensor")
    invalid(edited(add_model(), lambda m: setattr(m.operands[1], "dimensions", [0, 3])), "fully specified")


@pytest.mark.parametrize("t,scale,zp,ok", [
    (T.TENSOR_QUANT8_ASYMM, 0.5, 0, True), (T.TENSOR_QUANT8_ASYMM, 0.5, 255, True),
    (T.TENSOR_QUANT8_ASYMM, 0.5, 256, False), (T.TENSOR_QUANT8_ASYMM, 0.0, 0, False),
    (T.TENSOR_QUANT8_ASYMM, float("nan"), 0, False), (T.TENSOR_QUANT8_ASYMM, float("inf"), 0, False),
    (T.TENSOR_QUANT8_ASYMM_SIGNED, 0.5, -128, True), (T.TENSOR_QUANT8_ASYMM_SIGNED, 0.5, 128, False),
    (T.TENSOR_QUANT8_SYMM, 0.5, 0, True), (T.TENSOR_QUANT8_SYMM, 0.5, 1, False),
    (T.TENSOR_QUANT16_SYMM, 0.5, 0, True), (T.TENSOR_QUANT16_SYMM, 0.5, -1, False),
    (T.TENSOR_QUANT16_ASYMM, 0.5, 65535, True), (T.TENSOR_QUANT16_ASYMM, 0.5, 65536, False),
    (T.TENSOR_QUANT16_ASYMM, -0.5, 0, False),
    (T.TENSOR_INT32, 0.25, 0, True), (T.TENSOR_INT32, -1.0, 0, False), (T.TENSOR_INT32, 0.0, 1, False),
    (T.TENSOR_FLOAT32, 1.0, 0, False), (T.TENSOR_FLOAT16, 0.0, 1, False), (T.TENSOR_BOOL8, 1.0, 0, False),
    (T.FLOAT32, 1.0, 0, False), (T.INT32, 0.0, 1, False), (T.BOOL, 0.5, 0, False),
    (T.TENSOR_OEM_BYTE, 7.0, 9, True),
])
def test_scale_and_zero_point_per_type(t, scale, zp, ok):
    """Checked on an unused model input, so only the operand rules decide."""
    def add_input(m):
        dims = [] if t in (T.FLOAT32, T.INT32, T.BOOL) else [2]
        m.operands.append(Operand(t, dims, 0, scale, zp, L.SUBGRAPH_INPUT))
        m.inputIndexes.append(len(m.operands) - 1)
    m = edited(add_model(), add_input)
    if ok:
        validate_model(m)
    else:
        invalid(m, "operand 4")


def test_per_channel_quant_params():
    validate_model(per_channel_model())
    validate_model(per_channel_model((0.5, 0.5, 0.5), 1))
    invalid(edited(per_channel_model(), lambda m: setattr(m.operands[0], "extraParams", None)), "needs channelQuant")
    invalid(per_channel_model((0.5, 0.5, 0.5), 2), "channelDim")
    invalid(per_channel_model((0.5,)), "channel scales")
    invalid(per_channel_model((0.5, 0.0)), "not positive")
    invalid(per_channel_model((0.5, -1.0)), "not positive")
    invalid(edited(per_channel_model(), lambda m: setattr(m.operands[0], "scale", 0.5)), "scale 0")
    invalid(edited(per_channel_model(), lambda m: setattr(m.operands[0], "dimensions", [0, 3])), "unknown")
    invalid(edited(per_channel_model(), lambda m: m.operands[0].extraParams.__setattr__("extension", b"x")),
            "extension")


def test_extra_params_only_on_the_per_channel_type():
    cq = OperandExtraParams(channelQuant=SymmPerChannelQuantParams([1.0, 1.0], 0))
    invalid(edited(add_model(), lambda m: setattr(m.operands[0], "extraParams", cq)), "channelQuant is only")
    ext = OperandExtraParams(extension=b"\1")
    invalid(edited(add_model(), lambda m: setattr(m.operands[0], "extraParams", ext)), "extension")
    validate_model(edited(add_model(), lambda m: setattr(m.operands[0], "extraParams", OperandExtraParams())))


# ---- lifetimes and locations ---------------------------------------------------------------
def test_constant_copy_location():
    invalid(edited(add_model(), lambda m: setattr(m.operands[1].location, "offset", 8)), "outside")
    invalid(edited(add_model(), lambda m: setattr(m.operands[1].location, "length", 20)), "length 20")
    invalid(edited(add_model(), lambda m: setattr(m.operands[1].location, "poolIndex", 1)), "poolIndex 0")
    invalid(edited(add_model(), lambda m: setattr(m.operands[1].location, "offset", -8)), "uint32")


def test_non_constant_lifetimes_need_a_zero_location():
    for i in (0, 3):
        invalid(edited(add_model(), lambda m: setattr(m.operands[i], "location", DataLocation(0, 0, 4))),
                "all-zero location")


def test_constant_reference_into_a_pool():
    pool = allocate_shared(64)

    def to_pool(m, loc=DataLocation(0, 8, 24)):
        m.operands[1].lifetime, m.operands[1].location = L.CONSTANT_REFERENCE, loc
        m.pools = [pool]
    base = add_model()
    ok = copy.copy(base)
    ok.operands = copy.deepcopy(base.operands)
    to_pool(ok)
    assert validate_model(ok) == HalVersion.V1_0
    for loc, match in ((DataLocation(1, 0, 24), "pool 1 of 1"), (DataLocation(0, 48, 24), "outside"),
                       (DataLocation(0, 0, 12), "length 12")):
        bad = copy.copy(base)
        bad.operands = copy.deepcopy(base.operands)
        to_pool(bad, loc)
        invalid(bad, match)
    closed = allocate_shared(64)
    closed.close()
    bad = copy.copy(ok)
    bad.pools = [closed]
    invalid(bad, "closed")


def test_no_value_operand_is_a_known_value_with_no_location():
    def add_omitted(m):  # an unused omitted operand: only the operand rules apply
        m.operands.append(Operand(T.TENSOR_FLOAT32, [0], 0, 0.0, 0, L.NO_VALUE))
    m = edited(add_model(), add_omitted)
    validate_model(m)
    invalid(edited(m, lambda m: setattr(m.operands[4].location, "length", 4)), "all-zero location")


def test_io_indexes():
    invalid(edited(add_model(), lambda m: m.inputIndexes.append(0)), "listed twice")
    invalid(edited(add_model(), lambda m: setattr(m, "inputIndexes", [])), "at least one input")
    invalid(edited(add_model(), lambda m: setattr(m, "inputIndexes", [1])), "lifetime CONSTANT_COPY")
    invalid(edited(add_model(), lambda m: setattr(m, "outputIndexes", [4])), "output 0 is operand 4")


def test_graph_order_and_writers():
    chain = single_op_model(Op.ADD, [tensor(T.TENSOR_FLOAT32, X), tensor(T.TENSOR_FLOAT32, X, const=True),
                                     scalar(T.INT32, 0)], [output(T.TENSOR_FLOAT32, [2, 3])])

    def second_add(m):  # 3 becomes a temporary feeding ADD(3, 1, 2) -> 4
        m.operands[3].lifetime, m.operands[3].numberOfConsumers = L.TEMPORARY_VARIABLE, 1
        m.operands[1].numberOfConsumers += 1
        m.operands[2].numberOfConsumers += 1
        m.operands.append(Operand(T.TENSOR_FLOAT32, [2, 3], 0, 0.0, 0, L.SUBGRAPH_OUTPUT))
        m.operations.append(copy.deepcopy(m.operations[0]))
        m.operations[1].inputs, m.operations[1].outputs = [3, 1, 2], [4]
        m.outputIndexes = [4]
    two = edited(chain, second_add)
    assert validate_model(two) == HalVersion.V1_0
    invalid(edited(two, lambda m: m.operations.reverse()), "read before it is written")
    invalid(edited(two, lambda m: setattr(m.operations[1], "outputs", [3])), "already written")
    invalid(edited(two, lambda m: setattr(m.operands[3], "numberOfConsumers", 2)), "numberOfConsumers")

    def drop_second(m):
        for i in m.operations.pop().inputs:
            m.operands[i].numberOfConsumers -= 1
    invalid(edited(two, drop_second), "operand 4 is never written")


def test_main_graph_cannot_be_empty():
    invalid(edited(add_model(), lambda m: setattr(m, "operations", [])), "no operations")


# ---- 1.3 subgraphs -------------------------------------------------------------------------
def _if_model() -> Model_1_3:
    case = next(c for c in load_cases(default_corpus_dir(), ("V1_3",)) if c.name == "if_simple_true")
    return build_model(case)


def _subgraph_operand(offset: int) -> Operand:
    return Operand(T.SUBGRAPH, [], 0, 0.0, 0, L.SUBGRAPH, DataLocation(0, offset, 0))


def test_subgraph_references():
    m = _if_model()
    assert validate_model(m) == HalVersion.V1_3
    sub = next(i for i, o in enumerate(m.main.operands) if o.lifetime == L.SUBGRAPH)
    bad = copy.deepcopy(m)
    bad.main.operands[sub].location.offset = len(m.referenced)
    invalid(bad, f"references subgraph {len(m.referenced)}")
    bad = copy.deepcopy(m)
    bad.main.operands[sub].lifetime = L.CONSTANT_COPY
    invalid(bad)
    bad = copy.deepcopy(m)
    bad.referenced[0].operands.append(_subgraph_operand(0))  # referenced[0] refers to itself
    invalid(bad, "cycle")
    bad = copy.deepcopy(m)
    bad.referenced[0].operands.append(_subgraph_operand(1))
    bad.referenced[1].operands.append(_subgraph_operand(0))
    invalid(bad, "cycle")
    flat = Model(m.main.operands, m.main.operations, m.main.inputIndexes, m.main.outputIndexes,
                 m.operandValues, m.pools)
    invalid(flat, "references subgraph")  # a flat model has no referenced subgraphs


# ---- execution preference and priority -----------------------------------------------------
@pytest.mark.parametrize("value", [-1, 3, "FAST", None, 1.0])
def test_bad_preference_and_priority(value):
    with pytest.raises(ValidationError):
        validate_execution_preference(value)
    with pytest.raises(ValidationError):
        validate_priority(value)
    validate_execution_preference(2)
    validate_priority(0)


# ---- requests ------------------------------------------------------------------------------
def _request(dims=None, pool=None):
    pool = pool or allocate_shared(64)
    return Request([RequestArgument(False, DataLocation(0, 0, 24), dims or [])],
                   [RequestArgument(False, DataLocation(0, 24, 24), [])], [pool])


def test_request_dimensions_against_the_model():
    m = add_model()
    validate_request(_request(), m)
    validate_request(_request([2, 3]), m)
    for dims, match in (([2, 4], "dimension 1"), ([2, 3, 1], "rank"), ([6], "rank")):
        with pytest.raises(ValidationError, match=match):
            validate_request(_request(dims), m)
    open_dims = edited(m, lambda m: setattr(m.operands[0], "dimensions", [0, 3]))
    validate_request(_request([5, 3]), open_dims)
    with pytest.raises(ValidationError, match="not fully specified"):
        validate_request(_request(), open_dims)
    with pytest.raises(ValidationError, match="unspecified"):
        validate_request(_request([0, 3]), open_dims)
    unknown_out = edited(m, lambda m: setattr(m.operands[3], "dimensions", []))
    r = _request()
    r.outputs[0].dimensions = [2, 0]  # outputs may stay unspecified (dynamic output shape)
    validate_request(r, unknown_out)


def test_scalar_input_takes_no_dimensions():
    m = edited(add_model(), lambda m: setattr(m.operands[2], "lifetime", L.SUBGRAPH_INPUT))
    m.operands[2].location = DataLocation()
    m.inputIndexes.append(2)
    r = _request()
    r.inputs.append(RequestArgument(False, DataLocation(0, 48, 4), [1]))
    with pytest.raises(ValidationError, match="scalar"):
        validate_request(r, m)


def test_memory_pool_union():
    m = add_model()
    mem = allocate_shared(64)
    validate_request(_request(pool=MemoryPool(hidlMemory=mem)), m)
    # a driver-allocated buffer: offsets are the buffer table's business
    token = _request(pool=MemoryPool(token=1))
    token.inputs[0].location = DataLocation(0, 0, 0)
    validate_request(token, m)
    for bad in (MemoryPool(), MemoryPool(hidlMemory=mem, token=1), MemoryPool(token=-1), MemoryPool(hidlMemory=b"x")):
        with pytest.raises(ValidationError):
            validate_request(_request(pool=bad), m)


def test_corpus_requests_validate():
    for case in load_cases(default_corpus_dir(), ("V1_0",)):
        if case.name in ("add", "conv_quant8", "avg_pool_float_1"):
            validate_request(build_request(case).request, build_model(case))


def test_1_3_entry_points_reject_an_invalid_subgraph_model():
    from nngpu.driver.callbacks import PreparedModelCallback
    from nngpu.hal.types import ExecutionPreference, OptionalTimePoint, Priority

    dev = Device("numpy")
    m = _if_model()
    assert dev.getSupportedOperations_1_3(m)[0] == ErrorStatus.NONE
    m.referenced[0].operands.append(_subgraph_operand(0))
    assert dev.getSupportedOperations_1_3(m) == (ErrorStatus.INVALID_ARGUMENT, [])
    cb = PreparedModelCallback()
    status = dev.prepareModel_1_3(m, ExecutionPreference.FAST_SINGLE_ANSWER, Priority.MEDIUM, OptionalTimePoint(),
                                  [], [], bytes(32), cb)
    assert status == ErrorStatus.INVALID_ARGUMENT
    assert cb.wait(10) and cb.get() == (ErrorStatus.INVALID_ARGUMENT, None)
