"""A spawned driver service (python -m nngpu.service.burst_ipc) fed raw packets, as a hostile
client would send them: oversize declarations are refused without the allocation they ask for,
unknown ops, fields and values get INVALID_ARGUMENT, and after a fuzz of mutated messages (some
with fds attached) the service still serves and holds no more fds than before."""
import os
import random
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from nngpu.hal.types import ErrorStatus
from nngpu.memory import allocate_shared
from nngpu.service import codec
from nngpu.service.client import BurstService
from nngpu.service.wire import IDLE_WORKER_S, dumps, loads
from tests.driver.conftest import A, B, add_model, add_request
from tests.service.conftest import Process

FUZZ = 10_000


class RawClient:
    """The client end of a service's socket, talking packets instead of calls."""

    def __init__(self):
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen([sys.executable, "-m", "nngpu.service.burst_ipc", "--fd", str(theirs.fileno())],
                                     pass_fds=[theirs.fileno()])
        theirs.close()
        self.held = Process(self.proc.pid)
        self._id = 1 << 40

    def send(self, data: bytes, fds=()) -> None:
        socket.send_fds(self.sock, [data], list(fds))

    def reply_to(self, call_id: int, timeout: float = 30.0) -> dict:
        """The args of the reply to call_id; replies to other calls are read and dropped."""
        self.sock.settimeout(timeout)
        while True:
            data, fds, _f, _a = socket.recv_fds(self.sock, 1 << 17, 8)
            for fd in fds:
                os.close(fd)
            msg = loads(data)
            if msg.get("re") == call_id:
                return msg["args"]

    def call(self, op, args, fds=()) -> dict:
        self._id += 1
        self.send(dumps({"op": op, "id": self._id, "args": args}), fds)
        return self.reply_to(self._id)

    def ping(self) -> None:
        assert self.call("release", {"model": 1 << 50}) == {"status": 0}

    def settled_fd_count(self, want: int, within_s: float = 10.0) -> int:
        """The service's fd count once it reaches `want` (calls may still be finishing), or as it is."""
        deadline = time.monotonic() + within_s
        while (n := self.held.fds()) != want and time.monotonic() < deadline:
            time.sleep(0.05)
        return n

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes a BurstService reader on this socket too
        except OSError:
            pass
        self.sock.close()
        assert self.proc.wait(timeout=30) == 0


@pytest.fixture
def raw():
    client = RawClient()
    client.ping()
    yield client
    client.close()


def status(args) -> ErrorStatus:
    return ErrorStatus(args["status"])


def test_oversize_declarations_are_refused_without_the_allocation(raw):
    """The pickle bomb's cousins: 35-byte packets declaring 500 MB of bytes, a string, 4 G list
    items; body memfds of 500 MB and 200 MB (sparse) declared whole. None is read; the peak RSS does not grow."""
    before = raw.held.memory("VmHWM")
    head = b"\x83\xa2op\xa7prepare\xa2id\x01\xa4args"
    for tail in (b"\xc6\x1d\xcd\x65\x00", b"\xdb\x1d\xcd\x65\x00", b"\xdd\xff\xff\xff\xff", b"\xdf\xff\xff\xff\xff"):
        raw.send(head + tail + b"\0" * (35 - len(head) - len(tail)))
    fd = os.memfd_create("bomb")
    for size in (500_000_000, 200_000_000):  # over MAX_BODY; within it but sparse
        os.ftruncate(fd, size)
        raw.send(dumps({"body": size}), [fd])
    os.close(fd)
    raw.ping()
    assert raw.held.memory("VmHWM") - before < 50 << 20


def test_unknown_ops_fields_and_values_get_invalid_argument(raw):
    baseline = raw.held.fds()
    pool = allocate_shared(64)
    good_model, _fds = codec.encode(codec.CALLS["prepare"], {"model": add_model(), "preference": 1})
    cases = [("bogus", {}), ("getMemories", {"burst": 1, "slots": []}),  # a call the service does not serve
             ("release", {"model": 1, "extra": 0}), ("release", {}), ("release", {"model": "1"}),
             ("release", {"model": True}), ("freeMemory", {"burst": 1, "slot": 2 ** 40}),
             ("prepare", {**good_model, "preference": 99}),
             ("prepare", {**good_model, "model": {**good_model["model"], "version": 7}}),
             ("execute", {"model": 1, "measure": 0, "extra": 1,
                          "request": {"inputs": [], "outputs": [], "pools": [[0, ["x", 64, 0]]]}}),
             ("configure", {"model": 1, "burst": 1, "request_q": [8, 4, True], "result_q": [8, 4, False]})]
    for op, args in cases:
        reply = raw.call(op, args, [pool.fd, pool.fd])  # fds the message does not (all) describe
        assert status(reply) == ErrorStatus.INVALID_ARGUMENT, (op, args, reply)
        assert reply["error"]
    raw.send(dumps({"op": "release", "id": 5, "args": {"model": 1}, "extra": 0}), [pool.fd])
    assert status(raw.reply_to(5)) == ErrorStatus.INVALID_ARGUMENT  # an envelope off the schema
    # A well-formed call for a model that does not exist: INVALID_ARGUMENT, its queue fds closed.
    from nngpu.burst.fmq import MessageQueue

    q = MessageQueue(8, 4)
    plain, fds = codec.encode(codec.CALLS["configure"], {"model": 5, "burst": 1, "request_q": q.descriptor(),
                                                         "result_q": q.descriptor()})
    assert status(raw.call("configure", plain, fds)) == ErrorStatus.INVALID_ARGUMENT
    assert raw.settled_fd_count(baseline) == baseline


def templates(q):
    """Plain calls to mutate: ids that name nothing, a prepare the driver refuses (an output
    index out of range), so that no mutation that still decodes leaves a model behind."""
    model = add_model()
    model.outputIndexes = [99]
    request = add_request().request
    out = [codec.encode(codec.CALLS["prepare"], {"model": model, "preference": 1}),
           codec.encode(codec.CALLS["execute"], {"model": 77, "request": request, "measure": 1}),
           codec.encode(codec.CALLS["configure"], {"model": 77, "burst": 3, "request_q": q.descriptor(),
                                                   "result_q": q.descriptor()}),
           codec.encode(codec.CALLS["freeMemory"], {"burst": 77, "slot": 1}),
           codec.encode(codec.CALLS["closeBurst"], {"burst": 77}),
           codec.encode(codec.CALLS["getMemories"], {"burst": 77, "slots": [1]})]
    return [(op, plain, fds) for op, (plain, fds) in zip(
        ["prepare", "execute", "configure", "freeMemory", "closeBurst", "getMemories"], out)], request


def mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        choice = rng.random()
        at = rng.randrange(len(b) + 1)
        if choice < 0.5 and b:
            b[min(at, len(b) - 1)] = rng.randrange(256)
        elif choice < 0.75:
            b[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        else:
            del b[at:at + rng.randint(1, 8)]
    return bytes(b)


def test_fuzzed_messages_leave_the_service_serving_with_its_fds(raw):
    from nngpu.burst.fmq import MessageQueue

    rng = random.Random(1234)
    pool, q = allocate_shared(64), MessageQueue(8, 4)
    calls, _request = templates(q)
    baseline, threads = raw.held.fds(), raw.held.threads()
    with_fds = 0
    for k in range(FUZZ):
        op, plain, fds = rng.choice(calls)
        data = mutate(rng, dumps({"op": op, "id": k + 1, "args": plain}))
        if rng.random() < 0.2:
            data = bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))  # noise
        attach = fds if rng.random() < 0.7 else [pool.fd] * rng.randint(0, 5)
        with_fds += bool(attach)
        raw.send(data, attach)
        if k % 25 == 0:
            raw.ping()
    raw.ping()
    assert with_fds > FUZZ // 3  # some with fds attached
    assert raw.settled_fd_count(baseline) == baseline
    assert raw.held.settles(baseline, threads, within_s=IDLE_WORKER_S + 10)  # the wire's idle workers retire
    # Still serving, end to end: the same socket as a BurstService client.
    svc = BurstService(raw.sock, raw.proc)
    st, prepared = svc.prepare(add_model())
    assert st == ErrorStatus.NONE
    r = add_request()
    assert prepared.executeSynchronously(r.request, 0)[0] == ErrorStatus.NONE
    np.testing.assert_array_equal(r.result(), A + B)


def test_a_model_over_64_kib_rides_in_a_body_memfd(raw):
    """The big-message path end to end: 200 KiB of operand values cross in a memfd."""
    baseline = raw.held.fds()
    model = add_model()
    model.operandValues += bytes(200_000)
    svc = BurstService(raw.sock, raw.proc)
    st, prepared = svc.prepare(model)
    assert st == ErrorStatus.NONE
    r = add_request()
    assert prepared.executeSynchronously(r.request, 0)[0] == ErrorStatus.NONE
    np.testing.assert_array_equal(r.result(), A + B)
    prepared.release()
    assert raw.settled_fd_count(baseline) == baseline


def test_a_request_past_the_fd_bound_is_refused_before_sending(raw):
    svc = BurstService(raw.sock, raw.proc)
    st, prepared = svc.prepare(add_model())
    assert st == ErrorStatus.NONE
    r = add_request()
    pool = allocate_shared(8)
    too_many = type(r.request)(r.request.inputs, r.request.outputs, list(r.request.pools) + [pool] * 300)
    assert prepared.executeSynchronously(too_many, 0)[0] == ErrorStatus.INVALID_ARGUMENT
    assert prepared.executeSynchronously(r.request, 0)[0] == ErrorStatus.NONE
    np.testing.assert_array_equal(r.result(), A + B)
