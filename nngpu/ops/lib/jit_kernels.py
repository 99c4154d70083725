"""The compiled loops (jit.py loads this module; importing it needs Numba).

Each is a plain loop compiled once per argument types and cached on disk. No fastmath: every
float operation is IEEE's, in the order of the numpy passes it replaces, so the two give the
same bits. Helpers called in inner loops take scalars only: an array argument costs reference
count updates at every call, which cost more than the arithmetic."""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, inline="always")
def requantized(a, m, offset, m_high, high_offset, scale, step, below, low, high, lift, two):
    """One exact accumulator a requantized by FloatRequantizer's passes (one channel's terms,
    jit.TERMS; limits below, low, high, lift). One floor:
        v = clamp(floor(a*m + offset [- step where below]), low, high) - lift
    two floors (long right shifts): t = floor(a*m_high + high_offset)*scale + below, then
    corrected and clamped alike."""
    if two:
        t = np.floor(a * m_high + high_offset) * scale + below
    else:
        t = a * m + offset
    if t < below:
        t -= step
    return np.int64(min(max(np.floor(t), low), high)) - lift


@njit(cache=True, nogil=True)
def requantize(acc, terms, limits, two, table, out):
    """out [rows, channels] = the accumulators acc requantized (terms [len(TERMS), channels]);
    with a table (a fused 8-bit lookup), out = table[stored byte of each value], looked up in
    a loop of its own so that the requantizing one stays vectorized. A None table is pruned
    when compiled."""
    m, offset, m_high, high_offset, scale, step = terms[0], terms[1], terms[2], terms[3], terms[4], terms[5]
    below, low, high, lift = limits[0], limits[1], limits[2], np.int64(limits[3])
    values = np.empty(acc.shape[1], np.int32)
    for r in range(acc.shape[0]):
        if table is None:
            for c in range(acc.shape[1]):
                out[r, c] = requantized(acc[r, c], m[c], offset[c], m_high[c], high_offset[c], scale[c], step[c],
                                        below, low, high, lift, two)
        else:
            for c in range(acc.shape[1]):
                values[c] = requantized(acc[r, c], m[c], offset[c], m_high[c], high_offset[c], scale[c], step[c],
                                        below, low, high, lift, two)
            for c in range(acc.shape[1]):
                out[r, c] = table[values[c] & 255]


@njit(cache=True, nogil=True)
def channel_need(acc, bias, need):
    """need[c] = the largest of |bias[c]|, and of |acc[r, c]| and |acc[r, c] + bias[c]| over the
    rows, in float64: the range a checked requantizer proves exact before it requantizes."""
    for c in range(acc.shape[1]):
        need[c] = abs(bias[c])
    for r in range(acc.shape[0]):
        for c in range(acc.shape[1]):
            a = np.float64(acc[r, c])
            need[c] = max(need[c], abs(a), abs(a + bias[c]))


@njit(cache=True, nogil=True)
def depthwise(x, zero_point, f, multiplier, window, terms, limits, two, table, out):
    """A quantized depthwise convolution from the stored bytes, in f's float type: at each
    output pixel, acc[c] = sum over in-image taps of (x[n, iy, ix, c // multiplier] -
    zero_point) * f[ky, kx, c] in (ky, kx) order (taps outside the image are the zero point,
    so they add nothing; every sum is exact). Without terms (None), out [N,OH,OW,C*M] gets the
    accumulators; with them, the values requantize(...) would give, table included, as they
    are made. x [N,H,W,C]; f [KH,KW,C*M] with its zero point removed; window: stride_h,
    stride_w, dil_h, dil_w, pad_top, pad_left."""
    height, width = x.shape[1], x.shape[2]
    kh, kw, channels = f.shape
    acc, values = np.empty(channels, f.dtype), np.empty(channels, np.int32)
    if terms is not None:
        m, offset, m_high, high_offset, scale, step = terms[0], terms[1], terms[2], terms[3], terms[4], terms[5]
        below, low, high, lift = limits[0], limits[1], limits[2], np.int64(limits[3])
    for n in range(out.shape[0]):
        for oy in range(out.shape[1]):
            for ox in range(out.shape[2]):
                acc[:] = 0
                for ky in range(kh):
                    iy = oy * window[0] + ky * window[2] - window[4]
                    if iy < 0 or iy >= height:
                        continue
                    for kx in range(kw):
                        ix = ox * window[1] + kx * window[3] - window[5]
                        if ix < 0 or ix >= width:
                            continue
                        if multiplier == 1:
                            for c in range(channels):
                                acc[c] += (x[n, iy, ix, c] - zero_point) * f[ky, kx, c]
                        else:
                            for c in range(channels):
                                acc[c] += (x[n, iy, ix, c // multiplier] - zero_point) * f[ky, kx, c]
                if terms is None:
                    out[n, oy, ox, :] = acc
                elif table is None:
                    for c in range(channels):
                        out[n, oy, ox, c] = requantized(acc[c], m[c], offset[c], m_high[c], high_offset[c], scale[c],
                                                        step[c], below, low, high, lift, two)
                else:
                    for c in range(channels):
                        values[c] = requantized(acc[c], m[c], offset[c], m_high[c], high_offset[c], scale[c],
                                                step[c], below, low, high, lift, two)
                    for c in range(channels):
                        out[n, oy, ox, c] = table[values[c] & 255]


@njit(cache=True, nogil=True)
def centered_padded(x, zero_point, pad_top, pad_left, out):
    """out = x - zero_point in out's float type, placed at (pad_top, pad_left) of out [N,H',W',C]
    whose border is zero (the zero point's value once centered): one pass instead of a cast, a
    subtraction and a padded copy."""
    n, height, width, channels = x.shape
    if out.shape[1] != height or out.shape[2] != width:
        out[:] = 0
    for b in range(n):
        for y in range(height):
            for i in range(width):
                for c in range(channels):
                    out[b, y + pad_top, i + pad_left, c] = x[b, y, i, c] - zero_point


@njit(cache=True, nogil=True)
def byte_lookup(table, out, x):
    """out[i] = table[x[i]]: x, out 1-D, x the stored bytes as uint8."""
    for i in range(x.shape[0]):
        out[i] = table[x[i]]


@njit(cache=True, nogil=True)
def pair_lookup(table, a, b, out):
    """out[r, c] = table[a[r, c] * 256 + b[r, c]]: 2-D uint8 a and b of any strides (a
    broadcast operand has stride 0), out contiguous."""
    for r in range(out.shape[0]):
        for c in range(out.shape[1]):
            out[r, c] = table[np.int64(a[r, c]) * 256 + b[r, c]]
