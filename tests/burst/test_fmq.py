"""nngpu.burst.fmq: ring semantics, atomic packets, blocking wake-ups, timeouts, close, and a queue
shared with another process through a descriptor sent over a Unix socket."""
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import nngpu.burst.fmq as fmq_module
from nngpu.burst.descriptor import QueueDescriptor, QueueError, recv_descriptor, send_descriptor
from nngpu.burst.fmq import MessageQueue

E = 8  # element size used by most tests


def elems(tag: int, n: int) -> bytes:
    return b"".join(bytes([tag, k]) * (E // 2) for k in range(n))


@pytest.mark.parametrize("blocking", [True, False])
def test_wraparound_keeps_data_and_order(blocking):
    q = MessageQueue(E, 5, blocking=blocking)
    expected, got = b"", b""
    for i in range(40):  # packets of 1..4 elements wrap the 5-slot ring many times
        n = i % 4 + 1
        pkt = elems(i, n)
        assert q.write(pkt)
        expected += pkt
        got += q.read(n)
    assert got == expected
    assert q.available_to_read() == 0 and q.available_to_write() == 5
    q.close()


def test_full_and_empty_are_all_or_nothing():
    q = MessageQueue(E, 4)
    assert q.read() is None and q.read(1) is None
    assert q.write(elems(1, 3))
    assert not q.write(elems(2, 2))  # one slot left: the 2-element packet is not half written
    assert q.available_to_read() == 3
    assert q.read(4) is None  # more than there is: nothing dequeued
    assert q.read() == elems(1, 3)  # a whole packet
    assert not q.write(elems(3, 5))  # longer than the queue
    assert not q.write_blocking(elems(3, 5), timeout=10)  # fails at once, no wait
    assert not q.write(b"x" * (E + 1))  # not whole elements
    assert not q.write(b"")
    q.close()


def test_read_blocking_is_woken_by_a_write():
    q = MessageQueue(E, 4, spin_us=0)
    threading.Timer(0.05, lambda: q.write(elems(7, 2))).start()
    t0 = time.monotonic()
    assert q.read_blocking(timeout=5) == elems(7, 2)
    assert time.monotonic() - t0 < 2


def test_write_blocking_waits_for_room():
    q = MessageQueue(E, 2, spin_us=0)
    assert q.write(elems(1, 2))
    threading.Timer(0.05, lambda: q.read(1)).start()
    assert q.write_blocking(elems(2, 1), timeout=5)
    assert q.read() == elems(1, 2)[E:] + elems(2, 1)


@pytest.mark.parametrize("blocking", [True, False])
def test_read_times_out(blocking):
    q = MessageQueue(E, 4, blocking=blocking)
    t0 = time.monotonic()
    assert q.read_blocking(timeout=0.05) is None
    assert 0.04 <= time.monotonic() - t0 < 1.0
    assert q.read_blocking(1, timeout=0) is None


@pytest.mark.parametrize("blocking", [True, False])
def test_close_wakes_a_blocked_reader_on_the_other_end(blocking):
    writer = MessageQueue(E, 4, blocking=blocking, spin_us=0)
    reader = MessageQueue.attach(writer.descriptor(), spin_us=0)
    threading.Timer(0.05, writer.close).start()
    t0 = time.monotonic()
    assert reader.read_blocking(timeout=10) is None
    assert time.monotonic() - t0 < 2
    assert reader.closed
    assert not reader.write(elems(1, 1))
    reader.close()


def test_shutdown_wakes_a_blocked_writer():
    q = MessageQueue(E, 1, spin_us=0)
    assert q.write(elems(1, 1))
    threading.Timer(0.05, q.shutdown).start()
    assert not q.write_blocking(elems(2, 1), timeout=10)
    q.close()
    q.close()  # idempotent


def test_a_silent_write_needs_wake_reader_to_wake_a_sleeper(monkeypatch):
    import nngpu.burst.fmq

    monkeypatch.setattr(nngpu.burst.fmq, "_SLEEP_SLICE_S", 30.0)  # no periodic recheck during the test
    q = MessageQueue(E, 4, spin_us=0)
    got = []
    reader = threading.Thread(target=lambda: got.append(q.read_blocking(timeout=10)))
    reader.start()
    time.sleep(0.05)  # asleep in poll by now
    assert q.write(elems(3, 1), wake=False)
    reader.join(0.2)
    assert reader.is_alive()  # nobody told it
    t0 = time.monotonic()
    q.wake_reader()
    reader.join(5)
    assert got == [elems(3, 1)] and time.monotonic() - t0 < 2
    q.close()


def _signalled(fd: int) -> bool:
    try:
        return os.eventfd_read(fd) > 0
    except BlockingIOError:
        return False


@pytest.mark.skipif(fmq_module._SIGNAL_ALWAYS, reason="every transfer signals on this CPU")
def test_only_sleepers_are_signalled(monkeypatch):
    monkeypatch.setattr(fmq_module, "_SLEEP_SLICE_S", 30.0)  # woken by the signal, not by a recheck
    q = MessageQueue(E, 2, spin_us=0)
    d = q.descriptor()
    assert q.write(elems(1, 1)) and q.read() == elems(1, 1)
    assert not _signalled(d.not_empty_fd) and not _signalled(d.not_full_fd)  # nobody slept: no syscall
    got = []
    reader = threading.Thread(target=lambda: got.append(q.read_blocking(timeout=10)))
    reader.start()
    time.sleep(0.05)
    t0 = time.monotonic()
    assert q.write(elems(2, 1))
    reader.join(5)
    assert got == [elems(2, 1)] and time.monotonic() - t0 < 2
    assert q.write(elems(3, 2))  # full: the writer sleeps until a read makes room
    writer = threading.Thread(target=lambda: got.append(q.write_blocking(elems(4, 1), timeout=10)))
    writer.start()
    time.sleep(0.05)
    t0 = time.monotonic()
    assert q.read(1) == elems(3, 1)
    writer.join(5)
    assert time.monotonic() - t0 < 2
    assert got[-1] is True and q.read() == elems(3, 2)[E:] + elems(4, 1)
    q.close()


@pytest.mark.parametrize("spin_us", [0, 200])
def test_wait_readable(spin_us):
    q = MessageQueue(E, 4, spin_us=spin_us)
    assert not q.wait_readable(1, timeout=0.02)
    assert not q.wait_readable(5, timeout=10)  # more than the queue holds: at once
    threading.Timer(0.05, lambda: q.write(elems(1, 2))).start()
    assert q.wait_readable(2, timeout=5)
    assert q.available_to_read() == 2  # waiting consumes nothing
    threading.Timer(0.05, q.shutdown).start()
    t0 = time.monotonic()
    assert not q.wait_readable(3, timeout=10)
    assert time.monotonic() - t0 < 2
    q.close()


def test_attach_checks_the_descriptor():
    q = MessageQueue(E, 4)
    d = q.descriptor()
    with pytest.raises(QueueError):
        MessageQueue.attach(QueueDescriptor(d.memfd, d.not_empty_fd, d.not_full_fd, E * 2, 4))
    with pytest.raises(QueueError):
        MessageQueue.attach(QueueDescriptor(d.memfd, -1, -1, E, 4))  # blocking flag differs
    with pytest.raises(QueueError):
        MessageQueue.attach(QueueDescriptor(987654, -1, -1, E, 4))
    with pytest.raises(QueueError):
        MessageQueue.attach("not a descriptor")
    with pytest.raises(QueueError):
        MessageQueue(0, 4)
    other = MessageQueue.attach(d)
    assert q.write(elems(5, 2)) and other.read() == elems(5, 2)
    other.close()
    q.close()


_CHILD = textwrap.dedent("""
    import socket, sys
    from nngpu.burst.descriptor import recv_descriptor
    from nngpu.burst.fmq import MessageQueue
    sock = socket.socket(fileno=int(sys.argv[1]))
    d_in, _ = recv_descriptor(sock)
    d_out, _ = recv_descriptor(sock)
    qin, qout = MessageQueue.attach(d_in, dup=False), MessageQueue.attach(d_out, dup=False)
    while True:
        pkt = qin.read_blocking(timeout=20)
        if pkt is None:
            break  # closed by the parent
        assert qout.write_blocking(pkt[::-1], timeout=20)
    sock.send(b"bye")
""")


def test_cross_process_echo_and_close():
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(child.fileno())], pass_fds=[child.fileno()])
    child.close()
    try:
        to_child, from_child = MessageQueue(E, 3, spin_us=0), MessageQueue(E, 3, spin_us=0)
        send_descriptor(parent, to_child.descriptor())
        send_descriptor(parent, from_child.descriptor())
        for i in range(10):  # packets wrap both rings
            pkt = elems(i, i % 3 + 1)
            assert to_child.write_blocking(pkt, timeout=20)
            assert from_child.read_blocking(timeout=20) == pkt[::-1]
        to_child.close()  # the child's blocked read returns and it exits
        parent.settimeout(20)
        assert parent.recv(16) == b"bye"
        assert proc.wait(timeout=20) == 0
        from_child.close()
    finally:
        proc.kill()
        parent.close()


def test_bad_descriptor_message_is_rejected():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    a.send(b"not json")
    with pytest.raises(QueueError):
        recv_descriptor(b)
    a.close()
    b.close()


# ---- issue 10: a peer that truncates the region must not SIGBUS this process ----------------------
def unsealed_copy(q: MessageQueue) -> QueueDescriptor:
    """q's region copied into a memfd without seals: what a hostile peer could send."""
    d = q.descriptor()
    size = os.fstat(d.memfd).st_size
    fd = os.memfd_create("hostile-fmq", os.MFD_CLOEXEC)
    os.write(fd, os.pread(d.memfd, size, 0))
    return QueueDescriptor(fd, d.not_empty_fd, d.not_full_fd, d.element_size, d.capacity)


def test_queue_regions_are_sealed_and_unsealed_ones_are_refused():
    q = MessageQueue(E, 4)
    with pytest.raises(PermissionError):
        os.ftruncate(q.descriptor().memfd, 0)
    hostile = unsealed_copy(q)
    with pytest.raises(QueueError, match="sealed"):
        MessageQueue.attach(hostile)
    fds = [os.dup(fd) for fd in hostile.fds()]
    with pytest.raises(QueueError):
        MessageQueue.attach(QueueDescriptor(fds[0], fds[1], fds[2], E, 4), dup=False)
    for fd in fds:  # a refused attach closes the fds it was given
        with pytest.raises(OSError):
            os.fstat(fd)
    os.close(hostile.memfd)
    q.close()


_DRIVER = textwrap.dedent("""
    import socket, sys
    from nngpu.burst.descriptor import QueueError, recv_descriptor
    from nngpu.burst.fmq import MessageQueue
    sock = socket.socket(fileno=int(sys.argv[1]))
    for _ in range(2):  # the hostile region first, then a queue nngpu made
        desc, _ = recv_descriptor(sock)
        try:
            q = MessageQueue.attach(desc, dup=False)
        except QueueError:
            sock.send(b"refused")
            continue
        sock.send(b"attached")
        sock.recv(16)  # the client has tried to shrink it
        sock.send(q.read_blocking(timeout=20) or b"nothing")
""")


def test_a_driver_process_cannot_be_killed_by_a_shrunk_queue_region():
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    proc = subprocess.Popen([sys.executable, "-c", _DRIVER, str(child.fileno())], pass_fds=[child.fileno()])
    child.close()
    parent.settimeout(20)
    try:
        q = MessageQueue(E, 4, spin_us=0)
        hostile = unsealed_copy(q)
        send_descriptor(parent, hostile)
        assert parent.recv(16) == b"refused"
        os.ftruncate(hostile.memfd, 0)  # would have killed the driver had it mapped the region
        send_descriptor(parent, q.descriptor())
        assert parent.recv(16) == b"attached"
        with pytest.raises(PermissionError):
            os.ftruncate(q.descriptor().memfd, 0)
        assert q.write(elems(3, 1))
        parent.send(b"go")
        assert parent.recv(16) == elems(3, 1)
        assert proc.wait(timeout=20) == 0
        os.close(hostile.memfd)
        q.close()
    finally:
        proc.kill()
        parent.close()


def _poke_counter(q: MessageQueue, offset: int, value: int) -> None:
    """Overwrite a counter in the shared region, as a hostile peer would (through its own mapping)."""
    import mmap
    import struct
    with mmap.mmap(q.descriptor().memfd, 4096) as mm:
        struct.pack_into("<Q", mm, offset, value)


@pytest.mark.parametrize("blocking", [True, False])
@pytest.mark.parametrize("offset, value", [(64, 1 << 40), (64, 3), (128, 5)],
                         ids=["write-far-ahead", "write-behind-read", "read-past-write"])
def test_incoherent_counters_close_the_queue(blocking, offset, value):
    """Counters a peer made nonsense of close the queue for both ends with a reason, and no
    wait spins on them: a waiter returns False at once instead of at its timeout."""
    writer = MessageQueue(E, 4, blocking=blocking)
    reader = MessageQueue.attach(writer.descriptor())
    assert writer.write(elems(1, 4)) and reader.read() == elems(1, 4)  # both counters at 4
    _poke_counter(writer, offset, value)
    t0 = time.monotonic()
    assert not reader.wait_readable(1, timeout=5)
    assert reader.read() is None and not writer.write(elems(2, 1))
    assert not writer.write_blocking(elems(2, 1), timeout=5)
    assert time.monotonic() - t0 < 1
    assert reader.closed and writer.closed and (reader.corrupt or writer.corrupt)
    assert reader.available_to_read() == 0 and writer.available_to_write() == 0
    reader.close()
    writer.close()


def test_a_full_ring_is_coherent():
    """The bounds are inclusive: a full ring and an empty one are not corruption."""
    q = MessageQueue(E, 4)
    assert q.write(elems(1, 4)) and q.available_to_read() == 4 and q.available_to_write() == 0
    assert not q.write(elems(2, 1)) and not q.closed
    assert q.read() == elems(1, 4) and q.available_to_write() == 4 and not q.closed
    q.close()


def test_a_wake_up_after_close_writes_into_no_other_file():
    """shutdown() racing close() from another thread (a burst worker closing its queue while
    the context wakes it) must not write the wake-up into the closed eventfd's number, which a
    new queue's memfd may have taken: its header would read as another layout."""
    for _ in range(300):
        q = MessageQueue(24, 16)
        closer = threading.Thread(target=q.close)
        closer.start()
        fresh = MessageQueue(24, 16)     # may take the numbers close() frees
        q.shutdown()
        q.wake_reader()
        closer.join()
        attached = MessageQueue.attach(fresh.descriptor())   # the header is intact
        attached.close()
        fresh.close()
