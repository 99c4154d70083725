"""What a compilation cache holds, as bytes: the model cache payload (the model's structure,
the HAL version it was prepared through, and the kernel binaries of its plan) and the data cache
payload (every constant, laid out once).

No pickle: the structure is JSON of plain numbers and strings, decoded field by field, so even a
payload that passed its MAC cannot build anything but a Model. Constants are rewritten as
CONSTANT_COPY into one blob (the data cache): a restored model needs none of the client's pools."""
from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import replace
from typing import Any

from ..hal.types import (DataLocation, ExtensionNameAndPrefix, Model_1_3, Operand, OperandExtraParams,
                         OperandLifeTime, OperandType, Operation, OperationType, Subgraph,
                         SymmPerChannelQuantParams)
from ..modelutil import read_constant

_LEN = struct.Struct("<Q")
_ALIGN = 16
_CONSTANT = (OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_REFERENCE)
_GRAPH_KEYS = {"operands", "operations", "inputs", "outputs"}


class CacheFormatError(Exception):
    """A payload that does not decode to a model."""


def _extra(extra: OperandExtraParams | None) -> Any:
    if extra is None or (extra.channelQuant is None and extra.extension is None):
        return None
    if extra.channelQuant is not None:
        return {"channelQuant": [[float(s) for s in extra.channelQuant.scales], int(extra.channelQuant.channelDim)]}
    return {"extension": bytes(extra.extension).hex()}


def _operand(o: Operand) -> list:
    loc = o.location
    return [int(o.type), [int(d) for d in o.dimensions], int(o.numberOfConsumers), float(o.scale), int(o.zeroPoint),
            int(o.lifetime), [int(loc.poolIndex), int(loc.offset), int(loc.length)], _extra(o.extraParams)]


def encode_graph(graph: Subgraph) -> dict:
    """A subgraph's (or a 1.0-1.2 Model's) structure as plain numbers; nngpu.service's wire
    reuses it."""
    return {"operands": [_operand(o) for o in graph.operands],
            "operations": [[int(op.type), [int(i) for i in op.inputs], [int(i) for i in op.outputs]]
                           for op in graph.operations],
            "inputs": [int(i) for i in graph.inputIndexes], "outputs": [int(i) for i in graph.outputIndexes]}


def encode(model: Model_1_3, version: int, binaries: dict[str, bytes]) -> tuple[bytes, bytes]:
    """(model cache payload, data cache payload)."""
    data = bytearray()
    graphs = []
    for graph in (model.main, *model.referenced):
        operands = []
        for o in graph.operands:
            if o.lifetime in _CONSTANT:
                data.extend(b"\0" * (-len(data) % _ALIGN))
                raw = read_constant(model, o).tobytes()
                o = replace(o, lifetime=OperandLifeTime.CONSTANT_COPY, location=DataLocation(0, len(data), len(raw)))
                data.extend(raw)
            operands.append(o)
        graphs.append(encode_graph(replace(graph, operands=operands)))
    blobs = list(binaries.items())
    structure = {
        "version": int(version),
        "graphs": graphs,
        "relaxed": bool(model.relaxComputationFloat32toFloat16),
        "extensions": [[e.name, int(e.prefix)] for e in model.extensionNameToPrefix],
        "data_sha256": hashlib.sha256(data).hexdigest(),
        "programs": [[key, len(binary)] for key, binary in blobs],
    }
    head = json.dumps(structure, separators=(",", ":")).encode()
    return _LEN.pack(len(head)) + head + b"".join(b for _, b in blobs), bytes(data)


def _int_list(v) -> list[int]:
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise CacheFormatError("a list of integers expected")
    return v


def _decode_extra(v) -> OperandExtraParams | None:
    if v is None:
        return None
    if not isinstance(v, dict) or len(v) != 1:
        raise CacheFormatError("extra params are one of channelQuant / extension")
    if "channelQuant" in v:
        scales, dim = v["channelQuant"]
        return OperandExtraParams(channelQuant=SymmPerChannelQuantParams([float(s) for s in scales], int(dim)))
    return OperandExtraParams(extension=bytes.fromhex(v["extension"]))


def _decode_operand(v) -> Operand:
    type_, dims, consumers, scale, zero_point, lifetime, location, extra = v
    return Operand(OperandType(type_), _int_list(dims), int(consumers), float(scale), int(zero_point),
                   OperandLifeTime(lifetime), DataLocation(*_int_list(location)), _decode_extra(extra))


def decode_graph(g) -> Subgraph:
    """encode_graph undone; CacheFormatError, ValueError, TypeError... when `g` is not one."""
    if not isinstance(g, dict) or set(g) != _GRAPH_KEYS:
        raise CacheFormatError("a graph has exactly operands, operations, inputs and outputs")
    return Subgraph([_decode_operand(o) for o in g["operands"]],
                    [Operation(OperationType(t), _int_list(i), _int_list(o)) for t, i, o in g["operations"]],
                    _int_list(g["inputs"]), _int_list(g["outputs"]))


def decode(model_payload: bytes, data_payload: bytes) -> tuple[Model_1_3, int, dict[str, bytes]]:
    """(model, HAL version, kernel binaries by cache key); CacheFormatError when it does not
    decode or the data cache is not the one this model cache was saved with."""
    try:
        (n,) = _LEN.unpack_from(model_payload)
        structure = json.loads(model_payload[_LEN.size:_LEN.size + n])
        if structure["data_sha256"] != hashlib.sha256(data_payload).hexdigest():
            raise CacheFormatError("the data cache is not the one saved with this model cache")
        main, *referenced = [decode_graph(g) for g in structure["graphs"]]
        model = Model_1_3(main, referenced, bytes(data_payload), [], bool(structure["relaxed"]),
                          [ExtensionNameAndPrefix(str(name), int(prefix)) for name, prefix in structure["extensions"]])
        binaries, offset = {}, _LEN.size + n
        for key, length in structure["programs"]:
            if not isinstance(key, str) or not 0 <= length <= len(model_payload) - offset:
                raise CacheFormatError("a program outside the payload")
            binaries[key] = model_payload[offset:offset + length]
            offset += length
        if offset != len(model_payload):
            raise CacheFormatError("bytes after the last program")
        return model, int(structure["version"]), binaries
    except CacheFormatError:
        raise
    except (ValueError, TypeError, KeyError, IndexError, struct.error) as e:
        raise CacheFormatError(f"a model cache that does not decode: {type(e).__name__}: {e}") from e
