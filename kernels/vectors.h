// Vector spellings the hand-written OpenCL kernels share, for a width given as a macro (VW):
// VEC(VW) is floatVW, IVEC(VW) intVW, VLOAD(VW) / VSTORE(VW) vloadVW / vstoreVW. A template
// takes them with #include "vectors.h", which kernel_template (backends/base.py) replaces by
// this text, so a unit's source, and its cache key, carry it.
#define VEC_(n) float##n
#define VEC(n) VEC_(n)
#define IVEC_(n) int##n
#define IVEC(n) IVEC_(n)
#define VLOAD_(n) vload##n
#define VLOAD(n) VLOAD_(n)
#define VSTORE_(n) vstore##n
#define VSTORE(n) VSTORE_(n)
