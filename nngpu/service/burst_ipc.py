"""Bursts across processes: a minimal driver service process hosting a Device and its
prepared models, and the client-side proxies that reach it over a Unix socket.

    with BurstService.spawn() as service:           # or BurstService.connect(path)
        status, prepared = service.prepare(model)
        with ExecutionBurstController.create(prepared) as burst:
            status, shapes, timing = burst.compute(request, MeasureTiming.NO)

Wire (nngpu.service.wire): an AF_UNIX SOCK_SEQPACKET connection; one message is one packet of
bounded msgpack whose args follow the schema in nngpu.service.codec, with pool memories and FMQ
descriptors attached as fds. Each side serves the other's calls on worker threads, so its reader
is always free for replies.

Messages  client -> service: prepare, configure (FMQ descriptors), freeMemory, closeBurst,
          execute (executeSynchronously), release, and the IDevice proxy's (nngpu.service.proxy);
          service -> client: getMemories, prepared, executed.
The client is nngpu.service.client, the service nngpu.service.session (one per connection) in
nngpu.service.process; this module re-exports both and is the service process's entry point (`python -m nngpu.service.burst_ipc --fd N` or
`--listen PATH`). When the connection ends, the service closes that client's bursts and the
client shuts down its queues, so neither side waits for a peer that is gone.
"""
from __future__ import annotations

import sys

from .client import BurstService, RemoteBurstContext, RemotePreparedModel
from .process import main, serve_connection

__all__ = ["BurstService", "RemotePreparedModel", "RemoteBurstContext", "serve_connection", "main"]

if __name__ == "__main__":
    sys.exit(main())
