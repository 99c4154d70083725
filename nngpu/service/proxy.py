"""nngpu.connect(PATH): an IDevice whose models are prepared and executed by an `nngpu serve`
process, pools travelling as fds.

Served: getCapabilities*, getSupportedOperations*, getStatus, getVersionString, getType,
getSupportedExtensions, prepareModel* (callback-based: the launch status at once, the callback
notified when the service calls back `prepared`), allocate and IBuffer copyTo / copyFrom (a
buffer is named by its device token, which requests use as in process), and on the prepared
model executeSynchronously*, execute* (callbacks notified by an `executed` call back) and
configureExecutionBurst (the burst's FMQs cross as fds), executeFenced (sync fences in and out
as fds) with its IFencedExecutionCallback; the compilation cache too
(getNumberOfCacheFilesNeeded, prepareModel*'s cache handles, prepareModelFromCache*), its
files travelling as fds. That is every method of IDevice and IPreparedModel 1.0-1.3. For the
AIDL face, the prepared model also opens a reusable execution or a burst with memory
identifier tokens kept in the service (nngpu.service.remote_reusable).

Every callback is notified exactly once: by the service's call back after a successful launch,
here with the launch status after a failed one, and with DEVICE_UNAVAILABLE when the service goes
away first; a fence it returned that is still pending then is put in error (FENCE_ERROR), so that
no caller waits on it for ever. A prepared model, a buffer or a fenced execution's callback lives in the service until its
proxy object is collected or this proxy closes. A synchronous execution with a deadline waits
for its reply until the deadline and DEADLINE_GRACE_S more, then is DEVICE_UNAVAILABLE (a
stopped service); other calls wait the wire's CALL_TIMEOUT_S.
"""
from __future__ import annotations

import logging
import os
import queue
import socket
import weakref
from typing import Any

from ..threads import start_thread
from ..driver.execution import Result
from ..driver.fenced import FENCE_ERROR, FenceState, fence_kind, fence_state
from ..hal.interfaces import IBuffer
from ..hal.types import DeviceStatus, ErrorStatus, ExecutionPreference, NativeHandle, Priority, Timing
from ..hidl.device import NOTIFY, HidlDevice
from ..hidl.prepared_model import HidlPreparedModel
from .client import BurstService, RemotePreparedModel
from .codec import WireError
from .remote_calls import as_result, call, failure, fenced_call, timed
from .remote_reusable import RemoteReusableExecution, RemoteTokenBurst
from .wire import IpcError

log = logging.getLogger("nngpu.service")

HANDSHAKE_TIMEOUT_S = 10.0


def _is_callback(callback: Any) -> bool:
    return callback is not None and hasattr(callback, "notify")


def _notify(callback: Any, method: str, *args) -> None:
    try:
        getattr(callback, method)(*args)
    except Exception:
        log.exception("a callback raised")


class _Link(BurstService):
    """The connection: bursts (BurstService) plus the callbacks waiting for a call back."""

    def __init__(self, sock: socket.socket):
        self._waiting: dict[int, tuple[str, Any, str]] = {}  # id -> (op, callback, notify method)
        self._next_callback = 0
        # dups of the service's fences, to put in error if it goes away; no lock, as drop_fence runs
        # from the collector, at any point of this thread: each is taken out by one atomic pop
        self._fences: dict[int, bool] = {}
        # what collected proxy objects leave for the service to release (release_later)
        self._releases: queue.SimpleQueue = queue.SimpleQueue()
        super().__init__(sock)
        start_thread(_release_loop, "nngpu-release", (self._releases, self._conn))

    def release_later(self, op: str, args: dict) -> None:
        """From a finalizer, which runs wherever a collection happens (the reader thread, whose
        reply a call needs; the main thread, where a KeyboardInterrupt raised inside a finalizer
        would be lost): SimpleQueue.put neither blocks nor waits, so nothing is called here."""
        if self.alive:
            self._releases.put((op, args))

    def close(self) -> None:
        self._releases.put(None)
        super().close()

    def hold_fence(self, fd: int) -> int | None:
        """A dup of a fence the service returned (an eventfd, which nothing but the service would
        signal), kept until drop_fence; None for another kind of fd."""
        if fence_kind(fd) != "eventfd":
            return None
        dup = os.dup(fd)
        self._fences[dup] = True
        return dup

    def drop_fence(self, dup: int | None) -> None:
        if dup is not None and self._fences.pop(dup, False):
            os.close(dup)

    def wait_for(self, op: str, callback: Any, method: str) -> int:
        with self._lock:
            self._next_callback += 1
            self._waiting[self._next_callback] = (op, callback, method)
            return self._next_callback

    def claim(self, callback_id: int, op: str) -> tuple[Any, str] | None:
        """The callback waiting under this id for `op`, now no longer waiting; None if none."""
        with self._lock:
            entry = self._waiting.get(callback_id)
            if entry is None or entry[0] != op:
                return None
            del self._waiting[callback_id]
        return entry[1], entry[2]

    def _handle(self, op: str, args: dict) -> dict:
        if op not in ("prepared", "executed"):
            return super()._handle(op, args)
        claimed = self.claim(args["callback"], op)
        if claimed is None:
            return {"status": ErrorStatus.INVALID_ARGUMENT, "error": "no such callback"}
        callback, method = claimed
        status = args["status"]
        if op == "prepared":
            model = args.get("model")
            _notify(callback, method, status, ProxyPreparedModel(self, model) if model is not None else None)
        elif method == "notify":
            _notify(callback, method, status)
        else:
            _notify(callback, method, status, args.get("shapes", []), args.get("timing", Timing()))
        return {"status": ErrorStatus.NONE}

    def _peer_gone(self) -> None:
        super()._peer_gone()
        with self._lock:
            waiting = list(self._waiting.values())
            self._waiting.clear()
        while self._fences:  # a caller waiting on a pending fence of a dead service would wait forever
            try:
                dup = self._fences.popitem()[0]
            except KeyError:  # the collector took the last one
                break
            if fence_state(dup, "eventfd") == FenceState.ACTIVE:
                os.eventfd_write(dup, FENCE_ERROR)
            os.close(dup)
        for op, callback, method in waiting:
            if op == "prepared":
                _notify(callback, method, ErrorStatus.DEVICE_UNAVAILABLE, None)
            elif method == "notify":
                _notify(callback, method, ErrorStatus.DEVICE_UNAVAILABLE)
            else:
                _notify(callback, method, ErrorStatus.DEVICE_UNAVAILABLE, [], Timing())

    def launch(self, op: str, args: dict, callback: Any, notice: str, method: str, fail: tuple) -> ErrorStatus:
        """Start `op` with `callback` waiting for the `notice` call back; after a failed launch,
        notify it here with the launch status (and `fail`, the rest of the notification)."""
        cid = self.wait_for(notice, callback, method)
        try:
            status = self._conn.call(op, {**args, "callback": cid})["status"]
        except (IpcError, WireError) as e:
            status = failure(op, e)
        if status != ErrorStatus.NONE and self.claim(cid, notice) is not None:
            _notify(callback, method, status, *fail)
        return status


class ProxyPreparedModel(HidlPreparedModel, RemotePreparedModel):
    """A model prepared in the service, which keeps it while this object lives (as a HIDL
    reference would): the driver core's prepared-model calls as messages, with the HIDL methods
    over them (nngpu.hidl)."""

    configureExecutionBurst = RemotePreparedModel.configureExecutionBurst

    def __init__(self, link: "_Link", model_id: int):
        RemotePreparedModel.__init__(self, link, model_id)
        weakref.finalize(self, link.release_later, "release", {"model": model_id})

    def launch(self, version: int, request, measure, callback, loop=None, deadline=None) -> ErrorStatus:
        if not _is_callback(callback):
            return ErrorStatus.INVALID_ARGUMENT
        args = {"model": self.model_id, "request": request, "measure": measure, "version": version,
                **timed(deadline, loop)}
        method = NOTIFY[version]
        fail = () if method == "notify" else ([], Timing())
        return self._service.launch("executeAsync", args, callback, "executed", method, fail)

    def run(self, request, measure, loop=None, deadline=None) -> Result:
        return as_result(call(self._service, "executeSynchronously", "execute", {
            "model": self.model_id, "request": request, "measure": measure, "version": 13, **timed(deadline, loop)},
            deadline))

    def reusable_execution(self, request, measure, loop) -> RemoteReusableExecution | Result:
        """An execution kept in the service, its request checked there once (AIDL IExecution)."""
        return RemoteReusableExecution.create(self._service, self.model_id, request, measure, loop)

    def token_burst(self) -> RemoteTokenBurst | Result:
        """A burst kept in the service, which keeps its tokens' memories (AIDL IBurst)."""
        return RemoteTokenBurst.open(self._service, self.model_id)

    def executeFenced(self, request, waitFor, measure, deadline, loopTimeoutDuration, duration):
        """The returned fence is a fd of this process, the caller's to close, as in process."""
        return fenced_call(self._service, "executeFenced", {
            "model": self.model_id, "request": request, "wait_for": waitFor, "measure": measure,
            "duration": getattr(duration, "nanoseconds", None), **timed(deadline, loopTimeoutDuration)}, deadline)


def _release_loop(releases: queue.SimpleQueue, conn) -> None:
    """A link's releases, one call each, until it closes (None) or its connection ends."""
    while not conn.closed.is_set():
        try:
            item = releases.get(timeout=1.0)
        except queue.Empty:
            continue
        if item is None:
            return
        try:
            conn.call(item[0], item[1], timeout=10.0)
        except (IpcError, WireError):
            pass


class RemoteBuffer(IBuffer):
    """A device buffer in the service; the service keeps it while this object lives."""

    def __init__(self, link: _Link, token: int):
        self._link, self.token = link, token
        weakref.finalize(self, link.release_later, "freeBuffer", {"buffer": token})

    def _copy(self, method: str, args: dict) -> ErrorStatus:
        try:
            return self._link._conn.call(method, {"buffer": self.token, **args})["status"]
        except (IpcError, WireError) as e:
            return failure(method, e)

    def copyTo(self, dst) -> ErrorStatus:
        return self._copy("copyTo", {"memory": dst})

    def copyFrom(self, src, dimensions) -> ErrorStatus:
        return self._copy("copyFrom", {"memory": src, "dimensions": list(dimensions)})


def _caches(model_cache, data_cache, token) -> dict:
    return {"model_cache": list(model_cache or []), "data_cache": list(data_cache or []), "token": token}


def _saveable(model_cache, data_cache, token) -> tuple:
    """The caches to send with a prepare, or none: caching is optional, so handles that cannot
    travel (not NativeHandles of fds) make the service prepare without them, as in process."""
    handles = [*(model_cache or []), *(data_cache or [])]
    if not handles:
        return (), (), None
    if all(isinstance(h, NativeHandle) and all(type(fd) is int and fd >= 0 for fd in h.fds) for h in handles):
        try:
            return model_cache, data_cache, bytes(token)
        except TypeError:
            pass
    log.info("prepareModel: not saving to the compilation cache: a cache argument that cannot be sent")
    return (), (), None


class RemoteDevice(HidlDevice):
    """The IDevice of an `nngpu serve` process (see the module's doc for what is served): the
    driver core's device calls as messages, with the HIDL methods over them (nngpu.hidl)."""

    def __init__(self, link: _Link, name: str = "", served: tuple[str, ...] = ()):
        self._link = link
        self.name = name  # this device's name in the service
        self.served = served  # every device's name there

    def _call(self, method: str, op: str, args: dict) -> tuple[ErrorStatus, dict]:
        try:
            reply = self._link._conn.call(op, args)
        except (IpcError, WireError) as e:
            return failure(method, e), {}
        return reply["status"], reply

    # ---- what the device is --------------------------------------------------------------------
    def capabilities_of(self, version: int):
        status, reply = self._call("getCapabilities", "capabilities", {"version": version})
        return status, reply.get("capabilities")

    def getStatus(self) -> DeviceStatus:
        status, reply = self._call("getStatus", "info", {})
        return reply.get("device_status", DeviceStatus.OFFLINE) if status == ErrorStatus.NONE else DeviceStatus.OFFLINE

    def getVersionString(self):
        status, reply = self._call("getVersionString", "info", {})
        return status, reply.get("version_string", "")

    def getType(self):
        status, reply = self._call("getType", "info", {})
        return status, reply.get("type")

    def getSupportedExtensions(self):
        status, reply = self._call("getSupportedExtensions", "info", {})
        return status, reply.get("extensions", [])

    def getNumberOfCacheFilesNeeded(self):
        status, reply = self._call("getNumberOfCacheFilesNeeded", "info", {})
        model_files, data_files = reply.get("cache_files", [0, 0])
        return status, model_files, data_files

    def supported_operations(self, model, version: int):
        status, reply = self._call("getSupportedOperations", "supported", {"model": model, "version": version})
        return status, reply.get("supported", [])

    # ---- preparing -----------------------------------------------------------------------------
    def prepare(self, version: int, model, callback, preference=ExecutionPreference.FAST_SINGLE_ANSWER,
                priority=Priority.MEDIUM, deadline=None, model_cache=(), data_cache=(), token=b"") -> ErrorStatus:
        if not _is_callback(callback):
            return ErrorStatus.INVALID_ARGUMENT
        args = {"model": model, "preference": preference, "version": version,
                "priority": priority if version == 13 else None, "deadline": timed(deadline, None)["deadline"],
                **_caches(*_saveable(model_cache, data_cache, token))}
        return self._link.launch("prepare", args, callback, "prepared", NOTIFY[version], (None,))

    def prepare_from_cache(self, version: int, deadline, model_cache, data_cache, token, callback) -> ErrorStatus:
        if not _is_callback(callback):
            return ErrorStatus.INVALID_ARGUMENT
        args = {"version": version, "deadline": timed(deadline, None)["deadline"],
                **_caches(model_cache, data_cache, token)}
        return self._link.launch("prepareFromCache", args, callback, "prepared", NOTIFY[version], (None,))

    def allocate(self, desc, preparedModels, inputRoles, outputRoles):
        models = list(preparedModels or [])
        if not all(isinstance(m, ProxyPreparedModel) and m._service is self._link for m in models):
            log.info("allocate: a prepared model not from this device")
            return ErrorStatus.INVALID_ARGUMENT, None, 0
        status, reply = self._call("allocate", "allocate", {
            "dimensions": list(getattr(desc, "dimensions", None) or []), "models": [m.model_id for m in models],
            "inputRoles": list(inputRoles), "outputRoles": list(outputRoles)})
        if status != ErrorStatus.NONE or reply.get("token") is None:
            return status if status != ErrorStatus.NONE else ErrorStatus.GENERAL_FAILURE, None, 0
        return ErrorStatus.NONE, RemoteBuffer(self._link, reply["token"]), reply["token"]

    # ---- the connection ------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self._link.alive

    def close(self) -> None:
        self._link.close()

    def __enter__(self) -> "RemoteDevice":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _select(link: _Link, path: str, device: str) -> None:
    """Ask the service to serve this connection on `device`; LookupError (the link closed) if it
    has none of that name."""
    try:
        reply = link._conn.call("select", {"device": device}, timeout=HANDSHAKE_TIMEOUT_S)
        why = None if reply["status"] == ErrorStatus.NONE else reply.get("error") or f"no device {device!r} here"
    except WireError as e:  # a name the wire cannot carry is no device's
        why = f"no device {device!r} here: {e}"
    if why is not None:
        link.close()
        raise LookupError(f"{path}: {why}")


def connect(path: str, hal: str = "hidl", device: str | None = None):
    """The IDevice served at `path` by `nngpu serve`: its HIDL 1.0-1.3 face, or with hal="aidl"
    its AIDL face (nngpu.aidl over that HIDL 1.3 face, with reusable executions and bursts kept
    in the service). `device` names one of the service's devices (`nngpu serve --device`; the
    proxy's `name` and `served` say which it is and which there are); None is its first.
    OSError if nothing listens there; ConnectionRefusedError if the service does not admit this
    uid; LookupError for a device it does not serve; ValueError for another `hal`."""
    if hal not in ("hidl", "aidl"):
        raise ValueError(f"hal {hal!r}: choose hidl or aidl")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        raise
    link = _Link(sock)
    try:  # the service closes a peer it does not admit at once: say so here, not at the first call
        if device is not None:
            _select(link, path, device)
        info = link._conn.call("info", {}, timeout=HANDSHAKE_TIMEOUT_S)
    except IpcError as e:
        link._conn.closed.wait(HANDSHAKE_TIMEOUT_S)  # the reader reads the service's `bye` first
        link.close()
        why = link._conn.refusal or "the service closed the connection (is this uid admitted?)"
        raise ConnectionRefusedError(f"{path}: {why}") from e
    remote = RemoteDevice(link, info.get("name", ""), tuple(info.get("devices", ())))
    if hal == "aidl":
        from ..aidl import AidlDevice

        return AidlDevice(remote)
    return remote
