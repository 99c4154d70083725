"""Build tiny .tflite flatbuffers in tests with the `tflite` package's generated builder API.

    m = TFLModel()
    x = m.tensor("x", [1, 4], FLOAT32)
    y = m.tensor("y", [1, 4], FLOAT32)
    m.op("ADD", [x, x], [y], "AddOptions", lambda b: opt(b, "AddOptions", FusedActivationFunction=1))
    data = m.build(inputs=[x], outputs=[y])
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import flatbuffers
import numpy as np
import tflite

FLOAT32, FLOAT16, INT32, UINT8, INT64, BOOL, INT16, INT8 = 0, 1, 2, 3, 4, 6, 7, 9
# Builtins that TFLite registers only from a version above 1.
FIRST_VERSION = {"BROADCAST_TO": 2}
_NP = {FLOAT32: np.float32, FLOAT16: np.float16, INT32: np.int32, UINT8: np.uint8, INT64: np.int64,
       BOOL: np.bool_, INT16: np.int16, INT8: np.int8}


def opt(b: flatbuffers.Builder, table: str, **fields) -> int:
    """Build a <table> options table: opt(b, "Conv2DOptions", Padding=0, StrideW=1, ...)."""
    getattr(tflite, f"{table}Start")(b)
    for name, value in fields.items():
        getattr(tflite, f"{table}Add{name}")(b, value)
    return getattr(tflite, f"{table}End")(b)


def opt_vec(b: flatbuffers.Builder, table: str, vectors: dict[str, np.ndarray], **fields) -> int:
    """Options with vector fields (e.g. ReshapeOptions NewShape): vectors are built first."""
    offs = {k: b.CreateNumpyVector(np.asarray(v)) for k, v in vectors.items()}
    getattr(tflite, f"{table}Start")(b)
    for name, off in offs.items():
        getattr(tflite, f"{table}Add{name}")(b, off)
    for name, value in fields.items():
        getattr(tflite, f"{table}Add{name}")(b, value)
    return getattr(tflite, f"{table}End")(b)


@dataclass
class _Tensor:
    name: str
    shape: list[int]
    type: int
    data: np.ndarray | None = None
    scales: list[float] | None = None
    zero_points: list[int] | None = None
    qdim: int = 0
    csr: tuple[list[int], list[int]] | None = None  # 2-D CSR: (row segments, column indices)
    variable: bool = False                          # a state tensor (is_variable)


@dataclass
class _Op:
    code: str                      # builtin name or custom code
    custom: bool
    inputs: list[int]
    outputs: list[int]
    options_type: str | None = None
    options: Callable | None = None
    custom_options: bytes = b""


@dataclass
class TFLModel:
    tensors: list[_Tensor] = field(default_factory=list)
    ops: list[_Op] = field(default_factory=list)

    def tensor(self, name: str, shape, type_: int = FLOAT32, data=None, scale=None, zero_point=None,
               qdim: int = 0, csr=None, variable: bool = False) -> int:
        arr = None if data is None else np.asarray(data, dtype=_NP[type_])
        scales = None if scale is None else list(np.atleast_1d(scale).astype(float))
        zps = None if scale is None else list(np.atleast_1d(0 if zero_point is None else zero_point).astype(int))
        self.tensors.append(_Tensor(name, list(shape), type_, arr, scales, zps, qdim, csr, variable))
        return len(self.tensors) - 1

    def const(self, name: str, data, type_: int = FLOAT32, **quant) -> int:
        arr = np.asarray(data)
        return self.tensor(name, list(arr.shape), type_, arr, **quant)

    def op(self, code: str, inputs: list[int], outputs: list[int], options_type: str | None = None,
           options: Callable | None = None, custom: bool = False, custom_options: bytes = b"") -> None:
        self.ops.append(_Op(code, custom, inputs, outputs, options_type, options, custom_options))

    # ---- serialisation ---------------------------------------------------------------------
    def _sparsity(self, b, t: _Tensor) -> int:
        segments, indices = t.csr
        seg = b.CreateNumpyVector(np.asarray(segments, np.int32))
        tflite.Int32VectorStart(b); tflite.Int32VectorAddValues(b, seg); seg_t = tflite.Int32VectorEnd(b)
        idx = b.CreateNumpyVector(np.asarray(indices, np.int32))
        tflite.Int32VectorStart(b); tflite.Int32VectorAddValues(b, idx); idx_t = tflite.Int32VectorEnd(b)
        tflite.DimensionMetadataStart(b)
        tflite.DimensionMetadataAddFormat(b, tflite.DimensionType.DENSE)
        tflite.DimensionMetadataAddDenseSize(b, t.shape[0])
        dense = tflite.DimensionMetadataEnd(b)
        tflite.DimensionMetadataStart(b)
        tflite.DimensionMetadataAddFormat(b, tflite.DimensionType.SPARSE_CSR)
        tflite.DimensionMetadataAddArraySegmentsType(b, tflite.SparseIndexVector.Int32Vector)
        tflite.DimensionMetadataAddArraySegments(b, seg_t)
        tflite.DimensionMetadataAddArrayIndicesType(b, tflite.SparseIndexVector.Int32Vector)
        tflite.DimensionMetadataAddArrayIndices(b, idx_t)
        sparse = tflite.DimensionMetadataEnd(b)
        order = b.CreateNumpyVector(np.asarray([0, 1], np.int32))
        tflite.SparsityParametersStartDimMetadataVector(b, 2)
        b.PrependUOffsetTRelative(sparse)
        b.PrependUOffsetTRelative(dense)
        dims = b.EndVector()
        tflite.SparsityParametersStart(b)
        tflite.SparsityParametersAddTraversalOrder(b, order)
        tflite.SparsityParametersAddDimMetadata(b, dims)
        return tflite.SparsityParametersEnd(b)

    @staticmethod
    def _vector(b, start, offsets: list[int]) -> int:
        start(b, len(offsets))
        for off in reversed(offsets):
            b.PrependUOffsetTRelative(off)
        return b.EndVector()

    def build(self, inputs: list[int], outputs: list[int], version: int = 3) -> bytes:
        b = flatbuffers.Builder(4096)
        buffers = [None]
        buf_index = []
        for t in self.tensors:
            if t.data is None:
                buf_index.append(0)
            else:
                buffers.append(t.data)
                buf_index.append(len(buffers) - 1)
        buf_offs = []
        for data in buffers:
            vec = None if data is None else b.CreateNumpyVector(np.frombuffer(data.tobytes(), np.uint8))
            tflite.BufferStart(b)
            if vec is not None:
                tflite.BufferAddData(b, vec)
            buf_offs.append(tflite.BufferEnd(b))
        tensor_offs = []
        for t, bi in zip(self.tensors, buf_index):
            name = b.CreateString(t.name)
            shape = b.CreateNumpyVector(np.asarray(t.shape, np.int32))
            quant = None
            if t.scales is not None:
                sc = b.CreateNumpyVector(np.asarray(t.scales, np.float32))
                zp = b.CreateNumpyVector(np.asarray(t.zero_points, np.int64))
                tflite.QuantizationParametersStart(b)
                tflite.QuantizationParametersAddScale(b, sc)
                tflite.QuantizationParametersAddZeroPoint(b, zp)
                tflite.QuantizationParametersAddQuantizedDimension(b, t.qdim)
                quant = tflite.QuantizationParametersEnd(b)
            sparsity = self._sparsity(b, t) if t.csr is not None else None
            tflite.TensorStart(b)
            tflite.TensorAddShape(b, shape)
            tflite.TensorAddType(b, t.type)
            tflite.TensorAddBuffer(b, bi)
            tflite.TensorAddName(b, name)
            if quant is not None:
                tflite.TensorAddQuantization(b, quant)
            if sparsity is not None:
                tflite.TensorAddSparsity(b, sparsity)
            if t.variable:
                tflite.TensorAddIsVariable(b, True)
            tensor_offs.append(tflite.TensorEnd(b))
        codes: list[tuple[str, bool]] = []
        op_offs = []
        for o in self.ops:
            key = (o.code, o.custom)
            if key not in codes:
                codes.append(key)
            ins = b.CreateNumpyVector(np.asarray(o.inputs, np.int32))
            outs = b.CreateNumpyVector(np.asarray(o.outputs, np.int32))
            opts = o.options(b) if o.options is not None else None
            copts = b.CreateNumpyVector(np.frombuffer(o.custom_options, np.uint8)) if o.custom_options else None
            tflite.OperatorStart(b)
            tflite.OperatorAddOpcodeIndex(b, codes.index(key))
            tflite.OperatorAddInputs(b, ins)
            tflite.OperatorAddOutputs(b, outs)
            if opts is not None:
                tflite.OperatorAddBuiltinOptionsType(b, getattr(tflite.BuiltinOptions, o.options_type))
                tflite.OperatorAddBuiltinOptions(b, opts)
            if copts is not None:
                tflite.OperatorAddCustomOptions(b, copts)
            op_offs.append(tflite.OperatorEnd(b))
        code_offs = []
        for code, custom in codes:
            cname = b.CreateString(code) if custom else None
            builtin = tflite.BuiltinOperator.CUSTOM if custom else getattr(tflite.BuiltinOperator, code)
            tflite.OperatorCodeStart(b)
            tflite.OperatorCodeAddBuiltinCode(b, builtin)
            tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(builtin, 127))
            if cname is not None:
                tflite.OperatorCodeAddCustomCode(b, cname)
            tflite.OperatorCodeAddVersion(b, 1 if custom else FIRST_VERSION.get(code, 1))
            code_offs.append(tflite.OperatorCodeEnd(b))
        tensors_v = self._vector(b, tflite.SubGraphStartTensorsVector, tensor_offs)
        ops_v = self._vector(b, tflite.SubGraphStartOperatorsVector, op_offs)
        ins_v = b.CreateNumpyVector(np.asarray(inputs, np.int32))
        outs_v = b.CreateNumpyVector(np.asarray(outputs, np.int32))
        gname = b.CreateString("main")
        tflite.SubGraphStart(b)
        tflite.SubGraphAddTensors(b, tensors_v)
        tflite.SubGraphAddOperators(b, ops_v)
        tflite.SubGraphAddInputs(b, ins_v)
        tflite.SubGraphAddOutputs(b, outs_v)
        tflite.SubGraphAddName(b, gname)
        graph = tflite.SubGraphEnd(b)
        graphs_v = self._vector(b, tflite.ModelStartSubgraphsVector, [graph])
        codes_v = self._vector(b, tflite.ModelStartOperatorCodesVector, code_offs)
        bufs_v = self._vector(b, tflite.ModelStartBuffersVector, buf_offs)
        desc = b.CreateString("nngpu test model")
        tflite.ModelStart(b)
        tflite.ModelAddVersion(b, version)
        tflite.ModelAddOperatorCodes(b, codes_v)
        tflite.ModelAddSubgraphs(b, graphs_v)
        tflite.ModelAddBuffers(b, bufs_v)
        tflite.ModelAddDescription(b, desc)
        b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
        return bytes(b.Output())
