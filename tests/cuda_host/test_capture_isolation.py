"""Issue 22, part 2 on the host CUDA backend: while one prepared model captures its graph, the
executions another thread runs on another model are not recorded into it (each plan has a
stream of its own), and every answer on both sides stays right."""
from __future__ import annotations

import shutil
import threading
import time

import numpy as np
import pytest

import nngpu.backends
from nngpu.driver.device import Device
from nngpu.hal import OperandType as T
from nngpu.hal.types import OperationType as Op
from nngpu.session import Session
from nngpu.testing import output, scalar, single_op_model, tensor

from tests.driver.test_buffer import prepare
from tests.driver.test_buffer import test_execution_chained_through_device_memory_matches_pools as chain

from .capture_backend import Captures, CapturingHostBackend

pytestmark = pytest.mark.skipif(not shutil.which("g++"), reason="no g++ on this machine")

SHAPE = [32, 48]


def _model(op: Op, rng: np.random.Generator):
    """A two-input elementwise model, its inputs and its answer."""
    x, y = (rng.standard_normal(SHAPE).astype(np.float32) for _ in range(2))
    model = single_op_model(op, [tensor(T.TENSOR_FLOAT32, x), tensor(T.TENSOR_FLOAT32, y), scalar(T.INT32, 0)],
                            [output(T.TENSOR_FLOAT32, SHAPE)])
    answer = {Op.ADD: x + y, Op.MUL: x * y, Op.SUB: x - y}[op]
    return model, [x, y], answer


def test_no_launch_from_another_thread_lands_in_an_open_capture(monkeypatch):
    captures = Captures()
    monkeypatch.setattr(nngpu.backends, "create", lambda name: CapturingHostBackend(captures))
    device = Device("cuda")
    rng = np.random.default_rng(22)
    model_b, inputs_b, answer_b = _model(Op.ADD, rng)
    other = Session(model_b, device)     # prepared, and captured, before the other thread starts
    stop, wrong, failed, runs = threading.Event(), [], [], [0]

    def run_other() -> None:
        try:
            while not stop.is_set():
                other.set_inputs(inputs_b)
                other.execute()
                if not np.array_equal(other.output_arrays()[0], answer_b):
                    wrong.append(runs[0])
                runs[0] += 1
                time.sleep(0.0005)
        except Exception as e:  # reported below
            failed.append(e)

    def hold() -> None:
        """Keep a capture open until the other model's executions have issued work meanwhile."""
        seen, deadline = captures.overlapped, time.monotonic() + 2
        while captures.overlapped == seen and time.monotonic() < deadline:
            time.sleep(0.0005)

    worker = threading.Thread(target=run_other)
    worker.start()
    try:
        while runs[0] == 0 and worker.is_alive():
            time.sleep(0.001)
        before = len(captures.graphs)
        captures.hold = hold
        for op in (Op.MUL, Op.SUB):
            model, inputs, answer = _model(op, rng)
            with Session(model, device) as session:   # its graph is captured here, while `other` runs
                for _ in range(5):
                    session.set_inputs(inputs)
                    session.execute()
                    np.testing.assert_array_equal(session.output_arrays()[0], answer)
        captures.hold = None
    finally:
        stop.set()
        worker.join(60)
    assert failed == [], f"the other model's executions failed: {failed}"
    held = captures.graphs[before:]
    assert len(held) >= 2 and all(issuers for _, issuers in held), "the two models captured no graph"
    assert captures.overlapped > 0, "the other thread never ran while a capture was open"
    for thread, issuers in captures.graphs:
        assert set(issuers) == {thread}, "another thread's work was recorded into a capture"
    assert runs[0] > 0 and wrong == []


def test_ibuffer_transfers_under_capture_count_one_each(monkeypatch):
    """The IBuffer chain of tests/driver/test_buffer.py on a backend that captures graphs: a
    device input is one device copy, the host input one upload, the output one download,
    whether the run goes step by step or replays a graph that recorded them."""
    monkeypatch.setattr(nngpu.backends, "create", lambda name: CapturingHostBackend(Captures()))
    device = Device("cuda")
    prepared = prepare(device)
    for _ in range(3):   # first step by step (a new source: the IBuffer), then from the graph
        chain(device, prepared, monkeypatch)
