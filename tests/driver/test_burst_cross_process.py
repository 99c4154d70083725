"""Bursts with the driver in another process (nngpu.service.burst_ipc): FMQ descriptors and
pool memories cross a Unix socket as fds; a sample of corpus cases; either side going away."""
import os
import signal
import time

import numpy as np
import pytest

from nngpu.backends import device_backends
from nngpu.burst import ExecutionBurstController
from nngpu.hal.types import ErrorStatus, MeasureTiming, OutputShape, Timing
from nngpu.service.burst_ipc import BurstService

SAMPLE = 20


@pytest.fixture(scope="module")
def service():
    with BurstService.spawn() as svc:
        yield svc


@pytest.fixture(scope="module")
def remote_add(service, kit):
    status, prepared = service.prepare(kit.add_model())
    assert status == ErrorStatus.NONE
    return prepared


def test_compute_in_another_process(remote_add, kit):
    r = kit.add_request()
    with ExecutionBurstController.create(remote_add) as burst:
        for measure in (MeasureTiming.YES, MeasureTiming.NO):
            r.outputs.map()[:] = bytes(r.outputs.size)
            status, shapes, timing = burst.compute(r.request, measure)
            assert status == ErrorStatus.NONE and shapes == [OutputShape([2, 3], True)]
            np.testing.assert_array_equal(r.result(), kit.A + kit.B)
        assert timing == Timing()
        r2 = kit.add_request(a=kit.B, b=kit.B)
        burst.forget(r.inputs)  # a synchronous freeMemory over the socket
        assert burst.compute(r2.request)[0] == ErrorStatus.NONE
        np.testing.assert_array_equal(r2.result(), kit.B + kit.B)
        assert burst.compute(r.request)[0] == ErrorStatus.NONE  # the forgotten pool is fetched again


@pytest.mark.parametrize("backend", device_backends())
def test_registered_slots_in_another_process(kit, backend):
    """A device plan in the service registers the pools it maps there: what the client writes
    between computes reaches the device, the results reach the client, a too-small output
    region is reported, and a forgotten pool's slot is fetched again."""
    with BurstService.spawn(backend) as svc:
        status, prepared = svc.prepare(kit.add_model())
        assert status == ErrorStatus.NONE
        r, small = kit.add_request(), kit.add_request(out_capacity=8)
        with ExecutionBurstController.create(prepared) as burst:
            for k in range(3):
                r.inputs.map()[: kit.A.nbytes] = (kit.A * k).tobytes()
                assert burst.compute(r.request)[:2] == (ErrorStatus.NONE, [OutputShape([2, 3], True)])
                np.testing.assert_array_equal(r.result(), kit.A * k + kit.B)
            assert burst.compute(small.request)[:2] == (ErrorStatus.OUTPUT_INSUFFICIENT_SIZE,
                                                        [OutputShape([2, 3], False)])
            burst.forget(r.outputs)
            r.outputs.map()[:] = bytes(r.outputs.size)
            assert burst.compute(r.request)[0] == ErrorStatus.NONE
            np.testing.assert_array_equal(r.result(), kit.A * 2 + kit.B)


def test_remote_errors_and_sync_fallback(remote_add, kit):
    r = kit.add_request(out_capacity=8)
    with ExecutionBurstController.create(remote_add) as burst:
        status, shapes, timing = burst.compute(r.request, MeasureTiming.YES)
        assert status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE and shapes == [OutputShape([2, 3], False)]
    with ExecutionBurstController.create(remote_add, request_length=4) as burst:  # falls back
        ok = kit.add_request()
        assert burst.compute(ok.request)[:2] == (ErrorStatus.NONE, [OutputShape([2, 3], True)])
        np.testing.assert_array_equal(ok.result(), kit.A + kit.B)


def test_corpus_sample_in_another_process(service, corpus_dir, device):
    from nngpu.json_models import build_model, load_cases

    picked = []
    for case in load_cases(corpus_dir, ("V1_0", "V1_1", "V1_2")):
        if case.expect_failure or case.multinomial_tolerance or case.needs_1_3():
            continue
        model = build_model(case, True)
        status, supported = device.getSupportedOperations_1_2(model)
        if status == ErrorStatus.NONE and supported and all(supported):
            picked.append((case, model))
    if not picked:
        pytest.skip("no corpus case is supported by the registered kernels yet")
    step = max(len(picked) // SAMPLE, 1)
    failures, checked = [], 0
    for case, model in picked[::step][:SAMPLE]:
        # The in-process sync path is the baseline: a kernel's own failure is not the burst's.
        local = device_prepare(device, model)
        if local is None:
            continue  # preparation is not what this test is about
        want = _outcome(case, local, lambda p, ex: p.executeSynchronously(ex.request, 0))
        status, prepared = service.prepare(model)
        assert status == ErrorStatus.NONE, case.name

        def burst_compute(p, ex):
            with ExecutionBurstController.create(p) as burst:
                return burst.compute(ex.request, MeasureTiming.NO)

        got = _outcome(case, prepared, burst_compute)
        prepared.release()
        if got[:2] != want[:2]:
            failures.append(f"{case.name}: burst {got[:2]}, sync {want[:2]}")
        elif want[2] is None and got[2] is not None:
            failures.append(f"{case.name}: {got[2]}")
        checked += 1
    assert checked and not failures, failures


def device_prepare(device, model):
    from nngpu.driver.callbacks import PreparedModelCallback

    cb = PreparedModelCallback()
    device.prepareModel_1_2(model, 1, [], [], bytes(32), cb)
    cb.wait(60)
    return cb.prepared_model


def _outcome(case, prepared, execute):
    """(status, shapes, first problem compare_output finds or None) of one execution."""
    from nngpu.cts.compare import compare_output
    from nngpu.json_models import build_request

    ex = build_request(case)
    status, shapes, _ = execute(prepared, ex)
    dims = [list(s.dimensions) for s in shapes]
    if status != ErrorStatus.NONE:
        return status, dims, "failed"
    for k, (operand, _loc) in enumerate(ex.outputs):
        if operand["isIgnored"]:
            continue
        problem = compare_output(case, operand, ex.output_array(k, shapes[k].dimensions))
        if problem:
            return status, dims, f"output {k}: {problem}"
    return status, dims, None


def test_service_dying_wakes_the_client(kit):
    svc = BurstService.spawn()
    try:
        status, prepared = svc.prepare(kit.add_model())
        assert status == ErrorStatus.NONE
        burst = ExecutionBurstController.create(prepared, timeout=30)
        r = kit.add_request()
        assert burst.compute(r.request)[0] == ErrorStatus.NONE
        os.kill(svc.process.pid, signal.SIGKILL)
        svc.process.wait(timeout=10)
        t0 = time.monotonic()
        assert burst.compute(r.request)[0] == ErrorStatus.GENERAL_FAILURE
        assert time.monotonic() - t0 < 10
        burst.close()
    finally:
        svc.close()


def test_client_going_away_ends_the_service(kit):
    svc = BurstService.spawn()
    status, prepared = svc.prepare(kit.add_model())
    assert status == ErrorStatus.NONE
    burst = ExecutionBurstController.create(prepared)
    assert burst.compute(kit.add_request().request)[0] == ErrorStatus.NONE
    svc.close()  # without closing the burst: the service closes it and exits
    assert svc.process.returncode == 0
    assert burst.compute(kit.add_request().request)[0] == ErrorStatus.GENERAL_FAILURE
    burst.close()
