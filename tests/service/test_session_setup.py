"""The service's session, in this process over a socketpair: calls that arrive before the session
is set up are served like any other, and failed calls close each fd they were sent exactly once
(a second close could close another client's fd in a threaded service)."""
from __future__ import annotations

import errno
import fcntl
import os
import socket
import time

import pytest

from nngpu.burst.fmq import MessageQueue
from nngpu.driver.device import Device
from nngpu.hal.types import DataLocation, ErrorStatus, OperandLifeTime
from nngpu.memory import allocate_shared
from nngpu.service import codec, session as session_module
from nngpu.service.session import Session
from nngpu.service.wire import dumps, loads
from tests.driver.conftest import add_model

WAIT_S = 30.0


def send(sock: socket.socket, op: str, call_id: int, args: dict) -> None:
    plain, fds = codec.encode(codec.CALLS[op], args)
    socket.send_fds(sock, [dumps({"op": op, "id": call_id, "args": plain})], fds)


def messages(sock: socket.socket, count: int) -> list[dict]:
    sock.settimeout(WAIT_S)
    out = []
    while len(out) < count:
        data, fds, _f, _a = socket.recv_fds(sock, 1 << 17, 8)
        for fd in fds:
            os.close(fd)
        out.append(loads(data))
    return out


@pytest.fixture(scope="module")
def device():
    return Device("numpy")


@pytest.fixture
def pair(device):
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    yield mine, theirs
    mine.close()


def test_calls_sent_before_the_session_exists_are_served(device, pair, monkeypatch):
    """The calls wait in the socket while the session starts; the prepare's notice needs the
    session's connection, which the old session assigned only after its reader had started. The
    connection here takes 0.5 s more to return after starting its reader, to widen that window."""
    class SlowToReturn(session_module.Connection):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            time.sleep(0.5)

    monkeypatch.setattr(session_module, "Connection", SlowToReturn)
    mine, theirs = pair
    send(mine, "prepare", 1, {"model": add_model(), "preference": 1, "version": 12, "callback": 7})
    send(mine, "info", 2, {})
    session = Session(device, theirs)
    got = messages(mine, 3)  # two replies and the `prepared` call back, in some order
    replies = {m["re"]: m["args"] for m in got if "re" in m}
    assert replies[1]["status"] == ErrorStatus.NONE and replies[2]["status"] == ErrorStatus.NONE
    (notice,) = [m for m in got if m.get("op") == "prepared"]
    assert notice["args"]["callback"] == 7 and notice["args"]["status"] == ErrorStatus.NONE
    session.conn.close()


def test_failed_calls_close_each_fd_they_were_sent_once(device, pair, monkeypatch):
    mine, theirs = pair
    closed_twice: list[int] = []
    real_close = os.close

    def close(fd: int) -> None:
        try:
            fcntl.fcntl(fd, fcntl.F_GETFD)
        except OSError as e:
            if e.errno == errno.EBADF:
                closed_twice.append(fd)
        real_close(fd)

    monkeypatch.setattr(os, "close", close)
    session = Session(device, theirs)
    model = add_model()
    pool = allocate_shared(64)
    model.pools = [pool]
    model.operands[2].lifetime = OperandLifeTime.CONSTANT_REFERENCE
    model.operands[2].location = DataLocation(0, 1000, 4)  # past the pool's end: the prepare fails
    q = MessageQueue(24, 4)
    send(mine, "prepare", 1, {"model": model, "preference": 1})
    send(mine, "configure", 2, {"model": 99, "burst": 1, "request_q": q.descriptor(), "result_q": q.descriptor()})
    replies = {m["re"]: m["args"]["status"] for m in messages(mine, 2)}
    assert replies == {1: ErrorStatus.INVALID_ARGUMENT, 2: ErrorStatus.INVALID_ARGUMENT}
    session.conn.close()
    assert closed_twice == []
