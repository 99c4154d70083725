"""The wire of nngpu.service.burst_ipc: one AF_UNIX SOCK_SEQPACKET connection carrying calls and
replies in both directions.

One message is one packet of msgpack: a call {"op", "id", "args"}, its reply {"re", "args"} ("re":
the call's id), with fds attached (SCM_RIGHTS): pool memories and FMQ descriptors travel as fds,
never as bytes. A message over 64 KiB (a model) rides in a memfd attached as the last fd, the
packet then being {"body": length}. `args` follow the schema of nngpu.service.codec.

A peer's backlog is bounded: at most MAX_IN_FLIGHT of its calls are served or waiting at once,
their bodies within MAX_BODY bytes together, and a call past either is answered GENERAL_FAILURE
at once; at most MAX_IN_FLIGHT of our calls are sent to it at once, and MAX_PENDING in all wait
for its replies (one more fails at once); a reply it does not read within SEND_TIMEOUT_S (the
socket full) ends the connection; a call's send is bounded by the call's own timeout. So a
peer that floods calls, reads no replies or answers no calls costs a bounded amount of memory,
fds and threads, and never blocks a thread for long.
The worker threads serving calls retire when idle: an idle connection costs its reader only.

Nothing is allocated on a peer's word: the packet is read into a fixed buffer; a body's length is
checked against MAX_BODY and the memfd's size, and must be backed by pages the sender wrote
(not a sparse file), before it is read; msgpack is decoded by a walker
that refuses a container declaring more items than the bytes left could hold (msgpack itself would
allocate the declared count) and nesting deeper than MAX_DEPTH, and lets msgpack build only
scalars, strings and bytes, which it copies from the bytes present. Each side serves the other's
calls on worker threads so that its reader thread is always free to deliver replies (the driver's
getMemories call waits for the client while the client waits on the result FMQ).
"""
from __future__ import annotations

import array
import logging
import os
import select
import socket
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable

import msgpack

from ..threads import start_thread
from ..driver.work_queue import PriorityPool
from ..hal.types import ErrorStatus
from ..memory import close_fds
from . import codec
from .codec import WireError

log = logging.getLogger("nngpu.burst_ipc")

_MAX_PACKET = 1 << 17
_INLINE = 1 << 16
MAX_BODY = 1 << 28
MAX_DEPTH = 16
MAX_FDS = 250
CALL_TIMEOUT_S = 120.0
MAX_IN_FLIGHT = 32  # a peer's calls served or waiting at once
MAX_PENDING = 64  # our calls waiting for the peer's replies
SEND_TIMEOUT_S = float(os.environ.get("NNGPU_IPC_SEND_TIMEOUT_S", "10"))  # for a reply to go out
IDLE_WORKER_S = 5.0  # a worker idle this long exits
_ARRAY = frozenset([*range(0x90, 0xA0), 0xDC, 0xDD])
_MAP = frozenset([*range(0x80, 0x90), 0xDE, 0xDF])
_EXT = frozenset([0xC7, 0xC8, 0xC9, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8])


class IpcError(Exception):
    """The peer is gone or answered something unreadable."""


# ---- bounded msgpack ----------------------------------------------------------------------------
def dumps(value: Any) -> bytes:
    try:
        return msgpack.packb(value, use_bin_type=True)
    except (OverflowError, TypeError, ValueError) as e:  # an integer past 64 bits, say
        raise WireError(f"does not pack: {e}") from e


def loads(data: bytes) -> Any:
    """One msgpack value that fills `data`; WireError for anything else, before allocating more
    than a small multiple of len(data)."""
    u = msgpack.Unpacker(raw=False, max_buffer_size=max(len(data), 1), max_ext_len=0, strict_map_key=True)
    u.feed(data)
    try:
        value = _read(u, data, 0)
    except (msgpack.UnpackException, ValueError, RecursionError) as e:
        raise WireError(f"unreadable msgpack: {type(e).__name__}: {e}") from e
    if u.tell() != len(data):
        raise WireError(f"{len(data) - u.tell()} bytes after the message")
    return value


def _read(u: msgpack.Unpacker, data: bytes, depth: int) -> Any:
    at = u.tell()
    if at >= len(data):
        raise WireError("truncated message")
    tag = data[at]
    if tag in _EXT:
        raise WireError("msgpack ext types are not part of the wire")
    if tag not in _ARRAY and tag not in _MAP:
        return u.unpack()  # a scalar, a string or bytes: msgpack needs all their bytes present
    if depth >= MAX_DEPTH:
        raise WireError("nested too deep")
    if tag in _ARRAY:
        n = u.read_array_header()
        if n > len(data) - u.tell():  # every item takes at least a byte
            raise WireError(f"an array of {n} items in {len(data) - u.tell()} bytes")
        return [_read(u, data, depth + 1) for _ in range(n)]
    n = u.read_map_header()
    if 2 * n > len(data) - u.tell():
        raise WireError(f"a map of {n} items in {len(data) - u.tell()} bytes")
    out = {}
    for _ in range(n):
        key = _read(u, data, depth + 1)
        if not isinstance(key, str) or key in out:
            raise WireError("map keys are distinct strings")
        out[key] = _read(u, data, depth + 1)
    return out


def _read_body(n: Any, memfd: int) -> bytes:
    """The message in a body memfd of `n` bytes (the caller closes the memfd)."""
    if type(n) is not int or not 0 <= n <= MAX_BODY:
        raise WireError(f"a body of {n!r} bytes (at most {MAX_BODY})")
    st = os.fstat(memfd)
    if st.st_size != n:
        raise WireError("the body memfd is not the size declared")
    if st.st_blocks * 512 < n:  # a sparse memfd costs its sender nothing, its reader n bytes
        raise WireError("the body memfd is sparse")
    body = os.pread(memfd, n, 0)
    if len(body) != n:
        raise WireError("the body memfd shrank")
    return body


# ---- one connection, either side -----------------------------------------------------------------
# A handler answers a call's decoded args with its reply args; what it returns is kept alive
# (memories whose fds it attaches) until the reply is sent.
Handler = Callable[[str, dict], dict]


class Connection:
    """Calls and replies over one SEQPACKET socket; incoming calls go to `handler` on a pool."""

    def __init__(self, sock: socket.socket, handler: Handler, on_close: Callable[[], None] | None = None,
                 workers: int = 4):
        self._sock = sock
        self._handler = handler
        self._on_close = on_close
        self._send_lock = threading.Lock()
        self._pending: dict[int, tuple[Future, str]] = {}
        self._pending_lock = threading.Lock()
        # Our calls in flight, held to what the peer serves at once: a busy caller waits here for
        # a slot rather than send a call the peer would refuse as a flood (MAX_PENDING callers
        # at most, sent or waiting to be).
        self._slots = threading.BoundedSemaphore(MAX_IN_FLIGHT)
        self._callers = 0
        self._next_id = 0
        self._pool = PriorityPool(workers, "nngpu-ipc", idle_s=IDLE_WORKER_S)
        self._flight_lock = threading.Lock()
        self._in_flight = self._body_bytes = 0
        self._refused = False
        # The socket is closed once the reader has ended and no send is using it: never while a
        # thread may still send on its fd number, which the kernel could give to another client.
        self._sending = 0
        self._sock_closed = False
        self.refusal: str | None = None  # why the peer said it will not serve us (a `bye`)
        self.closed = threading.Event()
        self._reader = start_thread(self._read_loop, "nngpu-ipc-reader")

    def _send(self, envelope: dict, fds: list[int], timeout: float | None) -> None:
        """Send one message within `timeout` s (None: however long the peer takes to make room);
        IpcError when it cannot go out."""
        data = dumps(envelope)
        fds = list(fds)
        big = len(data) > _INLINE
        if len(fds) + big > MAX_FDS or len(data) > MAX_BODY:
            raise WireError(f"a message of {len(data)} bytes and {len(fds)} fds (at most {MAX_BODY}, {MAX_FDS})")
        memfd = -1
        try:
            if big:  # big messages ride in a memfd, attached as the last fd; a call's id stays outside
                memfd = os.memfd_create("nngpu-ipc", os.MFD_CLOEXEC)
                os.pwrite(memfd, data, 0)
                fds.append(memfd)
                data = dumps({"body": len(data), **({"id": envelope["id"]} if "id" in envelope else {})})
            self._send_packet(data, fds, None if timeout is None else time.monotonic() + timeout)
        except OSError as e:
            raise IpcError(f"send failed: {e}") from e
        finally:
            if memfd >= 0:
                os.close(memfd)

    def _send_packet(self, data: bytes, fds: list[int], deadline: float | None) -> None:
        with self._flight_lock:
            if self._sock_closed:
                raise IpcError("connection closed")
            self._sending += 1
        try:
            self._send_whole(data, fds, deadline)
        finally:
            with self._flight_lock:
                self._sending -= 1
                self._close_if_unused()

    def _close_if_unused(self) -> None:
        """(Under the flight lock.) Close the socket if the reader has ended and no send uses it."""
        if self.closed.is_set() and not self._sending and not self._sock_closed:
            self._sock_closed = True
            self._sock.close()

    def _send_whole(self, data: bytes, fds: list[int], deadline: float | None) -> None:
        """A SEQPACKET send is whole or nothing: try without blocking, wait for room until `deadline`."""
        if not self._send_lock.acquire(timeout=-1 if deadline is None else max(0.0, deadline - time.monotonic())):
            raise IpcError("send: another message is still waiting for room")
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
        try:
            while True:
                try:  # sendmsg, as socket.send_fds drops its flags argument (CPython 3.11)
                    self._sock.sendmsg([data], ancillary, socket.MSG_DONTWAIT)
                    return
                except BlockingIOError:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise IpcError("send: the peer reads nothing") from None
                    p = select.poll()
                    p.register(self._sock, select.POLLOUT)
                    p.poll(None if left is None else max(1, int(left * 1000)))
        finally:
            self._send_lock.release()

    def call(self, op: str, args: dict, timeout: float | None = CALL_TIMEOUT_S) -> dict:
        """The peer's reply args to `op`; IpcError if none comes or it is unreadable, WireError if
        `args` do not fit the schema."""
        plain, fds = codec.encode(codec.CALLS[op], args)
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._pending_lock:
            if self.closed.is_set():
                raise IpcError("connection closed" + (f": {self.refusal}" if self.refusal else ""))
            if self._callers >= MAX_PENDING:
                raise IpcError(f"{op}: the peer has not answered {MAX_PENDING} calls")
            self._callers += 1
        try:
            if not self._slots.acquire(timeout=-1 if deadline is None else max(0.0, deadline - time.monotonic())):
                raise IpcError(f"{op}: no reply (the {MAX_IN_FLIGHT} calls before it still wait for the peer)")
            try:
                return self._call_in_slot(op, plain, fds, deadline, timeout)
            finally:
                self._slots.release()
        finally:
            with self._pending_lock:
                self._callers -= 1

    def _call_in_slot(self, op: str, plain: Any, fds: list[int], deadline: float | None,
                      timeout: float | None) -> dict:
        fut: Future = Future()
        with self._pending_lock:
            if self.closed.is_set():
                raise IpcError("connection closed" + (f": {self.refusal}" if self.refusal else ""))
            self._next_id += 1
            call_id = self._next_id
            self._pending[call_id] = (fut, op)
        try:
            self._send({"op": op, "id": call_id, "args": plain}, fds, timeout)
            return fut.result(None if deadline is None else max(0.0, deadline - time.monotonic()))
        except TimeoutError as e:
            raise IpcError(f"{op}: no reply") from e
        finally:
            with self._pending_lock:
                self._pending.pop(call_id, None)

    def _read_loop(self) -> None:
        try:
            while True:
                try:
                    data, fds, flags, _addr = socket.recv_fds(self._sock, _MAX_PACKET, MAX_FDS + 1)
                except ConnectionResetError:
                    continue  # the peer closed with our message unread: what it sent before is still here
                except OSError:
                    break
                if not data:
                    close_fds(fds)
                    if self._peer_hung_up():
                        break
                    continue  # an empty packet, not the end
                try:
                    if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
                        raise WireError("a packet or its fds truncated")
                    parsed = self._parse(data, fds)
                except (WireError, OSError) as e:
                    log.warning("dropping unreadable message: %s", e)
                    close_fds(fds)
                    continue
                if parsed is not None:
                    self._dispatch(*parsed)
        finally:
            self._shutdown()

    def _peer_hung_up(self) -> bool:
        """After a read of 0 bytes: the peer's end is gone (SEQPACKET also carries empty packets)."""
        p = select.poll()
        p.register(self._sock, select.POLLRDHUP)
        return any(ev & (select.POLLRDHUP | select.POLLHUP | select.POLLERR) for _fd, ev in p.poll(0))

    def _parse(self, data: bytes, fds: list[int]) -> tuple[dict, list[int], int | None] | None:
        """The message, its fds and, for a call with a body, the bytes it was counted in with;
        None when it was answered already (such a call refused before its body is read)."""
        envelope, counted = loads(data), None
        if isinstance(envelope, dict) and "body" in envelope and set(envelope) <= {"body", "id"}:
            if not fds:
                raise WireError("body fd missing")
            size = envelope["body"]
            if type(envelope.get("id")) is int and type(size) is int and 0 <= size <= MAX_BODY:
                if (why := self._admit(size)) is not None:
                    close_fds(fds)
                    self._refuse(envelope["id"], why)
                    return None
                counted = size
            memfd = fds.pop()
            try:
                envelope = loads(_read_body(size, memfd))
                if not isinstance(envelope, dict):
                    raise WireError("a message is a map")
            except WireError:
                if counted is not None:
                    self._done(counted)
                raise
            finally:
                os.close(memfd)
        if not isinstance(envelope, dict):
            raise WireError("a message is a map")
        return envelope, fds, counted

    def _admit(self, cost: int) -> str | None:
        """Why the peer's next call (with `cost` body bytes) is not taken now; None: it is counted in."""
        with self._flight_lock:
            if self._in_flight >= MAX_IN_FLIGHT:
                return f"busy: {MAX_IN_FLIGHT} calls of this connection in flight"
            if self._body_bytes + cost > MAX_BODY:
                return f"busy: {self._body_bytes} bytes of messages of this connection in flight"
            self._in_flight += 1
            self._body_bytes += cost
        return None

    def _done(self, cost: int) -> None:
        with self._flight_lock:
            self._in_flight -= 1
            self._body_bytes -= cost

    def _refuse(self, call_id: int, why: str) -> None:
        if not self._refused:  # once per connection: a flood of calls must not flood the log too
            self._refused = True
            log.warning("refusing calls: %s (logged once per connection)", why)
        self._reply(call_id, "", {"status": ErrorStatus.GENERAL_FAILURE, "error": why})

    def _dispatch(self, envelope: dict, fds: list[int], counted: int | None) -> None:
        if set(envelope) == {"bye"} and isinstance(envelope["bye"], str):  # the peer will not serve us
            close_fds(fds)
            self.refusal = envelope["bye"][:200]
            log.warning("the peer refused the connection: %s", self.refusal)
            return
        if set(envelope) == {"re", "args"} and type(envelope["re"]) is int:
            with self._pending_lock:
                fut, op = self._pending.get(envelope["re"], (None, ""))
            if counted is not None:
                self._done(counted)
            if fut is None:
                close_fds(fds)
                return
            try:
                args, rx = codec.decode(codec.REPLIES[op], envelope["args"], fds)
                rx.close()
                fut.set_result(args)
            except WireError as e:
                fut.set_exception(IpcError(f"{op}: unreadable reply: {e}"))
            return
        call_id = envelope.get("id")
        if set(envelope) != {"op", "id", "args"} or type(call_id) is not int:
            close_fds(fds)
            if counted is not None:
                self._done(counted)
            if type(call_id) is int:  # a call with an envelope off the schema
                self._reply(call_id, "", {"status": ErrorStatus.INVALID_ARGUMENT, "error": "not a call"})
            else:
                log.warning("dropping a message that is neither a call nor a reply")
            return
        if counted is None:  # a call with a body was counted in before it was read
            if (why := self._admit(0)) is not None:
                close_fds(fds)
                self._refuse(call_id, why)
                return
            counted = 0
        self._pool.submit(lambda: self._serve(envelope["op"], call_id, envelope["args"], fds, counted))

    def _serve(self, op: Any, call_id: int, plain: Any, fds: list[int], cost: int) -> None:
        reply_op, reply = "", {"status": ErrorStatus.GENERAL_FAILURE, "error": "not served"}
        try:
            try:
                if not isinstance(op, str) or op not in codec.CALLS:
                    close_fds(fds)
                    raise WireError(f"unknown op {op!r}")
                args, rx = codec.decode(codec.CALLS[op], plain, fds)
            except WireError as e:
                reply = {"status": ErrorStatus.INVALID_ARGUMENT, "error": str(e)}
            else:
                reply_op = op
                try:
                    reply = self._handler(op, args)
                except Exception as e:
                    log.exception("handling %s", op)
                    reply = {"status": ErrorStatus.GENERAL_FAILURE, "error": str(e)}
                finally:
                    rx.close()  # the fds no decoded value took (queue descriptors: the burst dup'ed them)
        finally:
            # Counted out before the reply goes: once the peer has it, the peer may send its next
            # call at once, and that call must find the room this one leaves.
            self._done(cost)
        self._reply(call_id, reply_op, reply)

    def _reply(self, call_id: int, op: str, reply: dict) -> None:
        """Send a reply; a peer that leaves it unread for SEND_TIMEOUT_S is hung up on."""
        fields = codec.REPLIES.get(op, codec.REPLIES["release"])
        try:
            try:
                plain, fds = codec.encode(fields, reply)
            except WireError as e:
                log.warning("reply to %s does not encode: %s", op, e)
                plain, fds = codec.encode(fields, {"status": ErrorStatus.GENERAL_FAILURE, "error": str(e)})
            self._send({"re": call_id, "args": plain}, fds, SEND_TIMEOUT_S)
        except IpcError as e:
            if not self.closed.is_set():
                log.warning("hanging up on a peer that reads no replies (%s)", e)
                self._hang_up()
        except (WireError, OSError):
            pass

    def _shutdown(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        with self._pending_lock:
            pending = [fut for fut, _op in self._pending.values()]
        why = "connection closed" + (f": {self.refusal}" if self.refusal else "")
        for fut in pending:
            if not fut.done():
                fut.set_exception(IpcError(why))
        if self._on_close is not None:
            try:
                self._on_close()
            except Exception:
                log.exception("connection close hook")
        self._pool.close()
        with self._flight_lock:
            self._close_if_unused()

    def _hang_up(self) -> None:
        """End the connection: the reader sees the end and shuts everything down."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self) -> None:
        """Hang up and wait (a while) for the reader to end; the socket closes once unused."""
        self._hang_up()
        if threading.current_thread() is not self._reader:
            self._reader.join(timeout=5.0)
