"""Read a .tflite flatbuffer (through the `tflite` package's generated schema code) into plain
Python records: tensors with their constant data and quantization, operators with their options.

The first subgraph is the model; the others (IF branches, WHILE condition and body) are read
into TFLiteGraph.subgraphs, indexed as TFLite numbers them (subgraphs[0] is the model itself)."""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np

from .errors import TFLiteFormatError, TFLitePackageMissing

try:
    import tflite as _fb
except ImportError as e:  # the `tflite` package is an optional dependency of nngpu
    _fb = None
    _IMPORT_ERROR = e


# tflite.TensorType value -> numpy dtype (None: a type NNAPI has no counterpart for).
NP_DTYPES: dict[int, np.dtype | None] = {
    0: np.dtype(np.float32), 1: np.dtype(np.float16), 2: np.dtype(np.int32), 3: np.dtype(np.uint8),
    4: np.dtype(np.int64), 5: None, 6: np.dtype(np.bool_), 7: np.dtype(np.int16), 8: None,
    9: np.dtype(np.int8), 10: np.dtype(np.float64), 11: None, 12: np.dtype(np.uint64), 13: None,
    14: None, 15: np.dtype(np.uint32), 16: np.dtype(np.uint16), 17: None, 18: None,
}


@dataclass
class Quant:
    scales: np.ndarray        # float32, one per tensor or one per channel
    zero_points: np.ndarray   # int64, same length
    dim: int = 0              # quantized_dimension for per-channel parameters

    @property
    def per_channel(self) -> bool:
        return len(self.scales) > 1


@dataclass
class DimMeta:
    dense: bool
    dense_size: int = 0
    segments: np.ndarray | None = None
    indices: np.ndarray | None = None


@dataclass
class Sparsity:
    traversal_order: list[int]
    block_map: list[int]
    dims: list[DimMeta]


@dataclass
class Tensor:
    index: int
    name: str
    shape: list[int]
    type: int                         # tflite.TensorType
    quant: Quant | None = None
    data: np.ndarray | None = None    # constant value (dense: shaped; sparse: flat stored values)
    sparsity: Sparsity | None = None
    is_variable: bool = False
    signature: list[int] | None = None  # shape_signature: -1 marks an extent known only at run time
    shown_type: int | None = None       # the type the user sees when the model computes `type`
    stored: bool = False                # the file holds its bytes (`data` only where numpy has the type)

    @property
    def dynamic(self) -> bool:
        return self.signature is not None and any(d < 0 for d in self.signature)

    @property
    def type_name(self) -> str:
        return TENSOR_TYPE_NAMES.get(self.type, str(self.type))


@dataclass
class Operator:
    index: int
    name: str                          # builtin name (e.g. "CONV_2D") or the custom code
    custom: bool
    inputs: list[int]                  # tensor indexes; -1 marks an omitted optional input
    outputs: list[int]
    options: object | None = None      # the generated <Name>Options table, initialised
    custom_options: bytes = b""
    version: int = 1


@dataclass
class TFLiteGraph:
    tensors: list[Tensor]
    operators: list[Operator]
    inputs: list[int]
    outputs: list[int]
    description: str = ""
    extra: dict = field(default_factory=dict)
    subgraphs: list[TFLiteGraph] = field(default_factory=list)  # the main graph's: all of the file's, itself first
    name: str = ""


def _enum_names(enum_cls) -> dict[int, str]:
    return {v: k for k, v in vars(enum_cls).items() if not k.startswith("_") and isinstance(v, int)}


TENSOR_TYPE_NAMES: dict[int, str] = {}
_OP_NAMES: dict[int, str] = {}
_OPTION_NAMES: dict[int, str] = {}
if _fb is not None:
    TENSOR_TYPE_NAMES = _enum_names(_fb.TensorType)
    _OP_NAMES = _enum_names(_fb.BuiltinOperator)
    _OPTION_NAMES = _enum_names(_fb.BuiltinOptions)


def _sparse_vector(dm, kind: str) -> np.ndarray | None:
    """array_segments / array_indices: a union of Int32/Uint16/Uint8 vectors."""
    vtype = getattr(dm, f"Array{kind}Type")()
    table = getattr(dm, f"Array{kind}")()
    if not vtype or table is None:
        return None
    cls = {1: _fb.Int32Vector, 2: _fb.Uint16Vector, 3: _fb.Uint8Vector}.get(vtype)
    if cls is None:
        raise TFLiteFormatError(f"unknown sparse index vector type {vtype}")
    vec = cls()
    vec.Init(table.Bytes, table.Pos)
    return np.asarray(vec.ValuesAsNumpy(), dtype=np.int64).reshape(-1) if vec.ValuesLength() else np.zeros(0, np.int64)


def _sparsity(t) -> Sparsity | None:
    s = t.Sparsity()
    if s is None:
        return None
    order = [int(v) for v in s.TraversalOrderAsNumpy()] if s.TraversalOrderLength() else []
    block_map = [int(v) for v in s.BlockMapAsNumpy()] if s.BlockMapLength() else []
    dims = []
    for d in range(s.DimMetadataLength()):
        dm = s.DimMetadata(d)
        if dm.Format() == _fb.DimensionType.DENSE:
            dims.append(DimMeta(True, int(dm.DenseSize())))
        else:
            dims.append(DimMeta(False, 0, _sparse_vector(dm, "Segments"), _sparse_vector(dm, "Indices")))
    return Sparsity(order, block_map, dims)


def _quant(t) -> Quant | None:
    q = t.Quantization()
    if q is None or q.ScaleLength() == 0:
        return None
    scales = np.asarray(q.ScaleAsNumpy(), dtype=np.float32).reshape(-1)
    zps = (np.asarray(q.ZeroPointAsNumpy(), dtype=np.int64).reshape(-1) if q.ZeroPointLength()
           else np.zeros(len(scales), np.int64))
    if len(zps) == 1 and len(scales) > 1:
        zps = np.repeat(zps, len(scales))
    return Quant(scales, zps, int(q.QuantizedDimension()))


def _buffer_bytes(model, raw: bytes, index: int, what: str) -> memoryview | None:
    """Buffer `index`'s bytes: a view of the file's, never a copy."""
    if not 0 <= index < model.BuffersLength():
        raise TFLiteFormatError(f"{what}: buffer {index} of {model.BuffersLength()}")
    if index == 0:  # the empty sentinel
        return None
    b = model.Buffers(index)
    if b.Offset() > 1:  # large models keep buffers after the flatbuffer, addressed by offset
        if b.Offset() + b.Size() > len(raw):
            raise TFLiteFormatError(f"{what}: buffer {index} ends at byte {b.Offset() + b.Size()} of {len(raw)}")
        return memoryview(raw)[b.Offset(): b.Offset() + b.Size()]
    if b.DataLength() == 0:
        return None
    return memoryview(b.DataAsNumpy())


def _options(op):
    """The operator's options table, every field read once here: a corrupt table fails now, in
    the reader, not in whatever reads the field later."""
    otype = op.BuiltinOptionsType()
    if not otype:
        return None
    cls = getattr(_fb, _OPTION_NAMES.get(otype, ""), None)
    table = op.BuiltinOptions()
    if cls is None or table is None:
        return None
    opts = cls()
    opts.Init(table.Bytes, table.Pos)
    for name in dir(cls):
        method = getattr(cls, name)
        if callable(method) and name[0].isupper() and not name.startswith(("GetRootAs", "Init")) \
                and not name.endswith("BufferHasIdentifier") and method.__code__.co_argcount == 1:
            getattr(opts, name)()
    return opts


def _subgraph(model, data: bytes, index: int) -> TFLiteGraph:
    g = model.Subgraphs(index)
    tensors = []
    for i in range(g.TensorsLength()):
        t = g.Tensors(i)
        shape = [int(v) for v in t.ShapeAsNumpy()] if t.ShapeLength() else []
        sig = [int(v) for v in t.ShapeSignatureAsNumpy()] if t.ShapeSignatureLength() else None
        tensor = Tensor(i, (t.Name() or b"").decode("utf-8", "replace"), shape, int(t.Type()),
                        _quant(t), None, _sparsity(t), bool(t.IsVariable()), sig)
        if any(d < 0 for d in shape):
            raise TFLiteFormatError(f"tensor {i} ({tensor.name}): negative extent in shape {shape}")
        _check_size(tensor, i)
        _check_quant(tensor, i)
        raw = _buffer_bytes(model, data, t.Buffer(), f"tensor {i} ({tensor.name})")
        tensor.stored = raw is not None
        dtype = NP_DTYPES.get(tensor.type)
        if raw is not None and dtype is not None:
            arr = np.frombuffer(raw, dtype=dtype)   # read-only, in the file's bytes: weights held once
            if tensor.sparsity is None:
                if arr.size != int(np.prod(shape, dtype=np.int64)):
                    raise TFLiteFormatError(f"tensor {i} ({tensor.name}): buffer of {arr.size} values "
                                            f"for shape {shape}")
                arr = arr.reshape(shape)
            tensor.data = arr
        tensors.append(tensor)
    operators = []
    for i in range(g.OperatorsLength()):
        op = g.Operators(i)
        if not op.OpcodeIndex() < model.OperatorCodesLength():
            raise TFLiteFormatError(f"operator {i}: operator code {op.OpcodeIndex()} of {model.OperatorCodesLength()}")
        code = model.OperatorCodes(op.OpcodeIndex())
        builtin = max(int(code.BuiltinCode()), int(code.DeprecatedBuiltinCode()))
        custom = _OP_NAMES.get(builtin) == "CUSTOM"
        name = (code.CustomCode() or b"").decode() if custom else _OP_NAMES.get(builtin, f"BUILTIN_{builtin}")
        ins = [int(v) for v in op.InputsAsNumpy()] if op.InputsLength() else []
        outs = [int(v) for v in op.OutputsAsNumpy()] if op.OutputsLength() else []
        copts = op.CustomOptionsAsNumpy().tobytes() if op.CustomOptionsLength() else b""
        operators.append(Operator(i, name, custom, ins, outs, None if custom else _options(op), copts,
                                  int(code.Version())))
    ins = [int(v) for v in g.InputsAsNumpy()] if g.InputsLength() else []
    outs = [int(v) for v in g.OutputsAsNumpy()] if g.OutputsLength() else []
    graph = TFLiteGraph(tensors, operators, ins, outs, name=(g.Name() or b"").decode("utf-8", "replace"))
    _check_indexes(graph)
    return graph


# NNAPI gives an operand's size as a uint32 (DataLocation.length): no tensor can be larger.
MAX_TENSOR_BYTES = (1 << 32) - 1


def _check_size(t: Tensor, i: int) -> None:
    itemsize = NP_DTYPES[t.type].itemsize if NP_DTYPES.get(t.type) is not None else 1
    n = itemsize
    for d in t.shape:
        n *= d
    if n > MAX_TENSOR_BYTES:
        raise TFLiteFormatError(f"tensor {i} ({t.name}): shape {t.shape} holds {n} bytes, past NNAPI's "
                                f"{MAX_TENSOR_BYTES}")


def _check_quant(t: Tensor, i: int) -> None:
    q = t.quant
    if q is None:
        return
    if not np.all(np.isfinite(q.scales)) or np.any(q.scales < 0):
        raise TFLiteFormatError(f"tensor {i} ({t.name}): quantization scale {q.scales[:4].tolist()} is not a "
                                "finite non-negative number")
    if len(q.zero_points) != len(q.scales):
        raise TFLiteFormatError(f"tensor {i} ({t.name}): {len(q.scales)} scales, {len(q.zero_points)} zero points")
    if q.per_channel and not (0 <= q.dim < len(t.shape) and t.shape[q.dim] == len(q.scales)):
        raise TFLiteFormatError(f"tensor {i} ({t.name}): {len(q.scales)} per-channel scales on dimension {q.dim} "
                                f"of shape {t.shape}")


def _check_indexes(g: TFLiteGraph) -> None:
    """Every tensor index names a tensor of the graph (an operator input may be -1, omitted); no
    graph input is listed twice; no tensor is written by two operators, or by one and the caller;
    an operator reads only tensors that have a value by then (a graph input, a constant, a state
    tensor, or an earlier operator's output)."""
    n = len(g.tensors)

    def check(indexes: list[int], what: str, omitted_ok: bool = False) -> None:
        for k, t in enumerate(indexes):
            if not (0 <= t < n or (omitted_ok and t == -1)):
                raise TFLiteFormatError(f"{what} {k} is tensor {t} of {n}")

    check(g.inputs, "graph input")
    check(g.outputs, "graph output")
    if len(set(g.inputs)) != len(g.inputs):
        raise TFLiteFormatError(f"the graph inputs list a tensor twice: {g.inputs}")
    written = {t: "a graph input" for t in g.inputs}
    for op in g.operators:
        check(op.inputs, f"operator {op.index} ({op.name}) input", omitted_ok=True)
        check(op.outputs, f"operator {op.index} ({op.name}) output")
        for k, t in enumerate(op.inputs):
            tensor = g.tensors[t] if t >= 0 else None
            if tensor is not None and t not in written and not tensor.stored and not tensor.is_variable \
                    and all(tensor.shape):
                raise TFLiteFormatError(f"operator {op.index} ({op.name}) input {k} is tensor {t} ({tensor.name}), "
                                        "which has no value: no constant data, and no earlier operator writes it")
        for t in op.outputs:
            if t in written:
                raise TFLiteFormatError(f"operator {op.index} ({op.name}) writes tensor {t}, which is "
                                        f"{written[t]}")
            written[t] = f"written by operator {op.index}"


def read_tflite(data: bytes) -> TFLiteGraph:
    """Parse the bytes of a .tflite file into a TFLiteGraph (the first subgraph, with all of
    them in .subgraphs)."""
    if _fb is None:
        raise TFLitePackageMissing(f"reading .tflite files needs the `tflite` package: {_IMPORT_ERROR}")
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise TFLiteFormatError("not a .tflite flatbuffer (no TFL3 identifier)")
    data = data if isinstance(data, bytes) else bytes(data)   # the tensors' values are views of it
    try:
        model = _fb.Model.GetRootAsModel(data, 0)
        if model.SubgraphsLength() < 1:
            raise TFLiteFormatError("the model has no subgraph")
        graphs = [_subgraph(model, data, k) for k in range(model.SubgraphsLength())]
        desc = (model.Description() or b"").decode("utf-8", "replace")
    except TFLiteFormatError:
        raise
    except Exception as e:  # a corrupt flatbuffer surfaces as struct/index errors from the parser
        raise TFLiteFormatError(f"corrupt .tflite flatbuffer: {type(e).__name__}: {e}") from e
    main = graphs[0]
    main.description = desc
    # only the main graph lists them, itself weakly: no reference cycle keeps the file's bytes
    # (which the tensors view) alive after the import, until a garbage collection
    main.subgraphs = [weakref.proxy(main), *graphs[1:]]
    return main
