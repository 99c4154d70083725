"""The driver's own threads. Each is a daemon thread that blocks SIGINT and SIGTERM: the kernel
delivers a process's signal to any thread that does not block it, and Python runs the handler
only in the main thread, which a signal taken by another thread does not wake from a blocking
call. So `nngpu serve` waiting in accept() would never hear SIGTERM, nor `nngpu run` Ctrl-C."""
from __future__ import annotations

import signal
import threading
from typing import Any, Callable

STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


def block_stop_signals() -> None:
    """On the calling thread (not the main one): leave SIGINT and SIGTERM to the others."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)


def start_thread(target: Callable[..., Any], name: str, args: tuple = ()) -> threading.Thread:
    """A started daemon thread running target(*args) with the stop signals blocked."""
    def run() -> None:
        block_stop_signals()
        target(*args)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread
