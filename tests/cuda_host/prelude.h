// The CUDA built-ins the generated kernels use, as host C++: included before a CUDA-dialect
// translation unit so that g++ compiles it unchanged (see host_backend.py). A kernel runs as
// one call per thread. A unit without shared memory or block barriers runs every thread in
// turn (nnh_grid); one with them runs a block's threads together, as fibers that meet at
// __syncthreads (nnh_grid_threads). Kernels using atomics, warp shuffles or dynamic shared
// memory are refused before compiling and reported as skipped.
#include <math.h>     // C++ <math.h>: float overloads of exp, floor, fmax, ... as CUDA has them
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mutex>
#include <memory>
#include <ucontext.h>
#include <utility>
#include <vector>

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

// The grid: every block, every thread of it, in order (for units whose threads never meet).
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

// A block's threads as fibers (ucontext) on the launching thread. Each runs until it reaches
// __syncthreads or returns; a round resumes every fiber still in the kernel once, so a barrier
// opens when every thread that has not returned reached it, as a GPU counts exited threads as
// arrived. A switch costs well under a microsecond; with a block's threads as OS threads each
// barrier cost milliseconds of wake-ups (a tiled GEMM of 1,024 blocks: 38 s).
struct nnh_fibers {
    ucontext_t main;
    std::vector<ucontext_t> ctx;
    std::vector<unsigned char> done;
    std::unique_ptr<char[]> stacks;
    unsigned int current = 0;
    void (*kernel)() = nullptr;   // the kernel, called through `call` with its own type
    void* const* args = nullptr;
    void (*call)(nnh_fibers*) = nullptr;
};
static constexpr size_t NNH_STACK = 128 * 1024;   // a fiber's stack: a kernel's locals and calls
static thread_local nnh_fibers* nnh_active;

static inline void __syncthreads() {
    nnh_fibers* f = nnh_active;
    swapcontext(&f->ctx[f->current], &f->main);
}
#define __shared__ static

template <class... P>
static void nnh_call(nnh_fibers* f) {
    nnh_thread(reinterpret_cast<void (*)(P...)>(f->kernel), f->args, std::index_sequence_for<P...>{});
}

static void nnh_fiber_entry() {
    nnh_fibers* f = nnh_active;
    f->call(f);
    f->done[f->current] = 1;   // and back to the launcher through uc_link
}

// One threaded launch at a time per unit: a kernel's __shared__ arrays are its function's statics.
static std::mutex nnh_threaded_launch;

// The grid with a block's threads running together, block after block: a block ends when all
// of its threads have, so its shared memory is the next block's.
template <class... P>
static void nnh_grid_threads(void (*kernel)(P...), void* const* args, unsigned int grid, unsigned int block) {
    std::lock_guard<std::mutex> one(nnh_threaded_launch);
    nnh_fibers f;
    f.kernel = reinterpret_cast<void (*)()>(kernel);
    f.args = args;
    f.call = nnh_call<P...>;
    f.ctx.resize(block);
    f.done.resize(block);
    f.stacks.reset(new char[NNH_STACK * block]);
    nnh_fibers* outer = nnh_active;
    nnh_active = &f;
    blockDim = {block, 1, 1};
    gridDim = {grid, 1, 1};
    for (unsigned int b = 0; b < grid; ++b) {
        blockIdx = {b, 0, 0};
        for (unsigned int t = 0; t < block; ++t) {
            getcontext(&f.ctx[t]);
            f.ctx[t].uc_stack.ss_sp = f.stacks.get() + NNH_STACK * t;
            f.ctx[t].uc_stack.ss_size = NNH_STACK;
            f.ctx[t].uc_link = &f.main;
            makecontext(&f.ctx[t], nnh_fiber_entry, 0);
            f.done[t] = 0;
        }
        for (unsigned int running = block; running;) {
            running = 0;
            for (unsigned int t = 0; t < block; ++t) {
                if (f.done[t]) continue;
                f.current = t;
                threadIdx = {t, 0, 0};
                swapcontext(&f.main, &f.ctx[t]);
                running += !f.done[t];
            }
        }
    }
    nnh_active = outer;
}

#define NNH_LAUNCHER(name) \
    extern "C" __attribute__((visibility("default"))) \
    void nnh_launch_##name(void* const* args, unsigned int grid, unsigned int block) { \
        nnh_grid(name, args, grid, block); }

#define NNH_LAUNCHER_THREADS(name) \
    extern "C" __attribute__((visibility("default"))) \
    void nnh_launch_##name(void* const* args, unsigned int grid, unsigned int block) { \
        nnh_grid_threads(name, args, grid, block); }
