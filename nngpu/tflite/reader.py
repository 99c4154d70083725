"""Read a .tflite flatbuffer (through the `tflite` package's generated schema code) into plain
Python records: tensors with their constant data and quantization, operators with their options.

The first subgraph is the model; the others (IF branches, WHILE condition and body) are read
into TFLiteGraph.subgraphs, indexed as TFLite numbers them (subgraphs[0] is the model itself)."""
from __future__ import annotations

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
    subgraphs: list[TFLiteGraph] = field(default_factory=list)  # all of the file's, this one first
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


def _buffer_bytes(model, raw: bytes, index: int) -> bytes | None:
    if index <= 0 or index >= model.BuffersLength():  # buffer 0 is the empty sentinel
        return None
    b = model.Buffers(index)
    if b.Offset() > 1:  # large models keep buffers after the flatbuffer, addressed by offset
        return raw[b.Offset(): b.Offset() + b.Size()]
    if b.DataLength() == 0:
        return None
    return b.DataAsNumpy().tobytes()


def _options(op):
    otype = op.BuiltinOptionsType()
    if not otype:
        return None
    cls = getattr(_fb, _OPTION_NAMES.get(otype, ""), None)
    table = op.BuiltinOptions()
    if cls is None or table is None:
        return None
    opts = cls()
    opts.Init(table.Bytes, table.Pos)
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
        raw = _buffer_bytes(model, data, t.Buffer())
        dtype = NP_DTYPES.get(tensor.type)
        if raw is not None and dtype is not None:
            arr = np.frombuffer(raw, dtype=dtype).copy()
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
    return TFLiteGraph(tensors, operators, ins, outs, name=(g.Name() or b"").decode("utf-8", "replace"))


def read_tflite(data: bytes) -> TFLiteGraph:
    """Parse the bytes of a .tflite file into a TFLiteGraph (the first subgraph, with all of
    them in .subgraphs)."""
    if _fb is None:
        raise TFLitePackageMissing(f"reading .tflite files needs the `tflite` package: {_IMPORT_ERROR}")
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise TFLiteFormatError("not a .tflite flatbuffer (no TFL3 identifier)")
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
    for g in graphs:
        g.subgraphs = graphs
    return main
