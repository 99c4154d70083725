"""The service's message schema (nngpu.service.codec) and bounded msgpack (nngpu.service.wire):
every call and reply survives a round trip with its fds; an unknown op, field, type or value is
a WireError with every received fd closed once; declared lengths are refused before anything
of their size is allocated."""
import dataclasses
import gc
import os
import tracemalloc

import numpy as np
import pytest

from nngpu.driver.device import Device
from nngpu.burst.fmq import MessageQueue, QueueDescriptor
from nngpu.hal.types import (BufferRole, DataLocation, DeviceStatus, DeviceType, ErrorStatus, ExecutionPreference,
                             Extension, ExtensionNameAndPrefix, MeasureTiming, MemoryPool, Model_1_3, NativeHandle,
                             Operand, OperandExtraParams, OperandLifeTime, OperandType, OperandTypeInformation,
                             OutputShape, Priority, Subgraph, SymmPerChannelQuantParams, Timing)
from nngpu.memory import Memory, allocate_shared
from nngpu.service import codec
from nngpu.service.codec import WireError
from nngpu.service.wire import MAX_BODY, _read_body, dumps, loads
from tests.driver.conftest import add_model, add_request


def open_fds() -> set[int]:
    """The process's open fds, after a collection: an object of an earlier test that is
    collected during this one closes its fds then (a CI run saw one close mid-test)."""
    gc.collect()
    return {int(fd) for fd in os.listdir("/proc/self/fd")}


def norm(v):
    """A value with Memory, QueueDescriptor and NativeHandle replaced by what travels (their fds
    do not)."""
    if isinstance(v, Memory):
        return ("memory", v.name, v.size, v.offset, bytes(v.map()) if v.size else b"")
    if isinstance(v, QueueDescriptor):
        return ("queue", v.element_size, v.capacity, v.blocking)
    if isinstance(v, NativeHandle):
        return ("handle", len(v.fds), v.ints)
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return (type(v).__name__, *(norm(getattr(v, f.name)) for f in dataclasses.fields(v)))
    if isinstance(v, (list, tuple)):
        return [norm(x) for x in v]
    if isinstance(v, dict):
        return {k: norm(x) for k, x in v.items()}
    return (type(v).__name__, v)


def through_the_wire(fields, values):
    """values -> plain -> msgpack -> plain -> values, the fds dup'ed as SCM_RIGHTS would."""
    plain, fds = codec.encode(fields, values)
    got, rx = codec.decode(fields, loads(dumps(plain)), [os.dup(fd) for fd in fds])
    rx.close()
    if isinstance(got.get("fence"), NativeHandle):  # a returned fence is the receiver's to close
        for fd in got["fence"].fds:
            os.close(fd)
    return got


def model_1_3() -> Model_1_3:
    """Two graphs, both kinds of extra params, an extension, operand values and a pool."""
    pool = allocate_shared(16)
    pool.map()[:] = bytes(range(16))
    quant = OperandExtraParams(channelQuant=SymmPerChannelQuantParams([0.5, 0.25], 0))
    ext = OperandExtraParams(extension=b"\x01\x02")
    ops = [Operand(OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL, [2, 1], 1, 0.0, 0, OperandLifeTime.CONSTANT_REFERENCE,
                   DataLocation(0, 0, 2), quant),
           Operand(OperandType.TENSOR_FLOAT32, [0], 0, 0.0, 0, OperandLifeTime.SUBGRAPH_OUTPUT, extraParams=ext)]
    sub = Subgraph(ops, [], [], [1])
    return Model_1_3(sub, [sub], b"\x07" * 5, [pool], True, [ExtensionNameAndPrefix("com.example", 3)])


def calls_and_replies():
    """(fields, values) of every call and reply, each field of each one filled."""
    q1, q2 = MessageQueue(8, 4, blocking=True), MessageQueue(8, 4, blocking=False)
    request = add_request().request
    request.pools = [request.pools[0], MemoryPool(hidlMemory=request.pools[1]), MemoryPool(token=7)]
    mem = allocate_shared(8)
    calls = {
        "prepare": [{"model": add_model(), "preference": ExecutionPreference.SUSTAINED_SPEED},
                    {"model": model_1_3(), "preference": ExecutionPreference.LOW_POWER, "version": 13,
                     "priority": Priority.HIGH, "callback": 5, "deadline": 2 ** 64 - 1,
                     "model_cache": [NativeHandle([mem.fd])], "data_cache": [NativeHandle([mem.fd], [1, -2])],
                     "token": bytes(32)}],
        "prepareFromCache": [{"version": 12, "callback": 1, "model_cache": [NativeHandle([mem.fd])],
                              "data_cache": [NativeHandle([], [3])], "token": b"t"},
                             {"version": 13, "callback": 2, "deadline": 0}],
        "configure": [{"model": 1, "burst": 2, "request_q": q1.descriptor(), "result_q": q2.descriptor()}],
        "freeMemory": [{"burst": 3, "slot": -1}],
        "closeBurst": [{"burst": 3}],
        "execute": [{"model": 1, "request": request, "measure": MeasureTiming.YES},
                    {"model": 1, "request": request, "measure": MeasureTiming.NO, "version": 13, "deadline": 5,
                     "loop_timeout": 0}],
        "release": [{"model": 9}],
        "getMemories": [{"burst": 1, "slots": [0, 5, 2 ** 31 - 1]}],
        "info": [{}],
        "select": [{"device": "nngpu-opencl-1"}],
        "capabilities": [{"version": v} for v in (10, 11, 12, 13)],
        "supported": [{"model": add_model(), "version": 12}, {"model": model_1_3(), "version": 13}],
        "executeAsync": [{"model": 2, "request": request, "measure": MeasureTiming.YES, "version": 13,
                          "callback": 8, "deadline": 1, "loop_timeout": 2}],
        "prepared": [{"callback": 1, "status": ErrorStatus.NONE, "model": 3},
                     {"callback": 1, "status": ErrorStatus.MISSED_DEADLINE_TRANSIENT}],
        "allocate": [{"dimensions": [2, 0], "models": [1, 2], "inputRoles": [BufferRole(0, 1, 0.5)],
                      "outputRoles": [BufferRole(1, 0, 1.0), BufferRole(0, 0, 0.25)]}],
        "copyTo": [{"buffer": 3, "memory": mem}],
        "copyFrom": [{"buffer": 3, "memory": mem, "dimensions": [2]}],
        "freeBuffer": [{"buffer": 3}],
        "executeFenced": [{"model": 1, "request": request, "wait_for": [NativeHandle([mem.fd]), NativeHandle()],
                           "measure": MeasureTiming.YES, "duration": 7, "deadline": 8, "loop_timeout": 9}],
        "fencedInfo": [{"fenced": 4}],
        "releaseFenced": [{"fenced": 4}],
        "executed": [{"callback": 2, "status": ErrorStatus.NONE, "shapes": [OutputShape([1], True)],
                      "timing": Timing(1, 2)}],
        "createExecution": [{"model": 1, "request": request, "measure": MeasureTiming.YES},
                            {"model": 1, "request": request, "measure": MeasureTiming.NO, "loop_timeout": 3}],
        "runExecution": [{"execution": 2}, {"execution": 2, "deadline": 2 ** 64 - 1}],
        "fencedExecution": [{"execution": 2, "wait_for": [NativeHandle([mem.fd])], "deadline": 1, "duration": 0}],
        "releaseExecution": [{"execution": 2}],
        "openTokenBurst": [{"model": 1}],
        "runTokenBurst": [{"burst": 3, "request": request, "tokens": [-1, 0, 2 ** 63 - 1], "measure": MeasureTiming.NO,
                           "deadline": 4, "loop_timeout": 5}],
        "releaseToken": [{"burst": 3, "token": 6}],
        "closeTokenBurst": [{"burst": 3}],
    }
    assert set(calls) == set(codec.CALLS)
    replies = {op: [{"status": ErrorStatus.NONE}, {"status": ErrorStatus.GENERAL_FAILURE, "error": "why"}]
               for op in codec.REPLIES}
    replies["prepare"].append({"status": ErrorStatus.NONE, "model": 4})
    replies["execute"].append({"status": ErrorStatus.OUTPUT_INSUFFICIENT_SIZE, "timing": Timing(3, 2 ** 64 - 1),
                               "shapes": [OutputShape([2, 3], False), OutputShape([], True)]})
    replies["getMemories"].append({"status": ErrorStatus.NONE, "memories": [mem, request.pools[0]]})
    replies["info"].append({"status": ErrorStatus.NONE, "version_string": "nngpu", "type": DeviceType.GPU,
                            "device_status": DeviceStatus.BUSY, "extensions": [
                                Extension("com.example", [OperandTypeInformation(0, True, 4)]), Extension("x")]})
    device = Device("numpy")
    replies["capabilities"] += [{"status": ErrorStatus.NONE, "capabilities": get()[1]} for get in (
        device.getCapabilities, device.getCapabilities_1_1, device.getCapabilities_1_2, device.getCapabilities_1_3)]
    replies["info"][-1].update(cache_files=[1, 2], name="nngpu-cuda-0", devices=["nngpu-cuda-0", "nngpu-cuda-1"])
    replies["executeFenced"].append({"status": ErrorStatus.NONE, "fence": NativeHandle([mem.fd]), "fenced": 2})
    replies["fencedInfo"].append({"status": ErrorStatus.NONE, "info_status": ErrorStatus.MISSED_DEADLINE_PERSISTENT,
                                  "launched": Timing(1, 2), "after_fences": Timing(3, 4)})
    replies["allocate"].append({"status": ErrorStatus.NONE, "token": 5})
    replies["createExecution"].append({"status": ErrorStatus.NONE, "execution": 6})
    replies["openTokenBurst"].append({"status": ErrorStatus.NONE, "burst": 7})
    replies["fencedExecution"].append({"status": ErrorStatus.NONE, "fence": NativeHandle([mem.fd]), "fenced": 2})
    for op in ("runExecution", "runTokenBurst"):
        replies[op].append({"status": ErrorStatus.NONE, "timing": Timing(3, 4), "shapes": [OutputShape([2], True)]})
    replies["supported"].append({"status": ErrorStatus.NONE, "supported": [True, False]})
    return ([(codec.CALLS[op], v) for op, vs in calls.items() for v in vs]
            + [(codec.REPLIES[op], v) for op, vs in replies.items() for v in vs]), (q1, q2)


def test_every_message_round_trips():
    messages, _queues = calls_and_replies()
    for fields, values in messages:
        got = through_the_wire(fields, values)
        assert norm(got) == norm(values)
        assert [type(v) for v in got.values()] == [type(v) for v in values.values()]


def test_a_round_trip_leaves_no_fd_behind():
    messages, _queues = calls_and_replies()
    before = open_fds()
    for fields, values in messages:
        through_the_wire(fields, values)
    assert not open_fds() - before   # no fd the round trips opened is left open


def bad_variants():
    """Plain messages that do not fit their schema, each with the fds its good form has."""
    messages, _queues = calls_and_replies()
    for fields, values in messages:
        plain, fds = codec.encode(fields, values)
        yield fields, {**plain, "bogus": 1}, fds
        for key in plain:
            yield fields, {k: v for k, v in plain.items() if k != key}, fds  # a missing field
            for wrong in (True, "x", -1, -2 ** 63, 2 ** 64 - 1, 1.5, None, [[[]]], {"a": 1}, b"\0"):
                yield fields, {**plain, key: wrong}, fds
        yield fields, plain, fds + fds[:1]  # an fd nothing describes
        if fds:
            yield fields, plain, fds[:-1]  # one fd too few


def test_anything_off_schema_is_refused_and_its_fds_closed():
    before = open_fds()
    refused = 0
    for fields, plain, fds in bad_variants():
        received = [os.dup(fd) for fd in fds]
        try:
            got, rx = codec.decode(fields, loads(dumps(plain)), received)
        except WireError:
            refused += 1
            for fd in received:  # each closed once, by decode
                with pytest.raises(OSError):
                    os.fstat(fd)
            continue
        rx.close()
        if isinstance(got.get("fence"), NativeHandle):
            for fd in got["fence"].fds:
                os.close(fd)
        # A wrong value that happens to fit (an optional field, a smaller slot id) is fine, if it decodes as such.
        assert set(got) <= set(fields)
    assert refused > 300
    assert not open_fds() - before   # no fd decode was given or opened is left open


@pytest.mark.parametrize("values, why", [
    ({"status": 99}, "not a ErrorStatus"),
    ({"status": 0, "model": 0}, "integer in"),
    ({"status": 0, "shapes": [[[2], 1]]}, "a bool"),
    ({"status": 0, "timing": [1, 2, 3]}, "a timing"),
])
def test_unknown_values_are_named(values, why):
    with pytest.raises(WireError, match=why):
        codec.decode(codec.REPLIES["execute"] | codec.REPLIES["prepare"], values, [])


def test_unknown_pool_kinds_and_graph_fields_are_refused():
    model = model_1_3()  # alive: its pool owns the fd
    plain, fds = codec.encode(codec.CALLS["prepare"], {"model": model, "preference": 1})
    bad_pool = {**plain, "model": {**plain["model"], "pools": [[5, 0]]}}
    graph = plain["model"]["graphs"][0]
    bad_graph = {**plain, "model": {**plain["model"], "graphs": [{**graph, "extra": []}]}}
    for bad in (bad_pool, bad_graph):
        with pytest.raises(WireError):
            codec.decode(codec.CALLS["prepare"], bad, [os.dup(fd) for fd in fds])


def test_values_that_cannot_travel_do_not_encode():
    request = add_request().request
    for pools in ([object()], [MemoryPool(hidlMemory=request.pools[0], token=1)], [MemoryPool()]):
        with pytest.raises(WireError):
            codec.encode(codec.CALLS["execute"], {"model": 1, "request": dataclasses.replace(request, pools=pools),
                                                  "measure": 0})
    with pytest.raises(WireError):
        codec.encode(codec.CALLS["release"], {"model": 1, "extra": 2})


@pytest.mark.parametrize("data", [
    b"\xdd\xff\xff\xff\xff",                 # an array of 4 G items in 5 bytes
    b"\xdf\xff\xff\xff\xff",                 # a map of 4 G items
    b"\xc6\x1d\xcd\x65\x00" + b"x" * 30,     # 500 MB of bytes declared, 30 present (35 bytes)
    b"\xdb\x1d\xcd\x65\x00" + b"x" * 30,     # a 500 MB string declared
    b"\x91" * 10_000 + b"\x00",              # nested 10,000 deep
    b"\xc7\x02\x01ab",                       # an ext type
    b"\xd6\xff\x00\x00\x00\x00",             # a timestamp (an ext type too)
    b"\x01\x02",                             # bytes after the value
    b"\x81\x01\x02",                         # a map key that is not a string
    b"\x82\xa1a\x01\xa1a\x02",               # a repeated map key
    b"\xa2\xff\xfe",                         # invalid UTF-8
    b"\xc1",                                 # a reserved byte
    b"",
])
def test_loads_refuses_before_allocating(data):
    tracemalloc.start()
    try:
        with pytest.raises(WireError):
            loads(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * len(data) + (1 << 20)


def test_a_body_is_read_only_at_its_declared_and_real_size():
    fd = os.memfd_create("body")
    try:
        os.ftruncate(fd, 500_000_000)  # sparse: costs the sender nothing
        tracemalloc.start()
        for declared in (MAX_BODY + 1, 500_000_000, 10, -1, "1"):
            with pytest.raises(WireError):
                _read_body(declared, fd)
        os.ftruncate(fd, MAX_BODY // 2)  # within the bound, but sparse
        with pytest.raises(WireError, match="sparse"):
            _read_body(MAX_BODY // 2, fd)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 1 << 20
        os.ftruncate(fd, 0)
        os.write(fd, dumps([1, 2]))
        assert loads(_read_body(3, fd)) == [1, 2]
    finally:
        os.close(fd)


def test_float_fields_survive_exactly():
    q = np.float32(0.1)
    model = add_model()
    model.operands[0].scale = float(q)
    got = through_the_wire(codec.CALLS["prepare"], {"model": model, "preference": 1})
    assert got["model"].operands[0].scale == float(q)
