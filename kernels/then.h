// A folded elementwise kernel (compiler/render_epilogue.py), called as a kernel stores: rows of
// THEN_ROW elements (C, a pixel's channels, unless the kernel defines THEN_ROW first: gemm.cl's
// rows of N). THEN_AT(y, r, c) passes y, the element of row r at column c, to the kernel's
// function nn_then; THEN_VEC(n, y, r, c), n lanes of row r from column c, to nn_then_vn (both
// defined before the kernel's text, with THEN). Without THEN, THEN_PARAMS and THEN_ARGS add none.
// A kernel takes it with #include "then.h".
#ifndef THEN_ROW
#define THEN_ROW C
#endif
#ifdef THEN
#define THEN_AT(y, r, c) nn_then(y, (long)(r) * THEN_ROW + (c), r, c THEN_ARGS)
#define THEN_VEC_(n, y, r, c) nn_then_v##n(y, (long)(r) * THEN_ROW + (c), r, c THEN_ARGS)
#define THEN_VEC(n, y, r, c) THEN_VEC_(n, y, r, c)
#else
#define THEN_PARAMS
#define THEN_ARGS
#endif
