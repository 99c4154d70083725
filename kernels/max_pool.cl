// Float MAX_POOL_2D for the OpenCL backend, NHWC: each work-item takes PV vectors of VW
// neighbouring channels of one output pixel in explicit vectors, so a tap is one vector load (the
// generated kernel, one output a work-item, gathered its taps a channel apart: on PoCL the face
// detector's three pools took 250 us; a vector a work-item, 47 us for its first pool alone, where
// a pixel's 7 vectors a work-item take 19-23). The taps go in (ky, kx) order from -INFINITY, each
// replacing the maximum where it is larger or NaN, as the generated kernel does (NaN wins, as in
// np.maximum), taps in the padding left out; then the clamp of a fused activation (LO / HI;
// compares, so NaN stays NaN). With THEN, each vector it would store goes through nn_then_vVW
// first (as in depthwise.cl).
// The compiler specialises it per layer with #defines before this text: NAME, VW (2, 4, 8 or 16,
// which divides C), PV (which divides C / VW), N H W C, OH OW, KH KW, SH SW (strides), PT PL
// (padding top, left), X_T / OUT_T (the input's and output's element types, float or half:
// vectors.h's VLOAD_AS). Launch: global = N * OH * OW * (C / (VW * PV)), 1-D; every index fits in
// 32 bits (checked at lowering).
#include "vectors.h"
#include "then.h"
#include "activation.h"
#define ITEMS (C / (VW * PV))   // work-items a pixel
#define UNROLL _Pragma("unroll")

__kernel void NAME(__global const X_T* restrict x THEN_PARAMS, __global OUT_T* restrict out) {
    const int g = get_global_id(0);
    if (g >= N * OH * OW * ITEMS) return;
    const int first = (g % ITEMS) * (VW * PV);
    const int pixel = g / ITEMS;
    const int ox = pixel % OW, oy = (pixel / OW) % OH, n = pixel / (OW * OH);
    const int iy0 = oy * SH - PT, ix0 = ox * SW - PL;
    for (int v = 0; v < PV; ++v) {
        const int c = first + v * VW;
        VEC(VW) acc = (VEC(VW))(-INFINITY);
        UNROLL for (int ky = 0; ky < KH; ++ky) {
            const int iy = iy0 + ky;
            if (iy < 0 || iy >= H) continue;
            UNROLL for (int kx = 0; kx < KW; ++kx) {
                const int ix = ix0 + kx;
                if (ix < 0 || ix >= W) continue;
                const VEC(VW) t = VLOAD_AS(X_T, VW)(0, x + ((n * H + iy) * W + ix) * C + c);
                acc = select(acc, t, isnan(t) | (t > acc));
            }
        }
        CLAMP_ACTIVATION(VW, acc);
#ifdef THEN
        acc = THEN_VEC(VW, acc, pixel, c);   // rows of C: the pixel, the channel
#endif
        VSTORE_AS(OUT_T, VW)(acc, 0, out + pixel * C + c);
    }
}
