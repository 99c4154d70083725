// What the GEMM templates (gemm.cl, gemm.cu) take unless the backend defines it first: the
// element types of A and B (AB_T), C (C_T) and A's column scale (SCALE_T), float or half, and
// B's row stride LDB, N unless a packed B's rows are padded.
#ifndef AB_T
#define AB_T float
#endif
#ifndef C_T
#define C_T float
#endif
#ifndef SCALE_T
#define SCALE_T float
#endif
#ifndef LDB
#define LDB N
#endif
