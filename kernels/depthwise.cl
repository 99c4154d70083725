// Float DEPTHWISE_CONV_2D for the OpenCL backend, NHWC with depth multiplier 1: each work-item
// computes VW neighbouring channels of PIX neighbouring output pixels of a row in explicit
// vectors, so every tap is one vector load of the input and one of the filter [1, KH, KW, C],
// both contiguous in C, and the filter's vector serves the PIX pixels (at stride 1 their windows
// overlap too, and the compiler loads a shared input vector once). (PoCL vectorises a
// one-output-per-work-item kernel across work-items, which turns these loads into gathers; GPUs
// read VW * 4 contiguous bytes per work-item, coalesced across the channel groups.)
// The compiler specialises it per layer with #defines before this text: NAME, VW (2, 4, 8 or 16, which
// divides C), PIX, N H W C, OH OW, KH KW, SH SW (strides), DH DW (dilations), PT PL (padding
// top, left), LO / HI where a fused activation clamps, and X_T / OUT_T, the input's and output's
// element types (float or half: vectors.h's VLOAD_AS). The bias starts each sum and the taps
// follow in (ky, kx) order, as the generated kernel does; the clamp compares, so NaN stays NaN.
// A row's taps are unrolled (KW and PIX are constants; PoCL unrolls no loop itself), the rows
// are a loop: unrolled too, PoCL's compile at a layer's first launch took 4x as long (palm
// detection's 5x5 layers 2.2 s each, its first execution 58 s cold; now 0.6 s and 18 s) for no
// measured gain. A strip of windows wholly inside the image takes its taps without a bounds test
// each: on PoCL 1.6-2x faster, a 112x112x32 layer as fast as a copy of its input.
// With THEN, the vector it would store goes through nn_then_vVW first, defined before this text:
// the one elementwise kernel that read this layer's output, folded in (compiler/gemm_fold.py),
// its other buffers before `out` (THEN_PARAMS).
// With POOL_KH and POOL_KW, it also writes `pooled`: the MAX_POOL_2D of the same input whose
// windows are POOL_KH x POOL_KW taps of this layer's from tap (POOL_Y0, POOL_X0) (the same
// strides, dilation 1; compiler/pool_fold.py), as kernels/max_pool.cl computes it: from
// -INFINITY, the taps in (ky, kx) order each replacing the maximum where larger or NaN, those in
// the padding left out. The MediaPipe detectors' blocks that halve the image read their input
// once, not twice.
// Launch: global = N * OH * ceil(OW / PIX) * (C / VW), 1-D; every index fits in 32 bits (checked
// at lowering).
#include "vectors.h"
#include "then.h"
#include "row_strips.h"
// the filter's vector of tap (ky, kx)
#define FILTER(ky, kx) VLOAD(VW)(0, w + ((ky) * KW + (kx)) * C + c)
#ifdef POOL_KH
#define POOL_PARAM , __global POOLED_T* restrict pooled
#define POOL_ARG , pooled
#define POOL_START VEC(VW) most[PIX]; UNROLL for (int p = 0; p < PIX; ++p) most[p] = (VEC(VW))(-INFINITY)
#define POOL_TAP(ky, kx, p, t) \
    if ((ky) >= POOL_Y0 && (ky) < POOL_Y0 + POOL_KH && (kx) >= POOL_X0 && (kx) < POOL_X0 + POOL_KW) \
        most[p] = select(most[p], (t), isnan(t) | ((t) > most[p]))
#define POOL_STORE \
    UNROLL for (int p = 0; p < PIX; ++p) \
        if (ox0 + p < OW) VSTORE_AS(POOLED_T, VW)(most[p], 0, pooled + ((n * OH + oy) * OW + ox0 + p) * C + c)
#else
#define POOL_PARAM
#define POOL_ARG
#define POOL_START
#define POOL_TAP(ky, kx, p, t)
#define POOL_STORE
#endif

// One work-item's strip (a work-item past the last returns at once)
inline void depthwise_strip(__global const X_T* restrict x, __global const float* restrict w,
                            __global const float* restrict bias THEN_PARAMS, __global OUT_T* restrict out POOL_PARAM) {
    STRIP_START;
    VEC(VW) acc[1][PIX];   // one vector of channels (CV 1)
    STRIP_BIAS(acc);
    POOL_START;
    if (STRIP_INSIDE) {
        // the strip's first window's first tap
        const __global X_T* origin = x + ((n * H + iy0) * W + ix0) * C + c;
        for (int ky = 0; ky < KH; ++ky)
            UNROLL for (int kx = 0; kx < KW; ++kx) {
                const VEC(VW) f = FILTER(ky, kx);
                UNROLL for (int p = 0; p < PIX; ++p) {
                    const VEC(VW) t = VLOAD_AS(X_T, VW)(0, origin + (ky * DH * W + p * SW + kx * DW) * C);
                    acc[0][p] = acc[0][p] + t * f;
                    POOL_TAP(ky, kx, p, t);
                }
            }
    } else {
        for (int ky = 0; ky < KH; ++ky) {
            const int iy = iy0 + ky * DH;
            UNROLL for (int kx = 0; kx < KW; ++kx) {
                const VEC(VW) f = FILTER(ky, kx);
                UNROLL for (int p = 0; p < PIX; ++p) {
                    const int ix = ix0 + p * SW + kx * DW;
                    if (ox0 + p < OW && iy >= 0 && iy < H && ix >= 0 && ix < W) {
                        const VEC(VW) t = VLOAD_AS(X_T, VW)(0, x + ((n * H + iy) * W + ix) * C + c);
                        acc[0][p] = acc[0][p] + t * f;
                        POOL_TAP(ky, kx, p, t);
                    }
                }
            }
        }
    }
    STORE_STRIP(acc);
    POOL_STORE;
}

#ifdef EXCITE_HEAD
// With EXCITE_HEAD (compiler/squeeze_excite.py), the squeeze-and-excite head that pools this
// layer's output runs in the same launch: each work-group, once its strips are stored, counts
// itself in `arrived`, and the last to arrive runs the head (kernels/excite.h, with its #defines)
// on the whole output, then sets `arrived` back to 0 for the next launch. The head's own launch,
// and the wait for it, go; its work is the same, on one thread as before. Only on a CPU device,
// whose work-groups share one coherent memory: a group's stores, fenced before its atomic
// increment, are there for the group that counts after it. Launch: work-groups of GROUP.
#include "kahan.h"
#include "excite.h"
__kernel __attribute__((reqd_work_group_size(GROUP, 1, 1)))
void NAME(__global const X_T* restrict x, __global const float* restrict w,
          __global const float* restrict bias THEN_PARAMS, __global const float* restrict w1,
          __global const float* restrict b1 FIRST_PARAMS SECOND_PARAMS EXCITE_PARAMS, __global float* restrict out,
          __global float* restrict gate, __global volatile int* arrived) {
    __local float scratch[EXCITE_SCRATCH];
    __local int last;
    depthwise_strip(x, w, bias THEN_ARGS, out);
    barrier(CLK_GLOBAL_MEM_FENCE);
    if (get_local_id(0) == 0) {
        mem_fence(CLK_GLOBAL_MEM_FENCE);
        last = atomic_inc(arrived) == (int)get_num_groups(0) - 1;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (last) {
        excite_head(out, w1, b1 FIRST_ARGS SECOND_ARGS EXCITE_ARGS, gate, scratch);
        if (get_local_id(0) == 0) *arrived = 0;
    }
}
#else
__kernel void NAME(__global const X_T* restrict x, __global const float* restrict w,
                   __global const float* restrict bias THEN_PARAMS, __global OUT_T* restrict out POOL_PARAM) {
    depthwise_strip(x, w, bias THEN_ARGS, out POOL_ARG);
}
#endif
