"""The wire's bounds on one connection, in this process over a socketpair: calls past
MAX_IN_FLIGHT are answered GENERAL_FAILURE at once and the rest are served; calls back past
MAX_PENDING fail at once; a send is bounded by its call's timeout; workers retire when the
connection ends."""
from __future__ import annotations

import socket
import threading
import time

import pytest

from nngpu.hal.types import ErrorStatus
from nngpu.service.wire import MAX_IN_FLIGHT, MAX_PENDING, Connection, IpcError, dumps, loads


@pytest.fixture
def pair():
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    yield mine, theirs
    mine.close()


def test_calls_past_the_in_flight_bound_are_refused_at_once(pair):
    mine, theirs = pair
    release = threading.Event()

    def handler(op: str, args: dict) -> dict:
        release.wait(30)
        return {"status": ErrorStatus.NONE}

    conn = Connection(theirs, handler)
    extra = 8
    for k in range(MAX_IN_FLIGHT + extra):
        mine.send(dumps({"op": "release", "id": k + 1, "args": {"model": 1}}))
    mine.settimeout(30)
    refused = [loads(mine.recv(1 << 16)) for _ in range(extra)]  # before any call is served
    assert all(r["args"]["status"] == ErrorStatus.GENERAL_FAILURE and "in flight" in r["args"]["error"]
               for r in refused)
    release.set()
    served = [loads(mine.recv(1 << 16)) for _ in range(MAX_IN_FLIGHT)]
    assert {r["re"] for r in refused} | {r["re"] for r in served} == set(range(1, MAX_IN_FLIGHT + extra + 1))
    assert all(r["args"]["status"] == ErrorStatus.NONE for r in served)
    conn.close()


def test_calls_back_past_the_pending_bound_and_unsendable_calls_fail_within_their_timeout(pair):
    mine, theirs = pair
    conn = Connection(theirs, lambda op, args: {"status": ErrorStatus.NONE})
    waiting = [threading.Thread(target=lambda: pytest.raises(IpcError, conn.call, "release", {"model": 1}, 3.0))
               for _ in range(MAX_PENDING)]
    for t in waiting:
        t.start()
    time.sleep(0.5)  # the peer (mine) reads nothing and answers nothing
    start = time.monotonic()
    with pytest.raises(IpcError, match="has not answered"):
        conn.call("release", {"model": 1})
    assert time.monotonic() - start < 0.5
    for t in waiting:
        t.join()
    # The socket fills (nothing reads it): a call with a timeout still returns within it.
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    start = time.monotonic()
    for _ in range(1000):
        try:
            conn.call("release", {"model": 1}, timeout=0.2)
        except IpcError as e:
            if "reads nothing" in str(e):
                break
    else:
        pytest.fail("the socket never filled")
    assert time.monotonic() - start < 1000 * 0.2
    conn.close()
    assert conn.closed.is_set()


def test_a_caller_keeping_the_window_full_is_never_refused(pair, monkeypatch):
    """A caller that sends its next call as each reply arrives, MAX_IN_FLIGHT at once, is always
    served: a call is counted out before its reply goes (counting it out after the reply let
    the next call in while the answered one still counted: a spurious "busy", GENERAL_FAILURE
    for 1 of 64 bursts configured at once through `nngpu serve` under load)."""
    mine, theirs = pair
    real_done = Connection._done

    def slow_done(self, cost: int) -> None:
        time.sleep(0.002)                      # widens the window between a reply and the count
        real_done(self, cost)

    monkeypatch.setattr(Connection, "_done", slow_done)
    conn = Connection(theirs, lambda op, args: {"status": ErrorStatus.NONE}, workers=8)
    mine.settimeout(30)
    total, sent = 300, 0
    for _ in range(MAX_IN_FLIGHT):
        sent += 1
        mine.send(dumps({"op": "release", "id": sent, "args": {"model": 1}}))
    replies = []
    while len(replies) < total:
        replies.append(loads(mine.recv(1 << 16)))
        if sent < total:
            sent += 1
            mine.send(dumps({"op": "release", "id": sent, "args": {"model": 1}}))
    refused = [r for r in replies if r["args"]["status"] != ErrorStatus.NONE]
    assert not refused, f"{len(refused)} of {total} refused: {refused[0]['args']}"
    conn.close()
