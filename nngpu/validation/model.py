"""Model rules (types.hal Model / Subgraph / Operand / Operation, 1.0-1.3): every failure raises
ValidationError naming the subgraph, operand or operation index. `validate_model` returns the
lowest HAL version whose rules (and enums) the model satisfies: V1_0 to V1_3, or AIDL_V2 /
AIDL_V3 for what NNAPI feature levels 6 and 7 added (four operations, RESHAPE of TENSOR_INT32,
RSQRT of quantized tensors)."""
from __future__ import annotations

from typing import Any

from ..hal.types import ExecutionPreference, Model, Model_1_3, OperandLifeTime as L, Priority
from ..modelutil import as_model_1_3, read_constant
from ..ops import load_all
from ..ops.registry import HalVersion
from .checks import boolean, byte_buffer_size, is_int, memory_size, seq
from .errors import ValidationError
from .graph import check_execution_order, check_io_indexes, check_no_reference_cycles
from .operand import OperandSpace, check_operand
from .operation import check_op_rules, check_signature, constant_reader, operand_indexes, operation_type


def _graph_name(g: int) -> str:
    return "main" if g == 0 else f"referenced[{g - 1}]"


def _check_extension_prefixes(entries: Any) -> HalVersion:
    entries = seq(entries, "extensionNameToPrefix")
    names, prefixes = set(), set()
    for k, e in enumerate(entries):
        name, prefix = getattr(e, "name", None), getattr(e, "prefix", None)
        if not isinstance(name, str) or not is_int(prefix) or not 0 <= prefix <= 0xFFFF:
            raise ValidationError(f"extensionNameToPrefix[{k}] is malformed")
        if name in names or prefix in prefixes:
            raise ValidationError(f"extensionNameToPrefix[{k}]: name or prefix mapped twice")
        names.add(name)
        prefixes.add(prefix)
    return HalVersion.V1_2 if entries else HalVersion.V1_0


def _check_subgraph(m: Model_1_3, g: int, graph: Any, space: OperandSpace, read_value) -> HalVersion:
    where = _graph_name(g)
    try:
        operands, operations = graph.operands, graph.operations
        input_indexes, output_indexes = graph.inputIndexes, graph.outputIndexes
    except AttributeError:
        raise ValidationError(f"{where} is not a Subgraph") from None
    operands, operations = seq(operands, f"{where}.operands"), seq(operations, f"{where}.operations")
    if g == 0 and (not operands or not operations):
        raise ValidationError("the main subgraph has no operands or no operations")
    version = HalVersion.V1_0
    for i, operand in enumerate(operands):
        version = max(version, check_operand(operand, space, f"{where} operand {i}"))
    check_io_indexes(input_indexes, operands, L.SUBGRAPH_INPUT, where)
    check_io_indexes(output_indexes, operands, L.SUBGRAPH_OUTPUT, where)
    types = []
    for k, op in enumerate(operations):
        what = f"{where} operation {k}"
        op_type = operation_type(getattr(op, "type", None), what)
        operand_indexes(op, len(operands), what)
        types.append(op_type)
    check_execution_order(operations, operands, where)
    for k, (op, op_type) in enumerate(zip(operations, types)):
        what = f"{where} operation {k}"
        v = check_signature(op, op_type, operands, what)
        v = check_op_rules(op, op_type, operands, v, read_value, m.relaxComputationFloat32toFloat16,
                           m.referenced, what)
        version = max(version, v)
    return version


def _validate(model: Model | Model_1_3) -> HalVersion:
    if not isinstance(model, (Model, Model_1_3)):
        raise ValidationError(f"not a Model: {type(model).__name__}")
    m = as_model_1_3(model)
    version = HalVersion.V1_0
    if boolean(m.relaxComputationFloat32toFloat16, "relaxComputationFloat32toFloat16"):
        version = HalVersion.V1_1
    version = max(version, _check_extension_prefixes(m.extensionNameToPrefix))
    referenced = seq(m.referenced, "referenced")
    if referenced:
        version = HalVersion.V1_3
    pools = seq(m.pools, "pools")
    space = OperandSpace(byte_buffer_size(m.operandValues, "operandValues"),
                         [memory_size(p, f"pool {k}") for k, p in enumerate(pools)], len(referenced))
    read_value = constant_reader(lambda operand: read_constant(m, operand))
    graphs = [m.main, *referenced]
    for g, graph in enumerate(graphs):
        version = max(version, _check_subgraph(m, g, graph, space, read_value))
    if referenced:
        check_no_reference_cycles(graphs)
    return version


def validate_model(model: Model | Model_1_3) -> HalVersion:
    load_all()  # op signatures decide validity; make sure every family has registered
    try:
        return _validate(model)
    except ValidationError:
        raise
    except Exception as e:  # malformed structures are invalid arguments, never crashes
        raise ValidationError(f"malformed model: {type(e).__name__}: {e}") from e


def validate_execution_preference(preference: Any) -> None:
    if not is_int(preference) or preference not in {int(p) for p in ExecutionPreference}:
        raise ValidationError(f"bad execution preference {preference!r}")


def validate_priority(priority: Any) -> None:
    if not is_int(priority) or priority not in {int(p) for p in Priority}:
        raise ValidationError(f"bad priority {priority!r}")

