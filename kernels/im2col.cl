// Float im2col for the OpenCL backend's GEMM convolutions: the patch matrix
// [N * OH * OW, KH * KW * C] of an NHWC input, row (n, oy, ox), column (ky, kx, c), 0 in the
// padding. One work-item per output pixel writes its row: a window wholly inside the image
// (undilated along W) copies KH spans of KW * C neighbouring floats, unrolled; a window across
// an edge copies tap by tap, zeros for the taps outside. The generated kernel took one
// work-item per element, with three integer divisions and a masked gather each (600 us for
// MobileNet v2's 224x224x3 stem on PoCL); one work-item per kernel row of a patch took 100 us
// for MobileNet v3's stem, this 47 us.
// The values are copied, so the matrix is the generated kernel's, bit for bit.
// The compiler specialises it per layer with #defines before this text: NAME, N H W C, OH OW,
// KH KW, SH SW (strides), DH DW (dilations), PT PL (padding top, left), X_T / OUT_T (the input's
// and the matrix's element types, float or half: vectors.h's LOAD_AS). Launch: global =
// N * OH * OW, 1-D; every index fits in 32 bits (checked at lowering).
#include "vectors.h"
// element j of the input from `src` into element i of the matrix from `dst`: its bits where the
// two types are one (float16 to float16 unconverted: PoCL's unrolled software conversions took
// seconds to compile), else converted (a float32 input's float16 matrix: rounded to nearest even)
#define BITS_float uint
#define BITS_half ushort
#define COPY_float_float(i, dst, j, src) ((dst)[i] = (src)[j])
#define COPY_half_half(i, dst, j, src) (((__global ushort*)(dst))[i] = ((const __global ushort*)(src))[j])
#define COPY_float_half(i, dst, j, src) STORE_AS(half, LOAD_AS(float, j, src), i, dst)
#define COPY_half_float(i, dst, j, src) STORE_AS(float, LOAD_AS(half, j, src), i, dst)
#define COPY_(a, b) COPY_##a##_##b
#define COPY_AS(a, b) COPY_(a, b)
#define COPY(i, dst, j, src) COPY_AS(X_T, OUT_T)(i, dst, j, src)
#define BITS_(t) BITS_##t
#define BITS(t) BITS_(t)
// element i of the matrix from `dst` 0 (+0.0: no bit set, either type)
#define ZERO(i, dst) (((__global BITS(OUT_T)*)(dst))[i] = 0)

__kernel void NAME(__global const X_T* restrict x, __global OUT_T* restrict out) {
    const int pixel = get_global_id(0);
    if (pixel >= N * OH * OW) return;
    const int ox = pixel % OW, oy = (pixel / OW) % OH, n = pixel / (OW * OH);
    const int iy0 = oy * SH - PT, ix0 = ox * SW - PL;
    __global OUT_T* dst = out + pixel * (KH * KW * C);
    if (DW == 1 && iy0 >= 0 && iy0 + (KH - 1) * DH < H && ix0 >= 0 && ix0 + KW - 1 < W) {
        _Pragma("unroll") for (int ky = 0; ky < KH; ++ky) {
            const __global X_T* src = x + ((n * H + iy0 + ky * DH) * W + ix0) * C;
            _Pragma("unroll") for (int j = 0; j < KW * C; ++j) COPY(ky * KW * C + j, dst, j, src);
        }
        return;
    }
    for (int ky = 0; ky < KH; ++ky) {
        const int iy = iy0 + ky * DH;
        for (int kx = 0; kx < KW; ++kx) {
            const int ix = ix0 + kx * DW;
            const bool inside = iy >= 0 && iy < H && ix >= 0 && ix < W;
            const __global X_T* src = x + ((n * H + iy) * W + ix) * C;
            for (int c = 0; c < C; ++c) {
                if (inside)
                    COPY((ky * KW + kx) * C + c, dst, c, src);
                else
                    ZERO((ky * KW + kx) * C + c, dst);
            }
        }
    }
}
