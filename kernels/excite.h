// A squeeze-and-excite head as a function a work-group calls: the float MEAN of an [R, C] input
// over its R rows (a global average pool), then one or two fully connected layers of one row (1x1
// convolutions of one pixel) on it, each storing clamp(sum + bias), each through a folded
// elementwise kernel where there is one. kernels/squeeze_excite.cl runs it as a kernel of its
// own; kernels/depthwise.cl, with EXCITE_HEAD, in the last work-group of the depthwise layer whose
// output it pools.
// One work-group does it all, its stages separated by barriers, the values between them in local
// memory (a CPU device runs a work-group on one thread: the work is small, the launches were not;
// two work-groups, each computing the mean and the first layer and half the last, made MobileNet
// v3's 576 -> 144 -> 576 heads slower on PoCL, 28 -> 37 us).
// The mean is column_sum.cl's compensated (Kahan) sum, divided by COUNT: with MRV = 1 lane for
// lane, each column's sum in the same operations and order; with MRV > 1 (few columns: one chain
// took 22 us for MobileNet v3's 3136 rows of 16) row r in chain r % MRV (the last R % MRV rows in
// the first), whose sums (each less its correction) the first then adds in the same way.
// Each layer's output j is the dot product of its input with row j of its weights [N, K] (the
// model's own layout), in vectors along K (MV, HV), then the bias, then the clamp.
// The compiler specialises it per use with #defines: GROUP (the work-group), R, C, MV (4, 8 or
// 16, which divides C), MCV (MV * MCV divides C), MRV, COUNT (a float literal) for a MEAN, N1,
// LO1 / HI1 (its clamp), and for a second layer N2, LO2 / HI2 and HV (4, 8 or 16, which divides
// N1, else 1: scalars). With EXCITE, the last layer's values go through nn_excite, and with FIRST
// the first's, before a second, through nn_first, both defined before the kernel's text, their
// other buffers after their layer's bias (FIRST_PARAMS, EXCITE_PARAMS).
// A kernel takes it with #include "excite.h", after vectors.h and kahan.h.
#define UNROLL _Pragma("unroll")

#define HSUM4(s) dot((s), (float4)(1.0f))
#define HSUM8(s) HSUM4((s).lo + (s).hi)
#define HSUM16(s) HSUM8((s).lo + (s).hi)
#define HSUM_(n, s) HSUM##n(s)
#define HSUM(n, s) HSUM_(n, s)   // the sum of a vector's n lanes
// Sums t of outputs j .. j + 3 of a layer plus their bias (those past outs take outs - 1's), clamped
inline float4 biased_clamped(float4 t, __global const float* restrict bias, const int j, const int outs,
                             const float lo, const float hi) {
    t += (float4)(bias[j], bias[min(j + 1, outs - 1)], bias[min(j + 2, outs - 1)], bias[min(j + 3, outs - 1)]);
    t = select(t, (float4)(lo), t < (float4)(lo));
    return select(t, (float4)(hi), t > (float4)(hi));
}
// Outputs j .. j + 3 of a layer (those below outs; the rest repeat row outs - 1): rows of w [outs, K]
// times v [K] in vectors of n, four chains of dependent adds side by side (one alone leaves the
// core waiting on each add), then the bias and the clamp.
#define LAYER_DEF(n) \
inline float4 layer##n(__local const float* v, __global const float* restrict w, __global const float* restrict bias, \
                       const int j, const int outs, const int K, const float lo, const float hi) { \
    VEC(n) s[4]; \
    const __global float* row[4]; \
    UNROLL for (int o = 0; o < 4; ++o) { \
        s[o] = (VEC(n))(0.0f); \
        row[o] = w + min(j + o, outs - 1) * K; \
    } \
    for (int k = 0; k < K; k += n) { \
        const VEC(n) a = VLOAD(n)(0, v + k); \
        UNROLL for (int o = 0; o < 4; ++o) s[o] = fma(a, VLOAD(n)(0, row[o] + k), s[o]); \
    } \
    const float4 t = (float4)(HSUM(n, s[0]), HSUM(n, s[1]), HSUM(n, s[2]), HSUM(n, s[3])); \
    return biased_clamped(t, bias, j, outs, lo, hi); \
}
LAYER_DEF(4)
LAYER_DEF(8)
LAYER_DEF(16)
// the same in scalars, for a K that 4 does not divide (EfficientNet's 96 -> 4 -> 96)
inline float4 layer1(__local const float* v, __global const float* restrict w, __global const float* restrict bias,
                     const int j, const int outs, const int K, const float lo, const float hi) {
    const __global float* row[4];
    UNROLL for (int o = 0; o < 4; ++o) row[o] = w + min(j + o, outs - 1) * K;
    float4 t = (float4)(0.0f);
    for (int k = 0; k < K; ++k) t = fma((float4)(v[k]), (float4)(row[0][k], row[1][k], row[2][k], row[3][k]), t);
    return biased_clamped(t, bias, j, outs, lo, hi);
}
#define LAYER_(n) layer##n
#define LAYER(n) LAYER_(n)

#ifdef FIRST
#define FIRST_AT(y, c) nn_first(y, c, 0, c FIRST_ARGS)
#else
#define FIRST_PARAMS
#define FIRST_AT(y, c) (y)
#endif
#ifdef EXCITE
#define STORE(v, j) out[j] = nn_excite(v, j, 0, j EXCITE_ARGS)
#else
#define EXCITE_PARAMS
#define EXCITE_ARGS
#define STORE(v, j) out[j] = (v)
#endif
#ifndef FIRST
#define FIRST_ARGS
#endif

#ifdef N2
#define SECOND_PARAMS , __global const float* restrict w2, __global const float* restrict b2
#define SECOND_ARGS , w2, b2
#define EXCITE_SCRATCH (C + N1)
#else
#define SECOND_PARAMS
#define SECOND_ARGS
#define EXCITE_SCRATCH C
#endif

// The head, by the GROUP work-items of the work-group that calls it, all of them: x [R, C] -> out
// [the last layer's N]. `scratch`: EXCITE_SCRATCH floats of local memory (the mean, then the first
// layer's outputs before a second).
inline void excite_head(__global const float* restrict x, __global const float* restrict w1,
                        __global const float* restrict b1 FIRST_PARAMS SECOND_PARAMS EXCITE_PARAMS,
                        __global float* restrict out, __local float* scratch) {
    __local float* mean = scratch;
#ifdef N2
    __local float* hidden = scratch + C;
#endif
    const int l = get_local_id(0);
    // MCV vectors of MV columns a work-item, each over MRV interleaved sets of rows: MCV * MRV chains
    // of dependent adds side by side
    for (int c = l * (MV * MCV); c < C; c += GROUP * (MV * MCV)) {
        VEC(MV) acc[MCV][MRV], comp[MCV][MRV];
        UNROLL for (int v = 0; v < MCV; ++v)
            UNROLL for (int i = 0; i < MRV; ++i) acc[v][i] = comp[v][i] = (VEC(MV))(0.0f);
        int r = 0;
        for (; r + MRV <= R; r += MRV)
            UNROLL for (int i = 0; i < MRV; ++i)
                UNROLL for (int v = 0; v < MCV; ++v)
                    KAHAN(MV, acc[v][i], comp[v][i], VLOAD(MV)(0, x + (r + i) * C + c + v * MV));
        for (; r < R; ++r)
            UNROLL for (int v = 0; v < MCV; ++v) KAHAN(MV, acc[v][0], comp[v][0], VLOAD(MV)(0, x + r * C + c + v * MV));
        UNROLL for (int v = 0; v < MCV; ++v) {
            UNROLL for (int i = 1; i < MRV; ++i) KAHAN(MV, acc[v][0], comp[v][0], acc[v][i] - comp[v][i]);
#ifdef COUNT
            acc[v][0] = acc[v][0] / COUNT;
#endif
            VSTORE(MV)(acc[v][0], 0, mean + c + v * MV);
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#ifdef N2
    for (int j = l * 4; j < N1; j += GROUP * 4) {
        float t[4];
        vstore4(LAYER(MV)(mean, w1, b1, j, N1, C, LO1, HI1), 0, t);
        for (int o = 0; o < 4 && j + o < N1; ++o) hidden[j + o] = FIRST_AT(t[o], j + o);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#define LAST LAYER(HV)(hidden, w2, b2, j, N2, N1, LO2, HI2)
#define LAST_N N2
#else
#define LAST LAYER(MV)(mean, w1, b1, j, N1, C, LO1, HI1)
#define LAST_N N1
#endif
    for (int j = l * 4; j < LAST_N; j += GROUP * 4) {
        float t[4];
        vstore4(LAST, 0, t);
        for (int o = 0; o < 4 && j + o < LAST_N; ++o) STORE(t[o], j + o);
    }
}
