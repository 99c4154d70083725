"""LSH_PROJECTION: locality-sensitive hashing of an input to a bit vector.

Each bit is the sign of sum_i w_i * Fingerprint64(seed_bytes ++ row_i_bytes), where seed is the
hash-function entry as a float32 and row_i the raw bytes of the input's i-th row (as the
reference does). Fingerprint64 is FarmHash's farmhashna::Hash64, implemented below.
"""
from __future__ import annotations

import struct

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType
from .registry import HalVersion, OpContext, OpError, OpSpec, register, sig

_M64 = (1 << 64) - 1
_K0 = 0xC3A5C85C97CB3127
_K1 = 0xB492B66FBE98F273
_K2 = 0x9AE16A3B2F90404F

SPARSE_DEPRECATED, DENSE, SPARSE = 1, 2, 3


def _f64(s: bytes, i: int) -> int:
    return int.from_bytes(s[i:i + 8], "little")


def _f32(s: bytes, i: int) -> int:
    return int.from_bytes(s[i:i + 4], "little")


def _rot(v: int, shift: int) -> int:
    return v if shift == 0 else ((v >> shift) | (v << (64 - shift))) & _M64


def _shift_mix(v: int) -> int:
    return v ^ (v >> 47)


def _len16(u: int, v: int, mul: int) -> int:
    a = ((u ^ v) * mul) & _M64
    a ^= a >> 47
    b = ((v ^ a) * mul) & _M64
    b ^= b >> 47
    return (b * mul) & _M64


def _len0to16(s: bytes) -> int:
    n = len(s)
    if n >= 8:
        mul = (_K2 + n * 2) & _M64
        a = (_f64(s, 0) + _K2) & _M64
        b = _f64(s, n - 8)
        c = (_rot(b, 37) * mul + a) & _M64
        d = ((_rot(a, 25) + b) * mul) & _M64
        return _len16(c, d, mul)
    if n >= 4:
        mul = (_K2 + n * 2) & _M64
        a = _f32(s, 0)
        return _len16((n + (a << 3)) & _M64, _f32(s, n - 4), mul)
    if n > 0:
        y = (s[0] + (s[n >> 1] << 8)) & 0xFFFFFFFF
        z = (n + (s[n - 1] << 2)) & 0xFFFFFFFF
        return (_shift_mix(((y * _K2) ^ (z * _K0)) & _M64) * _K2) & _M64
    return _K2


def _len17to32(s: bytes) -> int:
    n = len(s)
    mul = (_K2 + n * 2) & _M64
    a = (_f64(s, 0) * _K1) & _M64
    b = _f64(s, 8)
    c = (_f64(s, n - 8) * mul) & _M64
    d = (_f64(s, n - 16) * _K2) & _M64
    return _len16((_rot((a + b) & _M64, 43) + _rot(c, 30) + d) & _M64,
                  (a + _rot((b + _K2) & _M64, 18) + c) & _M64, mul)


def _len33to64(s: bytes) -> int:
    n = len(s)
    mul = (_K2 + n * 2) & _M64
    a = (_f64(s, 0) * _K2) & _M64
    b = _f64(s, 8)
    c = (_f64(s, n - 8) * mul) & _M64
    d = (_f64(s, n - 16) * _K2) & _M64
    y = (_rot((a + b) & _M64, 43) + _rot(c, 30) + d) & _M64
    z = _len16(y, (a + _rot((b + _K2) & _M64, 18) + c) & _M64, mul)
    e = (_f64(s, 16) * mul) & _M64
    f = _f64(s, 24)
    g = ((y + _f64(s, n - 32)) * mul) & _M64
    h = ((z + _f64(s, n - 24)) * mul) & _M64
    return _len16((_rot((e + f) & _M64, 43) + _rot(g, 30) + h) & _M64,
                  (e + _rot((f + a) & _M64, 18) + g) & _M64, mul)


def _weak32(s: bytes, i: int, a: int, b: int) -> tuple[int, int]:
    w, x, y, z = _f64(s, i), _f64(s, i + 8), _f64(s, i + 16), _f64(s, i + 24)
    a = (a + w) & _M64
    b = _rot((b + a + z) & _M64, 21)
    c = a
    a = (a + x + y) & _M64
    b = (b + _rot(a, 44)) & _M64
    return (a + z) & _M64, (b + c) & _M64


def fingerprint64(s: bytes) -> int:
    """FarmHash Fingerprint64 (farmhashna::Hash64) of a byte string, as an unsigned 64-bit int."""
    n = len(s)
    if n <= 16:
        return _len0to16(s)
    if n <= 32:
        return _len17to32(s)
    if n <= 64:
        return _len33to64(s)
    seed = 81
    x = seed
    y = (seed * _K1 + 113) & _M64
    z = (_shift_mix((y * _K2 + 113) & _M64) * _K2) & _M64
    v = (0, 0)
    w = (0, 0)
    x = (x * _K2 + _f64(s, 0)) & _M64
    end = ((n - 1) // 64) * 64
    last64 = end + ((n - 1) & 63) - 63
    p = 0
    while True:
        x = (_rot((x + y + v[0] + _f64(s, p + 8)) & _M64, 37) * _K1) & _M64
        y = (_rot((y + v[1] + _f64(s, p + 48)) & _M64, 42) * _K1) & _M64
        x ^= w[1]
        y = (y + v[0] + _f64(s, p + 40)) & _M64
        z = (_rot((z + w[0]) & _M64, 33) * _K1) & _M64
        v = _weak32(s, p, (v[1] * _K1) & _M64, (x + w[0]) & _M64)
        w = _weak32(s, p + 32, (z + w[1]) & _M64, (y + _f64(s, p + 16)) & _M64)
        z, x = x, z
        p += 64
        if p == end:
            break
    mul = (_K1 + ((z & 0xFF) << 1)) & _M64
    p = last64
    w = ((w[0] + ((n - 1) & 63)) & _M64, w[1])
    v = ((v[0] + w[0]) & _M64, v[1])
    w = ((w[0] + v[0]) & _M64, w[1])
    x = (_rot((x + y + v[0] + _f64(s, p + 8)) & _M64, 37) * mul) & _M64
    y = (_rot((y + v[1] + _f64(s, p + 48)) & _M64, 42) * mul) & _M64
    x ^= (w[1] * 9) & _M64
    y = (y + v[0] * 9 + _f64(s, p + 40)) & _M64
    z = (_rot((z + w[0]) & _M64, 33) * mul) & _M64
    v = _weak32(s, p, (v[1] * mul) & _M64, (x + w[0]) & _M64)
    w = _weak32(s, p + 32, (z + w[1]) & _M64, (y + _f64(s, p + 16)) & _M64)
    z, x = x, z
    return _len16((_len16(v[0], w[0], mul) + _shift_mix(y) * _K0 + z) & _M64,
                  (_len16(v[1], w[1], mul) + x) & _M64, mul)


def _signed64(u: int) -> int:
    return u - (1 << 64) if u >= 1 << 63 else u


def _bits(hash_seeds: np.ndarray, rows: list[bytes], weights: np.ndarray | None) -> np.ndarray:
    """The sign bit for every hash seed: [num_hash, num_bits] of 0/1."""
    seeds = hash_seeds.astype(np.float32).reshape(-1)
    out = np.zeros(seeds.size, dtype=np.int32)
    for k, seed in enumerate(seeds):
        key = struct.pack("<f", float(seed))
        # int64 signature converted to double, as the reference accumulates it
        values = np.array([float(_signed64(fingerprint64(key + r))) for r in rows], dtype=np.float64)
        score = float(np.sum(values if weights is None else weights * values)) if rows else 0.0
        out[k] = 1 if score > 0 else 0
    return out.reshape(hash_seeds.shape)


def _shape(node: OpContext) -> list[tuple[int, ...]]:
    """DENSE: one bit per hash function and bit [num_hash * num_bits]; SPARSE: one signature
    per hash function [num_hash]."""
    hashes, data, kind = node.in_shape(0), node.in_shape(1), node.scalar(3)
    if len(hashes) != 2:
        raise OpError("hash tensor must be 2-D")
    num_hash, num_bits = hashes
    if num_bits > 32:
        raise OpError("at most 32 bits per hash function")
    if len(data) < 1:
        raise OpError("input must have rank >= 1")
    weighted = node.given(2)
    if weighted and node.in_shape(2) != data[:1]:
        raise OpError("weight must be 1-D with one entry per input row")
    if kind in (SPARSE, SPARSE_DEPRECATED):
        if weighted:
            raise OpError("sparse projection takes no weight")
        return [(num_hash,)]
    if kind == DENSE:
        if not weighted:
            raise OpError("dense projection needs a weight")
        return [(num_hash * num_bits,)]
    raise OpError(f"unknown projection type {kind}")


def _reference(ctx: OpContext) -> list[np.ndarray]:
    _shape(ctx)
    hashes = ctx.input(0)
    data = np.ascontiguousarray(ctx.input(1))
    kind = ctx.scalar(3)
    weights = ctx.input(2).astype(np.float64) if ctx.has_input(2) else None
    n = data.shape[0]
    flat = data.reshape(n, -1).view(np.uint8).reshape(n, -1) if n else data.reshape(0, 0)
    rows = [bytes(flat[i]) for i in range(n)]
    bits = _bits(hashes, rows, weights)
    if kind == DENSE:
        return [bits.reshape(-1)]
    num_hash, num_bits = hashes.shape
    powers = (1 << np.arange(num_bits - 1, -1, -1, dtype=np.int64))
    sig_ = (bits.astype(np.int64) * powers).sum(axis=1)
    if kind == SPARSE:
        sig_ = sig_ + np.arange(num_hash, dtype=np.int64) * (1 << num_bits)
    return [sig_.astype(np.int32)]


def _signatures():
    out = []
    for hash_t, hv in ((T.TENSOR_FLOAT32, HalVersion.V1_0), (T.TENSOR_FLOAT16, HalVersion.V1_2)):
        for in_t in (T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM, T.TENSOR_FLOAT16):
            v = max(hv, HalVersion.V1_2) if in_t == T.TENSOR_FLOAT16 else hv
            out.append(sig([hash_t, in_t, hash_t, T.INT32], [T.TENSOR_INT32], v))
    return out


register(OpSpec(OperationType.LSH_PROJECTION, _signatures(), _reference, shape=_shape))
