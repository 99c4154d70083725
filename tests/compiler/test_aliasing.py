"""Aliasing as the OpSpec states it (views and in-place outputs), and device builders whose bugs
surface instead of silently sending the operation to the host."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.runtime.interpreter import GraphRunner
from nngpu.compiler.steps import KernelStep
from nngpu.compiler.lower import lower_model
from nngpu.compiler.numpy_bind import numpy_plan
from nngpu.hal import OperationType as Op
from nngpu.modelutil import as_model_1_3
from nngpu.ops import load_all
from nngpu.ops.registry import REGISTRY, Alias, DeviceImpl, lookup
from nngpu.backends.opencl import TARGET as OPENCL
from tests.compiler.test_fusion import chain_model

load_all()


def test_views_are_stated_once_and_need_no_device_builder():
    views = {op for op, spec in REGISTRY.items() if spec.alias == Alias.VIEW}
    assert {Op.RESHAPE, Op.SQUEEZE, Op.EXPAND_DIMS} <= views
    for op in views:
        assert not REGISTRY[op].implementations, f"{op.name} is a view: the compiler shares its buffer"


def test_in_place_operations_write_over_a_dying_input():
    """A chain of in-place elementwise operations lives in one buffer in the numpy plan."""
    kinds = (Op.ADD, Op.TANH, Op.LOGISTIC, Op.RELU6)
    assert all(lookup(k).alias == Alias.IN_PLACE for k in kinds)
    model = as_model_1_3(chain_model(6, kinds=kinds))
    plan = numpy_plan(GraphRunner(model))
    x = np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)
    got = plan.run([x])[0]
    bound = next(iter(plan.bounds()))
    offsets = {o for st in bound.layout for o in st if o is not None}
    assert len(offsets) == 1, "every output is written over its dying input"
    np.testing.assert_array_equal(got, GraphRunner(model).run([x])[0])


def test_a_builder_bug_fails_the_lowering(monkeypatch):
    """A device builder that raises something other than OpError / ValueError / NeedsValue has a
    bug: lowering fails loudly instead of running the operation on the host."""
    spec = lookup(Op.TANH)

    def broken(node, ins):
        raise TypeError("a bug in the builder")

    monkeypatch.setattr(spec, "implementations", [DeviceImpl("broken", 0, lambda node: True, broken)])
    with pytest.raises(TypeError, match="a bug in the builder"):
        lower_model(GraphRunner(as_model_1_3(chain_model(2, kinds=(Op.TANH,)))), OPENCL)


def test_a_declining_builder_sends_the_operation_to_the_host(monkeypatch):
    spec = lookup(Op.TANH)

    def declines(node, ins):
        raise ValueError("not this node")

    monkeypatch.setattr(spec, "implementations", [DeviceImpl("declines", 0, lambda node: True, declines)])
    lowered = lower_model(GraphRunner(as_model_1_3(chain_model(2, kinds=(Op.TANH,)))), OPENCL)
    assert lowered.host_ops == 2 and not any(isinstance(s, KernelStep) for s in lowered.steps)
