// Float DEPTHWISE_CONV_2D for the OpenCL backend, NHWC with depth multiplier 1: each work-item
// computes VW neighbouring channels of one output pixel in explicit vectors, so every tap is one
// vector load of the input and one of the filter [1, KH, KW, C], both contiguous in C. (PoCL
// vectorises a one-output-per-work-item kernel across work-items, which turns these loads into
// gathers; GPUs read VW * 4 contiguous bytes per work-item, coalesced across the channel groups.)
// The compiler specialises it per layer with #defines before this text: NAME, VW (4, 8 or 16, which
// divides C), N H W C, OH OW, KH KW, SH SW (strides), DH DW (dilations), PT PL (padding top,
// left), and LO / HI where a fused activation clamps. The bias starts the sum and the taps follow
// in (ky, kx) order, as the generated kernel does; the clamp compares, so NaN stays NaN.
// The taps are unrolled (KH and KW are constants; PoCL unrolls no loop itself), and a window
// wholly inside the image takes them without a bounds test each: on PoCL 1.6-2x faster, a
// 112x112x32 layer as fast as a copy of its input.
// With THEN, the vector it would store goes through nn_then_vVW first, defined before this text:
// the one elementwise kernel that read this layer's output, folded in (compiler/gemm_fold.py),
// its other buffers before `out` (THEN_PARAMS).
// Launch: global = N * OH * OW * (C / VW), 1-D; every index fits in 32 bits (checked at lowering).
#include "vectors.h"
#ifdef THEN
#define THEN_VEC_(n, y, r, c) nn_then_v##n(y, (r) * C + (c), r, c THEN_ARGS)
#define THEN_VEC(n, y, r, c) THEN_VEC_(n, y, r, c)
#else
#define THEN_PARAMS
#endif
#define GROUPS (C / VW)
#define UNROLL _Pragma("unroll")
// tap (ky, kx) of the window at `origin`: its input vector times the filter's
#define TAP(ky, kx) (VLOAD(VW)(0, x + origin + ((ky) * DH * W + (kx) * DW) * C) * \
                     VLOAD(VW)(0, w + ((ky) * KW + (kx)) * C + c))

__kernel void NAME(__global const float* restrict x, __global const float* restrict w,
                   __global const float* restrict bias THEN_PARAMS, __global float* restrict out) {
    const int g = get_global_id(0);
    if (g >= N * OH * OW * GROUPS) return;
    const int c = (g % GROUPS) * VW;
    const int pixel = g / GROUPS;
    const int ox = pixel % OW, oy = (pixel / OW) % OH, n = pixel / (OW * OH);
    const int iy0 = oy * SH - PT, ix0 = ox * SW - PL;
    // the window's first tap, as an element offset (negative at the top and left edges)
    const int origin = ((n * H + iy0) * W + ix0) * C + c;
    VEC(VW) acc = VLOAD(VW)(0, bias + c);
    if (iy0 >= 0 && iy0 + (KH - 1) * DH < H && ix0 >= 0 && ix0 + (KW - 1) * DW < W) {
        UNROLL for (int ky = 0; ky < KH; ++ky)
            UNROLL for (int kx = 0; kx < KW; ++kx)
                acc = acc + TAP(ky, kx);
    } else {
        UNROLL for (int ky = 0; ky < KH; ++ky) {
            const int iy = iy0 + ky * DH;
            UNROLL for (int kx = 0; kx < KW; ++kx) {
                const int ix = ix0 + kx * DW;
                if (iy >= 0 && iy < H && ix >= 0 && ix < W) acc = acc + TAP(ky, kx);
            }
        }
    }
#ifdef LO
    acc = select(acc, (VEC(VW))(LO), (IVEC(VW))(acc < (VEC(VW))(LO)));
    acc = select(acc, (VEC(VW))(HI), (IVEC(VW))(acc > (VEC(VW))(HI)));
#endif
#ifdef THEN
    acc = THEN_VEC(VW, acc, pixel, c);   // rows of C: the pixel, the channel
#endif
    VSTORE(VW)(acc, 0, out + pixel * C + c);
}
