"""Ctrl-C that a long loop cannot lose. Python turns SIGINT into a KeyboardInterrupt raised
wherever the main thread is, and where that is a finalizer (a collected object's __del__ or
weakref.finalize callback) Python prints it and carries on: a loop over the whole corpus then
ran to its end. Here the signal is also noted, and the loop asks for the note between steps; the
one a finalizer swallowed is not printed (a traceback under "nngpu: interrupted", as Ctrl-C in
`nngpu cts` gave when it came during a pool's close)."""
from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager
from typing import Callable, Iterator


@contextmanager
def noted_interrupts() -> Iterator[Callable[[], None]]:
    """Yields `check`, which raises KeyboardInterrupt once SIGINT has come in the block, even if
    the one the signal raised was swallowed. Off the main thread (no handler can be set there)
    `check` does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    noted = threading.Event()

    def on_sigint(signum: int, frame: object) -> None:
        noted.set()
        raise KeyboardInterrupt

    def check() -> None:
        if noted.is_set():
            raise KeyboardInterrupt

    printing = sys.unraisablehook

    def unraisable(info: sys.UnraisableHookArgs) -> None:
        if not (noted.is_set() and isinstance(info.exc_value, KeyboardInterrupt)):
            printing(info)   # anything else a finalizer raised is printed as ever

    previous = signal.signal(signal.SIGINT, on_sigint)
    sys.unraisablehook = unraisable
    try:
        yield check
    finally:
        sys.unraisablehook = printing
        signal.signal(signal.SIGINT, previous)
