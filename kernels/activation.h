// CLAMP_ACTIVATION(n, v): a vector of n lanes clamped to [LO, HI] in place where the compiler
// defined LO and HI (a fused activation), else left as it is. It compares, so NaN stays NaN.
// A template takes it with #include "activation.h", after vectors.h.
#ifdef LO
#define CLAMP_ACTIVATION(n, v) do { \
        v = select(v, (VEC(n))(LO), (IVEC(n))(v < (VEC(n))(LO))); \
        v = select(v, (VEC(n))(HI), (IVEC(n))(v > (VEC(n))(HI))); \
    } while (0)
#else
#define CLAMP_ACTIVATION(n, v) do { } while (0)
#endif
