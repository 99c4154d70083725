// GEMM for the OpenCL backend: C[M,N] = A[M,K] * B[K,N], row-major float32, or with B given
// transposed (B[N,K]: a filter or weight matrix read in place, in the model's own layout).
// Two schedules each: the backend picks nn_gemm_tiled / nn_gemm_nt_tiled on GPUs and
// nn_gemm_vec / nn_gemm_nt_vec on CPU devices.
// With EPILOGUE defined (a program of its own), every kernel takes the bias of C's columns and
// the bounds of a fused activation after C, and stores clamp(C + bias): the convolution's or
// fully connected layer's output, written once. With RESIDUAL as well, it then adds the element
// of `residual` ([M, N], as C) and clamps again by lo2 and hi2: an ADD that read the GEMM's
// output (a residual connection) folded in (compiler/gemm_fold.py), the same operations in the
// same order. With THEN instead, it passes clamp(C + bias) to nn_then (nn_then_v4/8/16 on
// vectors of a row's neighbouring elements), with its index, row and column, defined before
// this text: the one elementwise kernel that read the GEMM's output, folded in
// (compiler/render_epilogue.py), with its other buffers after hi (THEN_PARAMS). The clamps
// compare, so NaN stays NaN; no activation passes -INFINITY and INFINITY.
// B's row stride: N, or LDB where the compiler padded a packed B's rows (zeros past column N).
// With SCALE_A, A's element (r, k) is multiplied by scale[k] as it is read: a kernel that
// stored A = x * scale (a squeeze-and-excite block's channel gate) folded in
// (compiler/gemm_fold.py), the same product, so the same bits.
// The GPU kernels read A and B as AB_T and the scale as SCALE_T, and store C as C_T: float, or
// half (float16 matrices widened as they are read into local memory: a relaxed model's patch
// matrix and its weights stored so, its gate; a float16 C rounded to nearest even as it is
// stored; the sums are float32 as ever).
#include "vectors.h"
#include "gemm_types.h"
#ifdef SCALE_A
#define SCALE_PARAM , __global const SCALE_T* restrict scale
#define SCALED(v, k) ((v) * LOAD_AS(SCALE_T, k, scale))
#define SCALED_VEC(v, k) ((v) * VLOAD(VW)(0, scale + (k)))
#else
#define SCALE_PARAM
#define SCALED(v, k) (v)
#define SCALED_VEC(v, k) (v)
#endif
#define THEN_ROW N
#include "then.h"
#ifdef EPILOGUE
inline float clamped(float v, const float lo, const float hi) {
    v = v < lo ? lo : v;
    return v > hi ? hi : v;
}
#ifdef RESIDUAL
#define EPILOGUE_ARGS , __global const float* restrict bias, const float lo, const float hi, \
                      __global const float* restrict residual, const float lo2, const float hi2
#define FINISH(v, r, c) clamped(clamped((v) + bias[c], lo, hi) + residual[(long)(r) * N + (c)], lo2, hi2)
#elif defined(THEN)
#define EPILOGUE_ARGS , __global const float* restrict bias, const float lo, const float hi THEN_PARAMS
#define FINISH(v, r, c) THEN_AT(clamped((v) + bias[c], lo, hi), r, c)
#else
#define EPILOGUE_ARGS , __global const float* restrict bias, const float lo, const float hi
#define FINISH(v, r, c) clamped((v) + bias[c], lo, hi)
#endif
#else
#define EPILOGUE_ARGS
#define FINISH(v, r, c) (v)
#endif

// GPUs: tiled in local memory. A work-group of TS x RTS work-items computes a TS x TS tile of C,
// walking K in steps of TS: the group loads a TS x TS tile of A and of B into local memory (each
// global element once, neighbouring work-items reading neighbouring addresses), meets at a
// barrier, and each work-item adds TS products to WPT rows of its column from local memory (a
// row of the A tile is one broadcast read, a row of the B tile one bank each). Elements past M,
// N or K load as zeros. Launch: global = (ceil(N / TS) * TS, ceil(M / TS) * RTS), local =
// (TS, RTS).
#define TS 32
#define WPT 4
#define RTS (TS / WPT)

// One K step: the tiles' products into acc (As is [row][k], Bs is [k][column]).
#define TILE_PRODUCTS(As, Bs, acc) \
    for (int k = 0; k < TS; ++k) { \
        const float b = Bs[k][tx]; \
        for (int w = 0; w < WPT; ++w) acc[w] += As[ty + w * RTS][k] * b; \
    }

#define TILE_STORE(C, acc) \
    for (int w = 0; w < WPT; ++w) { \
        const int row = get_group_id(1) * TS + ty + w * RTS; \
        if (row < M && col < N) STORE_AS(C_T, FINISH(acc[w], row, col), (long)row * N + col, C); \
    }

__kernel __attribute__((reqd_work_group_size(TS, RTS, 1)))
void nn_gemm_tiled(__global const AB_T* restrict A, __global const AB_T* restrict B,
                   __global C_T* restrict C, const int M, const int N, const int K EPILOGUE_ARGS SCALE_PARAM) {
    __local float As[TS][TS + 1], Bs[TS][TS];
    const int tx = get_local_id(0), ty = get_local_id(1), col = get_group_id(0) * TS + tx;
    float acc[WPT];
    for (int w = 0; w < WPT; ++w) acc[w] = 0.0f;
    for (int t = 0; t < K; t += TS) {
        for (int w = 0; w < WPT; ++w) {
            const int r = ty + w * RTS, arow = get_group_id(1) * TS + r;
            As[r][tx] = (arow < M && t + tx < K) ? SCALED(LOAD_AS(AB_T, (long)arow * K + t + tx, A), t + tx) : 0.0f;
            Bs[r][tx] = (t + r < K && col < N) ? LOAD_AS(AB_T, (long)(t + r) * LDB + col, B) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        TILE_PRODUCTS(As, Bs, acc)
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    TILE_STORE(C, acc)
}

// B transposed (B[N, K]), GPUs: the B tile is read along K (neighbouring work-items, neighbouring
// addresses) and stored transposed into local memory, padded against bank conflicts.
__kernel __attribute__((reqd_work_group_size(TS, RTS, 1)))
void nn_gemm_nt_tiled(__global const AB_T* restrict A, __global const AB_T* restrict B,
                      __global C_T* restrict C, const int M, const int N, const int K EPILOGUE_ARGS SCALE_PARAM) {
    __local float As[TS][TS + 1], Bs[TS][TS + 1];
    const int tx = get_local_id(0), ty = get_local_id(1), col = get_group_id(0) * TS + tx;
    float acc[WPT];
    for (int w = 0; w < WPT; ++w) acc[w] = 0.0f;
    for (int t = 0; t < K; t += TS) {
        for (int w = 0; w < WPT; ++w) {
            const int r = ty + w * RTS, arow = get_group_id(1) * TS + r, bcol = get_group_id(0) * TS + r;
            As[r][tx] = (arow < M && t + tx < K) ? SCALED(LOAD_AS(AB_T, (long)arow * K + t + tx, A), t + tx) : 0.0f;
            Bs[tx][r] = (bcol < N && t + tx < K) ? LOAD_AS(AB_T, (long)bcol * K + t + tx, B) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        TILE_PRODUCTS(As, Bs, acc)
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    TILE_STORE(C, acc)
}

// CPU devices (PoCL): a register-blocked micro-kernel in explicit vectors. Each work-item
// computes ROWS rows by NV vectors of VW columns (VW 8 or 16 and NV defined by the backend
// before this text): per k, NV vector loads of B and ROWS broadcasts of A feed ROWS * NV vector
// multiply-adds, each into an accumulator of its own. The loops over rows and vectors are
// unrolled by pragma: PoCL's compiler does not unroll them itself, and then keeps the
// accumulators in memory, a load and a store around every multiply-add (3-4x slower). PoCL's
// implicit vectorization across work-items would gather the A loads instead (3-8x slower). A
// block past the last row computes that row again and stores only the rows that exist; columns
// past the last whole block of vectors take the scalar path, unless B's rows are padded (LDB):
// then the last block computes whole vectors and stores those before N whole, the columns
// before N after them one by one. Row blocks are the first grid dimension, so the work-items
// that run one after another share their B panel in cache.
// Launch: global = (ceil(M / ROWS), ceil(N / (VW * NV))).
#define ROWS 4
#ifndef NV
#define NV 1   // a unit for the transposed kernel defines VW alone
#endif
#define UNROLL _Pragma("unroll")
#ifdef VW
// The epilogue on a vector of row r's columns from c on (the identity without EPILOGUE).
#ifdef EPILOGUE
#define CLAMPED_VEC_DEF_(n) \
inline VEC(n) clamped_vec##n(VEC(n) v, const float lo, const float hi) { \
    v = select(v, (VEC(n))(lo), (IVEC(n))(v < (VEC(n))(lo))); \
    return select(v, (VEC(n))(hi), (IVEC(n))(v > (VEC(n))(hi))); \
}
#define CLAMPED_VEC_DEF(n) CLAMPED_VEC_DEF_(n)
CLAMPED_VEC_DEF(4)
CLAMPED_VEC_DEF(8)
#if VW == 16
CLAMPED_VEC_DEF(16)
#endif
#define CLAMPED_VEC_(n, v, lo, hi) clamped_vec##n((v), lo, hi)
#define CLAMPED_VEC(n, v, lo, hi) CLAMPED_VEC_(n, v, lo, hi)
#define BIASED_VEC(n, v, c) CLAMPED_VEC(n, (v) + VLOAD(n)(0, bias + (c)), lo, hi)
#ifdef RESIDUAL
#define FINISH_VEC(n, v, r, c) \
    CLAMPED_VEC(n, BIASED_VEC(n, v, c) + VLOAD(n)(0, residual + (long)(r) * N + (c)), lo2, hi2)
#elif defined(THEN)
#define FINISH_VEC(n, v, r, c) THEN_VEC(n, BIASED_VEC(n, v, c), r, c)
#else
#define FINISH_VEC(n, v, r, c) BIASED_VEC(n, v, c)
#endif
#else
#define FINISH_VEC(n, v, r, c) (v)
#endif
// One k of nn_gemm_vec: NV vectors of B's row (from b) times ROWS broadcasts of A, row r's
// element `a_rk` (an expression in r)
#define K_STEP(a_rk) do { \
        VEC(VW) bv[NV]; \
        UNROLL for (int v = 0; v < NV; ++v) bv[v] = VLOAD(VW)(0, b + v * VW); \
        UNROLL for (int r = 0; r < ROWS; ++r) { \
            const VEC(VW) x = (VEC(VW))(a_rk); \
            UNROLL for (int v = 0; v < NV; ++v) acc[r][v] = fma(x, bv[v], acc[r][v]); \
        } \
    } while (0)
__kernel void nn_gemm_vec(__global const float* restrict A, __global const float* restrict B,
                          __global float* restrict C, const int M, const int N, const int K EPILOGUE_ARGS SCALE_PARAM) {
    const int row = get_global_id(0) * ROWS, col = get_global_id(1) * (VW * NV);
    if (col >= N || row >= M) return;
    if (col + VW * NV <= LDB) {
        VEC(VW) acc[ROWS][NV];
        const __global float* a[ROWS];
        UNROLL for (int r = 0; r < ROWS; ++r) {
            a[r] = A + (long)min(row + r, M - 1) * K;
            UNROLL for (int v = 0; v < NV; ++v) acc[r][v] = (VEC(VW))(0.0f);
        }
        const __global float* b = B + col;
        int k = 0;
#ifdef SCALE_A
        // A's scaled elements VW columns at a time, each row's products in one vector multiply,
        // held in private memory for the broadcasts: the same products as one at a time, where a
        // scalar multiply and a broadcast from a register each took 30-45% longer on PoCL (alone,
        // 196 x 40 x 240 26.6 -> 20.5 us, 49 x 96 x 576 32.6 -> 25.8; 20.4 / 22.4 unscaled). The
        // loop over the block's columns unrolled by 4: no slower than wholly. The scale's vector is
        // loaded once for the ROWS rows (SCALED_VEC on each row's vector: 7% slower, 20.1 -> 21.6 us)
        for (; k + VW <= K; k += VW) {
            float scaled[ROWS][VW];
            const VEC(VW) s = VLOAD_AS(SCALE_T, VW)(0, scale + k);
            UNROLL for (int r = 0; r < ROWS; ++r) VSTORE(VW)(VLOAD(VW)(0, a[r] + k) * s, 0, scaled[r]);
            _Pragma("unroll 4") for (int j = 0; j < VW; ++j, b += LDB) K_STEP(scaled[r][j]);
        }
#endif
        for (; k < K; ++k, b += LDB) K_STEP(SCALED(a[r][k], k));
        if (col + VW * NV <= N) {
            UNROLL for (int r = 0; r < ROWS; ++r) {
                if (row + r >= M) break;
                __global float* out = C + (long)(row + r) * N + col;
                UNROLL for (int v = 0; v < NV; ++v) VSTORE(VW)(FINISH_VEC(VW, acc[r][v], row + r, col + v * VW), 0, out + v * VW);
            }
            return;
        }
        // the last block of a padded B: its whole vectors before N, then of the vector across N
        // a vector of 8 and one of 4 where they fit (the face detector's N = 28: 16 + 8 + 4),
        // then the columns before N one by one. Unrolled over the rows as above (a loop over them
        // took 8-27% longer for the face detector's N = 28 and 42 GEMMs in the pipeline on PoCL)
        UNROLL for (int r = 0; r < ROWS; ++r) {
            if (row + r >= M) break;
            __global float* out = C + (long)(row + r) * N + col;
            UNROLL for (int v = 0; v < NV; ++v) {
                const int c = col + v * VW;
                if (c + VW <= N) {
                    VSTORE(VW)(FINISH_VEC(VW, acc[r][v], row + r, c), 0, out + v * VW);
                } else {
                    float lanes[VW];
                    VSTORE(VW)(acc[r][v], 0, lanes);
                    int j = 0;
#if VW == 16
                    if (c + 8 <= N) {
                        vstore8(FINISH_VEC(8, vload8(0, lanes), row + r, c), 0, out + v * VW);
                        j = 8;
                    }
#endif
                    if (c + j + 4 <= N) {
                        vstore4(FINISH_VEC(4, vload4(0, lanes + j), row + r, c + j), 0, out + v * VW + j);
                        j += 4;
                    }
                    for (; c + j < N; ++j) out[v * VW + j] = FINISH(lanes[j], row + r, c + j);
                }
            }
        }
        return;
    }
    for (int c = col; c < N; ++c) {
        for (int r = row; r < min(row + ROWS, M); ++r) {
            float s = 0.0f;
            for (int k = 0; k < K; ++k) s = fma(SCALED(A[(long)r * K + k], k), B[(long)k * LDB + c], s);
            C[(long)r * N + c] = FINISH(s, r, c);
        }
    }
}

// B transposed, CPU devices: each work-item computes NT_ROWS rows by NT_COLS columns as dot
// products along K, VW lanes at a time (rows of A and of B are both contiguous in K; the loops
// over them unrolled, as above), summing the lanes at the end and K's last K % VW terms in
// scalars. A partial block reads its last row or column again in place of the missing ones and
// stores only what exists. NT_ROWS is 4, or 1 where the backend defines it so for a GEMM of one
// row (a classifier's fully connected layer): 4 would compute that row 4 times over. Each
// element's sum is the same either way. Launch: global = (ceil(N / NT_COLS), ceil(M / NT_ROWS)).
#ifndef NT_ROWS
#define NT_ROWS 4
#endif
#define NT_COLS 4
#if VW == 16
#define HALVES(v) ((v).lo + (v).hi)
#else
#define HALVES(v) (v)
#endif
// The lane sums of four vectors, as one float4: pairwise adds of shuffled halves (a transposing
// reduction), about 3 vector adds per column where summing each vector alone takes 3 per vector.
inline float4 lane_sums(const float8 v0, const float8 v1, const float8 v2, const float8 v3) {
    const float8 t01 = (float8)(v0.lo + v0.hi, v1.lo + v1.hi);
    const float8 t23 = (float8)(v2.lo + v2.hi, v3.lo + v3.hi);
    const float8 u = (float8)(t01.even + t01.odd, t23.even + t23.odd);
    return u.even + u.odd;
}
__kernel void nn_gemm_nt_vec(__global const float* restrict A, __global const float* restrict B,
                             __global float* restrict C, const int M, const int N, const int K EPILOGUE_ARGS SCALE_PARAM) {
    const int col = get_global_id(0) * NT_COLS, row = get_global_id(1) * NT_ROWS;
    if (col >= N || row >= M) return;
    const int rows = min(NT_ROWS, M - row), cols = min(NT_COLS, N - col);
    const __global float* a[NT_ROWS];
    const __global float* b[NT_COLS];
    UNROLL for (int r = 0; r < NT_ROWS; ++r) a[r] = A + (long)(row + min(r, rows - 1)) * K;
    UNROLL for (int c = 0; c < NT_COLS; ++c) b[c] = B + (long)(col + min(c, cols - 1)) * K;
    VEC(VW) acc[NT_ROWS][NT_COLS];
    UNROLL for (int r = 0; r < NT_ROWS; ++r)
        UNROLL for (int c = 0; c < NT_COLS; ++c) acc[r][c] = (VEC(VW))(0.0f);
    int k = 0;
    for (; k + VW <= K; k += VW) {
        VEC(VW) av[NT_ROWS], bv[NT_COLS];
        UNROLL for (int r = 0; r < NT_ROWS; ++r) av[r] = SCALED_VEC(VLOAD(VW)(0, a[r] + k), k);
        UNROLL for (int c = 0; c < NT_COLS; ++c) bv[c] = VLOAD(VW)(0, b[c] + k);
        UNROLL for (int r = 0; r < NT_ROWS; ++r)
            UNROLL for (int c = 0; c < NT_COLS; ++c) acc[r][c] = fma(av[r], bv[c], acc[r][c]);
    }
    for (int r = 0; r < rows; ++r) {
        float4 s = lane_sums(HALVES(acc[r][0]), HALVES(acc[r][1]), HALVES(acc[r][2]), HALVES(acc[r][3]));
        for (int t = k; t < K; ++t) s = fma((float4)(SCALED(a[r][t], t)), (float4)(b[0][t], b[1][t], b[2][t], b[3][t]), s);
        __global float* out = C + (long)(row + r) * N + col;
        if (cols == NT_COLS) {
            vstore4(FINISH_VEC(4, s, row + r, col), 0, out);
        } else {
            float lanes[NT_COLS];
            vstore4(s, 0, lanes);
            for (int c = 0; c < cols; ++c) out[c] = FINISH(lanes[c], row + r, col + c);
        }
    }
}
#endif
