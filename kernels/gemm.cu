// GEMM with its epilogue for the CUDA backend (backends/cuda_tiled_gemm.py): C[M, N] = A[M, K] * B
// and, with EPILOGUE, as C is stored, clamp(C + bias[column], LO, HI); with RESIDUAL then plus
// the element of `residual` ([M, N], as C) and clamped by LO2 and HI2 (an ADD that read the
// GEMM's output, compiler/gemm_fold.py); with THEN instead, that value passed to nn_then with its
// index, row and column (the one elementwise kernel that read the GEMM's output,
// compiler/render_epilogue.py, defined before this text, its buffers after bias: THEN_PARAMS).
// The output is written once: cuBLAS would leave all of that to a kernel of its own, a second
// pass over C. The clamps compare, so NaN stays NaN; no activation is LO -inf and HI inf.
// B is [K, N] with rows LDB apart (N unless defined), or with B_T transposed, [N, K] (a filter or
// weight matrix read in place, in the model's own layout). With SCALE_A, A's element (r, k) is
// multiplied by scale[k] as it is read (a squeeze-and-excite gate, compiler/gemm_fold.py).
// M, N, K and the bounds are #defines: a unit per GEMM, as the generated kernels are per shape.
// IDX is int where every index fits in 31 bits (the backend checks), else long long. AB_T, C_T
// and SCALE_T are float, or half: float16 storage (a relaxed model's temporaries and its weights
// stored so), widened as it is read and rounded to nearest even as it is stored by
// nn_half_to_float / nn_float_to_half (the CUDA renderer's prelude, before this text); the sums
// are float32 (fmaf: the same bits on the GPU and in the host harness, tests/cuda_host).
//
// Tiles: a block of 256 threads computes a TS x TS tile of C, walking K in steps of TS: the block
// loads a TS x TS tile of A and of B into shared memory (each global element once, neighbouring
// threads reading neighbouring addresses), meets at a barrier, and each thread adds TS products
// to WPT rows of its column (a row of the A tile is one broadcast read, a row of the B tile one
// bank each; the tiles padded a column against bank conflicts). Elements past M, N or K load as
// zeros. A 1-D grid of ceil(M / TS) * ceil(N / TS) blocks, the tiles of a row of C neighbours.
#include "gemm_types.h"
#define TYPE_float float
#define TYPE_half unsigned short
#define TYPE_(t) TYPE_##t
#define TYPE(t) TYPE_(t)
#define LOAD_float(p, i) ((p)[i])
#define LOAD_half(p, i) nn_half_to_float((p)[i])
#define LOAD_(t, p, i) LOAD_##t(p, i)
#define LOAD(t, p, i) LOAD_(t, p, i)
#define STORE_float(p, i, v) ((p)[i] = (v))
#define STORE_half(p, i, v) ((p)[i] = nn_float_to_half(v))
#define STORE_(t, p, i, v) STORE_##t(p, i, v)
#define STORE(t, p, i, v) STORE_(t, p, i, v)

#define THEN_ROW N
#include "then.h"

#ifdef SCALE_A
#define SCALE_PARAM , const TYPE(SCALE_T)* __restrict__ scale
#define SCALED(v, k) ((v) * LOAD(SCALE_T, scale, k))
#else
#define SCALE_PARAM
#define SCALED(v, k) (v)
#endif

__device__ __forceinline__ float nn_clamped(float v, const float lo, const float hi) {
    v = v < lo ? lo : v;
    return v > hi ? hi : v;
}
#define BIASED(v, c) nn_clamped((v) + bias[c], LO, HI)
#ifndef EPILOGUE   // a bare GEMM with SCALE_A: C as it is
#define EPILOGUE_PARAMS
#define FINISH(v, r, c) (v)
#elif defined(RESIDUAL)
#define EPILOGUE_PARAMS , const float* __restrict__ bias, const float* __restrict__ residual
#define FINISH(v, r, c) nn_clamped(BIASED(v, c) + residual[(IDX)(r) * N + (c)], LO2, HI2)
#elif defined(THEN)
#define EPILOGUE_PARAMS , const float* __restrict__ bias THEN_PARAMS
#define FINISH(v, r, c) THEN_AT(BIASED(v, c), r, c)
#else
#define EPILOGUE_PARAMS , const float* __restrict__ bias
#define FINISH(v, r, c) BIASED(v, c)
#endif

#define TS 32
#define WPT 4
#define RTS (TS / WPT)
#define TILES_N ((N + TS - 1) / TS)

extern "C" __global__ void __launch_bounds__(256) nn_gemm_tiled(const TYPE(AB_T)* __restrict__ A,
        const TYPE(AB_T)* __restrict__ B, TYPE(C_T)* __restrict__ C EPILOGUE_PARAMS SCALE_PARAM) {
    __shared__ float As[TS][TS + 1];
    __shared__ float Bs[TS][TS + 1];
    const int tx = threadIdx.x % TS, ty = threadIdx.x / TS;
    const int tile_row = blockIdx.x / TILES_N * TS, tile_col = blockIdx.x % TILES_N * TS;
    const int col = tile_col + tx;
    float acc[WPT];
    for (int w = 0; w < WPT; ++w) acc[w] = 0.0f;
    for (int t = 0; t < K; t += TS) {
        for (int w = 0; w < WPT; ++w) {
            const int r = ty + w * RTS, arow = tile_row + r;
            As[r][tx] = (arow < M && t + tx < K) ? SCALED(LOAD(AB_T, A, (IDX)arow * K + t + tx), t + tx) : 0.0f;
#ifdef B_T
            const int bcol = tile_col + r;
            Bs[tx][r] = (bcol < N && t + tx < K) ? LOAD(AB_T, B, (IDX)bcol * K + t + tx) : 0.0f;
#else
            Bs[r][tx] = (t + r < K && col < N) ? LOAD(AB_T, B, (IDX)(t + r) * LDB + col) : 0.0f;
#endif
        }
        __syncthreads();
        for (int k = 0; k < TS; ++k) {
            const float b = Bs[k][tx];
            for (int w = 0; w < WPT; ++w) acc[w] = fmaf(As[ty + w * RTS][k], b, acc[w]);
        }
        __syncthreads();
    }
    for (int w = 0; w < WPT; ++w) {
        const int row = tile_row + ty + w * RTS;
        if (row < M && col < N) STORE(C_T, C, (IDX)row * N + col, FINISH(acc[w], row, col));
    }
}
