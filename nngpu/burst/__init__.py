"""Bursts (1.2 IPreparedModel::configureExecutionBurst): the fast message queue (fmq), the one
wire codec (codec), the client (client), the server generic over an executor (server, executor)
and the in-process transport (transport). nngpu.driver.burst_executor is nngpu's executor."""
from .client import CLIENT_SPIN_US, DEFAULT_CHANNEL_LENGTH, BurstCallback, BurstError, ExecutionBurstController
from .codec import DATUM_SIZE, BurstRequest, PacketError
from .descriptor import QueueDescriptor, QueueError, recv_descriptor, send_descriptor
from .executor import BurstExecutorWithCache
from .fmq import MessageQueue
from .server import SERVER_SPIN_US, BurstServer, start_server
from .transport import InProcessTransport, QueueTransport

__all__ = ["ExecutionBurstController", "BurstCallback", "BurstError", "DEFAULT_CHANNEL_LENGTH", "CLIENT_SPIN_US",
           "DATUM_SIZE", "BurstRequest", "PacketError", "BurstExecutorWithCache", "MessageQueue",
           "QueueDescriptor", "QueueError", "send_descriptor", "recv_descriptor", "BurstServer", "start_server",
           "SERVER_SPIN_US", "InProcessTransport", "QueueTransport"]
