"""How a burst client hands a request packet to the server. Either way the packet crosses the
request FMQ and its result comes back on the result FMQ; what differs is who runs it.

QueueTransport: the server's worker, woken by the write (a driver in another process, or any
IBurstContext that is not nngpu's own). InProcessTransport: nngpu's own BurstServer in this
process, whose worker would need two thread wake-ups per packet under the GIL; the client runs
the packet it just wrote through the server on its own thread (nngpu.burst.server explains).
transport_for picks one by the context's class, never by what attributes it happens to have.
"""
from __future__ import annotations

from ..hal.interfaces import IBurstContext
from .fmq import MessageQueue
from .server import BurstServer

__all__ = ["QueueTransport", "InProcessTransport", "transport_for"]


class QueueTransport:
    """The packet goes to the server's worker through the request FMQ."""

    def __init__(self, requests: MessageQueue):
        self._requests = requests

    def send(self, packet: bytes, timeout: float | None) -> bool:
        """Write `packet` for the server; False if it could not be written within `timeout`."""
        return self._requests.write_blocking(packet, timeout=timeout)


class InProcessTransport(QueueTransport):
    """The packet is answered on the calling thread by `server`, or by its worker when that is
    busy with an earlier one."""

    def __init__(self, requests: MessageQueue, results: MessageQueue, server: BurstServer):
        super().__init__(requests)
        self._server = server
        results.spin_s = 0.0  # the worker needs the GIL this thread would spin with

    def send(self, packet: bytes, timeout: float | None) -> bool:
        if not self._requests.write(packet, wake=False):
            return super().send(packet, timeout)  # the queue is full: wait for the worker
        if not self._server.serve_inline():  # its worker is busy: it reads the packet next, once woken
            self._requests.wake_reader()
        return True


def transport_for(context: IBurstContext, requests: MessageQueue, results: MessageQueue) -> QueueTransport:
    """InProcessTransport for nngpu's BurstServer serving a client in this process, else
    QueueTransport (a proxy for another process, or another driver's context)."""
    if isinstance(context, BurstServer) and context.in_process:
        return InProcessTransport(requests, results, context)
    return QueueTransport(requests)
