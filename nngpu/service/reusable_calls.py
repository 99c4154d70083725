"""The service's side of the AIDL IExecution and IBurst (nngpu.service.remote_reusable is the
client's): a Session mix-in. A reusable execution is the driver core's ReusableExecution, its
request checked and its pools registered once, in the service; a burst is the core's TokenBurst,
which keeps each token's memory (its fd, its mapping, its registration with the backend) until
the client releases the token.

A client holds at most MAX_OBJECTS of each, and at most MAX_KEPT_MEMORIES memories in them
together: one more is GENERAL_FAILURE. They go when released, or with the connection."""
from __future__ import annotations

import threading
from typing import Any, Callable

from ..driver.execution import Result
from ..driver.reusable import ReusableExecution
from ..driver.token_burst import TokenBurst
from ..hal.types import ErrorStatus, OptionalTimePoint, OptionalTimeoutDuration
from .codec import MAX_ERROR

MAX_KEPT_MEMORIES = 256  # per client: each is an open fd and a mapping in the service


class KeptFull(Exception):
    """The client holds as much of a kind as it may."""


def result_reply(result: Result) -> dict:
    return {"status": result.status, "shapes": result.output_shapes, "timing": result.timing,
            "error": result.reason[:MAX_ERROR] or None}


class ReusableCalls:
    """createExecution, runExecution, fencedExecution, releaseExecution; openTokenBurst,
    runTokenBurst, releaseToken, closeTokenBurst. The Session provides the tables' lock, ids,
    lookups and the fenced reply."""

    _lock: threading.Lock
    _new_id: Callable[[], int]
    _lookup: Callable[[dict, Any, str], Any]
    _model: Callable[[dict], Any]
    _request: Callable[[dict], Any]
    _room: Callable[[dict, str], None]
    fenced: dict[int, Any]
    fenced_reply: Callable[..., dict]

    def __init__(self) -> None:
        self.executions: dict[int, ReusableExecution] = {}
        self.token_bursts: dict[int, TokenBurst] = {}

    def close_reusable(self) -> None:
        """Release what this client's executions and bursts keep (the connection ended)."""
        with self._lock:
            kept = [*self.executions.values(), *self.token_bursts.values()]
            self.executions.clear()
            self.token_bursts.clear()
        for item in kept:
            item.close()

    def _kept(self) -> int:
        """How many memories this client's executions and bursts keep (the lock held)."""
        return sum(len(e) for e in self.executions.values()) + sum(len(b) for b in self.token_bursts.values())

    def _keep(self, table: dict, item, extra: int) -> int:
        """Keep `item` (which holds `extra` memories) under a new id, if the caps allow."""
        with self._lock:
            if self._kept() + extra > MAX_KEPT_MEMORIES:
                raise KeptFull(f"this client's executions and bursts keep {MAX_KEPT_MEMORIES} memories already")
        self._room(table, "reusable executions" if table is self.executions else "bursts")
        key = self._new_id()
        with self._lock:
            table[key] = item
        return key

    def _op_createExecution(self, args):
        created = ReusableExecution.create(self._model(args), self._request(args), args["measure"],
                                           OptionalTimeoutDuration(args.get("loop_timeout")))
        if isinstance(created, Result):
            return {"status": created.status, "error": created.reason[:MAX_ERROR] or None}
        try:
            return {"status": ErrorStatus.NONE, "execution": self._keep(self.executions, created, len(created))}
        except Exception:
            created.close()
            raise

    def _execution(self, args) -> ReusableExecution:
        return self._lookup(self.executions, args["execution"], "reusable execution")

    def _op_runExecution(self, args):
        return result_reply(self._execution(args).run(OptionalTimePoint(args.get("deadline"))))

    def _op_fencedExecution(self, args):
        execution = self._execution(args)
        self._room(self.fenced, "fenced executions")
        return self.fenced_reply(*execution.fenced(args["wait_for"], OptionalTimePoint(args.get("deadline")),
                                                   OptionalTimeoutDuration(args.get("duration"))))

    def _op_releaseExecution(self, args):
        return self._close(self.executions, args["execution"])

    def _op_openTokenBurst(self, args):
        return {"status": ErrorStatus.NONE, "burst": self._keep(self.token_bursts, TokenBurst(self._model(args)), 0)}

    def _burst(self, args) -> TokenBurst:
        return self._lookup(self.token_bursts, args["burst"], "burst")

    def _op_runTokenBurst(self, args):
        burst, request = self._burst(args), self._request(args)
        tokens = [None if t == -1 else t for t in args["tokens"]]
        with self._lock:
            if self._kept() + burst.new_tokens(tokens) > MAX_KEPT_MEMORIES:
                raise KeptFull(f"this client's executions and bursts keep {MAX_KEPT_MEMORIES} memories already")
        return result_reply(burst.run(request, tokens, args["measure"], OptionalTimePoint(args.get("deadline")),
                                      OptionalTimeoutDuration(args.get("loop_timeout"))))

    def _op_releaseToken(self, args):
        if args["token"] != -1:
            self._burst(args).release(args["token"])
        return {"status": ErrorStatus.NONE}

    def _op_closeTokenBurst(self, args):
        return self._close(self.token_bursts, args["burst"])

    def _close(self, table: dict, key) -> dict:
        """Close this client's `key` of `table`, if it has one (another client's is not in it)."""
        with self._lock:
            item = table.pop(key, None)
        if item is not None:
            item.close()
        return {"status": ErrorStatus.NONE}
