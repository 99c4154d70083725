"""Executions at once are right: 8 threads run 3 prepared models through the sync, async, burst
and fenced paths on a device backend, each on inputs drawn from a few sets, and every output is
compared with the numpy reference's for that set. A plan that let two executions share buffers,
or a queue that ran one model's work into another's, gives a wrong output here.

A few thousand executions by default; --full-cts runs 10,000."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import nngpu
from nngpu.backends import device_backends
from nngpu.cts.runner import execute_on
from nngpu.driver.callbacks import PreparedModelCallback
from nngpu.driver.device import Device
from nngpu.hal.types import (DataLocation, ErrorStatus, ExecutionPreference, MeasureTiming, OptionalTimePoint,
                             OperandType, Priority, Request, RequestArgument)
from nngpu.json_models import Execution
from nngpu.memory import allocate_shared

THREADS = 8
PATHS = ("sync", "async", "burst", "fenced")
SETS = 6   # input sets per model: different threads run different data at once


def _models() -> dict:
    """Three small models of different kinds: float convolution, quantized arithmetic, float
    fully connected layers."""
    rng = np.random.default_rng(40)
    conv = nngpu.ModelBuilder()
    x = conv.input("x", np.float32, [1, 8, 8, 3])
    h = conv.conv_2d(x, conv.constant(rng.standard_normal((4, 3, 3, 3)).astype(np.float32)), activation="RELU")
    conv.output("y", conv.softmax(conv.reshape(h, [1, 256])))
    quant = nngpu.ModelBuilder()
    q8 = OperandType.TENSOR_QUANT8_ASYMM
    a, b = quant.input("a", q8, [4, 16], scale=0.05, zero_point=120), quant.input("b", q8, [4, 16], scale=0.1, zero_point=3)
    s = quant.add(a, b, scale=0.2, zero_point=100)
    quant.output("p", quant.mul(s, a, activation="RELU", scale=0.5, zero_point=10))
    fc = nngpu.ModelBuilder()
    v = fc.input("v", np.float32, [2, 32])
    w1, w2 = (fc.constant(rng.standard_normal(shape).astype(np.float32)) for shape in ((24, 32), (10, 24)))
    fc.output("z", fc.fully_connected(fc.fully_connected(v, w1, activation="RELU"), w2))
    return {"conv": conv.build(), "quant": quant.build(), "fc": fc.build()}


def _draw(named, rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for t in named.inputs:
        if t.dtype == np.uint8:
            out.append(rng.integers(0, 256, t.shape).astype(np.uint8))
        else:
            out.append(rng.standard_normal(t.shape).astype(np.float32))
    return out


def _prepare(device, named):
    cb = PreparedModelCallback()
    status = device.prepareModel_1_3(named.model, ExecutionPreference.SUSTAINED_SPEED, Priority.MEDIUM,
                                     OptionalTimePoint(), [], [], bytes(32), cb)
    assert status == ErrorStatus.NONE and cb.wait(120) and cb.status == ErrorStatus.NONE, cb.reason
    return cb.prepared_model


def _execution(named, inputs: list[np.ndarray]) -> Execution:
    """A request over fresh pools holding `inputs`."""
    sizes = [a.nbytes for a in inputs]
    pool_in = allocate_shared(sum(sizes))
    view, args, off = pool_in.map(), [], 0
    for a in inputs:
        view[off: off + a.nbytes] = a.reshape(-1).view(np.uint8)
        args.append(RequestArgument(False, DataLocation(0, off, a.nbytes), list(a.shape)))
        off += a.nbytes
    outs, off = [], 0
    for t in named.outputs:
        n = int(np.prod(t.shape)) * t.dtype.itemsize
        outs.append(({"dimensions": list(t.shape)}, DataLocation(1, off, n)))
        off += n
    pool_out = allocate_shared(off)
    request = Request(args, [RequestArgument(False, loc, []) for _, loc in outs], [pool_in, pool_out])
    return Execution(request, pool_in, pool_out, outs)


def _close(got: np.ndarray, want: np.ndarray) -> bool:
    """Quantized outputs exactly; float ones within 1e-5 of the output's range (the device sums
    in another order: 1.5e-5 on outputs of about 10, measured on one thread)."""
    if want.dtype.kind == "f":
        span = float(want.max() - want.min()) or 1.0
        return bool(np.abs(got - want).max() <= 1e-5 * span)
    return bool(np.array_equal(got, want))


def reference_sets(named, prepared_reference, rng: np.random.Generator) -> list:
    """SETS input sets for a model, each with the outputs `prepared_reference` gives it."""
    sets = []
    for _ in range(SETS):
        inputs = _draw(named, rng)
        ex = _execution(named, inputs)
        assert execute_on(prepared_reference, "sync", ex, False, MeasureTiming.NO)[0] == ErrorStatus.NONE
        sets.append((inputs, [ex.output_pool.array(t.dtype, loc.offset, int(np.prod(t.shape))).reshape(t.shape).copy()
                              for t, (_, loc) in zip(named.outputs, ex.outputs)]))
    return sets


def run_concurrently(cases: dict, paths, execute, per_thread: int, seed: int) -> tuple[int, list[str]]:
    """THREADS threads each run `per_thread` executions: a random model of `cases` (name ->
    (named model, prepared model, [(inputs, expected outputs)])) on a random input set, through
    the paths in turn, by `execute(prepared, path, execution)` -> (status, shapes, timing) and
    the executions that path ran. (executions run, what came out wrong)."""
    wrong: list[str] = []
    lock = threading.Lock()

    def worker(k: int) -> int:
        r = np.random.default_rng([seed, k])
        done = 0
        for i in range(per_thread):
            name = list(cases)[r.integers(len(cases))]
            named, prepared, sets = cases[name]
            path = paths[(k + i) % len(paths)]
            inputs, expected = sets[r.integers(SETS)]
            ex = _execution(named, inputs)
            (status, _shapes, _timing), ran = execute(prepared, path, ex)
            got = [ex.output_pool.array(t.dtype, loc.offset, int(np.prod(t.shape))).reshape(t.shape)
                   for t, (_, loc) in zip(named.outputs, ex.outputs)]
            if status != ErrorStatus.NONE or not all(_close(g, e) for g, e in zip(got, expected)):
                with lock:
                    wrong.append(f"{name} via {path}: {ErrorStatus(status).name}")
            done += ran
        return done

    with ThreadPoolExecutor(THREADS) as pool:
        return sum(pool.map(worker, range(THREADS))), wrong


@pytest.mark.parametrize("backend", device_backends())
def test_concurrent_executions_match_numpy(backend, request):
    total = 10_000 if request.config.getoption("--full-cts") else 2_000
    models = _models()
    device, reference = Device(backend), Device("numpy")
    rng = np.random.default_rng(41)
    cases = {}
    for name, named in models.items():
        cases[name] = (named, _prepare(device, named), reference_sets(named, _prepare(reference, named), rng))

    def execute(prepared, path, ex):   # the fenced path runs a chain of two executions
        return execute_on(prepared, path, ex, False, MeasureTiming.NO), 1 + (path == "fenced")

    executions, wrong = run_concurrently(cases, PATHS, execute, total // THREADS, 42)
    assert executions >= total
    assert not wrong, f"{len(wrong)} of {executions} wrong: {wrong[:5]}"


@pytest.mark.parametrize("backend", device_backends())
def test_each_prepared_model_has_its_own_queue(backend):
    """Executions of different prepared models are not serialised on one queue (or one CUDA
    stream, where a capture would record another model's launches): each plan has its own."""
    device = Device(backend)
    plans = [_prepare(device, named).executor for named in _models().values()]
    queues = [getattr(p.backend, "queue", None) or getattr(p.backend, "stream") for p in plans]
    device_queue = getattr(device.backend, "queue", None) or getattr(device.backend, "stream")
    assert len({id(q) for q in queues + [device_queue]}) == len(plans) + 1
