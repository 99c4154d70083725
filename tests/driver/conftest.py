"""Burst test helpers: small ADD models, their requests, and a raw client end of a burst
(the two FMQs plus a callback) for sending hand-made packets to the driver's worker."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from nngpu.burst import DATUM_SIZE, BurstCallback, MessageQueue
from nngpu.driver.burst_executor import configure_burst
from nngpu.driver.callbacks import PreparedModelCallback
from nngpu.hal.types import (
    DataLocation,
    ErrorStatus,
    ExecutionPreference,
    Model,
    Operand,
    OperandLifeTime,
    OperandType as T,
    Operation,
    OperationType as Op,
    Request,
    RequestArgument,
)
from nngpu.memory import allocate_shared

from ..burst.datum_codec import deserialize_result, request_to_bytes, result_from_bytes

SHAPE = [2, 3]
A = np.arange(6, dtype=np.float32).reshape(SHAPE)
B = np.full(SHAPE, 0.5, np.float32)


def add_model(shape=SHAPE, outputs: int = 1) -> Model:
    """out_k = a + b for k < outputs (one ADD per output), float32 tensors of `shape`."""
    f = lambda life, consumers: Operand(T.TENSOR_FLOAT32, list(shape), consumers, 0.0, 0, life)
    act = np.zeros(1, np.int32).tobytes()
    operands = [f(OperandLifeTime.SUBGRAPH_INPUT, outputs), f(OperandLifeTime.SUBGRAPH_INPUT, outputs),
                Operand(T.INT32, [], outputs, 0.0, 0, OperandLifeTime.CONSTANT_COPY, DataLocation(0, 0, 4))]
    ops, outs = [], []
    for _ in range(outputs):
        outs.append(len(operands))
        operands.append(f(OperandLifeTime.SUBGRAPH_OUTPUT, 0))
        ops.append(Operation(Op.ADD, [0, 1, 2], [outs[-1]]))
    return Model(operands, ops, [0, 1], outs, act, [])


def prepare(device, model: Model):
    cb = PreparedModelCallback()
    status = device.prepareModel_1_2(model, ExecutionPreference.FAST_SINGLE_ANSWER, [], [], bytes(32), cb)
    assert cb.wait(60)
    assert status == ErrorStatus.NONE and cb.status == ErrorStatus.NONE, (status, cb.status)
    return cb.prepared_model


@dataclass
class AddRequest:
    request: Request
    inputs: object
    outputs: object

    def result(self, k: int = 0) -> np.ndarray:
        return self.outputs.array(np.float32, k * A.nbytes, A.size).reshape(A.shape)


def add_request(a=A, b=B, outputs: int = 1, dims: bool = True, out_capacity: int | None = None) -> AddRequest:
    """Inputs a, b in one pool, `outputs` results in another."""
    inp = allocate_shared(a.nbytes + b.nbytes)
    inp.map()[: a.nbytes] = a.tobytes()
    inp.map()[a.nbytes:] = b.tobytes()
    cap = a.nbytes if out_capacity is None else out_capacity
    out = allocate_shared(max(cap * outputs, 1))
    d = list(a.shape) if dims else []
    args_in = [RequestArgument(False, DataLocation(0, 0, a.nbytes), d),
               RequestArgument(False, DataLocation(0, a.nbytes, b.nbytes), d)]
    args_out = [RequestArgument(False, DataLocation(1, k * cap, cap), d) for k in range(outputs)]
    return AddRequest(Request(args_in, args_out, [inp, out]), inp, out)


class RawBurst:
    """The client end of a burst without the controller: packets in, result tuples out.
    inline=True answers each packet on this thread (the in-process controller's fast path),
    else the driver's worker thread does."""

    def __init__(self, prepared, request_length: int = 1024, result_length: int = 1024, inline: bool = False):
        self.requests = MessageQueue(DATUM_SIZE, request_length, spin_us=0)
        self.results = MessageQueue(DATUM_SIZE, result_length, spin_us=0)
        self.callback = BurstCallback()
        self.inline = inline
        status, self.context = configure_burst(prepared, self.callback, self.requests, self.results)
        assert status == ErrorStatus.NONE

    def send_bytes(self, raw: bytes, timeout: float = 20.0):
        """Write one packet; the raw result packet (None: no answer within timeout)."""
        if self.inline:
            assert self.requests.write(raw, wake=False)
            assert self.context.serve_inline()
        else:
            assert self.requests.write_blocking(raw, timeout=timeout)
        return self.results.read_blocking(None, timeout=timeout)

    def send(self, datums, timeout: float = 20.0):
        raw = self.send_bytes(request_to_bytes(datums), timeout)
        assert raw is not None, "the burst worker did not answer"
        return deserialize_result(result_from_bytes(raw))

    def close(self) -> None:
        self.context.close()
        self.requests.close()
        self.results.close()


@pytest.fixture(scope="module")
def add_prepared():
    from nngpu.driver.device import Device

    return prepare(Device("numpy"), add_model())


@pytest.fixture(params=["worker", "inline"])
def raw_burst(add_prepared, request):
    burst = RawBurst(add_prepared, inline=request.param == "inline")
    yield burst
    burst.close()


@pytest.fixture(scope="session")
def kit():
    """This module's helpers for test files (conftest modules are not importable by name)."""
    import types

    return types.SimpleNamespace(A=A, B=B, SHAPE=SHAPE, add_model=add_model, add_request=add_request,
                                 prepare=prepare, RawBurst=RawBurst)
