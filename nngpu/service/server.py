"""The service side of nngpu.service.burst_ipc: a driver process hosting a Device, serving each
client connection's calls (prepare, configure, freeMemory, closeBurst, execute, release) and
reaching back to the client for its burst memories (getMemories).

When a connection ends the service closes that client's bursts, so no worker waits for a
client that is gone. The driver is imported only where a call needs it: a client process that
imports nngpu.service.burst_ipc does not load it.
"""
from __future__ import annotations

import argparse
import logging
import os
import pickle
import socket
import threading
from typing import Any

from ..fmq import QueueDescriptor
from ..hal.interfaces import IBurstCallback
from ..hal.types import ErrorStatus, ExecutionPreference, MeasureTiming, Model, OptionalTimePoint, Priority, Request
from ..memory import close_fds
from .wire import CALL_TIMEOUT_S, Connection, IpcError, loads, memories_from, restore_pools, status_of

log = logging.getLogger("nngpu.burst_ipc")


class _RemoteCallback(IBurstCallback):
    """The client's IBurstCallback as the driver sees it: getMemories over the socket."""

    def __init__(self, conn: Connection, burst_id: int):
        self._conn = conn
        self._burst = burst_id

    def getMemories(self, slots):
        try:
            reply, _body, fds = self._conn.call({"op": "getMemories", "burst": self._burst,
                                                 "slots": [int(s) for s in slots]})
        except IpcError as e:
            log.info("getMemories: %s", e)
            return ErrorStatus.GENERAL_FAILURE, []
        status = status_of(reply)
        if status != ErrorStatus.NONE:
            close_fds(fds)
            return status, []
        try:
            return ErrorStatus.NONE, memories_from(reply.get("memories", []), fds)
        except (IpcError, KeyError, TypeError, ValueError) as e:
            close_fds(fds)
            log.info("getMemories: %s", e)
            return ErrorStatus.GENERAL_FAILURE, []


class _Session:
    """One client connection to the service: its prepared models and bursts."""

    def __init__(self, device, sock: socket.socket):
        self.device = device
        self.models: dict[int, Any] = {}
        self.bursts: dict[int, Any] = {}
        self._lock = threading.Lock()
        self._next = 0
        self.conn = Connection(sock, self.handle, self.close_all)

    def close_all(self) -> None:
        with self._lock:
            bursts = list(self.bursts.values())
            self.bursts.clear()
            self.models.clear()
        for b in bursts:
            close = getattr(b, "close", None)
            if close:
                close()

    def _new_id(self) -> int:
        with self._lock:
            self._next += 1
            return self._next

    def handle(self, msg: dict, body: bytes, fds: list[int]) -> tuple[dict, bytes, list[int]]:
        op = msg.get("op")
        fn = getattr(self, f"_op_{op}", None) if isinstance(op, str) else None
        if fn is None:
            close_fds(fds)
            return {"status": int(ErrorStatus.INVALID_ARGUMENT), "error": f"unknown op {op!r}"}, b"", []
        try:
            return fn(msg, body, fds)
        except (IpcError, pickle.UnpicklingError, KeyError, TypeError, ValueError, EOFError) as e:
            close_fds(fds)
            return {"status": int(ErrorStatus.INVALID_ARGUMENT), "error": str(e)}, b"", []

    def _op_prepare(self, msg, body, fds):
        from ..driver.callbacks import PreparedModelCallback

        memories = memories_from(msg.get("pools", []), fds)
        model = loads(body)
        model.pools = restore_pools(model.pools, memories)
        cb = PreparedModelCallback()
        pref = ExecutionPreference(int(msg.get("preference", ExecutionPreference.FAST_SINGLE_ANSWER)))
        if isinstance(model, Model):
            status = self.device.prepareModel_1_2(model, pref, [], [], bytes(32), cb)
        else:
            status = self.device.prepareModel_1_3(model, pref, Priority.MEDIUM, OptionalTimePoint(), [], [],
                                                  bytes(32), cb)
        cb.wait(CALL_TIMEOUT_S)
        status = status if status != ErrorStatus.NONE else cb.status
        if status != ErrorStatus.NONE or cb.prepared_model is None:
            return {"status": int(status or ErrorStatus.GENERAL_FAILURE)}, b"", []
        mid = self._new_id()
        with self._lock:
            self.models[mid] = cb.prepared_model
        return {"status": 0, "model": mid}, b"", []

    def _model(self, msg):
        with self._lock:
            prepared = self.models.get(msg.get("model"))
        if prepared is None:
            raise KeyError(f"unknown model {msg.get('model')}")
        return prepared

    def _op_release(self, msg, body, fds):
        with self._lock:
            self.models.pop(msg.get("model"), None)
        return {"status": 0}, b"", []

    def _op_configure(self, msg, body, fds):
        prepared = self._model(msg)
        queues, at = [], 0
        for key in ("request_q", "result_q"):
            meta = msg[key]
            n = 3 if meta.get("blocking") else 1
            queues.append(QueueDescriptor.from_parts(meta, fds[at:at + n]))
            at += n
        if at != len(fds):
            raise IpcError("unexpected fds with configure")
        burst_id = int(msg["burst"])
        try:
            status, context = prepared.configureExecutionBurst(_RemoteCallback(self.conn, burst_id), *queues)
        finally:
            close_fds(fds)  # the burst attached its own copies
        if status == ErrorStatus.NONE and context is not None:
            with self._lock:
                self.bursts[burst_id] = context
        return {"status": int(status)}, b"", []

    def _op_freeMemory(self, msg, body, fds):
        with self._lock:
            context = self.bursts.get(msg.get("burst"))
        if context is not None:
            context.freeMemory(int(msg["slot"]))
        return {"status": 0}, b"", []

    def _op_closeBurst(self, msg, body, fds):
        with self._lock:
            context = self.bursts.pop(msg.get("burst"), None)
        if context is not None and hasattr(context, "close"):
            context.close()
        return {"status": 0}, b"", []

    def _op_execute(self, msg, body, fds):
        prepared = self._model(msg)
        request = loads(body)
        if not isinstance(request, Request):
            raise TypeError("not a Request")
        request.pools = restore_pools(request.pools, memories_from(msg.get("pools", []), fds))
        status, shapes, timing = prepared.executeSynchronously(request, MeasureTiming(int(msg.get("measure", 0))))
        return {"status": int(status), "shapes": [[list(s.dimensions), bool(s.isSufficient)] for s in shapes],
                "timing": [int(timing.timeOnDevice), int(timing.timeInDriver)]}, b"", []


def serve_connection(sock: socket.socket, device=None) -> None:
    """Serve one client until it disconnects; then close everything it left open."""
    from ..driver.device import Device

    session = _Session(device or Device("numpy"), sock)
    session.conn.closed.wait()
    session.close_all()
    sock.close()



def main(argv: list[str] | None = None) -> int:
    """The service process: serve one inherited socket (--fd) or every connection to --listen."""
    p = argparse.ArgumentParser(prog="python -m nngpu.service.burst_ipc",
                                description="A driver service for bursts from other processes.")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--fd", type=int, help="serve the one connected socket with this fd")
    where.add_argument("--listen", help="accept connections on this Unix socket path")
    p.add_argument("--backend", default="numpy")
    args = p.parse_args(argv)

    from ..driver.device import Device

    device = Device(args.backend)
    if args.fd is not None:
        serve_connection(socket.socket(fileno=args.fd), device)
        return 0
    server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    old = os.umask(0o177)  # only this user may connect
    try:
        server.bind(args.listen)
    finally:
        os.umask(old)
    server.listen(8)
    try:
        while True:
            conn, _ = server.accept()
            threading.Thread(target=serve_connection, args=(conn, device), daemon=True).start()
    except KeyboardInterrupt:
        return 0
    finally:
        server.close()
        os.unlink(args.listen)
