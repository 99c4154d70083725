"""Weights held once (issue 31, part 8): importing a .tflite keeps no reference to the file's
bytes, builds the model's operand values without a third copy, and a device plan keeps no host
copy of the constants it uploaded."""
from __future__ import annotations

import sys
import tracemalloc

import numpy as np
import pytest

from nngpu.backends import device_backends
from nngpu.session import Session
from nngpu.tflite.constant_bytes import ConstantBytes
from nngpu.tflite.partition import plan_tflite

from .tflbuild import TFLModel, opt

UNITS, DEPTH = 1024, 2048   # an 8 MiB weight: large against everything else the import holds


def _dense_model() -> tuple[bytes, np.ndarray, np.ndarray]:
    """(the .tflite file, its weight, its bias): one FULLY_CONNECTED layer."""
    rng = np.random.default_rng(31)
    weight = rng.standard_normal((UNITS, DEPTH)).astype(np.float32)
    bias = rng.standard_normal(UNITS).astype(np.float32)
    m = TFLModel()
    x, y = m.tensor("x", [1, DEPTH]), m.tensor("y", [1, UNITS])
    m.op("FULLY_CONNECTED", [x, m.const("w", weight), m.const("b", bias)], [y], "FullyConnectedOptions",
         lambda bld: opt(bld, "FullyConnectedOptions", FusedActivationFunction=0))
    return m.build([x], [y]), weight, bias


def test_the_import_holds_no_reference_to_the_file_and_copies_the_weights_once():
    data = _dense_model()[0]
    weights = UNITS * DEPTH * 4
    plan_tflite(data)              # imports (the op registry) are not the import's memory
    refs = sys.getrefcount(data)
    tracemalloc.start()
    try:
        plan = plan_tflite(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sys.getrefcount(data) == refs   # nothing (no reference cycle either) keeps the file's bytes
    assert len(plan.whole.model.operandValues) >= weights
    assert peak < 1.3 * weights, f"the import allocated {peak / weights:.2f}x the weights at its peak"


@pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")
def test_a_device_plan_keeps_no_host_copy_of_the_constants_it_uploaded(tmp_path):
    path = tmp_path / "dense.tflite"
    data, weight, bias = _dense_model()
    path.write_bytes(data)
    del data
    weights = weight.nbytes + bias.nbytes
    tracemalloc.start()
    try:
        session = Session(path, "opencl")
        held = tracemalloc.get_traced_memory()[0]
        x = np.random.default_rng(1).standard_normal((1, DEPTH)).astype(np.float32)
        session.set_inputs([x])
        session.execute()
        y = session.output_arrays()[0]
    finally:
        tracemalloc.stop()
    # the model's operand values, once; the packed (transposed) weight lives in the device buffer only
    assert held < 1.5 * weights, f"{held / weights:.2f}x the weights held on the host after prepare"
    np.testing.assert_allclose(y, x @ weight.T + bias, rtol=1e-4, atol=1e-3)


def test_constant_bytes_keeps_views_of_immutable_bytes_and_copies_the_rest():
    store = ConstantBytes()
    file_bytes = np.arange(16, dtype=np.float32).tobytes()
    view = np.frombuffer(memoryview(file_bytes)[4:16], np.float32)
    mutable = np.array([7, 8, 9], np.int32)
    assert store.append(view) == (0, 12)
    assert store.append(mutable) == (16, 12)   # at the next 8-byte boundary
    mutable[0] = -1                            # a later change to a caller's array is not seen
    mark = len(store)
    store.append(np.ones(5, np.float32))
    store.truncate(mark)                       # an operator undone
    sub = ConstantBytes()
    sub.append(np.array([1.5], np.float32))
    assert store.extend(sub) == 32
    assert bytes(store.read(16, 12)) == np.array([7, 8, 9], np.int32).tobytes()
    frozen = store.freeze()
    assert frozen is store.freeze() and len(frozen) == 36
    assert frozen[0:12] == file_bytes[4:16] and frozen[12:16] == bytes(4)
    assert np.frombuffer(frozen[32:36], np.float32)[0] == 1.5
    with pytest.raises(RuntimeError):
        store.append(view)
