"""One client connection to the driver service (nngpu.service.process), the service's side of
it: the IDevice, IPreparedModel, IBuffer and IFencedExecutionCallback calls that
nngpu.service.proxy sends, and the burst's configure, freeMemory, closeBurst. It reaches back to
the client for its burst memories (getMemories) and with its callbacks' notifications
(nngpu.service.notices).

A client has at most MAX_OBJECTS prepared models (counting prepares under way), buffers, bursts
and fenced executions at once; one more is GENERAL_FAILURE. When the connection ends the session
closes that client's bursts, so no worker waits for a client that is gone, and forgets the rest.
"""
from __future__ import annotations

import logging
import socket
import threading
from typing import Any, Callable

from ..hal.interfaces import IBurstCallback
from ..hal.types import (ErrorStatus, ExecutionPreference, MeasureTiming, MemoryPool, Model, OptionalTimeoutDuration,
                         OptionalTimePoint, Priority)
from .device_keeper import ServedDevices
from .notices import ExecutedNotice, PreparedNotice, SentHandle
from .reusable_calls import KeptFull, ReusableCalls, result_reply
from .wire import CALL_TIMEOUT_S, Connection, IpcError

log = logging.getLogger("nngpu.burst_ipc")

MAX_OBJECTS = 1024  # of each kind, per client
# How long a burst's worker waits for the client to answer getMemories: a client that never
# answers holds up only its own burst, and only this long.
GET_MEMORIES_TIMEOUT_S = 10.0


class _Full(Exception):
    """The client holds MAX_OBJECTS of a kind already."""


def _check_room(held: int, what: str) -> None:
    if held >= MAX_OBJECTS:
        raise _Full(f"this client has {MAX_OBJECTS} {what} already")


class _RemoteCallback(IBurstCallback):
    """The client's IBurstCallback as the driver sees it: getMemories over the socket."""

    def __init__(self, conn: Connection, burst_id: int):
        self._conn = conn
        self._burst = burst_id

    def getMemories(self, slots):
        try:
            reply = self._conn.call("getMemories", {"burst": self._burst, "slots": [int(s) for s in slots]},
                                    timeout=GET_MEMORIES_TIMEOUT_S)
        except (IpcError, ValueError) as e:
            log.info("getMemories: %s", e)
            return ErrorStatus.GENERAL_FAILURE, []
        if reply["status"] != ErrorStatus.NONE:
            return reply["status"], []
        return ErrorStatus.NONE, reply.get("memories", [])


class Session(ReusableCalls):
    """One client connection to the service: its prepared models and bursts, on the device it
    selected (the service's first when it selects none)."""

    def __init__(self, device, sock: socket.socket, on_end: Callable[[], None] | None = None):
        self.served = device if isinstance(device, ServedDevices) else ServedDevices.one(device)
        self.device_name = self.served.names()[0]
        self.device = self.served.default
        self._on_end = on_end
        self.models: dict[int, Any] = {}
        self.bursts: dict[int, Any] = {}
        self.buffers: dict[int, Any] = {}  # token -> IBuffer: what keeps a device buffer alive
        self.fenced: dict[int, Any] = {}  # id -> IFencedExecutionCallback
        ReusableCalls.__init__(self)  # the AIDL reusable executions and bursts
        self._lock = threading.Lock()
        self._next = 0
        self._preparing = 0  # prepares launched and not yet notified
        # A call may arrive before Connection() returns: its handler waits for self.conn.
        self._ready = threading.Event()
        self.conn = Connection(sock, self.handle, self._ended)
        self._ready.set()

    def _ended(self) -> None:
        self.close_all()
        if self._on_end is not None:
            self._on_end()

    def close_all(self) -> None:
        with self._lock:
            bursts = list(self.bursts.values())
            self.bursts.clear()
            self.models.clear()
            self.buffers.clear()
            self.fenced.clear()
        for b in bursts:
            close = getattr(b, "close", None)
            if close:
                close()
        self.close_reusable()

    def _new_id(self) -> int:
        with self._lock:
            self._next += 1
            return self._next

    def handle(self, op: str, args: dict) -> dict:
        """One call, its args decoded by the wire's schema; the wire closes the fds after."""
        self._ready.wait()
        fn = getattr(self, f"_op_{op}", None)
        if fn is None:
            return {"status": ErrorStatus.INVALID_ARGUMENT, "error": f"{op} is not served here"}
        try:
            return fn(args)
        except KeyError as e:
            return {"status": ErrorStatus.INVALID_ARGUMENT, "error": str(e)}
        except (_Full, KeptFull) as e:
            return {"status": ErrorStatus.GENERAL_FAILURE, "error": str(e)}

    def _room(self, table: dict, what: str) -> None:
        """_Full if this client may not have one more `what`."""
        with self._lock:
            _check_room(len(table), what)

    def _op_prepare(self, args):
        from ..driver.callbacks import PreparedModelCallback

        model, pref = args["model"], args["preference"]
        if "callback" in args:
            return self._prepare_async(args)
        self.start_prepare()
        try:
            cb = PreparedModelCallback()
            status = self.device.prepare(12 if isinstance(model, Model) else 13, model, cb, pref)
            cb.wait(CALL_TIMEOUT_S)
            status = status if status != ErrorStatus.NONE else cb.status
            if status != ErrorStatus.NONE or cb.prepared_model is None:
                return {"status": status or ErrorStatus.GENERAL_FAILURE}
            return {"status": ErrorStatus.NONE, "model": self.keep(cb.prepared_model)}
        finally:
            self.end_prepare()

    def keep(self, prepared) -> int:
        """The id of a newly prepared model, kept until released or the client leaves."""
        mid = self._new_id()
        with self._lock:
            self.models[mid] = prepared
        return mid

    def start_prepare(self) -> None:
        """Count a prepare under way, for the models cap: _Full if the client's models and the
        prepares under way are at the cap already."""
        with self._lock:
            _check_room(len(self.models) + self._preparing, "prepared models")
            self._preparing += 1

    def end_prepare(self) -> None:
        with self._lock:
            self._preparing -= 1

    def _prepare_async(self, args) -> dict:
        """A prepare of the HAL version asked, the client notified by a `prepared` call back. The
        cache handles' fds are the message's: the device dups those it keeps."""
        v, cb = args.get("version", 13), PreparedNotice(self, args["callback"])
        # what a version's entry point cannot carry, it does not get
        preference = args["preference"] if v > 10 else ExecutionPreference.FAST_SINGLE_ANSWER
        priority = args.get("priority", Priority.MEDIUM) if v == 13 else Priority.MEDIUM
        deadline = OptionalTimePoint(args.get("deadline") if v == 13 else None)
        caches = (args.get("model_cache", []), args.get("data_cache", []), args.get("token", bytes(32))) if v > 11 \
            else ((), (), b"")
        return cb.launched(self.device.prepare(v, args["model"], cb, preference, priority, deadline, *caches))

    def _op_prepareFromCache(self, args):
        v, cb = args["version"], PreparedNotice(self, args["callback"])
        deadline = OptionalTimePoint(args.get("deadline")) if v == 13 else None
        return cb.launched(self.device.prepare_from_cache(v, deadline, args.get("model_cache", []),
                                                          args.get("data_cache", []), args.get("token", b""), cb))

    def _op_info(self, _args):
        d = self.device
        status, extensions = d.getSupportedExtensions()
        _s, model_files, data_files = d.getNumberOfCacheFilesNeeded()
        return {"status": status, "version_string": d.getVersionString()[1], "type": d.getType()[1],
                "device_status": d.getStatus(), "extensions": extensions, "cache_files": [model_files, data_files],
                "name": self.device_name, "devices": self.served.names()}

    def _op_select(self, args):
        """Serve this client on the device of that name: before it prepares or allocates anything,
        as what it made on one device cannot move to another."""
        name = args["device"]
        device = self.served.get(name)
        if device is None:
            return {"status": ErrorStatus.INVALID_ARGUMENT,
                    "error": f"no device {name!r} here; served: {', '.join(self.served.names())}"}
        with self._lock:
            if self.models or self.buffers or self._preparing:
                return {"status": ErrorStatus.INVALID_ARGUMENT,
                        "error": "a client selects its device before it prepares or allocates anything"}
            self.device, self.device_name = device, name
        return {"status": ErrorStatus.NONE}

    def _op_capabilities(self, args):
        status, caps = self.device.capabilities_of(args["version"])
        return {"status": status, "capabilities": caps if status == ErrorStatus.NONE else None}

    def _op_supported(self, args):
        status, supported = self.device.supported_operations(args["model"], args["version"])
        return {"status": status, "supported": list(supported)}

    def _op_executeAsync(self, args):
        prepared, v, request = self._model(args), args["version"], self._request(args)
        cb = ExecutedNotice(self.conn, args["callback"], request)
        timed = v == 13   # deadlines and loop timeouts are 1.3's; before 1.2 nothing is measured
        return cb.launched(prepared.launch(v, request, args["measure"] if v >= 12 else MeasureTiming.NO, cb,
                                           OptionalTimeoutDuration(args.get("loop_timeout") if timed else None),
                                           OptionalTimePoint(args.get("deadline") if timed else None)))

    def _op_allocate(self, args):
        from ..hal.types import BufferDesc

        prepared = [self._model({"model": m}) for m in args["models"]]
        self._room(self.buffers, "buffers")
        status, buffer, token = self.device.allocate(BufferDesc(args["dimensions"]), prepared, args["inputRoles"],
                                                     args["outputRoles"])
        if status != ErrorStatus.NONE or buffer is None:
            return {"status": status if status != ErrorStatus.NONE else ErrorStatus.GENERAL_FAILURE}
        with self._lock:
            self.buffers[token] = buffer
        return {"status": ErrorStatus.NONE, "token": token}

    def _lookup(self, table: dict, key, what: str):
        """This client's object `key` of `table`; KeyError (INVALID_ARGUMENT) for another's."""
        with self._lock:
            found = table.get(key)
        if found is None:
            raise KeyError(f"unknown {what} {key}")
        return found

    def _forget(self, table: dict, key) -> dict:
        with self._lock:
            table.pop(key, None)
        return {"status": ErrorStatus.NONE}

    def _buffer(self, args):
        return self._lookup(self.buffers, args["buffer"], "buffer")

    def _op_copyTo(self, args):
        return {"status": self._buffer(args).copyTo(args["memory"])}

    def _op_copyFrom(self, args):
        return {"status": self._buffer(args).copyFrom(args["memory"], args["dimensions"])}

    def _op_freeBuffer(self, args):
        return self._forget(self.buffers, args["buffer"])

    def _op_executeFenced(self, args):
        self._room(self.fenced, "fenced executions")
        return self.fenced_reply(*self._model(args).executeFenced(
            self._request(args), args["wait_for"], args["measure"], OptionalTimePoint(args.get("deadline")),
            OptionalTimeoutDuration(args.get("loop_timeout")), OptionalTimeoutDuration(args.get("duration"))))

    def fenced_reply(self, status: ErrorStatus, fence, callback) -> dict:
        """A fenced execution's reply: its fence, and its callback kept under a new id."""
        reply: dict = {"status": status, "fence": SentHandle(fence.fds, fence.ints) if fence.fds else None}
        if callback is not None:
            reply["fenced"] = fid = self._new_id()
            with self._lock:
                self.fenced[fid] = callback
        return reply

    def _op_fencedInfo(self, args):
        callback = self._lookup(self.fenced, args["fenced"], "fenced execution")
        status, launched, after_fences = callback.getExecutionInfo()
        return {"status": ErrorStatus.NONE, "info_status": status, "launched": launched,
                "after_fences": after_fences}

    def _op_releaseFenced(self, args):
        return self._forget(self.fenced, args["fenced"])

    def _request(self, args):
        """The call's request, if every buffer token in it is this client's: the device's tokens
        are shared by all clients, and one must not reach another's buffers."""
        request = args["request"]
        with self._lock:
            foreign = [p.token for p in request.pools if isinstance(p, MemoryPool) and p.token is not None
                       and p.token not in self.buffers]
        if foreign:
            raise KeyError(f"unknown buffer tokens {foreign}")
        return request

    def _model(self, args):
        return self._lookup(self.models, args["model"], "model")

    def _op_release(self, args):
        return self._forget(self.models, args["model"])

    def _op_configure(self, args):
        prepared = self._model(args)
        burst_id = args["burst"]
        self._room(self.bursts, "bursts")
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
        prepared, request = self._model(args), self._request(args)
        timed = args.get("version", 12) == 13   # a 1.2 call has no deadline or loop timeout
        return result_reply(prepared.run(request, args["measure"],
                                         OptionalTimeoutDuration(args.get("loop_timeout") if timed else None),
                                         OptionalTimePoint(args.get("deadline") if timed else None)))
