"""IF and WHILE: every outer operand must agree with the referenced subgraphs' inputs and
outputs in type, rank and dimensions (where both give them), scale, zeroPoint and extraParams
(types.hal 1.3, IF / WHILE); conditions are TENSOR_BOOL8 of shape [1]."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest

from nngpu.driver.device import Device
from nngpu.hal.types import (ErrorStatus, Operand, OperandExtraParams, OperandLifeTime, OperandType as T,
                             SymmPerChannelQuantParams)
from nngpu.json_models import build_model, load_file
from nngpu.ops import load_all
from nngpu.ops.control_flow import _check_compatible
from nngpu.ops.registry import OpError
from nngpu.validation import ValidationError, validate_model

CORPUS = Path(__file__).resolve().parents[1] / "data" / "nnapi-cts" / "V1_3"
load_all()


def _model(name: str):
    return build_model(load_file(CORPUS / f"{name}.json.gz")[0])


def _rejected(model, needle: str) -> None:
    with pytest.raises(ValidationError, match=needle):
        validate_model(model)
    status, _ = Device("numpy").getSupportedOperations_1_3(model)
    assert status == ErrorStatus.INVALID_ARGUMENT


def _edit(model, edit):
    m = copy.deepcopy(model)
    edit(m)
    return m


def test_the_corpus_models_are_valid():
    for name in ("if_simple", "while_fib"):
        validate_model(_model(name))


def test_if_outer_output_dimensions_must_match_the_branches():
    base = _model("if_simple")
    out = base.main.operations[0].outputs[0]
    _rejected(_edit(base, lambda m: setattr(m.main.operands[out], "dimensions", [3, 5])),
              r"IF then branch output 0: dimensions \[3, 4\] != \[3, 5\]")
    _rejected(_edit(base, lambda m: setattr(m.main.operands[out], "dimensions", [3, 4, 1])), "dimensions")


def test_if_unspecified_dimensions_are_compatible():
    base = _model("if_simple")
    inner = base.referenced[0].inputIndexes[0]
    validate_model(_edit(base, lambda m: setattr(m.referenced[0].operands[inner], "dimensions", [0, 4])))


def test_if_condition_is_a_bool_of_shape_one():
    base = _model("if_simple")
    cond = base.main.operations[0].inputs[0]
    _rejected(_edit(base, lambda m: setattr(m.main.operands[cond], "dimensions", [2])),
              r"IF condition must be a TENSOR_BOOL8 of shape \[1\]")


def test_while_outer_output_must_match_the_body():
    base = _model("while_fib")
    out = base.main.operations[0].outputs[0]
    _rejected(_edit(base, lambda m: setattr(m.main.operands[out], "dimensions", [1, 3])),
              r"WHILE body output 0: dimensions \[1, 2\] != \[1, 3\]")


def test_while_outer_inputs_must_match_condition_and_body():
    base = _model("while_fib")
    first = base.main.operations[0].inputs[2]
    _rejected(_edit(base, lambda m: setattr(m.main.operands[first], "dimensions", [2, 1])),
              r"WHILE condition input 0: dimensions \[1, 2\] != \[2, 1\]")


def _operand(t: T, dims, scale=0.0, zero_point=0, extra=None) -> Operand:
    return Operand(t, list(dims), 0, scale, zero_point, OperandLifeTime.TEMPORARY_VARIABLE, extraParams=extra)


@pytest.mark.parametrize("other, needle", [
    (_operand(T.TENSOR_QUANT8_ASYMM, [2], 0.5, 1), "type"),
    (_operand(T.TENSOR_QUANT8_ASYMM_SIGNED, [2, 1], 0.5, 1), "dimensions"),
    (_operand(T.TENSOR_QUANT8_ASYMM_SIGNED, [3], 0.5, 1), "dimensions"),
    (_operand(T.TENSOR_QUANT8_ASYMM_SIGNED, [2], 0.25, 1), "scale"),
    (_operand(T.TENSOR_QUANT8_ASYMM_SIGNED, [2], 0.5, 0), "zeroPoint"),
    (_operand(T.TENSOR_QUANT8_ASYMM_SIGNED, [2], 0.5, 1,
              OperandExtraParams(channelQuant=SymmPerChannelQuantParams([1.0], 0))), "extraParams"),
])
def test_every_operand_parameter_is_compared(other, needle):
    base = _operand(T.TENSOR_QUANT8_ASYMM_SIGNED, [2], 0.5, 1)
    with pytest.raises(OpError, match=needle):
        _check_compatible(base, other, "x")
    _check_compatible(base, _operand(T.TENSOR_QUANT8_ASYMM_SIGNED, [0], 0.5, 1, OperandExtraParams()), "x")
    _check_compatible(base, _operand(T.TENSOR_QUANT8_ASYMM_SIGNED, [], 0.5, 1), "x")  # rank unknown
