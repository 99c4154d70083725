"""`nngpu.ModelBuilder`: write an NNAPI model operation by operation (README: "The Python API").

Output types come from the operation's signatures, shapes from its shape function (nngpu/ops);
Python values as inputs become constants of the signature's type; None omits an optional input."""
from __future__ import annotations

import copy
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence, Union

import numpy as np

from .hal.types import (DataLocation, FusedActivationFunc, Model_1_3, Operand, OperandLifeTime as L,
                        OperandType as T, Operation, OperationType, Subgraph)
from .modelutil import count_consumers
from .named_io import io_tensor
from .named_model import NamedModel
from .ops import load_all
from .ops.lib.dtypes import QUANT_TENSORS, dtype_of, is_tensor
from .ops.node import DataDependent, NeedsValue, OpNode
from .ops.registry import OpContext, OpError, OpSpec, Signature, lookup
from .validation import ValidationError, validate_model

# numpy dtypes with one obvious NNAPI tensor type; quantized types must be named explicitly.
_TENSOR_OF = {np.dtype(np.float32): T.TENSOR_FLOAT32, np.dtype(np.float16): T.TENSOR_FLOAT16,
              np.dtype(np.int32): T.TENSOR_INT32, np.dtype(np.bool_): T.TENSOR_BOOL8}
_SCALAR_OF = {T.TENSOR_FLOAT32: T.FLOAT32, T.TENSOR_FLOAT16: T.FLOAT16, T.TENSOR_INT32: T.INT32, T.TENSOR_BOOL8: T.BOOL}
# What a Python value given as an operation input may become, best first.
_SCALAR_FITS = {bool: (T.BOOL, T.INT32), int: (T.INT32, T.UINT32, T.FLOAT32, T.FLOAT16), float: (T.FLOAT32, T.FLOAT16)}
_ARRAY_FITS = {"b": (T.TENSOR_BOOL8,), "i": (T.TENSOR_INT32, T.TENSOR_FLOAT32, T.TENSOR_FLOAT16),
               "f": (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)}  # by numpy kind, unsigned as signed
_DEFAULT_DTYPE = {"f": np.float32, "i": np.int32, "u": np.int32}  # a constant's, by numpy kind
_PADDING = {"SAME": 1, "VALID": 2}  # the implicit padding codes of CONV_2D and the pools
_TYPE_NAMES = frozenset(T.__members__)  # upper case; lower case names are numpy's ("float32")
_ACT = FusedActivationFunc.__members__
Arg = Union["Tensor", bool, int, float, Sequence[Any], np.ndarray, None]
Act = Union[str, FusedActivationFunc]


@dataclass(frozen=True)
class Tensor:
    """An operand of one ModelBuilder's model; a 0 extent (or no shape) is known at execution."""
    index: int
    type: T
    shape: tuple[int, ...]
    scale: float
    zero_point: int
    builder: "ModelBuilder" = field(repr=False, compare=False)


def operand_type(dtype: Any) -> T:
    """The OperandType of an OperandType, its name, or a numpy dtype (a tensor type)."""
    if isinstance(dtype, T) or (isinstance(dtype, str) and dtype in _TYPE_NAMES):
        return T[dtype] if isinstance(dtype, str) else dtype
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"unknown dtype {dtype!r}: give a numpy dtype or an OperandType") from None
    if dt not in _TENSOR_OF:
        raise ValueError(f"dtype {dt} has no single NNAPI type: give an OperandType (e.g. TENSOR_QUANT8_ASYMM)")
    return _TENSOR_OF[dt]


def _code(table: Mapping[str, int], v: Act, what: str = "activation") -> int:
    """An activation or padding by name (or as a FusedActivationFunc)."""
    name = getattr(v, "name", v)
    if not isinstance(name, str) or name.upper() not in table:
        raise ValueError(f"unknown {what} {v!r}: one of {', '.join(table)}")
    return int(table[name.upper()])


class ModelBuilder:
    """Inputs, constants and operations in order; `build` returns a validated NamedModel."""

    def __init__(self) -> None:
        load_all()  # the signature tables and shape functions
        self._operands: list[Operand] = []
        self._operations: list[Operation] = []
        self._inputs: list[tuple[str, int]] = []
        self._outputs: list[tuple[str, int]] = []
        self._values = bytearray()
        self._consts: list[np.ndarray | None] = []  # each operand's constant value, for shape functions

    def _new(self, t: T, dims: Sequence[int], lifetime: L, scale: float = 0.0, zero_point: int = 0,
             location: DataLocation | None = None) -> Tensor:
        dims = [int(d) for d in dims]
        self._operands.append(Operand(t, dims, 0, float(scale), int(zero_point), lifetime, location or DataLocation()))
        self._consts.append(None)
        return Tensor(len(self._operands) - 1, t, tuple(dims), float(scale), int(zero_point), self)

    def _shape(self, i: int) -> tuple[int, ...] | None:
        """Operand i's shape, None while it is known only at execution."""
        o = self._operands[i]
        if not is_tensor(o.type) or o.lifetime == L.NO_VALUE:
            return ()
        return tuple(o.dimensions) if o.dimensions and all(d > 0 for d in o.dimensions) else None

    def input(self, name: str, dtype: Any, shape: Sequence[int] = (), scale: float = 0.0,
              zero_point: int = 0) -> Tensor:
        """A model input; a 0 extent is left to each execution."""
        t = operand_type(dtype)
        if t in QUANT_TENSORS and t != T.TENSOR_QUANT8_SYMM_PER_CHANNEL and scale <= 0:
            raise ValueError(f"input {name!r}: {t.name} needs scale > 0 (and its zero_point)")
        x = self._new(t, shape, L.SUBGRAPH_INPUT, scale, zero_point)
        self._inputs.append((name, x.index))
        return x

    def constant(self, value: Any, dtype: Any = None, scale: float = 0.0, zero_point: int = 0) -> Tensor:
        """A tensor, or a scalar for a 0-d value (unless dtype is an OperandType); floats are float32
        and integers int32 unless dtype says; quantized ones name their OperandType."""
        arr = np.asarray(value)
        if dtype is None:  # Python lists come as float64 / int64: NNAPI's widest is 32 bits
            dtype = arr.dtype if arr.dtype == np.float16 else _DEFAULT_DTYPE.get(arr.dtype.kind, arr.dtype)
        t = operand_type(dtype)
        if not (isinstance(dtype, T) or dtype in _TYPE_NAMES) and arr.ndim == 0:
            t = _SCALAR_OF[t]
        if not is_tensor(t) and arr.ndim:
            raise ValueError(f"constant of scalar type {t.name} given shape {list(arr.shape)}")
        # A tensor without dimensions would be of unknown rank: a single value is one of shape [1].
        data = arr.astype(dtype_of(t)).reshape((arr.shape or (1,)) if is_tensor(t) else ())
        if data.dtype.kind in "iu" and not np.array_equal(data.reshape(arr.shape), arr):
            raise ValueError(f"constant {value!r} does not fit {t.name}")
        off = (len(self._values) + 7) // 8 * 8
        self._values.extend(b"\0" * (off - len(self._values)) + data.tobytes())
        c = self._new(t, data.shape, L.CONSTANT_COPY, scale, zero_point, DataLocation(0, off, data.nbytes))
        self._consts[c.index] = data
        return c

    def op(self, op_type: str | int, *inputs: Arg, dtype: Any = None, shape: Sequence[int] | None = None,
           scale: float | None = None, zero_point: int | None = None) -> Any:
        """Any NNAPI operation, by name or OperationType: a Tensor per output (a tuple for several).
        For every output: dtype where the inputs leave it open (QUANTIZE, CAST), shape where the
        shape function cannot know it, scale and zero_point where the operation does not fix them."""
        try:
            t = OperationType[op_type.upper()] if isinstance(op_type, str) else OperationType(op_type)
        except (KeyError, ValueError):
            raise ValueError(f"unknown operation {op_type!r}") from None
        spec = lookup(t)
        if spec is None or not spec.signatures:
            raise ValueError(f"{t.name}: the builder cannot write this operation")
        args = [a.item() if isinstance(a, (np.generic, np.ndarray)) and np.ndim(a) == 0 else a for a in inputs]
        if any(isinstance(a, Tensor) and a.builder is not self for a in args):
            raise ValueError(f"{t.name}: an input comes from another ModelBuilder")
        n_operands, n_values = len(self._operands), len(self._values)
        try:
            return self._op(spec, args, dtype, shape, scale, zero_point)
        except Exception:  # leave the model as it was before this call
            del self._operands[n_operands:], self._consts[n_operands:], self._values[n_values:]
            raise

    def _op(self, spec: OpSpec, args: list[Arg], dtype: Any, shape: Sequence[int] | None,
            scale: float | None, zero_point: int | None) -> Any:
        s = self._signature(spec, args, None if dtype is None else operand_type(dtype))
        ins = [a.index if isinstance(a, Tensor) else self._new(st, [], L.NO_VALUE).index if a is None
               else self.constant(a, st).index for a, st in zip(args, s.inputs)]
        outs = [self._new(ot, shape or [], L.TEMPORARY_VARIABLE, scale or 0.0, zero_point or 0).index
                for ot in s.outputs]
        operation = Operation(spec.type, ins, outs)
        values = [self._consts[i] for i in ins]
        ctx = OpContext(operation, self._operands, values)
        known = {i: self._shape(i) for i in ins}
        try:
            if None not in known.values():  # else the shapes are known only at execution
                node = OpNode(spec, 0, operation, self._operands, values, known)  # type: ignore[arg-type]
                with suppress(NeedsValue, DataDependent):
                    for i, dims in zip(outs, node.output_shapes()):
                        self._operands[i].dimensions = list(dims)
            for k, i in enumerate(outs):
                if self._operands[i].type in QUANT_TENSORS and scale is None:
                    self._infer_quant(spec, ctx, k)
            if spec.validate is not None:
                spec.validate(ctx)
        except OpError as e:
            raise ValueError(f"{spec.type.name}: {e}") from None
        self._operations.append(operation)
        res = tuple(Tensor(i, T(o.type), tuple(o.dimensions), o.scale, o.zeroPoint, self)
                    for i, o in zip(outs, [self._operands[i] for i in outs]))
        return res[0] if len(res) == 1 else res

    @staticmethod
    def _signature(spec: OpSpec, args: list[Arg], want: T | None) -> Signature:
        """The best-fitting, then oldest, signature; the only outputs those inputs allow."""
        name, n = spec.type.name, len(args)
        fits: list[tuple[int, int, Signature]] = []
        for s in spec.signatures:
            ranks = [_fit(a, t) for a, t in zip(args, s.inputs)]
            if n in _arity(s) and (want is None or want in s.outputs) and None not in ranks:
                fits.append((sum(r or 0 for r in ranks), int(s.version), s))
        if not fits:
            counts = ", ".join(map(str, sorted({c for s in spec.signatures for c in _arity(s)})))
            given = ", ".join(a.type.name if isinstance(a, Tensor) else type(a).__name__ for a in args)
            example = ", ".join(t.name for t in spec.signatures[0].inputs)
            raise ValueError(f"{name}: no signature takes ({given}){'' if want is None else ' to ' + want.name}; "
                             f"it takes {counts} inputs, e.g. ({example})")
        best = min(fits, key=lambda f: f[:2])[2]
        rivals = sorted({f[2].outputs for f in fits if f[2].inputs[:n] == best.inputs[:n]})
        if len(rivals) > 1:
            options = " or ".join("(" + ", ".join(t.name for t in o) + ")" for o in rivals)
            raise ValueError(f"{name}: the output type is {options}: pass dtype=")
        return best

    @staticmethod
    def _infer_quant(spec: OpSpec, ctx: OpContext, k: int) -> None:
        """Input 0's scale and zero point for output k where the rules fix them (RELU, movement)."""
        out, src = ctx.out_operand(k), ctx.in_operand(0)
        out.scale, out.zeroPoint = src.scale * 2, src.zeroPoint
        if src.type in QUANT_TENSORS and spec.validate is not None:
            try:
                spec.validate(ctx)
            except OpError:  # input 0's own, which the validation after this checks
                out.scale = src.scale
                return
        raise ValueError(f"{spec.type.name}: output {k} is {T(out.type).name} and its scale and zero point "
                         "cannot be inferred: pass scale= and zero_point=")

    # ---- a few common operations; `out` takes op()'s dtype, shape, scale, zero_point ---------
    def add(self, a: Arg, b: Arg, activation: Act = "NONE", **out: Any) -> Tensor:
        return self.op("ADD", a, b, _code(_ACT, activation), **out)

    def sub(self, a: Arg, b: Arg, activation: Act = "NONE", **out: Any) -> Tensor:
        return self.op("SUB", a, b, _code(_ACT, activation), **out)

    def mul(self, a: Arg, b: Arg, activation: Act = "NONE", **out: Any) -> Tensor:
        return self.op("MUL", a, b, _code(_ACT, activation), **out)

    def relu(self, x: Tensor) -> Tensor:
        return self.op("RELU", x)

    def conv_2d(self, x: Tensor, filter: Arg, bias: Arg = None, stride: int | Sequence[int] = 1,
                padding: str = "SAME", activation: Act = "NONE", **out: Any) -> Tensor:
        """NHWC input, OHWI filter, stride an int or (height, width); bias defaults to zeros."""
        sh, sw = (stride, stride) if isinstance(stride, int) else stride
        return self.op("CONV_2D", x, filter, self._bias(x, filter, bias), _code(_PADDING, padding, "padding"),
                       sw, sh, _code(_ACT, activation), **out)  # NNAPI: width first

    def fully_connected(self, x: Tensor, weights: Arg, bias: Arg = None, activation: Act = "NONE",
                        **out: Any) -> Tensor:
        """weights [units, input size]; bias defaults to zeros."""
        return self.op("FULLY_CONNECTED", x, weights, self._bias(x, weights, bias), _code(_ACT, activation), **out)

    def softmax(self, x: Tensor, beta: float = 1.0, **out: Any) -> Tensor:
        return self.op("SOFTMAX", x, float(beta), **out)

    def reshape(self, x: Tensor, shape: Sequence[int]) -> Tensor:
        return self.op("RESHAPE", x, [int(d) for d in shape])

    def _bias(self, x: Tensor, weights: Arg, bias: Arg) -> Arg:
        if bias is not None:
            return bias
        units = (weights.shape if isinstance(weights, Tensor) else np.shape(weights))[0]
        if isinstance(weights, Tensor) and weights.type in QUANT_TENSORS:  # the spec's bias scale
            return self.constant(np.zeros(units, np.int32), T.TENSOR_INT32, scale=x.scale * weights.scale)
        return np.zeros(units, np.float32)  # float32 or float16 as the signature wants

    def output(self, name: str, tensor: Tensor) -> None:
        """Make an operation's result a model output called `name`."""
        if not isinstance(tensor, Tensor) or tensor.builder is not self:
            raise ValueError(f"output {name!r}: not a tensor of this ModelBuilder")
        operand = self._operands[tensor.index]
        if operand.lifetime != L.TEMPORARY_VARIABLE:
            raise ValueError(f"output {name!r}: a {L(operand.lifetime).name}, not an operation's result")
        self._outputs.append((name, tensor.index))
        operand.lifetime = L.SUBGRAPH_OUTPUT

    def build(self) -> NamedModel:
        """The validated model (a HAL Model_1_3, a copy) with its inputs and outputs by name."""
        if not self._outputs:
            raise ValueError("the model has no outputs: call output(name, tensor)")
        names = [n for n, _ in self._inputs + self._outputs]
        if len(set(names)) < len(names):
            raise ValueError(f"two tensors are named {next(n for n in names if names.count(n) > 1)!r}")
        operands, operations = copy.deepcopy(self._operands), copy.deepcopy(self._operations)
        count_consumers(operands, operations)
        main = Subgraph(operands, operations, [i for _, i in self._inputs], [i for _, i in self._outputs])
        model = Model_1_3(main, [], bytes(self._values))
        try:
            validate_model(model)
        except ValidationError as e:
            raise ValueError(f"invalid model: {e}") from None
        named = [[io_tensor(n, operands[i]) for n, i in io] for io in (self._inputs, self._outputs)]
        return NamedModel(model, *named)


def _fit(arg: Arg, t: T) -> int | None:
    """How well an operation input fits operand type t: 0 best, None not at all."""
    if isinstance(arg, Tensor):
        return 0 if arg.type == t else None
    if arg is None:
        return 0  # an omitted optional input; the operation's rules say whether it may be
    fits = _SCALAR_FITS.get(type(arg))
    if fits is None and isinstance(arg, (list, tuple, np.ndarray)):
        fits = _ARRAY_FITS.get(np.asarray(arg).dtype.kind.replace("u", "i"))
    return fits.index(t) if fits and t in fits else None


def _arity(s: Signature) -> range:
    return range(len(s.inputs) if s.min_inputs is None else s.min_inputs, len(s.inputs) + 1)

