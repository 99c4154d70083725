// Float CONV_2D for the OpenCL backend's CPU devices, NHWC, for a layer with few input channels
// (a network's stem over an image's 3 colours): each work-item computes CV vectors of VW
// neighbouring output channels of PIX neighbouring output pixels of a row in explicit vectors.
// Each tap (ky, kx, ic) is one input per pixel, broadcast, times CV filter vectors, which serve
// the PIX pixels: CV * PIX multiply-adds for CV + PIX loads (MobileNet v2's 32 channels as two
// vectors a work-item rather than one: 120 -> 82 us alone on PoCL). For such a layer the GEMM
// convolution's patch matrix is as large as its output, written and read again: MobileNet v3's
// stem took 64 us (im2col) + 95 us (GEMM) in the pipeline on PoCL, this 71-84.
// The compiler specialises it per layer with #defines before this text: NAME, VW (4, 8 or 16,
// which divides C), CV (VW * CV divides C), PIX, N H W CIN, C (output channels), OH OW, KH KW,
// SH SW (strides), DH DW (dilations), PT PL (padding top, left), LO / HI where a fused
// activation clamps, and X_T / OUT_T, the input's and output's element types (float or half:
// vectors.h's LOAD_AS); the filter comes packed as [KH, KW, CIN, C]. The bias starts each sum and
// the taps follow in (ky, kx, ic) order, as the generated kernel does; the clamp compares, so NaN
// stays NaN. A row's taps are unrolled (the compiler takes the template only where KH * KW * CIN
// is small), the rows are a loop (as in depthwise.cl: PoCL compiled palm detection's 5x5 stem
// for 7.5 s at its first launch with them unrolled too, 0.8 s so), and a strip of windows wholly
// inside the image takes them without a bounds test each.
// With THEN, each vector it would store goes through nn_then_vVW first, defined before this
// text: the one elementwise kernel that read this layer's output, folded in
// (compiler/gemm_fold.py), its other buffers before `out` (THEN_PARAMS).
// Launch: global = N * OH * ceil(OW / PIX) * (C / (VW * CV)), 1-D; every index fits in 32 bits
// (checked at lowering).
#include "vectors.h"
#include "then.h"
#include "row_strips.h"
// the filter's vector v of tap (ky, kx, ic)
#define FILTER(ky, kx, ic, v) VLOAD(VW)(0, w + (((ky) * KW + (kx)) * CIN + (ic)) * C + c + (v) * VW)
// one tap: each pixel p's input (`at`, in p, from `origin`), broadcast, times the CV filter
// vectors, which are loaded once for the PIX pixels; a pixel where `inside` (in p) is false takes
// none
#define TAP(ky, kx, ic, origin, at, inside) do { \
        VEC(VW) f[CV]; \
        UNROLL for (int v = 0; v < CV; ++v) f[v] = FILTER(ky, kx, ic, v); \
        UNROLL for (int p = 0; p < PIX; ++p) \
            if (inside) { \
                const VEC(VW) a = (VEC(VW))(LOAD_AS(X_T, at, origin)); \
                UNROLL for (int v = 0; v < CV; ++v) acc[v][p] = acc[v][p] + a * f[v]; \
            } \
    } while (0)

__kernel void NAME(__global const X_T* restrict x, __global const float* restrict w,
                   __global const float* restrict bias THEN_PARAMS, __global OUT_T* restrict out) {
    STRIP_START;
    VEC(VW) acc[CV][PIX];
    STRIP_BIAS(acc);
    if (STRIP_INSIDE) {
        const __global X_T* origin = x + ((n * H + iy0) * W + ix0) * CIN;   // its first window's first tap
        for (int ky = 0; ky < KH; ++ky)
            UNROLL for (int kx = 0; kx < KW; ++kx)
                UNROLL for (int ic = 0; ic < CIN; ++ic)
                    TAP(ky, kx, ic, origin, (ky * DH * W + p * SW + kx * DW) * CIN + ic, true);
    } else {
        for (int ky = 0; ky < KH; ++ky) {
            const int iy = iy0 + ky * DH;
            UNROLL for (int kx = 0; kx < KW; ++kx)
                UNROLL for (int ic = 0; ic < CIN; ++ic)
                    TAP(ky, kx, ic, x, ((n * H + iy) * W + ix0 + p * SW + kx * DW) * CIN + ic,
                        ox0 + p < OW && iy >= 0 && iy < H && ix0 + p * SW + kx * DW >= 0 && ix0 + p * SW + kx * DW < W);
        }
    }
    STORE_STRIP(acc);
}
