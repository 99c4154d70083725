// KAHAN(n, acc, comp, value): one step of a compensated (Kahan) sum of vectors of n lanes, as the
// generated kernels sum floats: value less the running correction comp added to acc, the new
// correction the part of it the addition lost; a correction that is not finite is dropped (past
// an inf the sum keeps it, not NaN). A template takes it with #include "kahan.h", after vectors.h.
#define KAHAN(n, acc, comp, value) do { \
        const VEC(n) y_ = (value) - (comp); \
        const VEC(n) s_ = (acc) + y_; \
        comp = (s_ - (acc)) - y_; \
        comp = select((VEC(n))(0.0f), comp, isfinite(comp)); \
        acc = s_; \
    } while (0)
