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
// A buffer's element type T is float, or half where the compiler stores a relaxed model's float32
// temporary as float16 (compiler/relaxed_storage.py; the #defines compiler/library.py's
// ELEMENT_TYPES names): VLOAD_AS(T, n) / VSTORE_AS(T, n) are vloadn / vstoren for float and
// vload_halfn / vstore_halfn_rte for half, LOAD_AS(T, i, p) / STORE_AS(T, v, i, p) the element i
// of p. Half is storage only, widened as it is read and rounded to nearest even as it is stored
// (the generated kernels' vload_half / vstore_half_rte), so the arithmetic stays float32 and
// needs no cl_khr_fp16: these are core OpenCL.
#define VLOAD_float(n) VLOAD(n)
#define VSTORE_float(n) VSTORE(n)
#define VLOAD_half(n) VLOAD_HALF_(n)
#define VLOAD_HALF_(n) vload_half##n
#define VSTORE_half(n) VSTORE_HALF_(n)
#define VSTORE_HALF_(n) vstore_half##n##_rte
#define VLOAD_AS_(t, n) VLOAD_##t(n)
#define VLOAD_AS(t, n) VLOAD_AS_(t, n)
#define VSTORE_AS_(t, n) VSTORE_##t(n)
#define VSTORE_AS(t, n) VSTORE_AS_(t, n)
#define LOAD_float(i, p) ((p)[i])
#define LOAD_half(i, p) vload_half(i, p)
#define LOAD_AS_(t, i, p) LOAD_##t(i, p)
#define LOAD_AS(t, i, p) LOAD_AS_(t, i, p)
#define STORE_float(v, i, p) ((p)[i] = (v))
#define STORE_half(v, i, p) vstore_half_rte(v, i, p)
#define STORE_AS_(t, v, i, p) STORE_##t(v, i, p)
#define STORE_AS(t, v, i, p) STORE_AS_(t, v, i, p)
