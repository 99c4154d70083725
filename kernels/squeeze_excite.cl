// A squeeze-and-excite head in one launch, for the OpenCL backend's CPU devices: the float MEAN
// of an [R, C] input over its R rows (a global average pool), then one or two fully connected
// layers of one row (1x1 convolutions of one pixel) on it, each storing clamp(sum + bias), the
// last through a folded elementwise kernel (THEN) where there is one. As three launches
// (kernels/column_sum.cl, two GEMMs) MobileNet v3's nine heads were 27 of its 68 launches, each
// a few microseconds of work after a few of waiting for the one before.
// One work-group does it all, its stages separated by barriers, the values between them in local
// memory (a CPU device runs a work-group on one thread: the work is small, the launches were not).
// The mean is column_sum.cl's, lane for lane: each column's compensated (Kahan) sum in the same
// operations and order (a correction that is not finite dropped, as there), divided by COUNT.
// Each layer's output j is the dot product of its input with row j of its weights [N, K] (the
// model's own layout), in vectors of KV along K, then the bias, then the clamp.
// The compiler specialises it per use with #defines before this text: NAME, GROUP (the
// work-group), R, C, MV (4, 8 or 16, which divides C), CV (MV * CV divides C), COUNT (a float literal) for a MEAN, N1,
// LO1 / HI1 (its clamp), and for a second layer N2, LO2 / HI2 and HV (4, 8 or 16, which divides
// N1); THEN_ROW, the last layer's N. With THEN, the last layer's values go through nn_then, defined
// before this text, its other buffers before `out` (THEN_PARAMS). Launch: global = local = GROUP.
#include "vectors.h"
#include "then.h"
#define UNROLL _Pragma("unroll")

// row j of w [N, K] times v [K] (local memory), in vectors of KV, plus bias[j], clamped
#define LAYER(v, w, bias, j, K, KV, LO, HI, result) do { \
        VEC(KV) s_ = (VEC(KV))(0.0f); \
        for (int k_ = 0; k_ < (K); k_ += (KV)) s_ += VLOAD(KV)(0, (v) + k_) * VLOAD(KV)(0, (w) + (j) * (K) + k_); \
        float t_ = 0.0f; \
        UNROLL for (int l_ = 0; l_ < (KV); ++l_) t_ += s_[l_]; \
        t_ += (bias)[j]; \
        result = t_ < (LO) ? (LO) : (t_ > (HI) ? (HI) : t_); \
    } while (0)

#ifdef THEN
#define STORE(v, j) out[j] = THEN_AT(v, 0, j)
#else
#define STORE(v, j) out[j] = (v)
#endif

__kernel __attribute__((reqd_work_group_size(GROUP, 1, 1)))
void NAME(__global const float* restrict x, __global const float* restrict w1, __global const float* restrict b1
#ifdef N2
          , __global const float* restrict w2, __global const float* restrict b2
#endif
          THEN_PARAMS, __global float* restrict out) {
    __local float mean[C];
#ifdef N2
    __local float hidden[N1];
#endif
    const int l = get_local_id(0);
    // CV vectors of MV columns a work-item, their chains of dependent adds interleaved
    for (int c = l * (MV * CV); c < C; c += GROUP * (MV * CV)) {
        VEC(MV) acc[CV], comp[CV];
        UNROLL for (int v = 0; v < CV; ++v) acc[v] = comp[v] = (VEC(MV))(0.0f);
        for (int r = 0; r < R; ++r) {
            UNROLL for (int v = 0; v < CV; ++v) {
                const VEC(MV) y = VLOAD(MV)(0, x + r * C + c + v * MV) - comp[v];
                const VEC(MV) s = acc[v] + y;
                comp[v] = (s - acc[v]) - y;
                comp[v] = select((VEC(MV))(0.0f), comp[v], isfinite(comp[v]));   // past an inf: keep it, not NaN
                acc[v] = s;
            }
        }
        UNROLL for (int v = 0; v < CV; ++v) {
#ifdef COUNT
            acc[v] = acc[v] / COUNT;
#endif
            VSTORE(MV)(acc[v], 0, mean + c + v * MV);
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#ifdef N2
    for (int j = l; j < N1; j += GROUP) {
        float v;
        LAYER(mean, w1, b1, j, C, MV, LO1, HI1, v);
        hidden[j] = v;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int j = l; j < N2; j += GROUP) {
        float v;
        LAYER(hidden, w2, b2, j, N1, HV, LO2, HI2, v);
        STORE(v, j);
    }
#else
    for (int j = l; j < N1; j += GROUP) {
        float v;
        LAYER(mean, w1, b1, j, C, MV, LO1, HI1, v);
        STORE(v, j);
    }
#endif
}
