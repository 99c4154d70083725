// Float MEAN and REDUCE_SUM over a run of neighbouring axes with axes after it, for the OpenCL
// backend's CPU devices: the input seen as [B, R, C] (the axes before the run, the run, the axes
// after it), each work-item sums VW neighbouring columns of one b over the R rows in explicit
// vectors. One work-item per output walking a strided slice in scalars (the generated kernel)
// is a chain of dependent adds PoCL does not vectorise across work-items: 9x slower on a
// 112x112x32 global average pool. Each lane is the generated kernel's compensated (Kahan) sum
// of its output, the same operations in the same order (a correction that is not finite
// dropped, as there), and MEAN divides by the same count.
// A work-item sums CV such vectors side by side, their chains of dependent adds interleaved (a
// chain alone leaves the core waiting on each add's latency: MobileNet v3's squeeze-and-excite
// means of 15 vectors over 196 rows took 20 us as 15 work-items one after another); each lane's
// operations are unchanged.
// The compiler specialises it per use with #defines before this text: NAME, VW (4, 8 or 16,
// which divides C), CV (VW * CV divides C), B R C, and COUNT (a float literal) for MEAN. Launch:
// global = B * (C / (VW * CV)), 1-D; every index fits in 32 bits (checked at lowering).
#include "vectors.h"
#include "kahan.h"
#define GROUPS (C / (VW * CV))
#define UNROLL _Pragma("unroll")   // PoCL keeps unrolled accumulators in registers (see gemm.cl)

__kernel void NAME(__global const float* restrict x, __global float* restrict out) {
    const int g = get_global_id(0);
    if (g >= B * GROUPS) return;
    const int c = (g % GROUPS) * (VW * CV), b = g / GROUPS;
    const __global float* column = x + b * R * C + c;
    VEC(VW) acc[CV], comp[CV];
    UNROLL for (int v = 0; v < CV; ++v) acc[v] = comp[v] = (VEC(VW))(0.0f);
    for (int r = 0; r < R; ++r) {
        UNROLL for (int v = 0; v < CV; ++v) KAHAN(VW, acc[v], comp[v], VLOAD(VW)(0, column + r * C + v * VW));
    }
    UNROLL for (int v = 0; v < CV; ++v) {
#ifdef COUNT
        acc[v] = acc[v] / COUNT;
#endif
        VSTORE(VW)(acc[v], 0, out + b * C + c + v * VW);
    }
}
