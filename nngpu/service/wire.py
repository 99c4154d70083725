"""The wire of nngpu.service.burst_ipc: one AF_UNIX SOCK_SEQPACKET connection carrying calls and
replies in both directions, and the pickling of HAL values without their pools.

One message is one packet: a JSON header (u32 length, then UTF-8), then an optional body, with
fds attached (SCM_RIGHTS): pool memories and FMQ descriptors travel as fds, never as bytes.
Bodies over 64 KiB (models) go in a memfd attached as the last fd. A call carries "id", its
reply "re": the id of the call. Models and requests are pickled with their pools replaced by
PoolRefs, and unpickled by a loader that only builds nngpu.hal.types values. Each side serves
the other's calls on worker threads so that its reader thread is always free to deliver
replies (the driver's getMemories call waits for the client while the client waits on the
result FMQ).
"""
from __future__ import annotations

import io
import json
import logging
import os
import pickle
import socket
import struct
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from ..hal import types as hal_types
from ..hal.types import ErrorStatus, MemoryPool
from ..memory import Memory, close_fds, memory_from_fd

log = logging.getLogger("nngpu.burst_ipc")

_HAL_TYPES = hal_types.__name__
_MAX_MSG = 1 << 17
_INLINE_BODY = 1 << 16
MAX_FDS = 250
CALL_TIMEOUT_S = 120.0
_HDR = struct.Struct("<I")


class IpcError(Exception):
    """The peer is gone or answered something unreadable."""


# ---- pickling without pools ----------------------------------------------------------------------
@dataclass
class PoolRef:
    """A pool in a pickled model or request: the index of its memory among the message's fds."""

    index: int


def strip_pools(pools: list) -> tuple[list, list[int], list[dict]]:
    """Pools with every Memory replaced by a PoolRef, and the fds / metadata to send."""
    refs, fds, metas = [], [], []

    def ref(m: Memory) -> PoolRef:
        fds.append(m.fd)
        metas.append(memory_meta(m))
        return PoolRef(len(fds) - 1)

    for p in pools:
        if isinstance(p, Memory):
            refs.append(ref(p))
        elif isinstance(p, MemoryPool) and isinstance(p.hidlMemory, Memory):
            refs.append(MemoryPool(hidlMemory=ref(p.hidlMemory), token=p.token))
        else:
            refs.append(p)
    return refs, fds, metas


def restore_pools(pools: list, memories: list[Memory]) -> list:
    """strip_pools undone: every PoolRef replaced by its memory."""
    out = []
    for p in pools:
        if isinstance(p, PoolRef):
            out.append(memories[p.index])
        elif isinstance(p, MemoryPool) and isinstance(p.hidlMemory, PoolRef):
            out.append(MemoryPool(hidlMemory=memories[p.hidlMemory.index], token=p.token))
        else:
            out.append(p)
    return out


class _HalUnpickler(pickle.Unpickler):
    """Builds only HAL values: a peer cannot make this process run anything."""

    def find_class(self, module: str, name: str):
        if module.startswith(_HAL_TYPES + "."):  # a class nngpu.hal.types exports, where it is defined
            cls = getattr(hal_types, name, None)
            if isinstance(cls, type) and cls.__module__ == module:
                return cls
        if module == __name__ and name == "PoolRef":
            return PoolRef
        if module == "copyreg" and name in ("_reconstructor", "__newobj__"):
            return super().find_class(module, name)
        if module == "builtins" and name in ("object", "bytes", "bytearray", "list", "dict", "set"):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not a HAL type")


def loads(body: bytes) -> Any:
    """Unpickle a message body that may hold only HAL values and PoolRefs."""
    return _HalUnpickler(io.BytesIO(body)).load()


def memory_meta(m: Memory) -> dict:
    """What travels beside a memory's fd: memories_from rebuilds the Memory from both."""
    return {"name": m.name, "size": m.size, "offset": m.offset}


def memories_from(metas: list[dict], fds: list[int]) -> list[Memory]:
    """The Memory objects a message's memory metadata and fds describe (they own the fds)."""
    if len(metas) != len(fds):
        raise IpcError(f"{len(metas)} memories described, {len(fds)} fds received")
    return [memory_from_fd(str(m["name"]), int(m["size"]), fd, int(m.get("offset", 0))) for m, fd in zip(metas, fds)]


def status_of(reply: dict) -> ErrorStatus:
    """A reply's status; GENERAL_FAILURE when it has none or an unknown one."""
    try:
        return ErrorStatus(int(reply.get("status", ErrorStatus.GENERAL_FAILURE)))
    except (TypeError, ValueError):
        return ErrorStatus.GENERAL_FAILURE


# ---- one connection, either side -----------------------------------------------------------------
# A handler answers (reply, body, fds[, keepalive]): keepalive owns the fds until they are sent.
Handler = Callable[[dict, bytes, list[int]], tuple]


class Connection:
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
        if len(fds) > MAX_FDS:
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
             timeout: float | None = CALL_TIMEOUT_S) -> tuple[dict, bytes, list[int]]:
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
                    data, fds, _flags, _addr = socket.recv_fds(self._sock, _MAX_MSG, MAX_FDS + 1)
                except OSError:
                    break
                if not data:
                    close_fds(fds)
                    break  # the peer is gone
                try:
                    msg, body, fds = self._parse(data, fds)
                except (IpcError, ValueError, OSError) as e:
                    log.warning("dropping unreadable message: %s", e)
                    close_fds(fds)
                    continue
                if "re" in msg:
                    with self._pending_lock:
                        fut = self._pending.get(msg["re"])
                    if fut is None:
                        close_fds(fds)
                    else:
                        fut.set_result((msg, body, fds))
                else:
                    try:
                        self._pool.submit(self._serve, msg, body, fds)
                    except RuntimeError:
                        close_fds(fds)
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


