// A folded elementwise kernel (compiler/render_epilogue.py) for a template whose rows are a
// pixel's C channels: THEN_VEC(n, y, r, c) passes y, n lanes of row r from column c, to the
// kernel's vector function (defined before the template's text, with THEN). Without THEN,
// THEN_PARAMS adds no parameters. A template takes it with #include "then.h".
#ifdef THEN
#define THEN_VEC_(n, y, r, c) nn_then_v##n(y, (r) * C + (c), r, c THEN_ARGS)
#define THEN_VEC(n, y, r, c) THEN_VEC_(n, y, r, c)
#else
#define THEN_PARAMS
#endif
