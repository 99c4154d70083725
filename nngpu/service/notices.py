"""The service's side of the callbacks a client passes: a prepare's or an execution's
notification goes back to the client as a call (`prepared`, `executed`), on a thread of its own,
only once its launch has succeeded; and a fence the driver returns, closed once it is sent."""
from __future__ import annotations

import logging
import threading

from ..threads import start_thread
from ..hal.interfaces import IExecutionCallback, IPreparedModelCallback
from ..hal.types import ErrorStatus, NativeHandle
from ..memory import close_fds
from .codec import WireError
from .wire import Connection, IpcError

log = logging.getLogger("nngpu.burst_ipc")

NOTIFY_TIMEOUT_S = 30.0


class SentHandle(NativeHandle):
    """A fence the driver returned, ours to close: the wire keeps the reply (and so this) alive
    until it is sent, then the last reference closes the fds."""

    def __del__(self) -> None:
        close_fds(self.fds)


def notify_client(conn: Connection, op: str, args: dict) -> None:
    """A call back to the client, on its own thread: a driver thread (the prepare pool, an
    execution worker) never waits on a client."""
    def send() -> None:
        try:
            conn.call(op, args, timeout=NOTIFY_TIMEOUT_S)
        except (IpcError, WireError) as e:
            log.info("%s: the client was not told: %s", op, e)
    start_thread(send, f"nngpu-{op}")


class Notice:
    """A callback whose notification reaches the client by a call back (`op`), once its launch
    has succeeded: after a failed launch the client notifies its callback with the launch status
    itself, so each client callback is notified exactly once."""

    def __init__(self, conn: Connection, op: str, callback_id: int):
        self._conn, self._op, self._id = conn, op, callback_id
        self._lock = threading.Lock()
        self._launched: bool | None = None
        self._held: dict | None = None

    def _deliver(self, args: dict) -> None:
        with self._lock:
            if self._launched is None:  # notified before the launch returned: hold it
                self._held = args
                return
            send = self._launched
        if send:
            notify_client(self._conn, self._op, {"callback": self._id, **args})

    def launched(self, status: ErrorStatus) -> dict:
        with self._lock:
            self._launched = status == ErrorStatus.NONE
            held, self._held = self._held, None
        if held is not None and self._launched:
            notify_client(self._conn, self._op, {"callback": self._id, **held})
        return {"status": status}


class PreparedNotice(Notice, IPreparedModelCallback):
    """The client's prepare callback: the model is kept in the session, its id sent back. The
    session counts the prepare as under way from here (which fails when the client is at its
    models cap) until it is notified or its launch fails."""

    def __init__(self, session, callback_id: int):
        session.start_prepare()
        super().__init__(session.conn, "prepared", callback_id)
        self._session = session
        self._counted = True

    def _uncount(self) -> None:
        with self._lock:
            counted, self._counted = self._counted, False
        if counted:
            self._session.end_prepare()

    def notify(self, status, preparedModel) -> None:
        ok = status == ErrorStatus.NONE and preparedModel is not None
        model = self._session.keep(preparedModel) if ok else None
        self._uncount()
        self._deliver({"status": status, "model": model})

    def launched(self, status: ErrorStatus) -> dict:
        if status != ErrorStatus.NONE:
            self._uncount()
        return super().launched(status)

    notify_1_2 = notify
    notify_1_3 = notify


class ExecutedNotice(Notice, IExecutionCallback):
    """The client's execution callback; `request` (its pools) lives until the execution ends."""

    def __init__(self, conn: Connection, callback_id: int, request):
        super().__init__(conn, "executed", callback_id)
        self._request = request

    def notify(self, status) -> None:
        self.notify_1_2(status, [], None)

    def notify_1_2(self, status, outputShapes, timing) -> None:
        self._request = None
        self._deliver({"status": status, "shapes": list(outputShapes), "timing": timing})

    notify_1_3 = notify_1_2
