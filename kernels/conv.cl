// Float CONV_2D for the OpenCL backend's CPU devices, NHWC, for a layer with few input channels
// (a network's stem over an image's 3 colours): each work-item computes VW neighbouring output
// channels of PIX neighbouring output pixels of a row in explicit vectors. Each tap (ky, kx, ic)
// is one input per pixel, broadcast, times one filter vector, which serves the PIX pixels. For
// such a layer the GEMM convolution's patch matrix is as large as its output and written, then
// read again: MobileNet v3's stem took 64 us (im2col) + 95 us (GEMM) in the pipeline on PoCL.
// The compiler specialises it per layer with #defines before this text: NAME, VW (4, 8 or 16,
// which divides C), PIX, N H W CIN, C (output channels), OH OW, KH KW, SH SW (strides), DH DW
// (dilations), PT PL (padding top, left), and LO / HI where a fused activation clamps; the filter
// comes packed as [KH, KW, CIN, C]. The bias starts each sum and the taps follow in (ky, kx, ic)
// order, as the generated kernel does; the clamp compares, so NaN stays NaN. The taps are
// unrolled (the compiler takes the template only where KH * KW * CIN is small), and a strip of
// windows wholly inside the image takes them without a bounds test each.
// With THEN, the vector it would store goes through nn_then_vVW first, defined before this text:
// the one elementwise kernel that read this layer's output, folded in (compiler/gemm_fold.py),
// its other buffers before `out` (THEN_PARAMS).
// Launch: global = N * OH * ceil(OW / PIX) * (C / VW), 1-D; every index fits in 32 bits (checked
// at lowering).
#include "vectors.h"
#include "then.h"
#include "row_strips.h"
// the filter's vector of tap (ky, kx, ic)
#define FILTER(ky, kx, ic) VLOAD(VW)(0, w + (((ky) * KW + (kx)) * CIN + (ic)) * C + c)

__kernel void NAME(__global const float* restrict x, __global const float* restrict w,
                   __global const float* restrict bias THEN_PARAMS, __global float* restrict out) {
    STRIP_START;
    VEC(VW) acc[PIX];
    STRIP_BIAS(acc);
    if (STRIP_INSIDE) {
        const __global float* origin = x + ((n * H + iy0) * W + ix0) * CIN;   // its first window's first tap
        UNROLL for (int ky = 0; ky < KH; ++ky)
            UNROLL for (int kx = 0; kx < KW; ++kx)
                UNROLL for (int ic = 0; ic < CIN; ++ic) {
                    const VEC(VW) f = FILTER(ky, kx, ic);
                    UNROLL for (int p = 0; p < PIX; ++p)
                        acc[p] = acc[p] + (VEC(VW))(origin[(ky * DH * W + p * SW + kx * DW) * CIN + ic]) * f;
                }
    } else {
        UNROLL for (int ky = 0; ky < KH; ++ky) {
            const int iy = iy0 + ky * DH;
            UNROLL for (int kx = 0; kx < KW; ++kx)
                UNROLL for (int ic = 0; ic < CIN; ++ic) {
                    const VEC(VW) f = FILTER(ky, kx, ic);
                    UNROLL for (int p = 0; p < PIX; ++p) {
                        const int ix = ix0 + p * SW + kx * DW;
                        if (ox0 + p < OW && iy >= 0 && iy < H && ix >= 0 && ix < W)
                            acc[p] = acc[p] + (VEC(VW))(x[((n * H + iy) * W + ix) * CIN + ic]) * f;
                    }
                }
        }
    }
    STORE_STRIP(acc);
}
