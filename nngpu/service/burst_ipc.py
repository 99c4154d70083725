"""Bursts across processes: a minimal driver service process hosting a Device and its
prepared models, and the client-side proxies that reach it over a Unix socket.

    with BurstService.spawn() as service:           # or BurstService.connect(path)
        status, prepared = service.prepare(model)
        with ExecutionBurstController.create(prepared) as burst:
            status, shapes, timing = burst.compute(request, MeasureTiming.NO)

Wire: an AF_UNIX SOCK_SEQPACKET connection; one message is one packet, a JSON header
(u32 length, then UTF-8), then an optional body, with fds attached (SCM_RIGHTS): pool
memories and FMQ descriptors travel as fds, never as bytes. Bodies over 64 KiB (models) go in
a memfd attached as the last fd. Models and requests are pickled with their pools replaced by
`_PoolRef`s, and unpickled by a loader that only builds nngpu.hal.types values. A reply carries
"re": the id of its call. Each side serves the other's calls on worker threads so that its
reader thread is always free to deliver replies (the driver's getMemories call waits for the
client while the client waits on the result FMQ).

Messages  client -> service: prepare, configure (FMQ descriptors), freeMemory, closeBurst,
          execute (executeSynchronously), release;  service -> client: getMemories.
When the connection ends, the service closes that client's bursts and the client shuts down
its queues, so neither side waits for a peer that is gone.
"""
from __future__ import annotations

import argparse
import io
import json
import logging
import os
import pickle
import socket
import struct
import subprocess
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from ..fmq import MessageQueue, QueueDescriptor
from ..hal.interfaces import IBurstCallback, IBurstContext
from ..hal.types import ErrorStatus, MemoryPool, Model, OutputShape, Request, Timing
from ..memory import Memory, memory_from_fd

__all__ = ["BurstService", "RemotePreparedModel", "RemoteBurstContext", "serve_connection", "main"]

log = logging.getLogger("nngpu.burst_ipc")

_MAX_MSG = 1 << 17
_INLINE_BODY = 1 << 16
_MAX_FDS = 250
_CALL_TIMEOUT_S = 120.0
_HDR = struct.Struct("<I")


class IpcError(Exception):
    """The peer is gone or answered something unreadable."""


# ---- pickling without pools ----------------------------------------------------------------------
@dataclass
class _PoolRef:
    index: int


def _strip_pools(pools: list) -> tuple[list, list[int], list[dict]]:
    """Pools with every Memory replaced by a _PoolRef, and the fds / metadata to send."""
    refs, fds, metas = [], [], []

    def ref(m: Memory) -> _PoolRef:
        fds.append(m.fd)
        metas.append({"name": m.name, "size": m.size, "offset": m.offset})
        return _PoolRef(len(fds) - 1)

    for p in pools:
        if isinstance(p, Memory):
            refs.append(ref(p))
        elif isinstance(p, MemoryPool) and isinstance(p.hidlMemory, Memory):
            refs.append(MemoryPool(hidlMemory=ref(p.hidlMemory), token=p.token))
        else:
            refs.append(p)
    return refs, fds, metas


def _restore_pools(pools: list, memories: list[Memory]) -> list:
    out = []
    for p in pools:
        if isinstance(p, _PoolRef):
            out.append(memories[p.index])
        elif isinstance(p, MemoryPool) and isinstance(p.hidlMemory, _PoolRef):
            out.append(MemoryPool(hidlMemory=memories[p.hidlMemory.index], token=p.token))
        else:
            out.append(p)
    return out


class _HalUnpickler(pickle.Unpickler):
    """Builds only HAL values: a peer cannot make this process run anything."""

    def find_class(self, module: str, name: str):
        if module == "nngpu.hal.types":
            cls = super().find_class(module, name)
            if isinstance(cls, type) and cls.__module__ == module:
                return cls
        if module in (__name__, "nngpu.service.burst_ipc") and name == "_PoolRef":  # __main__ under -m
            return _PoolRef
        if module == "copyreg" and name in ("_reconstructor", "__newobj__"):
            return super().find_class(module, name)
        if module == "builtins" and name in ("object", "bytes", "bytearray", "list", "dict", "set"):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not a HAL type")


def _loads(body: bytes) -> Any:
    return _HalUnpickler(io.BytesIO(body)).load()


def _memories(metas: list[dict], fds: list[int]) -> list[Memory]:
    if len(metas) != len(fds):
        raise IpcError(f"{len(metas)} memories described, {len(fds)} fds received")
    return [memory_from_fd(str(m["name"]), int(m["size"]), fd, int(m.get("offset", 0))) for m, fd in zip(metas, fds)]


def _close_fds(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


# ---- one connection, either side -----------------------------------------------------------------
# A handler answers (reply, body, fds[, keepalive]): keepalive owns the fds until they are sent.
Handler = Callable[[dict, bytes, list[int]], tuple]


class _Connection:
    """Calls and replies over one SEQPACKET socket; incoming calls go to `handler` on a pool."""

    def __init__(self, sock: socket.socket, handler: Handler, on_close: Callable[[], None] | None = None,
                 workers: int = 4):
        self._sock = sock
        self._handler = handler
        self._on_close = on_close
        self._send_lock = threading.Lock()
        self._pending: dict[int, Future] = {}
        self._pending_lock = threading.Lock()
        self._next_id = 0
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nngpu-ipc")
        self.closed = threading.Event()
        self._reader = threading.Thread(target=self._read_loop, name="nngpu-ipc-reader", daemon=True)
        self._reader.start()

    def send(self, msg: dict, body: bytes = b"", fds: list[int] = ()) -> None:
        fds = list(fds)
        memfd = -1
        if len(body) > _INLINE_BODY:  # big bodies ride in a memfd, attached as the last fd
            memfd = os.memfd_create("nngpu-ipc", os.MFD_CLOEXEC)
            with open(memfd, "wb", closefd=False) as f:
                f.write(body)
            msg = {**msg, "body_fd": len(body)}
            fds.append(memfd)
            body = b""
        head = json.dumps(msg).encode()
        if len(fds) > _MAX_FDS:
            raise IpcError(f"{len(fds)} fds in one message")
        try:
            with self._send_lock:
                socket.send_fds(self._sock, [_HDR.pack(len(head)) + head + body], fds)
        except OSError as e:
            raise IpcError(f"send failed: {e}") from e
        finally:
            if memfd >= 0:
                os.close(memfd)

    def call(self, msg: dict, body: bytes = b"", fds: list[int] = (),
             timeout: float | None = _CALL_TIMEOUT_S) -> tuple[dict, bytes, list[int]]:
        fut: Future = Future()
        with self._pending_lock:
            if self.closed.is_set():
                raise IpcError("connection closed")
            self._next_id += 1
            call_id = self._next_id
            self._pending[call_id] = fut
        try:
            self.send({**msg, "id": call_id}, body, fds)
            return fut.result(timeout)
        except TimeoutError as e:
            raise IpcError(f"{msg.get('op')}: no reply") from e
        finally:
            with self._pending_lock:
                self._pending.pop(call_id, None)

    def _read_loop(self) -> None:
        try:
            while True:
                try:
                    data, fds, _flags, _addr = socket.recv_fds(self._sock, _MAX_MSG, _MAX_FDS + 1)
                except OSError:
                    break
                if not data:
                    _close_fds(fds)
                    break  # the peer is gone
                try:
                    msg, body, fds = self._parse(data, fds)
                except (IpcError, ValueError, OSError) as e:
                    log.warning("dropping unreadable message: %s", e)
                    _close_fds(fds)
                    continue
                if "re" in msg:
                    with self._pending_lock:
                        fut = self._pending.get(msg["re"])
                    if fut is None:
                        _close_fds(fds)
                    else:
                        fut.set_result((msg, body, fds))
                else:
                    try:
                        self._pool.submit(self._serve, msg, body, fds)
                    except RuntimeError:
                        _close_fds(fds)
        finally:
            self._shutdown()

    @staticmethod
    def _parse(data: bytes, fds: list[int]) -> tuple[dict, bytes, list[int]]:
        if len(data) < _HDR.size:
            raise IpcError("short message")
        (n,) = _HDR.unpack_from(data)
        msg = json.loads(data[_HDR.size:_HDR.size + n].decode())
        if not isinstance(msg, dict):
            raise IpcError("header is not an object")
        body = data[_HDR.size + n:]
        if "body_fd" in msg:
            if not fds:
                raise IpcError("body fd missing")
            memfd = fds.pop()
            try:
                body = os.pread(memfd, int(msg["body_fd"]), 0)
            finally:
                os.close(memfd)
        return msg, body, fds

    def _serve(self, msg: dict, body: bytes, fds: list[int]) -> None:
        try:
            answer = self._handler(msg, body, fds)
        except Exception as e:
            log.exception("handling %s", msg.get("op"))
            answer = {"status": int(ErrorStatus.GENERAL_FAILURE), "error": str(e)}, b"", []
        reply, rbody, rfds = answer[:3]
        if "id" in msg:
            try:
                self.send({**reply, "re": msg["id"]}, rbody, rfds)
            except IpcError:
                pass

    def _shutdown(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        with self._pending_lock:
            pending = list(self._pending.values())
        for fut in pending:
            if not fut.done():
                fut.set_exception(IpcError("connection closed"))
        if self._on_close is not None:
            try:
                self._on_close()
            except Exception:
                log.exception("connection close hook")
        self._pool.shutdown(wait=False)

    def close(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._reader.join(timeout=5.0)
        self._sock.close()


# ---- the service (driver) side ---------------------------------------------------------------------
class _RemoteCallback(IBurstCallback):
    """The client's IBurstCallback as the driver sees it: getMemories over the socket."""

    def __init__(self, conn: _Connection, burst_id: int):
        self._conn = conn
        self._burst = burst_id

    def getMemories(self, slots):
        try:
            reply, _body, fds = self._conn.call({"op": "getMemories", "burst": self._burst,
                                                 "slots": [int(s) for s in slots]})
        except IpcError as e:
            log.info("getMemories: %s", e)
            return ErrorStatus.GENERAL_FAILURE, []
        status = int(reply.get("status", ErrorStatus.GENERAL_FAILURE))
        if status != ErrorStatus.NONE:
            _close_fds(fds)
            return ErrorStatus(status) if status in ErrorStatus._value2member_map_ else ErrorStatus.GENERAL_FAILURE, []
        try:
            return ErrorStatus.NONE, _memories(reply.get("memories", []), fds)
        except (IpcError, KeyError, TypeError, ValueError) as e:
            _close_fds(fds)
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
        self.conn = _Connection(sock, self.handle, self.close_all)

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
            _close_fds(fds)
            return {"status": int(ErrorStatus.INVALID_ARGUMENT), "error": f"unknown op {op!r}"}, b"", []
        try:
            return fn(msg, body, fds)
        except (IpcError, pickle.UnpicklingError, KeyError, TypeError, ValueError, EOFError) as e:
            _close_fds(fds)
            return {"status": int(ErrorStatus.INVALID_ARGUMENT), "error": str(e)}, b"", []

    def _op_prepare(self, msg, body, fds):
        from ..driver.callbacks import PreparedModelCallback
        from ..hal.types import ExecutionPreference, OptionalTimePoint, Priority

        memories = _memories(msg.get("pools", []), fds)
        model = _loads(body)
        model.pools = _restore_pools(model.pools, memories)
        cb = PreparedModelCallback()
        pref = ExecutionPreference(int(msg.get("preference", ExecutionPreference.FAST_SINGLE_ANSWER)))
        if isinstance(model, Model):
            status = self.device.prepareModel_1_2(model, pref, [], [], bytes(32), cb)
        else:
            status = self.device.prepareModel_1_3(model, pref, Priority.MEDIUM, OptionalTimePoint(), [], [],
                                                  bytes(32), cb)
        cb.wait(_CALL_TIMEOUT_S)
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
            _close_fds(fds)  # the burst attached its own copies
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
        from ..hal.types import MeasureTiming

        prepared = self._model(msg)
        request = _loads(body)
        if not isinstance(request, Request):
            raise TypeError("not a Request")
        request.pools = _restore_pools(request.pools, _memories(msg.get("pools", []), fds))
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


def _status(reply: dict) -> ErrorStatus:
    try:
        return ErrorStatus(int(reply.get("status", ErrorStatus.GENERAL_FAILURE)))
    except (TypeError, ValueError):
        return ErrorStatus.GENERAL_FAILURE


# ---- the client side ---------------------------------------------------------------------------------
class RemoteBurstContext(IBurstContext):
    def __init__(self, service: "BurstService", burst_id: int):
        self._service = service
        self._burst = burst_id

    def freeMemory(self, slot: int) -> None:
        try:  # a call, not a notification: the driver has dropped the slot when this returns
            self._service._conn.call({"op": "freeMemory", "burst": self._burst, "slot": int(slot)})
        except IpcError:
            pass

    def close(self) -> None:
        self._service._forget_burst(self._burst)
        try:
            self._service._conn.call({"op": "closeBurst", "burst": self._burst}, timeout=10.0)
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
        req, res = requestChannel.descriptor(), resultChannel.descriptor()
        try:
            reply, _b, fds = self._service._conn.call(
                {"op": "configure", "model": self.model_id, "burst": burst_id,
                 "request_q": req.meta(), "result_q": res.meta()}, fds=req.fds() + res.fds())
            _close_fds(fds)
        except IpcError as e:
            log.warning("configureExecutionBurst: %s", e)
            self._service._forget_burst(burst_id)
            return ErrorStatus.DEVICE_UNAVAILABLE, None
        status = _status(reply)
        if status != ErrorStatus.NONE:
            self._service._forget_burst(burst_id)
            return status, None
        return ErrorStatus.NONE, RemoteBurstContext(self._service, burst_id)

    def executeSynchronously(self, request: Request, measure) -> tuple[ErrorStatus, list[OutputShape], Timing]:
        try:
            pools, fds, metas = _strip_pools(list(request.pools))
            body = pickle.dumps(Request(request.inputs, request.outputs, pools))
            reply, _b, rfds = self._service._conn.call(
                {"op": "execute", "model": self.model_id, "measure": int(measure), "pools": metas}, body, fds)
            _close_fds(rfds)
            shapes = [OutputShape(list(d), bool(s)) for d, s in reply.get("shapes", [])]
            on_device, in_driver = reply.get("timing", (Timing().timeOnDevice, Timing().timeInDriver))
            return ErrorStatus(int(reply["status"])), shapes, Timing(int(on_device), int(in_driver))
        except (IpcError, KeyError, TypeError, ValueError, pickle.PicklingError) as e:
            log.warning("remote executeSynchronously: %s", e)
            return ErrorStatus.GENERAL_FAILURE, [], Timing()

    def release(self) -> None:
        try:
            self._service._conn.call({"op": "release", "model": self.model_id})
        except IpcError:
            pass


class BurstService:
    """A connection to a driver service process (spawned here, or listening on a path)."""

    def __init__(self, sock: socket.socket, process: subprocess.Popen | None = None):
        self.process = process
        self._bursts: dict[int, tuple[IBurstCallback, tuple[MessageQueue, MessageQueue]]] = {}
        self._lock = threading.Lock()
        self._next_burst = 0
        self._conn = _Connection(sock, self._handle, self._peer_gone)

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
        pools, fds, metas = _strip_pools(list(model.pools))
        stripped = type(model)(**{**model.__dict__, "pools": pools})
        try:
            reply, _b, rfds = self._conn.call({"op": "prepare", "pools": metas, "preference": int(preference)},
                                              pickle.dumps(stripped), fds)
            _close_fds(rfds)
        except IpcError as e:
            log.warning("prepare: %s", e)
            return ErrorStatus.DEVICE_UNAVAILABLE, None
        status = _status(reply)
        if status != ErrorStatus.NONE or not isinstance(reply.get("model"), int):
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

    def _handle(self, msg: dict, body: bytes, fds: list[int]) -> tuple[dict, bytes, list[int]]:
        _close_fds(fds)
        if msg.get("op") != "getMemories":
            return {"status": int(ErrorStatus.INVALID_ARGUMENT)}, b"", []
        with self._lock:
            entry = self._bursts.get(msg.get("burst"))
        if entry is None:
            return {"status": int(ErrorStatus.INVALID_ARGUMENT)}, b"", []
        status, memories = entry[0].getMemories(list(msg.get("slots", [])))
        if status != ErrorStatus.NONE:
            return {"status": int(status)}, b"", []
        if len(memories) > _MAX_FDS - 1:
            return {"status": int(ErrorStatus.GENERAL_FAILURE)}, b"", []
        return ({"status": 0, "memories": [{"name": m.name, "size": m.size, "offset": m.offset} for m in memories]},
                b"", [m.fd for m in memories], memories)

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


# ---- the service process ----------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m nngpu.service.burst_ipc", description=__doc__.split("\n")[0])
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


if __name__ == "__main__":
    sys.exit(main())
