"""The compiled loops (jit.py loads this module; importing it needs Numba).

Each is a plain loop over [rows, channels] with per-channel terms, compiled once per argument
types and cached on disk. No fastmath: every float operation is IEEE's, in the order of the numpy
passes it replaces, so the two give the same bits."""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def requant_one_floor(acc, m, offset, step, below, low, high, lift, out):
    """out = clamp(floor(acc*m + offset [- step where below]), low, high) - lift, per channel:
    FloatRequantizer's one-floor passes."""
    rows, channels = acc.shape
    for r in range(rows):
        for c in range(channels):
            t = acc[r, c] * m[c] + offset[c]
            if t < below:
                t -= step[c]
            t = min(max(np.floor(t), low), high)
            out[r, c] = np.int64(t) - lift


@njit(cache=True, nogil=True)
def requant_two_floors(acc, m_high, high_offset, scale, step, below, low, high, lift, out):
    """The two-floor form for long right shifts: h = floor(acc*m_high + high_offset), then
    t = h*scale + below, corrected and clamped as in requant_one_floor."""
    rows, channels = acc.shape
    for r in range(rows):
        for c in range(channels):
            t = np.floor(acc[r, c] * m_high[c] + high_offset[c]) * scale[c] + below
            if t < below:
                t -= step[c]
            t = min(max(np.floor(t), low), high)
            out[r, c] = np.int64(t) - lift


@njit(cache=True, nogil=True)
def depthwise_centered(x, zero_point, f, multiplier, stride_h, stride_w, dil_h, dil_w, pad_top, pad_left, out):
    """out[n, oy, ox, c] = sum over in-image taps of (x[n, iy, ix, c // multiplier] - zero_point)
    * f[ky, kx, c]: a quantized depthwise convolution's exact accumulators (taps outside the
    image are the zero point, so they add nothing), in f's float type, summed in (ky, kx) order.
    x [N,H,W,C] stored integers; f [KH,KW,C*M] with its zero point removed."""
    height, width = x.shape[1], x.shape[2]
    kh, kw, channels = f.shape
    acc = np.empty(channels, f.dtype)
    for n in range(out.shape[0]):
        for oy in range(out.shape[1]):
            for ox in range(out.shape[2]):
                acc[:] = 0
                for ky in range(kh):
                    iy = oy * stride_h + ky * dil_h - pad_top
                    if iy < 0 or iy >= height:
                        continue
                    for kx in range(kw):
                        ix = ox * stride_w + kx * dil_w - pad_left
                        if ix < 0 or ix >= width:
                            continue
                        if multiplier == 1:
                            for c in range(channels):
                                acc[c] += (x[n, iy, ix, c] - zero_point) * f[ky, kx, c]
                        else:
                            for c in range(channels):
                                acc[c] += (x[n, iy, ix, c // multiplier] - zero_point) * f[ky, kx, c]
                out[n, oy, ox, :] = acc


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
