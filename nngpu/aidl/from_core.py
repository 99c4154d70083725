"""The driver core's values (the HIDL 1.3 structs) to AIDL ones: results, timing, shapes,
capabilities, and a core status that is not NONE as the ServiceSpecificError an AIDL method
raises; and, for clients holding HIDL-shaped models and requests (the corpus), those too."""
from __future__ import annotations

import mmap

from ..hal.aidl import types as A
from ..hal.types import (
    UINT64_MAX,
    Capabilities,
    DataLocation,
    ErrorStatus,
    Extension,
    Model_1_3,
    OutputShape,
    PerformanceInfo,
    Request,
    Subgraph,
    Timing,
)
from ..memory import Memory


def raise_for(status: ErrorStatus, reason: str = "") -> None:
    """Nothing for NONE; else the ServiceSpecificError carrying the status."""
    if status != ErrorStatus.NONE:
        raise A.ServiceSpecificError(status, reason)


def timing(value: Timing) -> A.Timing:
    """Microseconds (UINT64_MAX: not measured) to nanoseconds (-1)."""
    def ns(us: int) -> int:
        return A.NO_TIME if us == UINT64_MAX else int(us) * 1000
    return A.Timing(ns(value.timeOnDevice), ns(value.timeInDriver))


def output_shapes(shapes: list[OutputShape]) -> list[A.OutputShape]:
    return [A.OutputShape(list(s.dimensions), bool(s.isSufficient)) for s in shapes]


def execution_result(status: ErrorStatus, shapes: list[OutputShape], measured: Timing,
                     reason: str = "") -> A.ExecutionResult:
    """An execution's outcome: OUTPUT_INSUFFICIENT_SIZE is a result (outputSufficientSize false,
    with the shapes needed), any other failure an error."""
    if status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE:
        return A.ExecutionResult(False, output_shapes(shapes), A.Timing())
    raise_for(status, reason)
    return A.ExecutionResult(True, output_shapes(shapes), timing(measured))


def _performance(info: PerformanceInfo) -> A.PerformanceInfo:
    return A.PerformanceInfo(float(info.execTime), float(info.powerUsage))


def capabilities(value: Capabilities) -> A.Capabilities:
    return A.Capabilities(_performance(value.relaxedFloat32toFloat16PerformanceScalar),
                          _performance(value.relaxedFloat32toFloat16PerformanceTensor),
                          [A.OperandPerformance(p.type, _performance(p.info)) for p in value.operandPerformance],
                          _performance(value.ifPerformance), _performance(value.whilePerformance))


def extensions(values: list[Extension]) -> list[A.Extension]:
    return [A.Extension(e.name, [A.ExtensionOperandTypeInformation(t.type, t.isTensor, t.byteSize)
                                 for t in e.operandTypes]) for e in values]


def memory(value: Memory) -> A.Memory:
    """A core Memory as the AIDL union over the same fd, which stays the Memory's: the AIDL value
    holds the Memory, so the fd stays open while it lives."""
    fd = A.ParcelFileDescriptor(value.fd, owner=value)
    if value.name == "ashmem" and value.offset == 0:
        return A.Memory(ashmem=A.Ashmem(fd, value.size))
    return A.Memory(mappableFile=A.MappableFile(value.size, mmap.PROT_READ | mmap.PROT_WRITE, fd, value.offset))


def _location(value: DataLocation) -> A.DataLocation:
    return A.DataLocation(value.poolIndex, value.offset, value.length, 0)


def _subgraph(value: Subgraph) -> A.Subgraph:
    return A.Subgraph([A.Operand(o.type, list(o.dimensions), o.scale, o.zeroPoint, o.lifetime, _location(o.location),
                                 o.extraParams) for o in value.operands],
                      [A.Operation(op.type, list(op.inputs), list(op.outputs)) for op in value.operations],
                      list(value.inputIndexes), list(value.outputIndexes))


def model(value: Model_1_3) -> A.Model:
    return A.Model(_subgraph(value.main), [_subgraph(g) for g in value.referenced], bytes(value.operandValues),
                   [memory(p) for p in value.pools], value.relaxComputationFloat32toFloat16,
                   list(value.extensionNameToPrefix))


def request(value: Request) -> A.Request:
    """A 1.3 request (pools: memories, or MemoryPool values holding a memory or a token)."""
    pools = []
    for p in value.pools:
        token = getattr(p, "token", None)
        held = getattr(p, "hidlMemory", p)
        pools.append(A.RequestMemoryPool(token=token) if token is not None else A.RequestMemoryPool(pool=memory(held)))
    args = [[A.RequestArgument(a.hasNoValue, _location(a.location), list(a.dimensions)) for a in side]
            for side in (value.inputs, value.outputs)]
    return A.Request(args[0], args[1], pools)
