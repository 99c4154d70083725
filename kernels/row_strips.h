// The work-items of a template that computes CV vectors of VW neighbouring output channels (CV 1
// unless the template defines it) of PIX neighbouring output pixels of a row (depthwise.cl,
// conv.cl), given N OH OW C (the output), H W, KH KW, SH SW (strides), DH DW (dilations), PT PL
// (padding top, left) and OUT_T (the output's element type: vectors.h). A template takes it with
// #include "row_strips.h", after vectors.h and then.h, and then:
// - STRIP_START declares the work-item's first channel c, its strip's first output (ox0, oy) of
//   image n and that window's first tap (iy0, ix0); a work-item past the last returns;
// - STRIP_BIAS(acc) starts the strip's sums, VEC(VW) acc[CV][PIX], with the bias of their channels;
// - STRIP_INSIDE: whether every tap of the strip's windows is inside the image (no bounds tests);
// - STORE_STRIP(acc) stores the strip's vectors (those of pixels before OW), each clamped by a
//   fused activation and, with THEN, passed through nn_then_vVW first, in rows of C (the pixel,
//   the channel).
// Launch: global = N * OH * STRIPS * GROUPS, 1-D.
#include "activation.h"
#ifndef CV
#define CV 1
#endif
#define GROUPS (C / (VW * CV))
#define STRIPS ((OW + PIX - 1) / PIX)
#define UNROLL _Pragma("unroll")
#define STRIP_START \
    const int g = get_global_id(0); \
    if (g >= N * OH * STRIPS * GROUPS) return; \
    const int c = (g % GROUPS) * (VW * CV); \
    const int s = g / GROUPS; \
    const int ox0 = (s % STRIPS) * PIX, oy = (s / STRIPS) % OH, n = s / (STRIPS * OH); \
    const int iy0 = oy * SH - PT, ix0 = ox0 * SW - PL
#define STRIP_BIAS(acc) \
    UNROLL for (int v = 0; v < CV; ++v) \
        UNROLL for (int p = 0; p < PIX; ++p) (acc)[v][p] = VLOAD(VW)(0, bias + c + v * VW)
#define STRIP_INSIDE (ox0 + PIX <= OW && iy0 >= 0 && iy0 + (KH - 1) * DH < H && ix0 >= 0 \
                      && ix0 + (PIX - 1) * SW + (KW - 1) * DW < W)
#ifdef THEN
#define STRIP_THEN(v, pixel, channel) THEN_VEC(VW, v, pixel, channel)
#else
#define STRIP_THEN(v, pixel, channel) (v)
#endif
#define STORE_STRIP(acc) \
    UNROLL for (int p = 0; p < PIX; ++p) { \
        const int pixel = (n * OH + oy) * OW + ox0 + p; \
        UNROLL for (int v = 0; v < CV; ++v) { \
            VEC(VW) y = (acc)[v][p]; \
            CLAMP_ACTIVATION(VW, y); \
            if (ox0 + p < OW) VSTORE_AS(OUT_T, VW)(STRIP_THEN(y, pixel, c + v * VW), 0, out + pixel * C + c + v * VW); \
        } \
    }
