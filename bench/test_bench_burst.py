"""Latency of one small execution (ADD of two 1x1000 float32 tensors) on each path and backend
(numpy, and each device backend here): executeSynchronously, execute_1_2 + callback, a burst in
process, a burst to another process, executeSynchronously and a burst through `nngpu serve`; and the bare FMQ round trip to another process (a 7-datum
packet echoed back), busy-polled on both sides and sleeping on both sides, which bound what a
burst's transport can cost. The summary gives, per backend, burst / executeSynchronously in
process, and what a hot cross-process burst adds over the busy-polled round trip: its latency
less the floor, and less the floor and the driver's own time (its median timeInDriver,
dequeue to enqueue), which leaves the client's encoding and decoding and the transport.

Run explicitly: `pytest bench` (the default `pytest` run collects tests/ only).

Spin defaults (nngpu.burst.CLIENT_SPIN_US = 500, nngpu.burst.SERVER_SPIN_US =
200), measured here on 2 vCPUs shared with other work: a wake-up from poll() costs ~40 µs when
the two processes sit on different CPUs, so a client that sleeps at once (spin 0) took ~110 µs
a burst, one that spins ~69 µs; with both processes on one CPU every setting costs ~90 µs, so
spinning never loses. The spin yields (sched_yield) every turn: a spin without yielding, or with
time.sleep(0), starved the peer under load (~300 µs and ~240 µs). The windows only cover a hot
burst: the client's a small model's execution, the server's a client's think time; after them
both sides sleep and cost nothing. The cross-process figures are bimodal (~60-70 µs on two
CPUs, ~90 µs when the scheduler puts both processes on one), so compare medians of one run."""
import socket
import statistics
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from nngpu.backends import device_backends
from nngpu.burst import CLIENT_SPIN_US, DATUM_SIZE, SERVER_SPIN_US, ExecutionBurstController, MessageQueue, \
    send_descriptor
from nngpu.driver.callbacks import ExecutionCallback, PreparedModelCallback
from nngpu.driver.device import Device
from nngpu.hal.types import (
    DataLocation,
    ErrorStatus,
    ExecutionPreference,
    MeasureTiming,
    OperandType as T,
    OperationType as Op,
    Request,
    RequestArgument,
)
from nngpu.memory import allocate_shared
from nngpu.testing import output, scalar, single_op_model, tensor

from .common import show_summary

pytestmark = pytest.mark.benchmark(group="burst", min_rounds=200, warmup=True)

N = 1000
A = np.linspace(0, 1, N, dtype=np.float32).reshape(1, N)
B = np.full((1, N), 2.0, np.float32)
MEDIANS: dict[str, float] = {}  # "test[backend]" -> median s
DRIVER_S: dict[str, float] = {}  # backend -> median timeInDriver of a cross-process burst, s


@pytest.fixture(scope="module", autouse=True)
def ratio_table(request):
    yield
    floor = MEDIANS.get("ring[busy_polled]")
    lines = ["", "bursts (median µs; machine shared, compare within one run):"]
    for backend in ["numpy", *device_backends()]:
        sync, inproc = MEDIANS.get(f"sync[{backend}]"), MEDIANS.get(f"in_process[{backend}]")
        cross, driver = MEDIANS.get(f"cross_process[{backend}]"), DRIVER_S.get(backend)
        if sync and inproc:
            lines.append(f"  {backend:7s} executeSynchronously {sync * 1e6:7.1f}  burst in process {inproc * 1e6:7.1f}"
                         f"  = {inproc / sync:5.2f}x sync")
        served_sync, served_burst = MEDIANS.get(f"served_sync[{backend}]"), MEDIANS.get(f"served_burst[{backend}]")
        if served_sync and served_burst and floor:
            lines.append(f"  {backend:7s} nngpu serve: executeSynchronously {served_sync * 1e6:7.1f}"
                         f"  burst {served_burst * 1e6:7.1f}  FMQ floor {floor * 1e6:5.1f}")
        if cross and floor and driver is not None:
            lines.append(f"  {backend:7s} burst cross-process {cross * 1e6:7.1f}  FMQ floor {floor * 1e6:5.1f}"
                         f"  driver {driver * 1e6:6.1f}  adds {(cross - floor) * 1e6:6.1f} over the floor,"
                         f" {(cross - floor - driver) * 1e6:6.1f} beyond the driver's time")
    show_summary(request, lines)


def _record(benchmark, key: str) -> None:
    stats = getattr(benchmark, "stats", None)
    if stats is not None and getattr(stats, "stats", None) is not None:
        MEDIANS[key] = stats.stats.median


@pytest.fixture(scope="module")
def model():
    return single_op_model(Op.ADD, [tensor(T.TENSOR_FLOAT32, A), tensor(T.TENSOR_FLOAT32, B), scalar(T.INT32, 0)],
                           [output(T.TENSOR_FLOAT32, [1, N])])


@pytest.fixture(scope="module", params=["numpy", *device_backends()])
def backend(request):
    return request.param


@pytest.fixture(scope="module")
def prepared(model, backend):
    cb = PreparedModelCallback()
    assert Device(backend).prepareModel_1_2(model, ExecutionPreference.FAST_SINGLE_ANSWER, [], [], bytes(32), cb) \
        == ErrorStatus.NONE
    cb.wait(60)
    return cb.prepared_model


@pytest.fixture(scope="module")
def request_():
    inp = allocate_shared(A.nbytes + B.nbytes)
    inp.map()[: A.nbytes] = A.tobytes()
    inp.map()[A.nbytes:] = B.tobytes()
    out = allocate_shared(A.nbytes)
    req = Request([RequestArgument(False, DataLocation(0, 0, A.nbytes), []),
                   RequestArgument(False, DataLocation(0, A.nbytes, B.nbytes), [])],
                  [RequestArgument(False, DataLocation(1, 0, A.nbytes), [])], [inp, out])
    yield req, out


def _check(result, out):
    assert result[0] == ErrorStatus.NONE
    np.testing.assert_array_equal(out.array(np.float32).reshape(1, N), A + B)


def test_execute_synchronously(benchmark, prepared, backend, request_):
    req, out = request_
    _check(benchmark(prepared.executeSynchronously, req, MeasureTiming.NO), out)
    _record(benchmark, f"sync[{backend}]")


def test_execute_1_2_callback(benchmark, prepared, request_):
    req, out = request_

    def run():
        cb = ExecutionCallback()
        prepared.execute_1_2(req, MeasureTiming.NO, cb)
        return cb.get(30)

    _check(benchmark(run), out)


def test_burst_in_process(benchmark, prepared, backend, request_):
    req, out = request_
    with ExecutionBurstController.create(prepared) as burst:
        _check(benchmark(burst.compute, req, MeasureTiming.NO), out)
    _record(benchmark, f"in_process[{backend}]")


def test_burst_cross_process(benchmark, model, backend, request_):
    from nngpu.service.burst_ipc import BurstService

    req, out = request_
    with BurstService.spawn(backend) as service:
        status, remote = service.prepare(model)
        assert status == ErrorStatus.NONE
        with ExecutionBurstController.create(remote) as burst:
            _check(benchmark(burst.compute, req, MeasureTiming.NO), out)
            driver_us = [burst.compute(req, MeasureTiming.YES)[2].timeInDriver for _ in range(200)]
    _record(benchmark, f"cross_process[{backend}]")
    DRIVER_S[backend] = statistics.median(driver_us) * 1e-6


@pytest.fixture(scope="module")
def served(model, backend):
    """The model prepared in a spawned `nngpu serve`, through nngpu.connect's proxy."""
    from nngpu.cts.served import served_device

    with served_device(backend) as service:
        cb = PreparedModelCallback()
        assert service.device.prepareModel_1_2(model, ExecutionPreference.FAST_SINGLE_ANSWER, [], [], bytes(32),
                                               cb) == ErrorStatus.NONE
        cb.wait(60)
        yield cb.prepared_model


def test_served_execute_synchronously(benchmark, served, backend, request_):
    req, out = request_
    _check(benchmark(served.executeSynchronously, req, MeasureTiming.NO), out)
    _record(benchmark, f"served_sync[{backend}]")


def test_served_burst(benchmark, served, backend, request_):
    req, out = request_
    with ExecutionBurstController.create(served) as burst:
        _check(benchmark(burst.compute, req, MeasureTiming.NO), out)
    _record(benchmark, f"served_burst[{backend}]")


# ---- the bare ring ----------------------------------------------------------------------------------
_ECHO = textwrap.dedent("""
    import socket, sys
    from nngpu.burst.fmq import MessageQueue, recv_descriptor
    sock = socket.socket(fileno=int(sys.argv[1]))
    spin = float(sys.argv[2])
    (d_in, _), (d_out, _) = recv_descriptor(sock), recv_descriptor(sock)
    qin, qout = MessageQueue.attach(d_in, dup=False, spin_us=spin), MessageQueue.attach(d_out, dup=False, spin_us=spin)
    while (pkt := qin.read_blocking(timeout=60)) is not None:
        qout.write(pkt)
""")


@pytest.mark.parametrize("mode", ["busy_polled", "sleeping"])
def test_ring_round_trip_cross_process(benchmark, mode):
    """What a burst to another process would cost with free serialization and execution: the
    busy-polled case uses the burst's spin defaults, the sleeping one pays an eventfd wake-up
    on each side."""
    client_spin, server_spin = (CLIENT_SPIN_US, SERVER_SPIN_US) if mode == "busy_polled" else (0, 0)
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    proc = subprocess.Popen([sys.executable, "-c", _ECHO, str(child.fileno()), str(server_spin)],
                            pass_fds=[child.fileno()])
    child.close()
    to_child = MessageQueue(DATUM_SIZE, 1024, spin_us=client_spin)
    from_child = MessageQueue(DATUM_SIZE, 1024, spin_us=client_spin)
    try:
        send_descriptor(parent, to_child.descriptor())
        send_descriptor(parent, from_child.descriptor())
        packet = bytes(range(7 * DATUM_SIZE))

        def round_trip():
            to_child.write(packet)
            return from_child.read_blocking(None, timeout=10)

        assert benchmark(round_trip) == packet
        _record(benchmark, f"ring[{mode}]")
    finally:
        to_child.close()
        from_child.close()
        parent.close()
        proc.wait(timeout=20)
