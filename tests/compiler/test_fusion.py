"""Fusion and the device plan: one kernel for an elementwise chain, conv epilogues, shared
buffers, and results equal to the numpy reference (run on every available device backend)."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.compiler.steps import KernelStep, Transfer
from nngpu.compiler.lower import lower_model
from nngpu.runtime.interpreter import GraphRunner
from nngpu.hal import DataLocation, Model, Operand, OperandLifeTime, OperandType as T, Operation, OperationType as Op
from nngpu.modelutil import as_model_1_3
from nngpu.testing import run_model

from nngpu.backends import device_backends
from nngpu.backends.opencl import TARGET as OPENCL

SHAPE = [4, 8]


def _operand(t, dims, life, consumers=1, loc=None):
    return Operand(t, dims, consumers, 0.0, 0, life, loc or DataLocation())


TRANSCENDENTAL = (Op.ADD, Op.MUL, Op.TANH, Op.SUB, Op.LOGISTIC, Op.MAXIMUM, Op.DIV, Op.RELU6)
ARITHMETIC = (Op.ADD, Op.MUL, Op.SUB, Op.MAXIMUM, Op.DIV, Op.RELU6, Op.MINIMUM, Op.ABS)
_WITH_ACTIVATION = {Op.ADD, Op.SUB, Op.MUL, Op.DIV}
_TWO_INPUTS = {Op.MAXIMUM, Op.MINIMUM, Op.POW, Op.PRELU}


def chain_model(n_ops: int = 8, shape=SHAPE, kinds=TRANSCENDENTAL) -> Model:
    """x → op(x, c) → op → ... : n_ops elementwise ops, c a broadcast constant 0.5."""
    values = np.float32(0.5).tobytes() + np.int32(0).tobytes() + np.int32(1).tobytes()
    operands = [_operand(T.TENSOR_FLOAT32, shape, OperandLifeTime.SUBGRAPH_INPUT),
                _operand(T.TENSOR_FLOAT32, [1], OperandLifeTime.CONSTANT_COPY, 0, DataLocation(0, 0, 4)),
                _operand(T.INT32, [], OperandLifeTime.CONSTANT_COPY, 0, DataLocation(0, 4, 4)),   # NONE
                _operand(T.INT32, [], OperandLifeTime.CONSTANT_COPY, 0, DataLocation(0, 8, 4))]   # RELU
    ops, prev = [], 0
    for k in range(n_ops):
        kind = kinds[k % len(kinds)]
        out = len(operands)
        last = k == n_ops - 1
        operands.append(_operand(T.TENSOR_FLOAT32, shape,
                                 OperandLifeTime.SUBGRAPH_OUTPUT if last else OperandLifeTime.TEMPORARY_VARIABLE))
        if kind in _WITH_ACTIVATION:
            ins = [prev, 1, 3 if kind == Op.ADD else 2]
        elif kind in _TWO_INPUTS:
            ins = [prev, 1]
        else:
            ins = [prev]
        ops.append(Operation(kind, ins, [out]))
        prev = out
    counts = [0] * len(operands)
    for op in ops:
        for i in op.inputs:
            counts[i] += 1
    for i, c in enumerate(counts):
        operands[i].numberOfConsumers = c
    return Model(operands, ops, [0], [prev], values)


def _kernels(spec) -> list[KernelStep]:
    """The steps, checked to be the input upload and kernels only."""
    assert isinstance(spec.steps[0], Transfer) and spec.stop is None
    assert all(isinstance(s, KernelStep) for s in spec.steps[1:])
    return spec.steps[1:]


def test_elementwise_chain_becomes_one_kernel():
    spec = lower_model(GraphRunner(as_model_1_3(chain_model())), OPENCL)
    kernels = _kernels(spec)
    assert len(kernels) == 1 and kernels[0].ops == list(range(8))
    unfused = lower_model(GraphRunner(as_model_1_3(chain_model())), OPENCL, fuse=False)
    assert len(_kernels(unfused)) == 8 and (unfused.device_ops, unfused.host_ops) == (8, 0)


def test_intermediates_share_buffers_when_unfused():
    spec = lower_model(GraphRunner(as_model_1_3(chain_model())), OPENCL, fuse=False)
    # 7 intermediates between 8 kernels: ping-pong reuse keeps them in two slots.
    model = as_model_1_3(chain_model()).main
    temps = [i for i, o in enumerate(model.operands) if o.lifetime == OperandLifeTime.TEMPORARY_VARIABLE]
    assert len(temps) == 7 and len({spec.slot_of[i] for i in temps}) == 2


@pytest.mark.parametrize("backend", device_backends())
@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("kinds", [TRANSCENDENTAL, ARITHMETIC], ids=["transcendental", "arithmetic"])
def test_plan_matches_reference(backend, fusion, kinds):
    from nngpu.driver.device import Device

    x = np.linspace(-3, 3, int(np.prod(SHAPE)), dtype=np.float32).reshape(SHAPE)
    ref = run_model(chain_model(kinds=kinds), [x], [x.nbytes], Device("numpy"))
    got = run_model(chain_model(kinds=kinds), [x], [x.nbytes], Device(backend, fusion=fusion))
    np.testing.assert_allclose(got.outputs[0], ref.outputs[0], rtol=1e-6, atol=1e-6)


def test_unknown_input_extents_are_compiled_per_shape():
    """A model whose input extent is unknown is compiled for each input shape it is run with."""
    from nngpu.driver.device import Device

    for backend in device_backends():
        device = Device(backend)
        for rows in (3, 5, 3):
            x = np.linspace(-3, 3, rows * 8, dtype=np.float32).reshape(rows, 8)
            ref = run_model(chain_model(shape=[0, 8]), [x], [x.nbytes], Device("numpy"))
            got = run_model(chain_model(shape=[0, 8]), [x], [x.nbytes], device)
            assert got.shapes == ref.shapes == [[rows, 8]]
            np.testing.assert_allclose(got.outputs[0], ref.outputs[0], rtol=1e-6, atol=1e-6)


def test_constant_subgraphs_are_folded_at_prepare():
    """ADD(c1, c2) of two constants is computed once; only MUL(x, that) runs per execution."""
    from nngpu.driver.device import Device
    from nngpu.testing import output, scalar, single_op_model, tensor

    c1 = np.arange(6, dtype=np.float32).reshape(2, 3)
    c2 = np.full((2, 3), 0.25, np.float32)
    m = single_op_model(Op.ADD, [tensor(T.TENSOR_FLOAT32, c1, const=True), tensor(T.TENSOR_FLOAT32, c2, const=True),
                                 scalar(T.INT32, 0)], [output(T.TENSOR_FLOAT32, [2, 3])])
    # Append MUL(x, sum) with x a new model input; the ADD output becomes a temporary.
    add_out = m.outputIndexes[0]
    m.operands[add_out].lifetime = OperandLifeTime.TEMPORARY_VARIABLE
    m.operands[add_out].numberOfConsumers = 1
    x_idx, out_idx = len(m.operands), len(m.operands) + 1
    m.operands.append(_operand(T.TENSOR_FLOAT32, [2, 3], OperandLifeTime.SUBGRAPH_INPUT))
    m.operands.append(_operand(T.TENSOR_FLOAT32, [2, 3], OperandLifeTime.SUBGRAPH_OUTPUT, 0))
    m.operands[2].numberOfConsumers = 2
    m.operations.append(Operation(Op.MUL, [x_idx, add_out, 2], [out_idx]))
    m.inputIndexes, m.outputIndexes = [x_idx], [out_idx]
    spec = lower_model(GraphRunner(as_model_1_3(m)), OPENCL)
    assert [s.ops for s in _kernels(spec)] == [[1]]
    x = np.full((2, 3), 2.0, np.float32)
    for backend in device_backends():
        got = run_model(m, [x], [x.nbytes], Device(backend))
        np.testing.assert_array_equal(got.outputs[0], x * (c1 + c2))
