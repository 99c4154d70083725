"""The driver service as a process: serving one inherited socket (`python -m
nngpu.service.burst_ipc --fd N`) or every connection to a listening one (`nngpu serve`,
`--listen PATH`), each on a Session of its own, admitting peers by uid (SO_PEERCRED).

accept_loop serves at most `max_clients` connections at once (each costs the wire's reader
thread while idle, and its workers while busy); one more is told why in a `bye` message, closed,
and logged. Running out of fds or memory is logged and waited out, never the end of the loop.
The driver is imported only where it is needed: a client process that imports
nngpu.service.burst_ipc does not load it.
"""
from __future__ import annotations

import argparse
import errno
import logging
import socket
import threading
import time
from pathlib import Path

from .listen import ListenError, Listener, admitted, peer_uid
from .session import Session
from .wire import dumps

log = logging.getLogger("nngpu.burst_ipc")

MAX_CLIENTS = 64
SIGNAL_POLL_S = 0.5  # how soon the accept loop runs a signal handler another thread took


def serve_connection(sock: socket.socket, device=None) -> None:
    """Serve one client until it disconnects; then close everything it left open."""
    from ..driver.device import Device

    session = Session(device or Device("numpy"), sock)
    session.conn.closed.wait()


_SHORT = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)  # out of fds or memory: wait


def _bye(conn: socket.socket, why: str) -> None:
    """Tell a peer we will not serve why, without waiting on it, and close."""
    try:
        conn.send(dumps({"bye": why}), socket.MSG_DONTWAIT)
    except OSError:
        pass
    conn.close()


def accept_loop(server: socket.socket, device, allowed: frozenset[int] = frozenset(),
                max_clients: int = MAX_CLIENTS) -> None:
    """Serve each admitted connection to `server` (its session runs on the wire's threads), until
    `server` is closed. A peer whose uid is not admitted, or one past `max_clients`, is logged
    and closed; running out of fds or memory is logged and waited out, never the end of the loop."""
    room = threading.BoundedSemaphore(max_clients)  # one unit per connection served
    # A signal the kernel gave another thread (one of a library's: OpenBLAS's, PoCL's) does not
    # wake accept(); Python runs its handler once this thread runs again, so it wakes this often.
    server.settimeout(SIGNAL_POLL_S)
    while True:
        try:
            conn, _ = server.accept()
        except TimeoutError:
            continue
        except OSError as e:
            if server.fileno() < 0:
                return  # closed
            log.warning("accept: %s%s", e.strerror, "; refusing connections for now" if e.errno in _SHORT else "")
            if e.errno in _SHORT:
                time.sleep(0.1)
            continue
        try:
            uid = peer_uid(conn)
        except OSError as e:  # gone already
            log.info("accept: no peer credentials: %s", e)
            conn.close()
            continue
        if not admitted(uid, allowed):
            log.warning("refused a connection from uid %d (admitted: this uid%s)", uid,
                        "".join(f", {u}" for u in sorted(allowed)))
            conn.close()
            continue
        if not room.acquire(blocking=False):
            log.warning("refused a connection: serving %d clients already (--max-clients)", max_clients)
            _bye(conn, f"the service is serving {max_clients} clients already")
            continue
        try:
            Session(device, conn, room.release)
        except Exception:  # out of threads, say: this client is not served, the loop goes on
            log.exception("cannot serve a connection")
            room.release()
            conn.close()


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
    try:
        listener = Listener(Path(args.listen), strict_dir=False)
    except ListenError as e:
        p.exit(1, f"{p.prog}: {e}\n")
    try:
        accept_loop(listener.sock, device)
    except KeyboardInterrupt:
        pass
    finally:
        listener.close()
    return 0
