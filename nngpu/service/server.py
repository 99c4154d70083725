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
import socket
import threading
from typing import Any

from ..hal.interfaces import IBurstCallback
from ..hal.types import ErrorStatus, Model, OptionalTimePoint, Priority
from .wire import CALL_TIMEOUT_S, Connection, IpcError

log = logging.getLogger("nngpu.burst_ipc")


class _RemoteCallback(IBurstCallback):
    """The client's IBurstCallback as the driver sees it: getMemories over the socket."""

    def __init__(self, conn: Connection, burst_id: int):
        self._conn = conn
        self._burst = burst_id

    def getMemories(self, slots):
        try:
            reply = self._conn.call("getMemories", {"burst": self._burst, "slots": [int(s) for s in slots]})
        except (IpcError, ValueError) as e:
            log.info("getMemories: %s", e)
            return ErrorStatus.GENERAL_FAILURE, []
        if reply["status"] != ErrorStatus.NONE:
            return reply["status"], []
        return ErrorStatus.NONE, reply.get("memories", [])


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

    def handle(self, op: str, args: dict) -> dict:
        """One call, its args decoded by the wire's schema; the wire closes the fds after."""
        fn = getattr(self, f"_op_{op}", None)
        if fn is None:
            return {"status": ErrorStatus.INVALID_ARGUMENT, "error": f"{op} is not served here"}
        try:
            return fn(args)
        except KeyError as e:
            return {"status": ErrorStatus.INVALID_ARGUMENT, "error": str(e)}

    def _op_prepare(self, args):
        from ..driver.callbacks import PreparedModelCallback

        model, pref = args["model"], args["preference"]
        cb = PreparedModelCallback()
        if isinstance(model, Model):
            status = self.device.prepareModel_1_2(model, pref, [], [], bytes(32), cb)
        else:
            status = self.device.prepareModel_1_3(model, pref, Priority.MEDIUM, OptionalTimePoint(), [], [],
                                                  bytes(32), cb)
        cb.wait(CALL_TIMEOUT_S)
        status = status if status != ErrorStatus.NONE else cb.status
        if status != ErrorStatus.NONE or cb.prepared_model is None:
            return {"status": status or ErrorStatus.GENERAL_FAILURE}
        mid = self._new_id()
        with self._lock:
            self.models[mid] = cb.prepared_model
        return {"status": ErrorStatus.NONE, "model": mid}

    def _model(self, args):
        with self._lock:
            prepared = self.models.get(args["model"])
        if prepared is None:
            raise KeyError(f"unknown model {args['model']}")
        return prepared

    def _op_release(self, args):
        with self._lock:
            self.models.pop(args["model"], None)
        return {"status": ErrorStatus.NONE}

    def _op_configure(self, args):
        prepared = self._model(args)
        burst_id = args["burst"]
        status, context = prepared.configureExecutionBurst(_RemoteCallback(self.conn, burst_id),
                                                           args["request_q"], args["result_q"])
        if status == ErrorStatus.NONE and context is not None:
            with self._lock:
                self.bursts[burst_id] = context
        return {"status": status}

    def _op_freeMemory(self, args):
        with self._lock:
            context = self.bursts.get(args["burst"])
        if context is not None:
            context.freeMemory(args["slot"])
        return {"status": ErrorStatus.NONE}

    def _op_closeBurst(self, args):
        with self._lock:
            context = self.bursts.pop(args["burst"], None)
        if context is not None and hasattr(context, "close"):
            context.close()
        return {"status": ErrorStatus.NONE}

    def _op_execute(self, args):
        status, shapes, timing = self._model(args).executeSynchronously(args["request"], args["measure"])
        return {"status": status, "shapes": shapes, "timing": timing}


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
