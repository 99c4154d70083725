// Float im2col for the OpenCL backend's GEMM convolutions: the patch matrix
// [N * OH * OW, KH * KW * C] of an NHWC input, row (n, oy, ox), column (ky, kx, c), 0 in the
// padding. One work-item per (output pixel, ky) copies its kernel row's KW taps of C
// neighbouring floats each; the generated kernel took one work-item per element, with three
// integer divisions and a masked gather each (600 us for MobileNet v2's 224x224x3 stem on PoCL).
// The values are copied, so the matrix is the generated kernel's, bit for bit.
// The compiler specialises it per layer with #defines before this text: NAME, N H W C, OH OW,
// KH KW, SH SW (strides), DH DW (dilations), PT PL (padding top, left). Launch: global =
// N * OH * OW * KH, 1-D; every index fits in 32 bits (checked at lowering).
__kernel void NAME(__global const float* restrict x, __global float* restrict out) {
    const int g = get_global_id(0);
    if (g >= N * OH * OW * KH) return;
    const int ky = g % KH, pixel = g / KH;
    const int ox = pixel % OW, oy = (pixel / OW) % OH, n = pixel / (OW * OH);
    const int iy = oy * SH - PT + ky * DH, ix0 = ox * SW - PL;
    __global float* dst = out + pixel * (KH * KW * C) + ky * (KW * C);
    for (int kx = 0; kx < KW; ++kx) {
        const int ix = ix0 + kx * DW;
        if (iy >= 0 && iy < H && ix >= 0 && ix < W) {
            const __global float* src = x + ((n * H + iy) * W + ix) * C;
            for (int c = 0; c < C; ++c) dst[kx * C + c] = src[c];
        } else {
            for (int c = 0; c < C; ++c) dst[kx * C + c] = 0.0f;
        }
    }
}
