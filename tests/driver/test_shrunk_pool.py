"""Issue 10, "shrunk pool": a client ftruncates a pool the driver already used. The driver must
answer with an error status and keep serving; it must never die of SIGBUS (nngpu.memory)."""
import os
import signal
import subprocess
import sys
import textwrap
from dataclasses import replace

import numpy as np
import pytest

from nngpu.burst import DATUM_SIZE, BurstCallback, ExecutionBurstController, MessageQueue
from nngpu.driver.burst_executor import configure_burst
from nngpu.driver.callbacks import ExecutionCallback, PreparedModelCallback
from nngpu.driver.device import Device
from nngpu.hal import (
    BufferDesc,
    BufferRole,
    DataLocation,
    ErrorStatus,
    ExecutionPreference,
    MeasureTiming,
    OperandLifeTime,
    Request,
    RequestArgument,
)
from nngpu.memory import allocate_shared, memory_from_fd
from nngpu.service.burst_ipc import BurstService

from ..burst.test_fmq import unsealed_copy
from .conftest import A, B, add_model, add_request, prepare

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IN_BYTES = A.nbytes + B.nbytes  # a, b, then the output, in one pool


def client_pool() -> int:
    """An unsealed memfd holding a, b and room for a + b: what a client that does not seal sends."""
    fd = os.memfd_create("client-pool", os.MFD_CLOEXEC)
    os.write(fd, A.tobytes() + B.tobytes() + bytes(A.nbytes))
    return fd


def one_pool_request(pool) -> Request:
    args_in = [RequestArgument(False, DataLocation(0, 0, A.nbytes), []),
               RequestArgument(False, DataLocation(0, A.nbytes, B.nbytes), [])]
    return Request(args_in, [RequestArgument(False, DataLocation(0, IN_BYTES, A.nbytes), [])], [pool])


def result_in(fd: int) -> np.ndarray:
    return np.frombuffer(os.pread(fd, A.nbytes, IN_BYTES), np.float32).reshape(A.shape)


def execute_async(prepared, request) -> ErrorStatus:
    cb = ExecutionCallback()
    launched = prepared.execute_1_2(request, MeasureTiming.NO, cb)
    return launched if launched != ErrorStatus.NONE else cb.get(30)[0]


@pytest.mark.parametrize("path", ["sync", "async", "burst"])
def test_a_shrunk_pool_is_an_error_and_the_driver_keeps_serving(add_prepared, path):
    fd = client_pool()
    pool = memory_from_fd("ashmem", IN_BYTES + A.nbytes, os.dup(fd))
    request = one_pool_request(pool)
    with ExecutionBurstController.create(add_prepared) as burst:
        run = {"sync": lambda r: add_prepared.executeSynchronously(r, MeasureTiming.NO)[0],
               "async": lambda r: execute_async(add_prepared, r),
               "burst": lambda r: burst.compute(r)[0]}[path]
        assert run(request) == ErrorStatus.NONE  # the pool is known to the driver (a burst slot)
        np.testing.assert_array_equal(result_in(fd), A + B)
        os.ftruncate(fd, IN_BYTES // 2)  # inputs gone
        assert run(request) == ErrorStatus.INVALID_ARGUMENT
        os.ftruncate(fd, 0)
        os.pwrite(fd, A.tobytes() + B.tobytes(), 0)  # inputs back, output region gone
        assert run(request) == ErrorStatus.INVALID_ARGUMENT
        assert os.fstat(fd).st_size == IN_BYTES  # nothing was written past the shrunk end
        good = add_request()
        assert run(good.request) == ErrorStatus.NONE
        np.testing.assert_array_equal(good.result(), A + B)
    os.close(fd)


def test_a_client_cannot_shrink_a_pool_nngpu_made(add_prepared):
    r = add_request()
    with pytest.raises(PermissionError):
        os.ftruncate(r.inputs.fd, 0)
    assert add_prepared.executeSynchronously(r.request, MeasureTiming.NO)[0] == ErrorStatus.NONE



def test_a_burst_refuses_queue_regions_a_client_could_shrink(add_prepared):
    requests, results = MessageQueue(DATUM_SIZE, 64), MessageQueue(DATUM_SIZE, 64)
    hostile = unsealed_copy(requests)
    status, context = configure_burst(add_prepared, BurstCallback(), hostile, results.descriptor())
    assert (status, context) == (ErrorStatus.INVALID_ARGUMENT, None)
    status, context = configure_burst(add_prepared, BurstCallback(), requests.descriptor(), results.descriptor())
    assert status == ErrorStatus.NONE
    context.close()
    os.close(hostile.memfd)
    requests.close()
    results.close()



def test_ibuffer_copies_through_a_shrunk_pool_fail_cleanly():
    from .test_buffer import prepare as prepare_1_3  # ADD on float32 (2, 3), HAL 1.3
    device = Device("numpy")
    pm = prepare_1_3(device)
    status, buffer, _ = device.allocate(BufferDesc([]), [pm], [BufferRole(0, 0, 1.0)], [BufferRole(0, 0, 1.0)])
    assert status == ErrorStatus.NONE
    fd = os.memfd_create("client-buffer-pool", os.MFD_CLOEXEC)
    os.write(fd, A.tobytes())
    pool = memory_from_fd("ashmem", A.nbytes, os.dup(fd))
    assert buffer.copyFrom(pool, []) == ErrorStatus.NONE
    os.pwrite(fd, bytes(A.nbytes), 0)
    assert buffer.copyTo(pool) == ErrorStatus.NONE
    np.testing.assert_array_equal(np.frombuffer(os.pread(fd, A.nbytes, 0), np.float32), A.ravel())
    os.ftruncate(fd, 4)
    assert buffer.copyTo(pool) == ErrorStatus.INVALID_ARGUMENT
    assert buffer.copyFrom(pool, []) == ErrorStatus.INVALID_ARGUMENT  # and the buffer is invalidated
    assert buffer.copyTo(allocate_shared(A.nbytes)) == ErrorStatus.GENERAL_FAILURE
    assert os.fstat(fd).st_size == 4
    os.close(fd)



def test_preparing_a_model_whose_weights_pool_shrank_fails_cleanly():
    model = add_model()
    fd = os.memfd_create("client-weights", os.MFD_CLOEXEC)
    os.write(fd, bytes(8))  # the ADD's fused activation (NONE) as a CONSTANT_REFERENCE at 4
    model.operands[2] = replace(model.operands[2], lifetime=OperandLifeTime.CONSTANT_REFERENCE,
                                location=DataLocation(0, 4, 4))
    model.pools = [memory_from_fd("ashmem", 8, fd)]
    device = Device("numpy")
    os.ftruncate(fd, 2)
    cb = PreparedModelCallback()
    device.prepareModel_1_2(model, ExecutionPreference.FAST_SINGLE_ANSWER, [], [], bytes(32), cb)
    assert cb.get(30)[0] == ErrorStatus.GENERAL_FAILURE  # the weights cannot be read: no model
    os.ftruncate(fd, 8)
    prepared = prepare(device, model)
    assert prepared.executeSynchronously(add_request().request, MeasureTiming.NO)[0] == ErrorStatus.NONE


# The driver side in its own process: a SIGBUS there would show as its exit status.
DRIVER = textwrap.dedent("""
    import os, sys
    from nngpu.driver.device import Device
    from nngpu.hal import MeasureTiming
    from nngpu.memory import memory_from_fd
    from tests.driver.conftest import add_model, add_request, prepare
    from tests.driver.test_shrunk_pool import IN_BYTES, A, one_pool_request

    prepared = prepare(Device("numpy"), add_model())
    pool = memory_from_fd("ashmem", IN_BYTES + A.nbytes, int(sys.argv[1]))
    request = one_pool_request(pool)
    for _ in range(2):  # before, then after the client shrinks the pool
        print(prepared.executeSynchronously(request, MeasureTiming.NO)[0].name, flush=True)
        sys.stdin.readline()
    print(prepared.executeSynchronously(add_request().request, MeasureTiming.NO)[0].name, flush=True)
""")


def test_a_driver_process_survives_its_client_shrinking_a_pool():
    fd = client_pool()
    env = {**os.environ, "PYTHONPATH": ROOT}
    with subprocess.Popen([sys.executable, "-c", DRIVER, str(fd)], pass_fds=[fd], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT) as driver:
        try:
            assert driver.stdout.readline().strip() == "NONE"
            np.testing.assert_array_equal(result_in(fd), A + B)
            os.ftruncate(fd, 0)
            driver.stdin.write("\n")
            driver.stdin.flush()
            after = driver.stdout.readline().strip()
            driver.stdin.write("\n")
            driver.stdin.flush()
            again = driver.stdout.readline().strip()
        finally:
            driver.stdin.close()
            code = driver.wait(60)
    os.close(fd)
    assert code != -signal.SIGBUS, "the driver died of SIGBUS"
    assert (after, again, code) == ("INVALID_ARGUMENT", "NONE", 0)


def test_the_burst_service_survives_a_client_shrinking_a_pool():
    fd = client_pool()
    request = one_pool_request(memory_from_fd("ashmem", IN_BYTES + A.nbytes, os.dup(fd)))
    with BurstService.spawn() as service:
        status, prepared = service.prepare(add_model())
        assert status == ErrorStatus.NONE
        with ExecutionBurstController.create(prepared) as burst:
            assert burst.compute(request)[0] == ErrorStatus.NONE  # the service now holds the pool
            np.testing.assert_array_equal(result_in(fd), A + B)
            os.ftruncate(fd, 0)
            assert burst.compute(request)[0] == ErrorStatus.INVALID_ARGUMENT
            good = add_request()
            assert burst.compute(good.request)[0] == ErrorStatus.NONE
            np.testing.assert_array_equal(good.result(), A + B)
    os.close(fd)
