"""Issue 25 through a real `nngpu serve`: the service checks the memories whose fds it receives
(request pools, a burst's getMemories answers, IBuffer copies) against what those fds hold, and
refuses one that declares more with INVALID_ARGUMENT, on every path; then it serves a valid
request. The in-process cases are tests/driver/test_lying_pool.py's."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest

import nngpu
from nngpu.burst import ExecutionBurstController
from nngpu.hal.types import BufferDesc, BufferRole, ErrorStatus
from nngpu.memory import allocate_shared, memory_from_fd
from tests.driver.conftest import A, B
from tests.driver.test_lying_pool import (IN_BYTES, LIES, PATHS, assert_serves, lying_memory, memfd, prepare_1_3,
                                          request_over, runner)
from tests.service.conftest import Served


@pytest.fixture(scope="module")
def remote():
    with tempfile.TemporaryDirectory(prefix="nngpu-t", dir="/tmp") as d:  # a Unix socket path is short
        served = Served(Path(d) / "s.sock")
        try:
            with nngpu.connect(served.path) as device:
                yield device
        finally:
            served.stop()


@pytest.fixture(scope="module")
def remote_prepared(remote):
    return prepare_1_3(remote)


@pytest.mark.parametrize("lie", ["one_byte", "1MiB", "2^64-1", "2^64"])
@pytest.mark.parametrize("path", PATHS)
def test_the_service_refuses_a_lying_pool_on_every_path(remote_prepared, path, lie):
    pool, fd = lying_memory("memfd", LIES[lie])
    request, out = request_over(pool)
    with ExecutionBurstController.create(remote_prepared) as burst:
        run = runner(remote_prepared, path, burst)
        assert run(request) == ErrorStatus.INVALID_ARGUMENT
        assert bytes(out.map()) == bytes(A.nbytes)
        assert_serves(run)
        request, out = request_over(memory_from_fd("ashmem", IN_BYTES, os.dup(fd)))  # its true size
        assert run(request) == ErrorStatus.NONE
        np.testing.assert_array_equal(np.frombuffer(out.map(), np.float32).reshape(A.shape), A + B)
    os.close(fd)


@pytest.mark.parametrize("lie", ["one_byte", "2^64-1", "2^64"])
def test_the_service_refuses_lying_ibuffer_copies(remote, remote_prepared, lie):
    status, buffer, _token = remote.allocate(BufferDesc([]), [remote_prepared], [BufferRole(0, 0, 1.0)],
                                             [BufferRole(0, 0, 1.0)])
    assert status == ErrorStatus.NONE
    fd = memfd(A.tobytes())
    src = memory_from_fd("ashmem", A.nbytes, os.dup(fd))
    liar = memory_from_fd("ashmem", A.nbytes + 1 if lie == "one_byte" else LIES[lie], os.dup(fd))
    short = memfd(A.tobytes()[:-4])
    for bad in (liar, memory_from_fd("ashmem", A.nbytes, os.dup(short))):
        assert buffer.copyFrom(src, list(A.shape)) == ErrorStatus.NONE
        assert buffer.copyTo(bad) == ErrorStatus.INVALID_ARGUMENT
        assert buffer.copyFrom(bad, list(A.shape)) == ErrorStatus.INVALID_ARGUMENT
    assert os.fstat(short).st_size == A.nbytes - 4
    assert buffer.copyFrom(src, list(A.shape)) == ErrorStatus.NONE
    dst = allocate_shared(A.nbytes)
    assert buffer.copyTo(dst) == ErrorStatus.NONE
    np.testing.assert_array_equal(dst.array(np.float32), A.ravel())
    os.close(fd)
    os.close(short)
