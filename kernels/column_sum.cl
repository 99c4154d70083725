// Float MEAN and REDUCE_SUM over a run of neighbouring axes with axes after it, for the OpenCL
// backend's CPU devices: the input seen as [B, R, C] (the axes before the run, the run, the axes
// after it), each work-item sums VW neighbouring columns of one b over the R rows in explicit
// vectors. One work-item per output walking a strided slice in scalars (the generated kernel)
// is a chain of dependent adds PoCL does not vectorise across work-items: 9x slower on a
// 112x112x32 global average pool. Each lane is the generated kernel's compensated (Kahan) sum
// of its output, the same operations in the same order (a correction that is not finite
// dropped, as there), and MEAN divides by the same count.
// The compiler specialises it per use with #defines before this text: NAME, VW (4, 8 or 16,
// which divides C), B R C, and COUNT (a float literal) for MEAN. Launch: global = B * (C / VW),
// 1-D; every index fits in 32 bits (checked at lowering).
#include "vectors.h"
#define GROUPS (C / VW)

__kernel void NAME(__global const float* restrict x, __global float* restrict out) {
    const int g = get_global_id(0);
    if (g >= B * GROUPS) return;
    const int c = (g % GROUPS) * VW, b = g / GROUPS;
    const __global float* column = x + b * R * C + c;
    VEC(VW) acc = (VEC(VW))(0.0f), comp = (VEC(VW))(0.0f);
    for (int r = 0; r < R; ++r) {
        const VEC(VW) y = VLOAD(VW)(0, column + r * C) - comp;
        const VEC(VW) s = acc + y;
        comp = (s - acc) - y;
        comp = select((VEC(VW))(0.0f), comp, isfinite(comp));   // past an inf: keep it, not NaN
        acc = s;
    }
#ifdef COUNT
    acc = acc / COUNT;
#endif
    VSTORE(VW)(acc, 0, out + b * C + c);
}
