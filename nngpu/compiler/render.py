"""One C renderer, two dialects: CUDA C and OpenCL C differ only in qualifiers, the thread
index and how float16 is loaded and stored (OpenCL vload_half/vstore_half; CUDA bit conversion
in the prelude, so no header is needed and NVRTC compiles it anywhere)."""
from __future__ import annotations

from dataclasses import dataclass

from ..hal.types import OperandType as T

# C storage type per operand type on the device; float16 is stored as 16-bit words.
C_TYPES = {T.TENSOR_FLOAT32: "float", T.TENSOR_FLOAT16: "half", T.TENSOR_BOOL8: "uchar", T.TENSOR_INT32: "int",
           # 8-bit quantized values, moved as they are by data-movement kernels
           T.TENSOR_QUANT8_ASYMM: "unsigned char", T.TENSOR_QUANT8_ASYMM_SIGNED: "signed char",
           T.TENSOR_QUANT8_SYMM_PER_CHANNEL: "signed char", T.TENSOR_QUANT8_SYMM: "signed char"}

_CUDA_PRELUDE = r"""
typedef unsigned char uchar;
typedef unsigned short half_bits;
__device__ __forceinline__ float nn_half_to_float(half_bits h) {
    unsigned int sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
    if (exp == 0) {
        if (mant == 0) { bits = sign; }
        else { exp = 113; while (!(mant & 0x400u)) { mant <<= 1; --exp; } mant &= 0x3ffu; bits = sign | (exp << 23) | (mant << 13); }
    } else if (exp == 31) { bits = sign | 0x7f800000u | (mant << 13); }
    else { bits = sign | ((exp + 112) << 23) | (mant << 13); }
    return __uint_as_float(bits);
}
__device__ __forceinline__ half_bits nn_float_to_half(float f) {
    unsigned int x = __float_as_uint(f), sign = (x >> 16) & 0x8000u, absx = x & 0x7fffffffu;
    if (absx > 0x7f800000u) return (half_bits)(sign | 0x7e00u);           /* NaN */
    if (absx >= 0x477ff000u) return (half_bits)(sign | 0x7c00u);          /* overflow to inf */
    if (absx < 0x38800000u) {                                              /* subnormal or zero */
        unsigned int shift = 113 - (absx >> 23);
        if (shift > 24) return (half_bits)sign;
        unsigned int mant = (absx & 0x7fffffu) | 0x800000u;
        unsigned int r = mant >> (shift + 13), rem = mant & ((1u << (shift + 13)) - 1u), halfway = 1u << (shift + 12);
        if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
        return (half_bits)(sign | r);
    }
    unsigned int r = ((absx - 0x38000000u) >> 13), rem = absx & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;                 /* round to nearest even */
    return (half_bits)(sign | r);
}
"""


@dataclass(frozen=True)
class Dialect:
    name: str
    prelude: str
    kernel: str        # qualifier before the kernel's return type
    global_ptr: str    # qualifier of a device pointer parameter
    gid: str           # the flat global thread index

    def param(self, ctype: str, name: str, const: bool) -> str:
        storage = {"half": "half_bits" if self.name == "cuda" else "half"}.get(ctype, ctype)
        q = "const " if const else ""
        return f"{self.global_ptr}{q}{storage}* {'__restrict__ ' if self.name == 'cuda' else 'restrict '}{name}"

    def load(self, ctype: str, ptr: str, index: str) -> str:
        if ctype == "half":
            return f"nn_half_to_float({ptr}[{index}])" if self.name == "cuda" else f"vload_half({index}, {ptr})"
        if ctype == "uchar":
            return f"({ptr}[{index}] != 0)"
        return f"{ptr}[{index}]"

    def store(self, ctype: str, ptr: str, index: str, value: str) -> str:
        if ctype == "half":
            if self.name == "cuda":
                return f"{ptr}[{index}] = nn_float_to_half({value});"
            return f"vstore_half_rte({value}, {index}, {ptr});"
        if ctype == "uchar":
            return f"{ptr}[{index}] = (uchar)(({value}) ? 1 : 0);"
        return f"{ptr}[{index}] = {value};"

    def compute_type(self, ctype: str) -> str:
        return {"half": "float", "uchar": "int", "unsigned char": "int", "signed char": "int"}.get(ctype, ctype)


OPENCL = Dialect("opencl", "", "__kernel void", "__global ", "get_global_id(0)")
CUDA = Dialect("cuda", _CUDA_PRELUDE, 'extern "C" __global__ void', "", "(blockIdx.x * (long)blockDim.x + threadIdx.x)")
DIALECTS = {"opencl": OPENCL, "cuda": CUDA}


def broadcast_strides(shape: tuple[int, ...], out_shape: tuple[int, ...]) -> list[int]:
    """Element strides of a C-contiguous `shape` indexed by `out_shape` coordinates (numpy
    broadcasting: right-aligned, size-1 extents get stride 0)."""
    strides, acc = [0] * len(out_shape), 1
    for k in range(1, len(shape) + 1):
        d = shape[-k]
        strides[-k] = 0 if d == 1 else acc
        acc *= d
    return strides


def index_expr(shape: tuple[int, ...], out_shape: tuple[int, ...]) -> str:
    """The C expression of an input's flat offset from the coordinates c0..c{n-1}."""
    if tuple(shape) == tuple(out_shape):
        return "i"
    terms = [f"c{k} * {s}" for k, s in enumerate(broadcast_strides(shape, out_shape)) if s]
    return " + ".join(terms) if terms else "0"


def coordinates(out_shape: tuple[int, ...]) -> list[str]:
    """C statements unravelling the flat index i into c0..c{n-1}."""
    lines = ["long r = i;"]
    for k in range(len(out_shape) - 1, -1, -1):
        lines.append(f"long c{k} = r % {out_shape[k]}; r /= {out_shape[k]};")
    return lines


def float_literal(x: float) -> str:
    if x != x:
        return "(0.0f/0.0f)"
    if x in (float("inf"), float("-inf")):
        return "(1.0f/0.0f)" if x > 0 else "(-1.0f/0.0f)"
    return f"{float(x)!r}f" if "e" in repr(float(x)) or "." in repr(float(x)) else f"{float(x)}.0f"
