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
// KH KW, SH SW (strides), DH DW (dilations), PT PL (padding top, left). Launch: global =
// N * OH * OW, 1-D; every index fits in 32 bits (checked at lowering).
__kernel void NAME(__global const float* restrict x, __global float* restrict out) {
    const int pixel = get_global_id(0);
    if (pixel >= N * OH * OW) return;
    const int ox = pixel % OW, oy = (pixel / OW) % OH, n = pixel / (OW * OH);
    const int iy0 = oy * SH - PT, ix0 = ox * SW - PL;
    __global float* dst = out + pixel * (KH * KW * C);
    if (DW == 1 && iy0 >= 0 && iy0 + (KH - 1) * DH < H && ix0 >= 0 && ix0 + KW - 1 < W) {
        _Pragma("unroll") for (int ky = 0; ky < KH; ++ky) {
            const __global float* src = x + ((n * H + iy0 + ky * DH) * W + ix0) * C;
            _Pragma("unroll") for (int j = 0; j < KW * C; ++j) dst[ky * KW * C + j] = src[j];
        }
        return;
    }
    for (int ky = 0; ky < KH; ++ky) {
        const int iy = iy0 + ky * DH;
        for (int kx = 0; kx < KW; ++kx) {
            const int ix = ix0 + kx * DW;
            const bool inside = iy >= 0 && iy < H && ix >= 0 && ix < W;
            const __global float* src = x + ((n * H + iy) * W + ix) * C;
            for (int c = 0; c < C; ++c) dst[(ky * KW + kx) * C + c] = inside ? src[c] : 0.0f;
        }
    }
}
