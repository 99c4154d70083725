// GEMM for the OpenCL backend: C[M,N] = A[M,K] * B[K,N], row-major float32.
// Two schedules: the backend picks nn_gemm on GPUs and nn_gemm_vec on CPU devices.
#define ROWS 8

// GPUs. Each work-item computes ROWS consecutive rows of one column: neighbouring work-items
// read neighbouring B elements (coalesced) and every B value loaded is reused ROWS times from
// registers. Launch: global = (N, ceil(M / ROWS)).
__kernel void nn_gemm(__global const float* restrict A, __global const float* restrict B,
                      __global float* restrict C, const int M, const int N, const int K) {
    const int col = get_global_id(0), row = get_global_id(1) * ROWS;
    if (col >= N) return;
    float acc[ROWS];
    for (int r = 0; r < ROWS; ++r) acc[r] = 0.0f;
    const int rows = min(ROWS, M - row);
    if (rows == ROWS) {
        for (int k = 0; k < K; ++k) {
            const float b = B[(long)k * N + col];
            for (int r = 0; r < ROWS; ++r) acc[r] += A[(long)(row + r) * K + k] * b;
        }
    } else {
        for (int k = 0; k < K; ++k) {
            const float b = B[(long)k * N + col];
            for (int r = 0; r < rows; ++r) acc[r] += A[(long)(row + r) * K + k] * b;
        }
    }
    for (int r = 0; r < rows; ++r) C[(long)(row + r) * N + col] = acc[r];
}

// CPU devices (PoCL): a register-blocked micro-kernel in explicit vectors. Each work-item
// computes ROWS rows by VW columns (VW 8 or 16, defined by the backend before this text):
// one vector load of B and ROWS broadcast loads of A feed ROWS vector multiply-adds. PoCL's
// implicit vectorization across work-items would gather the A loads instead (3-8x slower).
// Columns past the last whole vector take the scalar path. Launch: global = (ceil(N / VW),
// ceil(M / ROWS)).
#ifdef VW
#define VEC_(n) float##n
#define VEC(n) VEC_(n)
#define VLOAD_(n) vload##n
#define VLOAD(n) VLOAD_(n)
#define VSTORE_(n) vstore##n
#define VSTORE(n) VSTORE_(n)
__kernel void nn_gemm_vec(__global const float* restrict A, __global const float* restrict B,
                          __global float* restrict C, const int M, const int N, const int K) {
    const int col = get_global_id(0) * VW, row = get_global_id(1) * ROWS;
    if (col >= N || row >= M) return;
    const int rows = min(ROWS, M - row);
    if (col + VW <= N && rows == ROWS) {
        VEC(VW) acc[ROWS];
        for (int r = 0; r < ROWS; ++r) acc[r] = (VEC(VW))(0.0f);
        const __global float* a = A + (long)row * K;
        for (int k = 0; k < K; ++k) {
            const VEC(VW) b = VLOAD(VW)(0, B + (long)k * N + col);
            for (int r = 0; r < ROWS; ++r) acc[r] = fma((VEC(VW))(a[(long)r * K + k]), b, acc[r]);
        }
        for (int r = 0; r < ROWS; ++r) VSTORE(VW)(acc[r], 0, C + (long)(row + r) * N + col);
        return;
    }
    for (int c = col; c < min(col + VW, N); ++c) {
        for (int r = 0; r < rows; ++r) {
            float s = 0.0f;
            for (int k = 0; k < K; ++k) s = fma(A[(long)(row + r) * K + k], B[(long)k * N + c], s);
            C[(long)(row + r) * N + c] = s;
        }
    }
}
#endif
