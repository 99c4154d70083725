// The CUDA built-ins the generated kernels use, as host C++: included before a CUDA-dialect
// translation unit so that g++ compiles it unchanged (see host_backend.py). A kernel runs as
// one call per thread; the launcher below loops over blockIdx and threadIdx.
// Kernels using shared memory, barriers or atomics are refused before compiling (they need
// threads that run together) and reported as skipped.
#include <math.h>     // C++ <math.h>: float overloads of exp, floor, fmax, ... as CUDA has them
#include <string.h>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(threads)   // the launcher runs the block size it is given

struct uint3 { unsigned int x, y, z; };
struct dim3 { unsigned int x, y, z; };

// thread_local: two plans may launch on two threads at once
static thread_local uint3 blockIdx, threadIdx;
static thread_local dim3 blockDim, gridDim;

// Bit casts (CUDA's intrinsics are exact reinterpretations).
static inline float __uint_as_float(unsigned int u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned int __float_as_uint(float f) { unsigned int u; memcpy(&u, &f, 4); return u; }
static inline float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }
static inline int __float_as_int(float f) { int u; memcpy(&u, &f, 4); return u; }

// Round-to-nearest float arithmetic that CUDA never contracts into an FMA; the units are built
// with -ffp-contract=off, so plain operators round each operation too.
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }

template <class... P, size_t... I>
static inline void nnh_thread(void (*kernel)(P...), void* const* args, std::index_sequence<I...>) {
    kernel(static_cast<P>(args[I])...);
}

// The grid: every block, every thread of it, in order (threads never meet: see above).
template <class... P>
static void nnh_grid(void (*kernel)(P...), void* const* args, unsigned int grid, unsigned int block) {
    blockDim = {block, 1, 1};
    gridDim = {grid, 1, 1};
    for (unsigned int b = 0; b < grid; ++b) {
        blockIdx = {b, 0, 0};
        for (unsigned int t = 0; t < block; ++t) {
            threadIdx = {t, 0, 0};
            nnh_thread(kernel, args, std::index_sequence_for<P...>{});
        }
    }
}

#define NNH_LAUNCHER(name) \
    extern "C" __attribute__((visibility("default"))) \
    void nnh_launch_##name(void* const* args, unsigned int grid, unsigned int block) { \
        nnh_grid(name, args, grid, block); }
