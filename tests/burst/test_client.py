"""nngpu.burst.client on its own: configureExecutionBurst refused."""
import pytest

from nngpu.burst import BurstError, ExecutionBurstController
from nngpu.hal.types import ErrorStatus


def test_create_raises_when_configure_fails():
    class Refuses:
        def configureExecutionBurst(self, *args):
            return ErrorStatus.DEVICE_UNAVAILABLE, None

    with pytest.raises(BurstError) as e:
        ExecutionBurstController.create(Refuses())
    assert e.value.status == ErrorStatus.DEVICE_UNAVAILABLE
