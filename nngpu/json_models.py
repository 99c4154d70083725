"""Models in JSON: the format of the NNAPI generated-test corpus (../shared/nnapi-cts/README.md),
which `nngpu run`, `nngpu kernels` and the conformance runner read. A case becomes a HAL Model
and a Request whose inputs and outputs live in shared-memory pools."""
from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np

from .hal.types import (
    DataLocation,
    Model,
    Model_1_3,
    Operand,
    OperandExtraParams,
    OperandLifeTime,
    OperandType,
    Operation,
    OperationType,
    Request,
    RequestArgument,
    Subgraph,
    SymmPerChannelQuantParams,
)
from .memory import Memory, allocate_shared
from .ops.lib.dtypes import DTYPES, dtype_of

_LIFETIME = {
    "TEMPORARY_VARIABLE": OperandLifeTime.TEMPORARY_VARIABLE,
    "SUBGRAPH_INPUT": OperandLifeTime.SUBGRAPH_INPUT,
    "SUBGRAPH_OUTPUT": OperandLifeTime.SUBGRAPH_OUTPUT,
    "CONSTANT_COPY": OperandLifeTime.CONSTANT_COPY,
    "CONSTANT_REFERENCE": OperandLifeTime.CONSTANT_REFERENCE,
    "NO_VALUE": OperandLifeTime.NO_VALUE,
    "SUBGRAPH": OperandLifeTime.SUBGRAPH,
}

_SPECIAL_FLOATS = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf}


def _align(n: int, a: int = 8) -> int:
    return (n + a - 1) // a * a


def to_array(values: list, operand_type: OperandType, dims: list[int]) -> np.ndarray:
    """Decode a JSON `data` list to the operand's storage dtype (floats rounded like the C++)."""
    dt = dtype_of(operand_type) if operand_type in DTYPES else np.dtype(np.int32)
    vals = [_SPECIAL_FLOATS.get(v, v) if isinstance(v, str) else v for v in values]
    if dt.kind == "f":
        arr = np.array(vals, dtype=np.float64).astype(np.float32).astype(dt)
    else:
        arr = np.array(vals, dtype=np.int64 if dt.kind != "b" else np.bool_).astype(dt)
    if len(dims) and arr.size == int(np.prod(dims)):
        arr = arr.reshape(dims)
    return arr


@dataclass
class TestCase:
    name: str
    spec: str
    version: str
    min_version: str
    relaxed: bool
    expect_failure: bool
    multinomial_tolerance: float
    raw: dict = field(repr=False)

    @property
    def main(self) -> dict:
        return self.raw["main"]

    def operation_types(self) -> list[OperationType]:
        graphs = [self.raw["main"], *self.raw.get("referenced", [])]
        return [OperationType[o["type"]] for g in graphs for o in g["operations"]]

    def operand_types(self) -> set[OperandType]:
        graphs = [self.raw["main"], *self.raw.get("referenced", [])]
        return {OperandType[o["type"]] for g in graphs for o in g["operands"]}

    def has_float16(self) -> bool:
        return bool(self.operand_types() & {OperandType.TENSOR_FLOAT16, OperandType.FLOAT16})

    def needs_1_3(self) -> bool:
        """Whether the case goes through the 1.3 entry points (its folder or its contents); the
        AIDL_V2 / AIDL_V3 cases do, through nngpu's extension of them (driver.device)."""
        return self.version.startswith(("V1_3", "AIDL")) or bool(self.raw.get("referenced")) or \
            self.min_version == "V1_3" or \
            any(t >= 95 and t != OperationType.OEM_OPERATION for t in self.operation_types()) or \
            bool(self.operand_types() & {OperandType.TENSOR_QUANT8_ASYMM_SIGNED, OperandType.SUBGRAPH})


class _ConstantWriter:
    """Lays constants out: CONSTANT_COPY into operandValues, CONSTANT_REFERENCE into one pool."""

    def __init__(self) -> None:
        self.copy = bytearray()
        self.refs: list[bytes] = []
        self.ref_size = 0

    def add(self, lifetime: OperandLifeTime, data: bytes) -> DataLocation:
        if lifetime == OperandLifeTime.CONSTANT_COPY:
            off = _align(len(self.copy))
            self.copy.extend(b"\0" * (off - len(self.copy)))
            self.copy.extend(data)
            return DataLocation(0, off, len(data))
        off = _align(self.ref_size)
        self.refs.append((off, data))
        self.ref_size = off + len(data)
        return DataLocation(0, off, len(data))

    def pools(self) -> list[Memory]:
        if not self.refs:
            return []
        mem = allocate_shared(max(self.ref_size, 1))
        view = mem.map()
        for off, data in self.refs:
            view[off : off + len(data)] = data
        return [mem]


def _operands(graph: dict, writer: _ConstantWriter, flat: bool) -> list[Operand]:
    out = []
    for o in graph["operands"]:
        t = OperandType[o["type"]]
        lifetime = _LIFETIME[o["lifetime"]]
        location = DataLocation()
        if lifetime in (OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_REFERENCE):
            location = writer.add(lifetime, to_array(o["data"], t, o["dimensions"]).tobytes())
        elif lifetime == OperandLifeTime.SUBGRAPH:
            location = DataLocation(0, int(o["data"][0]), 0)
        extra = None
        if o.get("channelQuant"):
            cq = o["channelQuant"]
            extra = OperandExtraParams(channelQuant=SymmPerChannelQuantParams(list(cq["scales"]), cq["channelDim"]))
        out.append(Operand(t, list(o["dimensions"]), o["numberOfConsumers"], float(o["scale"]), int(o["zeroPoint"]),
                           lifetime, location, extra))
    return out


def _operations(graph: dict) -> list[Operation]:
    return [Operation(OperationType[op["type"]], list(op["inputs"]), list(op["outputs"])) for op in graph["operations"]]


def build_model(case: TestCase, flat: bool | None = None) -> Model | Model_1_3:
    """The case's model: a flat 1.2 Model, or a 1.3 Model when it needs subgraphs (flat=None)."""
    if flat is None:
        flat = not case.needs_1_3()
    writer = _ConstantWriter()
    graphs = [case.raw["main"], *case.raw.get("referenced", [])]
    subgraphs = [Subgraph(_operands(g, writer, flat), _operations(g), list(g["inputIndexes"]), list(g["outputIndexes"]))
                 for g in graphs]
    pools = writer.pools()
    values = bytes(writer.copy)
    if flat:
        s = subgraphs[0]
        return Model(s.operands, s.operations, s.inputIndexes, s.outputIndexes, values, pools, case.relaxed)
    return Model_1_3(subgraphs[0], subgraphs[1:], values, pools, case.relaxed)


@dataclass
class Execution:
    """A Request over two shared-memory pools, and the expected outputs to compare with."""

    request: Request
    input_pool: Memory
    output_pool: Memory
    outputs: list[tuple[dict, DataLocation]]  # (operand JSON, where the driver writes it)

    def output_array(self, k: int, dims: list[int]) -> np.ndarray:
        operand, loc = self.outputs[k]
        t = OperandType[operand["type"]]
        dt = dtype_of(t)
        n = int(np.prod(dims)) if dims else 1
        n = min(n, loc.length // dt.itemsize)
        return self.output_pool.array(dt, loc.offset, n).copy()


def case_inputs(case: TestCase) -> list[np.ndarray | None]:
    """The case's input values, shaped (None for an input it leaves without a value)."""
    main = case.raw["main"]
    res: list[np.ndarray | None] = []
    for idx in main["inputIndexes"]:
        o = main["operands"][idx]
        res.append(to_array(o["data"], OperandType[o["type"]], o["dimensions"]) if o["data"] else None)
    return res


def build_request(case: TestCase, output_slack: int = 0) -> Execution:
    """Inputs written into one pool, outputs given room in another (at least 1 byte each)."""
    main = case.raw["main"]
    in_args, in_bytes = [], bytearray()
    for value in case_inputs(case):
        if value is None:  # the corpus marks an omitted optional input by empty data
            in_args.append(RequestArgument(hasNoValue=True))
            continue
        data = value.tobytes()
        off = _align(len(in_bytes))
        in_bytes.extend(b"\0" * (off - len(in_bytes)))
        in_bytes.extend(data)
        in_args.append(RequestArgument(False, DataLocation(0, off, len(data)), []))
    out_args, outputs, out_size = [], [], 0
    for idx in main["outputIndexes"]:
        o = main["operands"][idx]
        t = OperandType[o["type"]]
        n = int(np.prod(o["dimensions"])) if o["dimensions"] else 1
        length = max(n * dtype_of(t).itemsize + output_slack, 1)
        off = _align(out_size)
        loc = DataLocation(1, off, length)
        out_size = off + length
        out_args.append(RequestArgument(False, loc, []))
        outputs.append((o, loc))
    input_pool = allocate_shared(max(len(in_bytes), 1))
    input_pool.map()[: len(in_bytes)] = in_bytes
    output_pool = allocate_shared(max(out_size, 1))
    return Execution(Request(in_args, out_args, [input_pool, output_pool]), input_pool, output_pool, outputs)


def default_corpus_dir() -> Path | None:
    """../shared/nnapi-cts beside the checkout, else the bundled copy under tests/data."""
    env = os.environ.get("NNGPU_CTS_DIR")
    candidates = [Path(env)] if env else []
    here = Path(__file__).resolve()
    candidates += [here.parents[2] / "shared" / "nnapi-cts", here.parents[1] / "tests" / "data" / "nnapi-cts"]
    for c in candidates:
        if c.is_dir():
            return c
    return None


def load_file(path: Path | str) -> list[TestCase]:
    """The cases of one corpus file (*.json or *.json.gz)."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        doc = json.load(fh)
    return [TestCase(c["name"], c["spec"], c["version"], c["minSupportedVersion"], bool(c["isRelaxed"]),
                     bool(c["expectFailure"]), float(c["expectedMultinomialDistributionTolerance"]), c)
            for c in doc["cases"]]


def load_cases(root: Path | str, versions: tuple[str, ...] | None = None) -> Iterator[TestCase]:
    """Every case under root (files *.json or *.json.gz in version folders), sorted by path."""
    root = Path(root)
    for f in sorted([*root.glob("*/*.json"), *root.glob("*/*.json.gz")]):
        if not versions or f.parent.name in versions:
            yield from load_file(f)
