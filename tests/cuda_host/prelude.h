// The CUDA built-ins the generated kernels use, as host C++: included before a CUDA-dialect
// translation unit so that g++ compiles it unchanged (see host_backend.py). A kernel runs as
// one call per thread. A unit without shared memory or block barriers runs every thread in
// turn (nnh_grid); one with them runs a block's threads as real threads that meet at
// __syncthreads (nnh_grid_threads). Kernels using atomics, warp shuffles or dynamic shared
// memory are refused before compiling and reported as skipped.
#include <math.h>     // C++ <math.h>: float overloads of exp, floor, fmax, ... as CUDA has them
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
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

// A block barrier that threads leaving the kernel drop out of, as a GPU counts exited threads
// as arrived: __syncthreads() after some threads returned (past the end of the data) still meets.
struct nnh_barrier {
    std::mutex m;
    std::condition_variable cv;
    unsigned int expected = 0, arrived = 0, phase = 0;
    void release() { arrived = 0; ++phase; cv.notify_all(); }
    void wait() {
        std::unique_lock<std::mutex> lock(m);
        unsigned int seen = phase;
        if (++arrived >= expected) {
            release();
        } else if (!cv.wait_for(lock, std::chrono::seconds(60), [&] { return phase != seen; })) {
            // threads of a block that never meet (a barrier some of them skip): fail, never hang
            fprintf(stderr, "nnh: a block barrier waited 60 s for threads that never came\n");
            abort();
        }
    }
    void drop() {
        std::lock_guard<std::mutex> lock(m);
        if (--expected > 0 && arrived >= expected) release();
    }
    void reset(unsigned int n) { std::lock_guard<std::mutex> lock(m); expected = n; arrived = 0; }
};

// One threaded launch at a time per unit: a kernel's __shared__ arrays are its function's statics.
static std::mutex nnh_threaded_launch;
static nnh_barrier* nnh_block_barrier;
static inline void __syncthreads() { nnh_block_barrier->wait(); }
#define __shared__ static

// The grid with a block's threads running together: `block` threads each walk the blocks in
// order; a block ends when all of its threads have, so its shared memory is the next block's.
template <class... P>
static void nnh_grid_threads(void (*kernel)(P...), void* const* args, unsigned int grid, unsigned int block) {
    std::lock_guard<std::mutex> one(nnh_threaded_launch);
    nnh_barrier inside, between;
    inside.reset(block);
    between.reset(block);
    nnh_block_barrier = &inside;
    std::vector<std::thread> threads;
    for (unsigned int t = 0; t < block; ++t) {
        threads.emplace_back([&, t] {
            blockDim = {block, 1, 1};
            gridDim = {grid, 1, 1};
            for (unsigned int b = 0; b < grid; ++b) {
                blockIdx = {b, 0, 0};
                threadIdx = {t, 0, 0};
                nnh_thread(kernel, args, std::index_sequence_for<P...>{});
                inside.drop();       // the rest of the block no longer waits for this thread
                between.wait();      // every thread is done with block b
                if (t == 0) inside.reset(block);
                between.wait();      // ... and the reset is seen before block b + 1 starts
            }
        });
    }
    for (auto& thread : threads) thread.join();
}

#define NNH_LAUNCHER(name) \
    extern "C" __attribute__((visibility("default"))) \
    void nnh_launch_##name(void* const* args, unsigned int grid, unsigned int block) { \
        nnh_grid(name, args, grid, block); }

#define NNH_LAUNCHER_THREADS(name) \
    extern "C" __attribute__((visibility("default"))) \
    void nnh_launch_##name(void* const* args, unsigned int grid, unsigned int block) { \
        nnh_grid_threads(name, args, grid, block); }
