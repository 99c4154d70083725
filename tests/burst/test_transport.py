"""nngpu.burst.transport: the controller answers its packets on its own thread only for nngpu's
own BurstServer serving it in this process, chosen by class: a driver in another process, a
server reached through descriptors, or a context that merely looks the part go through the queue."""
from nngpu.burst import BurstServer, ExecutionBurstController, InProcessTransport, QueueTransport
from nngpu.driver.device import Device
from nngpu.hal.interfaces import IBurstContext
from nngpu.hal.types import ErrorStatus
from nngpu.service.burst_ipc import BurstService

from ..driver.conftest import add_model, add_request, prepare
from .test_server import EchoModel


def _transport(prepared):
    burst = ExecutionBurstController.create(prepared)
    try:
        assert burst.compute(add_request().request)[0] == ErrorStatus.NONE
        return type(burst._transport), burst.context
    finally:
        burst.close()


def test_in_process_for_nngpus_own_driver():
    transport, context = _transport(prepare(Device("numpy"), add_model()))
    assert transport is InProcessTransport and isinstance(context, BurstServer)


def test_the_queue_for_a_driver_in_another_process():
    with BurstService.spawn() as service:
        status, prepared = service.prepare(add_model())
        assert status == ErrorStatus.NONE
        assert _transport(prepared)[0] is QueueTransport


def test_the_queue_for_a_server_given_descriptors():
    model = EchoModel(in_process=False)
    with ExecutionBurstController.create(model) as burst:
        assert isinstance(burst.context, BurstServer) and isinstance(burst._transport, QueueTransport)
        assert not isinstance(burst._transport, InProcessTransport)


def test_the_queue_for_a_context_that_only_looks_in_process():
    class LooksInProcess(IBurstContext):
        in_process = True

        def serve_inline(self) -> bool:
            raise AssertionError("a context is not picked by its attributes")

        def freeMemory(self, slot) -> None:
            pass

        def close(self) -> None:
            pass

    class Model:
        def configureExecutionBurst(self, callback, requests, results):
            return ErrorStatus.NONE, LooksInProcess()

    burst = ExecutionBurstController.create(Model())
    assert type(burst._transport) is QueueTransport
    burst.close()
