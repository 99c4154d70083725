"""Ctrl-C noted by nngpu.cli.interrupt: one that Python swallows inside a finalizer still stops
the loop at its next check, and is not printed; anything else a finalizer raises still is."""
import os
import signal
import sys

import pytest

from nngpu.cli.interrupt import noted_interrupts


class _InterruptedWhenCollected:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)  # raised in here, where Python only prints it


class _FailingWhenCollected:
    def __del__(self):
        raise ValueError("a finalizer's own error")


def test_an_interrupt_swallowed_by_a_finalizer_is_raised_at_the_next_check(monkeypatch):
    printed = []
    monkeypatch.setattr(sys, "unraisablehook", printed.append)   # what Python would print
    before = signal.getsignal(signal.SIGINT)
    reached = False
    with noted_interrupts() as check:
        check()  # nothing yet
        _InterruptedWhenCollected()
        reached = True  # the KeyboardInterrupt did not come out of the collection
        with pytest.raises(KeyboardInterrupt):
            check()
        assert printed == []   # noted, so not printed
        _FailingWhenCollected()
    assert [type(info.exc_value) for info in printed] == [ValueError]
    assert reached
    assert signal.getsignal(signal.SIGINT) is before and sys.unraisablehook == printed.append


def test_an_interrupt_outside_a_finalizer_raises_where_it_comes():
    with noted_interrupts() as check:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # the handler runs at the next bytecode boundary
                pass
        with pytest.raises(KeyboardInterrupt):
            check()
