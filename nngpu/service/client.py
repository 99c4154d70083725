"""The client side of nngpu.service.burst_ipc: a connection to a driver service process and the
proxies (RemotePreparedModel, RemoteBurstContext) that let ExecutionBurstController reach a
prepared model there. The client answers the service's getMemories calls from each burst's
callback, and when the connection ends it shuts down every burst's queues, so no compute waits
for a service that is gone.
"""
from __future__ import annotations

import logging
import socket
import subprocess
import sys
import threading

from ..burst.fmq import MessageQueue
from ..hal.interfaces import IBurstCallback, IBurstContext
from ..hal.types import ErrorStatus, OutputShape, Request, Timing
from .codec import WireError
from .wire import MAX_FDS, Connection, IpcError

log = logging.getLogger("nngpu.burst_ipc")


class RemoteBurstContext(IBurstContext):
    """A burst configured in the service process: freeMemory and close are calls to it."""

    def __init__(self, service: "BurstService", burst_id: int):
        self._service = service
        self._burst = burst_id

    def freeMemory(self, slot: int) -> None:
        try:  # a call, not a notification: the driver has dropped the slot when this returns
            self._service._conn.call("freeMemory", {"burst": self._burst, "slot": int(slot)})
        except (IpcError, WireError):
            pass

    def close(self) -> None:
        self._service._forget_burst(self._burst)
        try:
            self._service._conn.call("closeBurst", {"burst": self._burst}, timeout=10.0)
        except IpcError:
            pass


class RemotePreparedModel:
    """The part of IPreparedModel a burst client needs, for a model in the service process."""

    def __init__(self, service: "BurstService", model_id: int):
        self._service = service
        self.model_id = model_id

    def configureExecutionBurst(self, callback, requestChannel, resultChannel):
        if callback is None or not isinstance(requestChannel, MessageQueue) or \
                not isinstance(resultChannel, MessageQueue):
            return ErrorStatus.INVALID_ARGUMENT, None
        burst_id = self._service._register_burst(callback, (requestChannel, resultChannel))
        try:
            reply = self._service._conn.call("configure", {
                "model": self.model_id, "burst": burst_id,
                "request_q": requestChannel.descriptor(), "result_q": resultChannel.descriptor()})
        except (IpcError, WireError) as e:
            log.warning("configureExecutionBurst: %s", e)
            self._service._forget_burst(burst_id)
            return ErrorStatus.INVALID_ARGUMENT if isinstance(e, WireError) else ErrorStatus.DEVICE_UNAVAILABLE, None
        status = reply["status"]
        if status != ErrorStatus.NONE:
            self._service._forget_burst(burst_id)
            return status, None
        return ErrorStatus.NONE, RemoteBurstContext(self._service, burst_id)

    def executeSynchronously(self, request: Request, measure) -> tuple[ErrorStatus, list[OutputShape], Timing]:
        try:
            reply = self._service._conn.call("execute", {"model": self.model_id, "request": request,
                                                         "measure": measure})
        except WireError as e:  # a request or measure the schema cannot hold is not a valid one
            log.warning("remote executeSynchronously: %s", e)
            return ErrorStatus.INVALID_ARGUMENT, [], Timing()
        except IpcError as e:
            log.warning("remote executeSynchronously: %s", e)
            return ErrorStatus.GENERAL_FAILURE, [], Timing()
        return reply["status"], reply.get("shapes", []), reply.get("timing", Timing())

    def release(self) -> None:
        try:
            self._service._conn.call("release", {"model": self.model_id})
        except (IpcError, WireError):
            pass


class BurstService:
    """A connection to a driver service process (spawned here, or listening on a path)."""

    def __init__(self, sock: socket.socket, process: subprocess.Popen | None = None):
        self.process = process
        self._bursts: dict[int, tuple[IBurstCallback, tuple[MessageQueue, MessageQueue]]] = {}
        self._lock = threading.Lock()
        self._next_burst = 0
        self._conn = Connection(sock, self._handle, self._peer_gone)

    @classmethod
    def spawn(cls, backend: str = "numpy", extra_args: list[str] | None = None) -> "BurstService":
        """Start `python -m nngpu.service.burst_ipc` on one end of a socketpair."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            proc = subprocess.Popen([sys.executable, "-m", "nngpu.service.burst_ipc", "--fd", str(theirs.fileno()),
                                     "--backend", backend, *(extra_args or [])], pass_fds=[theirs.fileno()])
        finally:
            theirs.close()
        return cls(mine, proc)

    @classmethod
    def connect(cls, path: str) -> "BurstService":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.connect(path)
        return cls(sock)

    def prepare(self, model, preference: int = 1) -> tuple[ErrorStatus, RemotePreparedModel | None]:
        """Send `model` (pools as fds) to the service and prepare it there."""
        try:
            reply = self._conn.call("prepare", {"model": model, "preference": preference})
        except WireError as e:  # a model the schema cannot hold is not a valid one
            log.warning("prepare: %s", e)
            return ErrorStatus.INVALID_ARGUMENT, None
        except IpcError as e:
            log.warning("prepare: %s", e)
            return ErrorStatus.DEVICE_UNAVAILABLE, None
        status = reply["status"]
        if status != ErrorStatus.NONE or reply.get("model") is None:
            return status if status != ErrorStatus.NONE else ErrorStatus.GENERAL_FAILURE, None
        return status, RemotePreparedModel(self, int(reply["model"]))

    # ---- bursts -------------------------------------------------------------------------------------
    def _register_burst(self, callback, queues) -> int:
        with self._lock:
            self._next_burst += 1
            self._bursts[self._next_burst] = (callback, queues)
            return self._next_burst

    def _forget_burst(self, burst_id: int) -> None:
        with self._lock:
            self._bursts.pop(burst_id, None)

    def _handle(self, op: str, args: dict) -> dict:
        if op != "getMemories":
            return {"status": ErrorStatus.INVALID_ARGUMENT}
        with self._lock:
            entry = self._bursts.get(args["burst"])
        if entry is None:
            return {"status": ErrorStatus.INVALID_ARGUMENT}
        status, memories = entry[0].getMemories(args["slots"])
        if status != ErrorStatus.NONE:
            return {"status": status}
        if len(memories) > MAX_FDS - 1:
            return {"status": ErrorStatus.GENERAL_FAILURE}
        return {"status": ErrorStatus.NONE, "memories": list(memories)}

    def _peer_gone(self) -> None:
        """The service died: wake every compute waiting on its queues."""
        with self._lock:
            bursts = list(self._bursts.values())
        for _cb, queues in bursts:
            for q in queues:
                q.shutdown()

    @property
    def alive(self) -> bool:
        return not self._conn.closed.is_set()

    def close(self) -> None:
        self._conn.close()
        if self.process is not None:
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> "BurstService":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
