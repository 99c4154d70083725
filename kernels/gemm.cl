// Tiled GEMM for the OpenCL backend: C[M,N] = A[M,K] * B[K,N], row-major float32.
// Each work-group computes a TILE x TILE block of C from TILE x TILE tiles of A and B staged in
// local memory; each work-item accumulates one element. Launch: global = (ceil(N/TILE)*TILE,
// ceil(M/TILE)*TILE), local = (TILE, TILE).
#define TILE 16

__kernel void nn_gemm(__global const float* restrict A, __global const float* restrict B,
                      __global float* restrict C, const int M, const int N, const int K) {
    __local float As[TILE][TILE];
    __local float Bs[TILE][TILE + 1];
    const int col = get_global_id(0), row = get_global_id(1);
    const int lc = get_local_id(0), lr = get_local_id(1);
    float acc = 0.0f;
    for (int t = 0; t < K; t += TILE) {
        As[lr][lc] = (row < M && t + lc < K) ? A[(long)row * K + t + lc] : 0.0f;
        Bs[lr][lc] = (t + lr < K && col < N) ? B[(long)(t + lr) * N + col] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TILE; ++k) acc += As[lr][k] * Bs[k][lc];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < M && col < N) C[(long)row * N + col] = acc;
}
