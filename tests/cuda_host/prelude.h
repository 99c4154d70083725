// The CUDA built-ins the generated kernels use, as host C++: included before a CUDA-dialect
// translation unit so that g++ compiles it unchanged (see host_backend.py). A kernel runs as
// one call per thread. A unit without shared memory or block barriers runs every thread in
// turn (nnh_grid); one with them runs a block's threads together, as fibers that meet at
// __syncthreads (nnh_grid_threads). Kernels using atomics, warp shuffles or dynamic shared
// memory are refused before compiling and reported as skipped.
#include <math.h>     // C++ <math.h>: float overloads of exp, floor, fmax, ... as CUDA has them
#include <stdint.h>
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

// A block's threads as fibers on the launching thread. Each runs until it reaches __syncthreads
// or returns; a round resumes every fiber still in the kernel once, so a barrier opens when every
// thread that has not returned reached it, as a GPU counts exited threads as arrived. With a
// block's threads as OS threads each barrier cost milliseconds of wake-ups (a kernel of 1,024
// blocks and 8 barriers: 38 s). On x86-64 a switch saves the callee-saved registers, the SSE and
// x87 control words and the stack pointer (nnh_switch, below): that kernel takes 0.1 s.
// Elsewhere, or with NNH_UCONTEXT, ucontext's swapcontext does, with a system call for the
// signal mask each way: 1.2-1.5 s.
#if defined(__x86_64__) && !defined(NNH_UCONTEXT)
// nnh_switch(&from, to): pushes what the callee must keep, stores the stack pointer in `from`,
// and pops the same from `to`'s stack, returning where that fiber called it (or to its entry).
extern "C" void nnh_switch(void** from, void* to);
__asm__(".text\n.p2align 4\n.type nnh_switch,@function\nnnh_switch:\n"
        "    pushq %rbp\n    pushq %rbx\n    pushq %r12\n    pushq %r13\n    pushq %r14\n    pushq %r15\n"
        "    subq $8, %rsp\n    stmxcsr (%rsp)\n    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n    movq %rsi, %rsp\n"
        "    ldmxcsr (%rsp)\n    fldcw 4(%rsp)\n    addq $8, %rsp\n"
        "    popq %r15\n    popq %r14\n    popq %r13\n    popq %r12\n    popq %rbx\n    popq %rbp\n"
        "    ret\n.size nnh_switch, .-nnh_switch\n");
struct nnh_context { void* sp = nullptr; };
static inline void nnh_swap(nnh_context* from, nnh_context* to) { nnh_switch(&from->sp, to->sp); }
// A stack that nnh_switch enters at `entry`: zeros for the registers, this thread's control
// words, and `entry` as the return address with the stack aligned as at a call.
static void nnh_start(nnh_context* c, char* stack, size_t size, nnh_context*, void (*entry)()) {
    uint64_t* s = reinterpret_cast<uint64_t*>(reinterpret_cast<uintptr_t>(stack + size) & ~uintptr_t(15));
    *--s = 0;                                    // entry never returns
    *--s = reinterpret_cast<uint64_t>(entry);
    for (int r = 0; r < 6; ++r) *--s = 0;
    --s;
    __asm__("stmxcsr %0" : "=m"(reinterpret_cast<uint32_t*>(s)[0]));
    __asm__("fnstcw %0" : "=m"(reinterpret_cast<uint16_t*>(s)[2]));
    c->sp = s;
}
#else
struct nnh_context { ucontext_t uc; };
static inline void nnh_swap(nnh_context* from, nnh_context* to) { swapcontext(&from->uc, &to->uc); }
static void nnh_start(nnh_context* c, char* stack, size_t size, nnh_context* back, void (*entry)()) {
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = stack;
    c->uc.uc_stack.ss_size = size;
    c->uc.uc_link = &back->uc;
    makecontext(&c->uc, entry, 0);
}
#endif

struct nnh_fibers {
    nnh_context main;
    std::vector<nnh_context> ctx;
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
    nnh_swap(&f->ctx[f->current], &f->main);
}
#define __shared__ static

template <class... P>
static void nnh_call(nnh_fibers* f) {
    nnh_thread(reinterpret_cast<void (*)(P...)>(f->kernel), f->args, std::index_sequence_for<P...>{});
}

static void nnh_fiber_entry() {
    nnh_fibers* f = nnh_active;
    f->call(f);
    f->done[f->current] = 1;
    nnh_swap(&f->ctx[f->current], &f->main);   // back to the launcher for good
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
            nnh_start(&f.ctx[t], f.stacks.get() + NNH_STACK * t, NNH_STACK, &f.main, nnh_fiber_entry);
            f.done[t] = 0;
        }
        for (unsigned int running = block; running;) {
            running = 0;
            for (unsigned int t = 0; t < block; ++t) {
                if (f.done[t]) continue;
                f.current = t;
                threadIdx = {t, 0, 0};
                nnh_swap(&f.main, &f.ctx[t]);
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
