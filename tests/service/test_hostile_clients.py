"""A real `nngpu serve` against clients that misbehave as whole processes and connections
(issue 10, part 4): one that reads no replies, more idle connections than the service serves,
more connections than it has fds, and clients killed (SIGKILL) at any point of their session.
Each time the service goes on serving the other clients, and its fds and threads come back to
their baseline, its memory to about it."""
from __future__ import annotations

import os
import random
import resource
import select
import signal
import socket
import time

import pytest

import nngpu
from nngpu.burst.fmq import MessageQueue
from nngpu.hal.types import ErrorStatus
from nngpu.service import codec
from nngpu.service.wire import dumps
from tests.driver.conftest import add_model, add_request
from tests.service.conftest import Process, Served, serve_env

SEND_TIMEOUT_S = 2.0  # the service's wait for a reply to go out, lowered from 10 s for the test
CYCLES, FULL_CYCLES = 300, 1000  # clients killed: a sample by default, the sweep with --full-cts


def raw_connection(path, within_s: float = 30.0) -> socket.socket:
    """A connected socket; TimeoutError if the service's backlog stays full for `within_s`
    (a non-blocking AF_UNIX connect fails with EAGAIN then: it is tried again)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.setblocking(False)
    end = time.monotonic() + within_s
    while True:
        try:
            sock.connect(str(path))
            break
        except BlockingIOError:
            if time.monotonic() > end:
                sock.close()
                raise TimeoutError(f"{path}: the backlog stayed full") from None
            time.sleep(0.01)
    sock.setblocking(True)
    return sock


def packet(op: str, call_id: int, args: dict) -> tuple[bytes, list[int]]:
    plain, fds = codec.encode(codec.CALLS[op], args)
    return dumps({"op": op, "id": call_id, "args": plain}), fds


def hung_up(sock: socket.socket, within_s: float) -> bool:
    p = select.poll()
    p.register(sock, select.POLLRDHUP)
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if any(ev & (select.POLLRDHUP | select.POLLHUP) for _fd, ev in p.poll(100)):
            return True
    return False


def served_ok(path) -> None:
    with nngpu.connect(path) as device:
        assert device.getVersionString()[0] == ErrorStatus.NONE


@pytest.fixture
def baseline(short_dir):
    """A service, used once (so that what it loads lazily is loaded), and what it then holds."""
    s = Served(short_dir / "s.sock", env=serve_env(NNGPU_IPC_SEND_TIMEOUT_S=str(SEND_TIMEOUT_S)))
    served_ok(s.path)
    proc = Process(s.proc.pid)
    yield s, proc
    s.stop()


def test_a_client_that_reads_no_replies_costs_bounded_memory_and_is_hung_up_on(baseline):
    """It sends calls as fast as the service takes them and reads nothing: the service reads on
    until MAX_IN_FLIGHT calls wait on replies that cannot go out, refuses the rest, hangs up once
    a reply has waited SEND_TIMEOUT_S, and serves another client meanwhile."""
    s, proc = baseline
    fds, threads = proc.quiet()
    peak = proc.memory("VmHWM")
    flood = raw_connection(s.path)
    data, _ = packet("info", 1, {})
    sent = 0
    flood.setblocking(False)
    try:
        while sent < 200_000:
            try:
                flood.send(data)
                sent += 1
            except BlockingIOError:  # the service stopped reading: wait a little, then give up
                if not select.select([], [flood], [], 1.0)[1]:
                    break
    finally:
        flood.setblocking(True)
    assert sent < 200_000, "the service read every call of a client that reads no replies"
    served_ok(s.path)
    assert hung_up(flood, SEND_TIMEOUT_S + 10)
    flood.close()
    assert proc.memory("VmHWM") - peak < 32 << 20
    assert proc.settles(fds, threads), (proc.holds(), (fds, threads))
    assert "hanging up on a peer that reads no replies" in s.stderr()
    served_ok(s.path)


def test_connections_past_the_cap_are_refused_politely(short_dir):
    """Idle connections cost a reader thread each; one past --max-clients is told why, closed and
    logged; once they close, fds and threads are back to the baseline and new clients are served."""
    s = Served(short_dir / "s.sock", "--max-clients", "8")
    try:
        served_ok(s.path)
        proc = Process(s.proc.pid)
        fds, threads = proc.quiet()
        idle = [nngpu.connect(s.path) for _ in range(8)]
        assert proc.quiet() == (fds + 8, threads + 8)  # a socket and a reader each: their workers retired
        with pytest.raises(ConnectionRefusedError, match="serving 8 clients already"):
            nngpu.connect(s.path)
        assert "refused a connection: serving 8 clients already" in s.stderr()
        assert all(d.getVersionString()[0] == ErrorStatus.NONE for d in idle)
        for d in idle:
            d.close()
        assert proc.settles(fds, threads), (proc.holds(), (fds, threads))
        served_ok(s.path)
    finally:
        s.stop()


def _limit_fds() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))


def test_running_out_of_fds_does_not_end_the_accept_loop(short_dir):
    """With 64 fds, idle connections exhaust them: accept fails (EMFILE), which is logged and
    waited out; once the clients go, fds and threads are back to the baseline and it serves."""
    s = Served(short_dir / "s.sock", "--max-clients", "1000", preexec_fn=_limit_fds)
    try:
        served_ok(s.path)
        proc = Process(s.proc.pid)
        fds, threads = proc.quiet()
        socks = []
        try:  # past the fds it has, the service accepts none; the kernel queues a backlog, then waits
            while len(socks) < 200:
                socks.append(raw_connection(s.path, within_s=2.0))
        except TimeoutError:
            pass
        assert len(socks) < 200
        end = time.monotonic() + 20
        while "accept: Too many open files" not in s.stderr():
            assert time.monotonic() < end, s.stderr()
            time.sleep(0.05)
        for sock in socks:
            sock.close()
        assert s.proc.poll() is None
        assert proc.settles(fds, threads), (proc.holds(), (fds, threads))
        served_ok(s.path)
    finally:
        s.stop()


def _client_session(path, messages: list[tuple[bytes, list[int]]], ready_w: int) -> None:
    """In a forked child: connect, send a session's calls without waiting for replies, say so,
    and wait to be killed. Only system calls: the parent's other threads are not in the child."""
    try:
        sock = raw_connection(path)
        for data, fds in messages:
            socket.send_fds(sock, [data], fds)
        os.write(ready_w, b"x")
        time.sleep(60)
    finally:
        os._exit(0)


def test_clients_killed_at_any_point_leave_nothing_behind(baseline, pytestconfig):
    """Clients that prepare a model, configure a burst on it (its FMQs as fds), execute
    synchronously and asynchronously with pools as fds, and are killed with SIGKILL at once or
    after sending: CYCLES of them (FULL_CYCLES with --full-cts) leave the service's fds and
    threads as they were, its RSS about so."""
    s, proc = baseline
    requests, results = MessageQueue(24, 64), MessageQueue(24, 64)
    request = add_request().request
    messages = [packet("prepare", 1, {"model": add_model(), "preference": 1}),
                packet("configure", 2, {"model": 1, "burst": 1, "request_q": requests.descriptor(),
                                        "result_q": results.descriptor()}),
                packet("execute", 3, {"model": 1, "request": request, "measure": 0}),
                packet("executeAsync", 4, {"model": 1, "request": request, "measure": 0, "version": 12,
                                           "callback": 1})]
    rng = random.Random(7)

    def cycle() -> bool:
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            _client_session(s.path, messages, ready_w)
        os.close(ready_w)
        reached = rng.random() < 0.8 and bool(select.select([ready_r], [], [], 10.0)[0])
        if reached and rng.random() < 0.5:
            time.sleep(rng.random() * 0.005)  # somewhere in the service's handling of the session
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(ready_r)
        return reached

    for _ in range(100):  # the allocator's arenas and the driver's caches warm up
        cycle()
    fds, threads = proc.quiet(for_s=11)  # the driver's pools retire idle threads after 10 s
    rss = proc.memory()
    cycles = FULL_CYCLES if pytestconfig.getoption("--full-cts") else CYCLES
    reached = sum(cycle() for _ in range(cycles))
    assert reached > cycles // 2  # most clients were killed after sending their whole session
    assert proc.settles(fds, threads), (proc.holds(), (fds, threads))
    assert proc.memory() - rss < 16 << 20
    served_ok(s.path)
