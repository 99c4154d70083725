// Float RESIZE_BILINEAR on NHWC for the OpenCL backend: each work-item computes VW neighbouring
// channels of one output pixel in explicit vectors from the four source pixels its output row
// and column name in the tables (ops/resize.py: each output row's two source rows and their
// weights, the same per column). The generated kernel, one output element a work-item, gathered
// its four loads across work-items on PoCL (selfie segmentation's three resizes 1.1 ms).
// The four terms are (v * wy) * wx, summed in the generated kernel's order ((0,0), (1,0), (0,1),
// (1,1): row, column), each product rounded once (no contraction), so the bits are its bits.
// The compiler specialises it per use with #defines before this text: NAME, VW (4, 8 or 16,
// which divides C), N H W C (the input), OH OW, X_T / OUT_T (the input's and output's element
// types, float or half: vectors.h's VLOAD_AS). Launch: global = N * OH * OW * (C / VW), 1-D;
// every index fits in 32 bits (checked at lowering).
#pragma OPENCL FP_CONTRACT OFF
#include "vectors.h"
#define GROUPS (C / VW)
// term (i, j): source row i, column j of the pixel, weighted by the row's and then the column's weight
#define TERM(i, j) ((VLOAD_AS(X_T, VW)(0, image + (y[i] * W + x[j]) * C) * wy[i]) * wx[j])

__kernel void NAME(__global const X_T* restrict source, __global const int* restrict rows,
                   __global const float* restrict row_weights, __global const int* restrict cols,
                   __global const float* restrict col_weights, __global OUT_T* restrict out) {
    const int g = get_global_id(0);
    if (g >= N * OH * OW * GROUPS) return;
    const int c = (g % GROUPS) * VW;
    const int pixel = g / GROUPS;
    const int ox = pixel % OW, oy = (pixel / OW) % OH, n = pixel / (OW * OH);
    const __global X_T* image = source + n * (H * W * C) + c;
    const int y[2] = {rows[2 * oy], rows[2 * oy + 1]}, x[2] = {cols[2 * ox], cols[2 * ox + 1]};
    const float wy[2] = {row_weights[2 * oy], row_weights[2 * oy + 1]};
    const float wx[2] = {col_weights[2 * ox], col_weights[2 * ox + 1]};
    VEC(VW) total = TERM(0, 0);
    total = total + TERM(1, 0);
    total = total + TERM(0, 1);
    total = total + TERM(1, 1);
    VSTORE_AS(OUT_T, VW)(total, 0, out + pixel * C + c);
}
