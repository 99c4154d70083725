"""A queue's descriptor (its fds and sizes), how it travels between processes over a Unix socket
(SCM_RIGHTS), and the errors of opening a queue (fmq.py)."""
from __future__ import annotations

import errno
import json
import os
import socket
from dataclasses import dataclass


class QueueError(Exception):
    """A queue that cannot be created or attached (bad descriptor, sizes or mapping)."""


class QueueResourceError(QueueError):
    """The process ran out of something (fds, memory, address space) while it opened a queue:
    the descriptor may be fine."""


_OUT_OF = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EAGAIN, errno.ENOSPC}


def queue_error(what: str, e: OSError | ValueError) -> QueueError:
    """QueueResourceError for an exhausted resource, else QueueError (the caller's descriptor)."""
    kind = QueueResourceError if getattr(e, "errno", None) in _OUT_OF else QueueError
    return kind(f"{what}: {e}")


@dataclass(frozen=True)
class QueueDescriptor:
    """What another process needs to open the queue: the memfd, the event fds (-1: none)."""

    memfd: int
    not_empty_fd: int
    not_full_fd: int
    element_size: int
    capacity: int

    @property
    def blocking(self) -> bool:
        return self.not_empty_fd >= 0

    def fds(self) -> list[int]:
        return [self.memfd] + ([self.not_empty_fd, self.not_full_fd] if self.blocking else [])

    def meta(self) -> dict:
        return {"element_size": self.element_size, "capacity": self.capacity, "blocking": self.blocking}

    @classmethod
    def from_parts(cls, meta: dict, fds: list[int]) -> "QueueDescriptor":
        try:
            blocking = bool(meta["blocking"])
            if len(fds) != (3 if blocking else 1):
                raise QueueError(f"descriptor carries {len(fds)} fds")
            return cls(fds[0], fds[1] if blocking else -1, fds[2] if blocking else -1,
                       int(meta["element_size"]), int(meta["capacity"]))
        except (KeyError, TypeError, ValueError) as e:
            raise QueueError(f"bad descriptor: {e}") from e


# ---- descriptor transport over Unix sockets ---------------------------------------------------
def send_descriptor(sock: socket.socket, desc: QueueDescriptor, extra: dict | None = None) -> None:
    """Send `desc` (and a small JSON dict) as one message with its fds attached."""
    payload = json.dumps({"queue": desc.meta(), **(extra or {})}).encode()
    socket.send_fds(sock, [payload], desc.fds())


def recv_descriptor(sock: socket.socket) -> tuple[QueueDescriptor, dict]:
    """Receive one send_descriptor message; the returned fds are owned by the caller."""
    data, fds, _flags, _addr = socket.recv_fds(sock, 65536, 8)
    try:
        msg = json.loads(data.decode())
        return QueueDescriptor.from_parts(msg.pop("queue"), fds), msg
    except (ValueError, KeyError, QueueError) as e:
        for fd in fds:
            os.close(fd)
        raise QueueError(f"bad descriptor message: {e}") from e
