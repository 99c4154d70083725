"""Issue 25, "lying pool": a memory that declares more bytes than its file holds (one byte more,
1 MiB, 2^64 - 1, 2^64) is an invalid argument wherever it is first used, even when every
argument lies inside the real bytes: executions on every path and backend, IBuffer copies,
and a cache record that declares more than its file. The driver then serves a valid request.
A pool that shrinks after that check is tests/driver/test_shrunk_pool.py's."""
from __future__ import annotations

import fcntl
import os
import select
import struct

import numpy as np
import pytest

from nngpu.backends import device_backends
from nngpu.burst import ExecutionBurstController
from nngpu.driver.callbacks import ExecutionCallback, PreparedModelCallback
from nngpu.driver.device import Device
from nngpu.hal import (BufferDesc, BufferRole, DataLocation, ErrorStatus, ExecutionPreference, MeasureTiming,
                       NativeHandle, OptionalTimePoint, OptionalTimeoutDuration, Priority, Request, RequestArgument)
from nngpu.memory import Memory, MemoryError_, allocate_shared, memory_from_fd
from nngpu.modelutil import as_model_1_3

from .conftest import A, B, add_model, add_request

IN_BYTES = A.nbytes + B.nbytes  # the real file: a then b, 48 bytes
LIES = {"one_byte": IN_BYTES + 1, "1MiB": 1 << 20, "2^64-1": (1 << 64) - 1, "2^64": 1 << 64}
PATHS = ["sync", "sync_1_3", "async", "burst", "fenced"]
HEAD = 16  # bytes before the region of a file memory (its offset)
NO_TIME, NO_DURATION = OptionalTimePoint(), OptionalTimeoutDuration()


def prepare_1_3(device):
    cb = PreparedModelCallback()
    status = device.prepareModel_1_3(as_model_1_3(add_model()), ExecutionPreference.FAST_SINGLE_ANSWER,
                                     Priority.MEDIUM, NO_TIME, [], [], bytes(32), cb)
    assert cb.wait(120) and (status, cb.status) == (ErrorStatus.NONE, ErrorStatus.NONE), (status, cb.status)
    return cb.prepared_model


@pytest.fixture(scope="module", params=["numpy", *device_backends()])
def prepared(request):
    return prepare_1_3(Device(request.param))


def memfd(data: bytes, seal: bool = False) -> int:
    """An anonymous file holding `data`; sealed against shrinking if `seal` (sealed, but still
    smaller than what a lying memory over it declares)."""
    fd = os.memfd_create("lying-pool", os.MFD_CLOEXEC | (os.MFD_ALLOW_SEALING if seal else 0))
    os.write(fd, data)
    if seal:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    return fd


def lying_memory(kind: str, declared: int, tmp_path=None) -> tuple[Memory, int]:
    """(a Memory declaring `declared` bytes over a file of a then b, the client's own fd)."""
    if kind == "file":  # an mmap_fd memory at an offset: the offset counts against the file too
        path = tmp_path / "pool.bin"
        path.write_bytes(bytes(HEAD) + A.tobytes() + B.tobytes())
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        return Memory("mmap_fd", declared, os.dup(fd), HEAD), fd
    fd = memfd(A.tobytes() + B.tobytes(), seal=kind == "sealed")
    return memory_from_fd("ashmem", declared, os.dup(fd)), fd


def inputs_in(pool: Memory) -> list[RequestArgument]:
    return [RequestArgument(False, DataLocation(0, 0, A.nbytes), []),
            RequestArgument(False, DataLocation(0, A.nbytes, B.nbytes), [])]


def request_over(pool: Memory) -> tuple[Request, Memory]:
    """a + b with both inputs inside the pool's real bytes, the output in an honest pool."""
    out = allocate_shared(A.nbytes)
    return Request(inputs_in(pool), [RequestArgument(False, DataLocation(1, 0, A.nbytes), [])], [pool, out]), out


def runner(prepared, path: str, burst):
    """The status of `request` on `path`."""
    def execute_async(r):
        cb = ExecutionCallback()
        launched = prepared.execute_1_3(r, MeasureTiming.NO, NO_TIME, NO_DURATION, cb)
        return launched if launched != ErrorStatus.NONE else cb.get(60)[0]

    def fenced(r):
        status, fence, callback = prepared.executeFenced(r, [], MeasureTiming.NO, NO_TIME, NO_DURATION, NO_DURATION)
        if callback is None:
            return status
        for fd in fence.fds:  # the fence signals when the execution is done
            poll = select.poll()
            poll.register(fd, select.POLLIN)
            assert poll.poll(60_000), "the fence never signalled"
            os.close(fd)
        return callback.getExecutionInfo()[0]

    return {"sync": lambda r: prepared.executeSynchronously(r, MeasureTiming.NO)[0],
            "sync_1_3": lambda r: prepared.executeSynchronously_1_3(r, MeasureTiming.NO, NO_TIME, NO_DURATION)[0],
            "async": execute_async,
            "burst": lambda r: burst.compute(r)[0],
            "fenced": fenced}[path]


def assert_serves(run) -> None:
    good = add_request()
    assert run(good.request) == ErrorStatus.NONE
    np.testing.assert_array_equal(good.result(), A + B)


@pytest.mark.parametrize("lie", list(LIES))
@pytest.mark.parametrize("path", PATHS)
def test_a_lying_pool_is_refused_on_every_path(prepared, path, lie):
    pool, fd = lying_memory("memfd", LIES[lie])
    request, out = request_over(pool)
    with ExecutionBurstController.create(prepared) as burst:
        run = runner(prepared, path, burst)
        assert run(request) == ErrorStatus.INVALID_ARGUMENT
        assert run(request) == ErrorStatus.INVALID_ARGUMENT  # a burst's repeated packet too
        assert bytes(out.map()) == bytes(A.nbytes)  # nothing was computed into the output
        assert_serves(run)
        honest = memory_from_fd("ashmem", IN_BYTES, os.dup(fd))  # the same file, its true size
        request, out = request_over(honest)
        assert run(request) == ErrorStatus.NONE
        np.testing.assert_array_equal(np.frombuffer(out.map(), np.float32).reshape(A.shape), A + B)
    os.close(fd)


@pytest.mark.parametrize("lie", list(LIES))
@pytest.mark.parametrize("kind", ["memfd", "sealed", "file"])
def test_every_kind_of_memory_that_lies_is_refused(add_prepared, kind, lie, tmp_path):
    pool, fd = lying_memory(kind, LIES[lie], tmp_path)
    with pytest.raises(MemoryError_):
        pool.verify()
    assert not pool.mapped  # only a memory its file holds is ever mapped
    request, _out = request_over(pool)
    run = runner(add_prepared, "sync", None)
    assert run(request) == ErrorStatus.INVALID_ARGUMENT
    assert os.fstat(fd).st_size == IN_BYTES + (HEAD if kind == "file" else 0)
    assert_serves(run)
    os.close(fd)


def test_a_memory_its_file_holds_is_served(add_prepared, tmp_path):
    """No false refusals: a file larger than the memory, a file memory ending at its file's end,
    and a sealed memfd of the exact size (mapped)."""
    run = runner(add_prepared, "sync", None)
    pools = []
    fd = memfd(A.tobytes() + B.tobytes() + bytes(100))
    pools.append(memory_from_fd("ashmem", IN_BYTES, fd))
    pools.append(lying_memory("file", IN_BYTES, tmp_path)[0])
    sealed = lying_memory("sealed", IN_BYTES)[0]
    assert sealed.mapped
    pools.append(sealed)
    for pool in pools:
        pool.verify()
        request, out = request_over(pool)
        assert run(request) == ErrorStatus.NONE
        np.testing.assert_array_equal(np.frombuffer(out.map(), np.float32).reshape(A.shape), A + B)


@pytest.mark.parametrize("path", PATHS)
def test_an_output_region_past_the_real_end_is_refused_before_it_runs(add_prepared, path):
    """One pool holds a, b and declares room for the output that its file does not have."""
    fd = memfd(A.tobytes() + B.tobytes())
    pool = memory_from_fd("ashmem", IN_BYTES + A.nbytes, os.dup(fd))
    request = Request(inputs_in(pool), [RequestArgument(False, DataLocation(0, IN_BYTES, A.nbytes), [])], [pool])
    with ExecutionBurstController.create(add_prepared) as burst:
        run = runner(add_prepared, path, burst)
        assert run(request) == ErrorStatus.INVALID_ARGUMENT
        assert os.fstat(fd).st_size == IN_BYTES  # the file was not grown by a write
        assert_serves(run)
    os.close(fd)


@pytest.mark.parametrize("lie", ["one_byte", "2^64-1", "2^64"])
def test_ibuffer_copies_refuse_a_lying_memory(lie):
    from .test_buffer import prepare as prepare_buffer_model  # ADD on float32 (2, 3), HAL 1.3
    device = Device("numpy")
    pm = prepare_buffer_model(device)
    status, buffer, _token = device.allocate(BufferDesc([]), [pm], [BufferRole(0, 0, 1.0)], [BufferRole(0, 0, 1.0)])
    assert status == ErrorStatus.NONE
    declared = A.nbytes + 1 if lie == "one_byte" else LIES[lie]
    fd = memfd(A.tobytes())
    src = memory_from_fd("ashmem", A.nbytes, os.dup(fd))
    assert buffer.copyFrom(src, list(A.shape)) == ErrorStatus.NONE
    short = memfd(A.tobytes()[:-4])  # one element short of what the memory declares
    for liar in (memory_from_fd("ashmem", A.nbytes, os.dup(short)), memory_from_fd("ashmem", declared, os.dup(fd))):
        assert buffer.copyTo(liar) == ErrorStatus.INVALID_ARGUMENT
        assert buffer.copyFrom(allocate_shared(A.nbytes), list(A.shape)) == ErrorStatus.NONE
        assert buffer.copyFrom(liar, list(A.shape)) == ErrorStatus.INVALID_ARGUMENT
        assert buffer.copyTo(allocate_shared(A.nbytes)) == ErrorStatus.GENERAL_FAILURE  # invalidated
        assert buffer.copyFrom(src, list(A.shape)) == ErrorStatus.NONE
    assert os.fstat(short).st_size == A.nbytes - 4  # copyTo did not grow it
    dst = allocate_shared(A.nbytes)
    assert buffer.copyTo(dst) == ErrorStatus.NONE
    np.testing.assert_array_equal(dst.array(np.float32), A.ravel())
    os.close(fd)
    os.close(short)


def test_a_cache_record_that_declares_more_than_its_file_is_refused(tmp_path, monkeypatch):
    """The record's header names its payload length: a file holding less is a corrupted cache."""
    monkeypatch.setenv("NNGPU_CACHE_DIR", str(tmp_path / "kernels"))
    device = Device("numpy")
    paths = [tmp_path / "model.bin", tmp_path / "data.bin"]
    token = bytes(range(32))

    def handles():
        fds = [os.open(p, os.O_RDWR | os.O_CREAT, 0o600) for p in paths]
        return [NativeHandle([fds[0]])], [NativeHandle([fds[1]])], fds

    def from_cache():
        model_cache, data_cache, fds = handles()
        cb = PreparedModelCallback()
        device.prepareModelFromCache(model_cache, data_cache, token, cb)
        assert cb.wait(60)
        for fd in fds:
            os.close(fd)
        return cb.status, cb.prepared_model

    model_cache, data_cache, fds = handles()
    cb = PreparedModelCallback()
    assert device.prepareModel_1_2(add_model(), ExecutionPreference.FAST_SINGLE_ANSWER, model_cache, data_cache,
                                   token, cb) == ErrorStatus.NONE
    assert cb.wait(60) and cb.status == ErrorStatus.NONE
    for fd in fds:
        os.close(fd)
    record = paths[1].read_bytes()
    length_at = 8 + 4 + 4 + 32 + 32  # magic, format, kind, token, identity: then the payload length
    (length,) = struct.unpack_from("<Q", record, length_at)
    for lie in (length + 1, (1 << 64) - 1):
        paths[1].write_bytes(record[:length_at] + struct.pack("<Q", lie) + record[length_at + 8:])
        assert from_cache() == (ErrorStatus.GENERAL_FAILURE, None)
    paths[1].write_bytes(record)
    status, restored = from_cache()
    assert status == ErrorStatus.NONE
    good = add_request()
    assert restored.executeSynchronously(good.request, MeasureTiming.NO)[0] == ErrorStatus.NONE
    np.testing.assert_array_equal(good.result(), A + B)
