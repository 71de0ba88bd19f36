// cuda_emu — see cuda_emu.h: the kernel launcher (blocks in turn, threads as fibers)
// and the CUDA runtime and cuBLAS calls gentrain's sources make, on the CPU.
#include "cuda_emu.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>

#include <map>
#include <set>
#include <vector>

namespace {

[[noreturn]] void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cuda_emu: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    fflush(stdout);
    abort();
}

// ------------------------------------------------------------ memory and handles

// Device allocations by start address: a pointer is "device" when it lies inside one.
std::map<uintptr_t, size_t> g_device;
size_t g_device_used = 0;
std::set<uintptr_t> g_pinned, g_streams, g_events_all, g_handles;
cudaError_t g_last_error = cudaSuccess;

size_t device_capacity()
{
    const char *s = getenv("CUDA_EMU_DEVICE_BYTES");
    return s ? strtoull(s, nullptr, 10) : (size_t)8 << 30;
}

// The GPUs a node has (CUDA_EMU_DEVICES, default 1, at most 64): ranks on one node that
// take different indices each see a device of their own, as on a node of several GPUs.
int device_count()
{
    const char *s = getenv("CUDA_EMU_DEVICES");
    const int n = s ? atoi(s) : 1;
    return n < 1 ? 1 : n > 64 ? 64 : n;
}

// Whether [p, p + n) lies inside one device allocation.
bool is_device(const void *p, size_t n)
{
    const uintptr_t a = (uintptr_t)p;
    auto it = g_device.upper_bound(a);
    if (it == g_device.begin()) return false;
    --it;
    return a >= it->first && a + n <= it->first + it->second;
}

// Whether any byte of [p, p + n) is device memory.
bool touches_device(const void *p, size_t n)
{
    if (n == 0) return false;
    const uintptr_t a = (uintptr_t)p;
    auto it = g_device.upper_bound(a + n - 1);
    if (it == g_device.begin()) return false;
    --it;
    return it->first + it->second > a;
}

bool valid_stream(cudaStream_t s) { return s == 0 || g_streams.count((uintptr_t)s) != 0; }

struct Event {
    unsigned flags;
    bool recorded;
    double ms;
};

double now_ms()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

// ------------------------------------------------------------ the kernel launcher

constexpr size_t kStackBytes = 256 * 1024;

// Switching fibers: on x86-64 a hand-written switch of the callee-saved registers and
// the stack pointer, as fast as a call; elsewhere ucontext's swapcontext, which also
// saves the signal mask with a system call each time (correct, some 50x slower).
#if defined(__x86_64__)
#define EMU_FAST_SWITCH 1
// emu_switch(save, next): pushes the callee-saved registers, stores the stack pointer
// in *save, continues on the stack `next` (one that emu_switch saved, or a new one
// prepared by new_stack) by popping its registers and returning there.
extern "C" void emu_switch(void **save, void *next);
asm(".text\n"
    ".globl emu_switch\n"
    ".type emu_switch,@function\n"
    "emu_switch:\n"
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    ".size emu_switch,.-emu_switch\n");
#else
#define EMU_FAST_SWITCH 0
#endif

struct Fiber {
    ucontext_t ctx; // EMU_FAST_SWITCH 0
    void *sp;       // EMU_FAST_SWITCH 1: the saved stack pointer
    uint3 tid;
    int warp, lane;
    bool done;
    int waits;     // 0: runnable, 1: at the block barrier, 2: at its warp's barrier
    unsigned gen;  // the barrier generation it waits to see pass
};

struct Barrier {
    int live, arrived;
    unsigned gen;
};

struct Launch {
    emu::Config c;
    void (*body)(void *);
    void *ctx;
    uint3 block_idx;
    std::vector<Fiber> fibers;
    std::vector<Barrier> warps;
    Barrier block;
    std::vector<float> slots; // [warp][32] warp exchange values
    std::vector<unsigned char> shared;
    // Static shared arrays by declaration site (translate.pl), poisoned per block.
    std::map<const void *, std::vector<unsigned char>> statics;
    size_t static_bytes;
    const char *kernel;
    int order;      // kForward, kReverse or kShuffle
    uint64_t rng;   // kShuffle's state
    std::vector<int> perm;
    ucontext_t scheduler; // EMU_FAST_SWITCH 0
    void *scheduler_sp;   // EMU_FAST_SWITCH 1
    Fiber *cur;
};

Launch *g_launch = nullptr;

// CUDA_EMU_ORDER (cuda_emu.h): the order blocks, and a block's threads between
// barriers, run in; kAll runs every launch in the three and compares.
enum { kForward, kReverse, kShuffle, kAll };
int g_order = kForward;
uint64_t g_seed = 1;
unsigned long long g_order_launches = 0; // launches run in every order (kAll)
void order_summary()
{
    fprintf(stderr, "cuda_emu: %llu launches each run in 3 thread orders (forward, reverse, "
            "shuffle seed %llu), results the same\n", g_order_launches,
            (unsigned long long)g_seed);
}
[[maybe_unused]] const bool g_order_read = [] {
    const char *s = getenv("CUDA_EMU_ORDER");
    if (!s || !*s || strcmp(s, "forward") == 0) return true;
    if (strcmp(s, "reverse") == 0) g_order = kReverse;
    else if (strcmp(s, "all") == 0) g_order = kAll;
    else if (strncmp(s, "shuffle", 7) == 0 && (s[7] == '\0' || s[7] == ':')) g_order = kShuffle;
    else die("CUDA_EMU_ORDER=%s: not forward, reverse, shuffle[:SEED] or all", s);
    const char *seed = strchr(s, ':');
    if (seed) {
        char *end;
        g_seed = strtoull(seed + 1, &end, 10);
        if (end == seed + 1 || *end) die("CUDA_EMU_ORDER=%s: the seed is not a number", s);
    }
    if (g_order == kAll) atexit(order_summary);
    return true;
}();

// xorshift64*: the shuffle's numbers (any fixed, seeded sequence does).
uint32_t next_random(uint64_t &x)
{
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    return (uint32_t)((x * 2685821657736338717ull) >> 32);
}

// perm = 0..n-1 in the launch's order (a fresh shuffle each call for kShuffle).
void order_of(Launch &L, int n, std::vector<int> &perm)
{
    perm.resize((size_t)n);
    for (int i = 0; i < n; i++) perm[(size_t)i] = L.order == kReverse ? n - 1 - i : i;
    if (L.order == kShuffle)
        for (int i = n - 1; i > 0; i--)
            std::swap(perm[(size_t)i], perm[(size_t)(next_random(L.rng) % (uint32_t)(i + 1))]);
}
// CUDA_EMU_DRY=1: check, compute nothing. Launch configurations and cuBLAS arguments
// (extents within their allocations included) are checked as always, but no kernel
// runs, no product is computed and nothing is copied to or from device memory (copies
// down fill the host buffer with zeros); device allocations are address space that
// any host access faults on. So a program can be walked through at full size (the
// GPT-2 benchmark's 93 GiB) on a small machine: what it asks of the GPU is checked,
// what it computes is not.
const bool g_dry = [] {
    const char *s = getenv("CUDA_EMU_DRY");
    return s && strcmp(s, "1") == 0;
}();
char *g_stacks = nullptr;
size_t g_stack_count = 0;

Launch &running()
{
    if (!g_launch || !g_launch->cur) die("a device function was called outside a kernel");
    return *g_launch;
}

// From the running fiber back to the scheduler (run_block).
void to_scheduler(Fiber &f)
{
    Launch &L = *g_launch;
#if EMU_FAST_SWITCH
    emu_switch(&f.sp, L.scheduler_sp);
#else
    if (swapcontext(&f.ctx, &L.scheduler) != 0) die("swapcontext failed");
#endif
}

// From the scheduler into fiber f, until it waits or ends.
void to_fiber(Fiber &f)
{
    Launch &L = *g_launch;
    L.cur = &f;
#if EMU_FAST_SWITCH
    emu_switch(&L.scheduler_sp, f.sp);
#else
    if (swapcontext(&L.scheduler, &f.ctx) != 0) die("swapcontext failed");
#endif
    L.cur = nullptr;
}

// Releases b's waiting threads once every live thread has arrived; whether it did.
bool release_if_complete(Barrier &b)
{
    if (b.arrived == 0 || b.arrived != b.live) return false;
    b.arrived = 0;
    b.gen++;
    return true;
}

void fiber_main()
{
    Launch &L = *g_launch;
    L.body(L.ctx);
    Fiber &f = *L.cur;
    f.done = true;
    L.block.live--;
    release_if_complete(L.block); // those waiting for this thread no longer need it
    Barrier &w = L.warps[(size_t)f.warp];
    w.live--;
    if (w.arrived > 0)
        die("block (%u,%u,%u) thread (%u,%u,%u) exited while lanes of its warp wait in a "
            "warp shuffle (undefined on a GPU)", L.block_idx.x, L.block_idx.y,
            L.block_idx.z, f.tid.x, f.tid.y, f.tid.z);
#if EMU_FAST_SWITCH
    to_scheduler(f); // never resumed
    die("a finished fiber was resumed");
#endif
    // ucontext: returning resumes the scheduler (uc_link).
}

// A fresh stack for fiber f whose first emu_switch into it starts fiber_main; 16-byte
// aligned as the x86-64 ABI wants at a call (fiber_main sees a zero return address).
void new_stack(Fiber &f, char *stack, size_t bytes)
{
#if EMU_FAST_SWITCH
    void **sp = (void **)(((uintptr_t)stack + bytes) & ~(uintptr_t)15);
    *--sp = nullptr;                          // fiber_main's return address: none
    *--sp = (void *)(void (*)())fiber_main;   // where emu_switch's ret goes
    for (int i = 0; i < 6; i++) *--sp = nullptr; // rbp rbx r12 r13 r14 r15
    f.sp = sp;
#else
    if (getcontext(&f.ctx) != 0) die("getcontext failed");
    f.ctx.uc_stack.ss_sp = stack;
    f.ctx.uc_stack.ss_size = bytes;
    f.ctx.uc_link = &g_launch->scheduler;
    makecontext(&f.ctx, fiber_main, 0);
#endif
}

void wait_at(Barrier &b, int kind)
{
    Launch &L = *g_launch;
    Fiber &f = *L.cur;
    b.arrived++;
    if (release_if_complete(b)) return; // the last to arrive goes on
    f.waits = kind;
    f.gen = b.gen;
    to_scheduler(f);
}

// Runs one block to completion: each runnable fiber in turn, until all are done.
void run_block(Launch &L)
{
    const dim3 bd = L.c.block;
    const int n = (int)(bd.x * bd.y * bd.z);
    L.fibers.assign((size_t)n, Fiber());
    L.warps.assign((size_t)(n + 31) / 32, Barrier{0, 0, 0});
    L.block = Barrier{n, 0, 0};
    L.slots.assign(L.warps.size() * 32, 0.0f);
    if (!L.shared.empty()) memset(L.shared.data(), 0xff, L.shared.size()); // unset: NaN
    for (auto &st : L.statics) memset(st.second.data(), 0xff, st.second.size());
    for (int i = 0; i < n; i++) {
        Fiber &f = L.fibers[(size_t)i];
        f.tid = uint3{(unsigned)i % bd.x, (unsigned)i / bd.x % bd.y, (unsigned)i / (bd.x * bd.y)};
        f.warp = i / 32;
        f.lane = i % 32;
        L.warps[(size_t)f.warp].live++;
        new_stack(f, g_stacks + (size_t)i * kStackBytes, kStackBytes);
    }
    for (;;) {
        bool ran = false, all_done = true;
        order_of(L, n, L.perm); // the threads' order up to the next barrier
        for (int k = 0; k < n; k++) {
            Fiber &f = L.fibers[(size_t)L.perm[(size_t)k]];
            if (f.done) continue;
            all_done = false;
            if (f.waits == 1 && f.gen == L.block.gen) continue;
            if (f.waits == 2 && f.gen == L.warps[(size_t)f.warp].gen) continue;
            f.waits = 0;
            to_fiber(f);
            ran = true;
        }
        if (all_done) return;
        if (!ran)
            die("deadlock in block (%u,%u,%u): threads wait at a barrier (__syncthreads or a "
                "warp shuffle) that other live threads of the block never reach",
                L.block_idx.x, L.block_idx.y, L.block_idx.z);
    }
}

unsigned long long g_launch_count = 0;

// Every block of L's grid, in L.order.
void run_grid(Launch &L)
{
    const dim3 g = L.c.grid;
    const unsigned long long blocks = (unsigned long long)g.x * g.y * g.z;
    if (L.order == kShuffle && blocks > (1ull << 26))
        die("kernel %s: %llu blocks are too many to shuffle", L.kernel, blocks);
    std::vector<int> perm;
    if (L.order == kShuffle) order_of(L, (int)blocks, perm);
    for (unsigned long long k = 0; k < blocks; k++) {
        const unsigned long long b = L.order == kShuffle   ? (unsigned long long)perm[k]
                                     : L.order == kReverse ? blocks - 1 - k
                                                           : k;
        L.block_idx = uint3{(unsigned)(b % g.x), (unsigned)(b / g.x % g.y),
                            (unsigned)(b / ((unsigned long long)g.x * g.y))};
        run_block(L);
    }
}

// Where atomicAdd added during a kAll launch, and the sum of the magnitudes it added.
std::map<uintptr_t, double> g_atomics;
bool g_tracking_atomics = false;

// The device memory a kernel may write, copied (kAll).
std::vector<std::vector<unsigned char>> device_snapshot()
{
    std::vector<std::vector<unsigned char>> v;
    v.reserve(g_device.size());
    for (const auto &a : g_device)
        v.emplace_back((const unsigned char *)a.first, (const unsigned char *)a.first + a.second);
    return v;
}

void device_restore(const std::vector<std::vector<unsigned char>> &v)
{
    size_t i = 0;
    for (const auto &a : g_device) memcpy((void *)a.first, v[i++].data(), a.second);
}

// Whether byte address p's float (an atomicAdd target) agrees with `want` within the
// tolerance of its additions; false for any other byte that differs.
bool atomic_close(uintptr_t p, const unsigned char *want)
{
    const uintptr_t f = p & ~(uintptr_t)3;
    auto it = g_atomics.find(f);
    if (it == g_atomics.end()) return false;
    float a, b;
    memcpy(&a, (const void *)f, 4);
    memcpy(&b, want - (p - f), 4);
    return fabs((double)a - (double)b) <= 1e-5 * it->second;
}

// kAll: L from the same device memory in each order; every byte the same as after the
// forward run (atomicAdd targets within rounding), else the emulation stops, naming the
// kernel, the order, the allocation and the first byte that differs.
void run_all_orders(Launch &L)
{
    const auto before = device_snapshot();
    g_atomics.clear();
    g_tracking_atomics = true;
    L.order = kForward;
    run_grid(L);
    const auto forward = device_snapshot();
    static const char *const names[] = {"forward", "reverse", "shuffle"};
    for (int order : {kReverse, kShuffle}) {
        device_restore(before);
        L.order = order;
        L.rng = g_seed * 0x9e3779b97f4a7c15ull + g_launch_count;
        run_grid(L);
        size_t i = 0;
        for (const auto &a : g_device) {
            const unsigned char *want = forward[i++].data(), *got = (const unsigned char *)a.first;
            if (memcmp(want, got, a.second) == 0) continue;
            for (size_t j = 0; j < a.second; j++) {
                if (want[j] == got[j] || atomic_close(a.first + j, want + j)) continue;
                float fw = 0, fg = 0;
                const size_t f = j & ~(size_t)3;
                if (f + 4 <= a.second) memcpy(&fw, want + f, 4), memcpy(&fg, got + f, 4);
                die("kernel %s: its results depend on the order its threads run in: run %s "
                    "and %s, byte %zu of the device allocation at %p (%zu bytes) differs "
                    "(as a float: %g and %g): a missing __syncthreads, or threads racing on "
                    "the same memory", L.kernel, names[kForward], names[order], j,
                    (void *)a.first, a.second, (double)fw, (double)fg);
            }
        }
    }
    g_tracking_atomics = false;
    g_launch_count++;
    g_order_launches++;
}

} // namespace

// ------------------------------------------------------------ emu:: (cuda_emu.h)

namespace emu {

void run(const Config &c, const char *kernel, void (*body)(void *), void *ctx)
{
    if (g_launch) die("a kernel launched another kernel (not supported)");
    const dim3 g = c.grid, b = c.block;
    const unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
    if (g.x == 0 || g.y == 0 || g.z == 0 || g.x > 2147483647u || g.y > 65535 ||
        g.z > 65535 || threads == 0 || threads > 1024 || b.x > 1024 || b.y > 1024 ||
        b.z > 64) {
        g_last_error = cudaErrorInvalidConfiguration;
        return;
    }
    if (c.shared_bytes > 48 * 1024) { // more needs cudaFuncSetAttribute on a GPU
        g_last_error = cudaErrorInvalidValue;
        return;
    }
    if (!valid_stream(c.stream)) {
        g_last_error = cudaErrorInvalidResourceHandle;
        return;
    }
    if (g_dry) return;
    if (threads > g_stack_count) {
        if (g_stacks) munmap(g_stacks, g_stack_count * kStackBytes);
        void *m = mmap(nullptr, threads * kStackBytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) die("no memory for %llu fiber stacks", threads);
        g_stacks = (char *)m;
        g_stack_count = threads;
    }
    Launch L;
    L.c = c;
    L.body = body;
    L.ctx = ctx;
    L.cur = nullptr;
    L.kernel = kernel;
    L.static_bytes = 0;
    L.shared.assign(c.shared_bytes, 0);
    g_launch = &L;
    if (g_order != kAll) {
        L.order = g_order;
        L.rng = g_seed * 0x9e3779b97f4a7c15ull + g_launch_count++;
        run_grid(L);
    } else {
        run_all_orders(L);
    }
    g_launch = nullptr;
}

const uint3 &thread_idx() { return running().cur->tid; }
const uint3 &block_idx() { return running().block_idx; }
const dim3 &block_dim() { return running().c.block; }
const dim3 &grid_dim() { return running().c.grid; }

void *dynamic_shared()
{
    Launch &L = running();
    return L.shared.empty() ? nullptr : L.shared.data();
}

void *static_shared(const void *site, size_t bytes)
{
    Launch &L = running();
    auto it = L.statics.find(site);
    if (it == L.statics.end()) {
        L.static_bytes += bytes;
        if (L.static_bytes + L.shared.size() > 48 * 1024)
            die("kernel %s: %zu bytes of static and %zu of dynamic shared memory (more than "
                "48 KiB)", L.kernel, L.static_bytes, L.shared.size());
        it = L.statics.emplace(site, std::vector<unsigned char>(bytes, 0xff)).first;
    } else if (it->second.size() != bytes) {
        die("kernel %s: one __shared__ declaration with two sizes", L.kernel);
    }
    return it->second.data();
}

float atomic_add(float *p, float v)
{
    const float old = *p;
    *p = old + v;
    if (g_tracking_atomics && touches_device(p, sizeof *p)) g_atomics[(uintptr_t)p] += fabs(v);
    return old;
}

void sync_threads()
{
    Launch &L = running();
    wait_at(L.block, 1);
}

int lane_id() { return running().cur->lane; }

float warp_exchange(unsigned mask, float v, int src_lane)
{
    Launch &L = running();
    Fiber &f = *L.cur;
    Barrier &w = L.warps[(size_t)f.warp];
    const int lanes = (int)L.fibers.size() - f.warp * 32 < 32 ? (int)L.fibers.size() - f.warp * 32 : 32;
    if (mask != 0xffffffffu || lanes != 32)
        die("warp shuffle with mask %#x in a warp of %d lanes (gentrain's kernels shuffle "
            "whole warps)", mask, lanes);
    if (w.live != 32)
        die("block (%u,%u,%u): a warp shuffle over all 32 lanes after %d of them exited "
            "(undefined on a GPU)", L.block_idx.x, L.block_idx.y, L.block_idx.z, 32 - w.live);
    if (src_lane < 0 || src_lane > 31) die("warp shuffle from lane %d", src_lane);
    float *slot = &L.slots[(size_t)f.warp * 32];
    slot[f.lane] = v;
    wait_at(w, 2); // every lane has written
    const float r = slot[src_lane];
    wait_at(w, 2); // every lane has read
    return r;
}

} // namespace emu

// ------------------------------------------------------------ the CUDA runtime

extern "C" {

cudaError_t cudaGetDeviceCount(int *count)
{
    *count = device_count();
    return cudaSuccess;
}

// Any of the node's emulated devices: each process emulates its own whichever it takes.
static int g_current_device = 0;
cudaError_t cudaSetDevice(int device)
{
    if (device < 0 || device >= device_count()) return cudaErrorInvalidDevice;
    g_current_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    *device = g_current_device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int device)
{
    if (device < 0 || device >= device_count()) return cudaErrorInvalidDevice;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "CPU emulation of a GPU (cuda_emu)");
    // The node's device `device` is the same device in every process that takes it.
    snprintf(p->uuid.bytes, sizeof p->uuid.bytes, "cuda_emu dev%d", device);
    p->pciBusID = device + 1;
    p->totalGlobalMem = device_capacity();
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 1;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->sharedMemPerBlock = 48 * 1024;
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    *total = device_capacity();
    *free_bytes = *total > g_device_used ? *total - g_device_used : 0;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }

cudaError_t cudaGetLastError(void)
{
    const cudaError_t e = g_last_error;
    g_last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) { return g_last_error; }

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient";
    default: return "unknown error (cuda_emu)";
    }
}

const char *cudaGetErrorName(cudaError_t e)
{
    return e == cudaSuccess ? "cudaSuccess" : "cudaError (cuda_emu)";
}

cudaError_t cudaMalloc(void **p, size_t n)
{
    *p = nullptr;
    if (n == 0) return cudaSuccess;
    if (g_device_used + n > device_capacity()) return cudaErrorMemoryAllocation;
    void *m = nullptr;
    if (g_dry) {
        m = mmap(nullptr, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) return cudaErrorMemoryAllocation;
    } else {
        if (posix_memalign(&m, 256, n) != 0) return cudaErrorMemoryAllocation;
        memset(m, 0xff, n); // never written: NaN in FP16 and FP32
    }
    g_device[(uintptr_t)m] = n;
    g_device_used += n;
    *p = m;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    if (!p) return cudaSuccess;
    auto it = g_device.find((uintptr_t)p);
    if (it == g_device.end()) return cudaErrorInvalidValue;
    g_device_used -= it->second;
    if (g_dry)
        munmap(p, it->second);
    else
        free(p);
    g_device.erase(it);
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **p, size_t n)
{
    *p = malloc(n ? n : 1);
    if (!*p) return cudaErrorMemoryAllocation;
    g_pinned.insert((uintptr_t)*p);
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *p)
{
    if (!p) return cudaSuccess;
    if (!g_pinned.erase((uintptr_t)p)) return cudaErrorInvalidValue;
    free(p);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind)
{
    if (n == 0) return cudaSuccess;
    const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (kind != cudaMemcpyDefault) {
        if (dst_dev ? !is_device(dst, n) : touches_device(dst, n)) return cudaErrorInvalidValue;
        if (src_dev ? !is_device(src, n) : touches_device(src, n)) return cudaErrorInvalidValue;
    }
    if (g_dry && (touches_device(dst, n) || touches_device(src, n))) {
        if (!touches_device(dst, n)) memset(dst, 0, n);
        return cudaSuccess;
    }
    memmove(dst, src, n);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind,
                            cudaStream_t s)
{
    if (!valid_stream(s)) return cudaErrorInvalidResourceHandle;
    return cudaMemcpy(dst, src, n, kind);
}

cudaError_t cudaMemset(void *p, int v, size_t n)
{
    if (n == 0) return cudaSuccess;
    if (!is_device(p, n)) return cudaErrorInvalidValue;
    if (!g_dry) memset(p, v, n);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s)
{
    if (!valid_stream(s)) return cudaErrorInvalidResourceHandle;
    return cudaMemset(p, v, n);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    (void)flags;
    char *h = (char *)malloc(1);
    if (!h) return cudaErrorMemoryAllocation;
    g_streams.insert((uintptr_t)h);
    *s = (cudaStream_t)h;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, 0); }

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    if (!g_streams.erase((uintptr_t)s)) return cudaErrorInvalidResourceHandle;
    free((void *)s);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    return valid_stream(s) ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    Event *ev = (Event *)calloc(1, sizeof(Event));
    if (!ev) return cudaErrorMemoryAllocation;
    ev->flags = flags;
    g_events_all.insert((uintptr_t)ev);
    *e = (cudaEvent_t)ev;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    if (!g_events_all.erase((uintptr_t)e)) return cudaErrorInvalidResourceHandle;
    free((void *)e);
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    if (!g_events_all.count((uintptr_t)e) || !valid_stream(s))
        return cudaErrorInvalidResourceHandle;
    Event *ev = (Event *)e;
    ev->recorded = true;
    ev->ms = now_ms();
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    return g_events_all.count((uintptr_t)e) ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

cudaError_t cudaEventQuery(cudaEvent_t e)
{
    return g_events_all.count((uintptr_t)e) ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags)
{
    (void)flags;
    if (!valid_stream(s) || !g_events_all.count((uintptr_t)e))
        return cudaErrorInvalidResourceHandle;
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    if (!g_events_all.count((uintptr_t)start) || !g_events_all.count((uintptr_t)end))
        return cudaErrorInvalidResourceHandle;
    const Event *a = (const Event *)start, *b = (const Event *)end;
    if ((a->flags | b->flags) & cudaEventDisableTiming) return cudaErrorInvalidResourceHandle;
    if (!a->recorded || !b->recorded) return cudaErrorInvalidResourceHandle;
    *ms = (float)(b->ms - a->ms);
    return cudaSuccess;
}

// For the emulation's other stand-ins (nccl_emu.c, in C): whether [p, p + n) is
// emulated device memory, whether s is a stream of this emulation, whether nothing is
// computed (CUDA_EMU_DRY).
int cuda_emu_is_device(const void *p, size_t n) { return is_device(p, n); }
int cuda_emu_valid_stream(const void *s) { return valid_stream((cudaStream_t)s); }
int cuda_emu_dry(void) { return g_dry; }

} // extern "C"

// ------------------------------------------------------------ cuBLAS

namespace {

struct Handle {
    cudaStream_t stream;
    unsigned math; // cublasSetMathMode's flags
};

bool valid_handle(cublasHandle_t h) { return h && g_handles.count((uintptr_t)h); }

size_t type_bytes(cudaDataType t) { return t == CUDA_R_16F ? 2 : 4; }

float load(const void *p, cudaDataType t, size_t i)
{
    return t == CUDA_R_16F ? __half2float(((const __half *)p)[i]) : ((const float *)p)[i];
}

void store(void *p, cudaDataType t, size_t i, float v)
{
    if (t == CUDA_R_16F)
        ((__half *)p)[i] = __float2half(v);
    else
        ((float *)p)[i] = v;
}

// The column-major extent, in elements, of a rows x cols matrix with leading dimension
// ld, and whether it lies in device memory.
bool matrix_on_device(const void *p, cudaDataType t, int rows, int cols, int ld)
{
    if (rows == 0 || cols == 0) return true;
    const size_t n = (size_t)ld * (size_t)(cols - 1) + (size_t)rows;
    return is_device(p, n * type_bytes(t));
}

// The products' inner loop, in FP32 in whatever order vectorises. Not instrumented by
// the sanitizers: it reads only the emulator's own copies (a, b in gemm), and it is
// most of the emulation's time.
__attribute__((no_sanitize("address", "undefined"))) float dot(const float *x,
                                                                const float *y, int k)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int l = 0; l < k; l++) s += x[l] * y[l];
    return s;
}

// C = alpha op(A) op(B) + beta C for `batch` matrices (cuBLAS's rules and meaning; C is
// not read when beta is 0). FP32 accumulation, as the tensor cores do with
// CUBLAS_COMPUTE_32F.
cublasStatus_t gemm(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m,
                    int n, int k, const void *alpha, const void *A, cudaDataType at, int lda,
                    long long sa, const void *B, cudaDataType bt, int ldb, long long sb,
                    const void *beta, void *C, cudaDataType ct, int ldc, long long sc,
                    int batch, cublasComputeType_t compute)
{
    if (!valid_handle(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    const bool ok_types = compute == CUBLAS_COMPUTE_32F &&
                          ((at == CUDA_R_16F && bt == CUDA_R_16F &&
                            (ct == CUDA_R_16F || ct == CUDA_R_32F)) ||
                           (at == CUDA_R_32F && bt == CUDA_R_32F && ct == CUDA_R_32F));
    if (!ok_types) return CUBLAS_STATUS_NOT_SUPPORTED;
    // gentrain's rule (ol_blas_numerics): an FP16 product may not sum its split-K
    // partials in FP16; a handle that allows it is a bug here, however the sums come out.
    if (ct == CUDA_R_16F &&
        !(((Handle *)handle)->math & CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION))
        die("an FP16-output cuBLAS product on a handle that allows reduced-precision "
            "reductions (cublasSetMathMode without "
            "CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION: see ol_blas_numerics)");
    const bool tA = ta == CUBLAS_OP_T, tB = tb == CUBLAS_OP_T;
    if ((ta != CUBLAS_OP_N && !tA) || (tb != CUBLAS_OP_N && !tB) || m < 0 || n < 0 || k < 0 ||
        batch < 0 || lda < (tA ? (k > 1 ? k : 1) : (m > 1 ? m : 1)) ||
        ldb < (tB ? (n > 1 ? n : 1) : (k > 1 ? k : 1)) || ldc < (m > 1 ? m : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS;
    const float al = *(const float *)alpha, be = *(const float *)beta;
    std::vector<float> a, b; // op(A) by rows, op(B) by columns
    if (!g_dry) {
        a.resize((size_t)m * k);
        b.resize((size_t)n * k);
    }
    for (int bi = 0; bi < batch; bi++) {
        const char *Ab = (const char *)A + (long long)bi * sa * (long long)type_bytes(at);
        const char *Bb = (const char *)B + (long long)bi * sb * (long long)type_bytes(bt);
        char *Cb = (char *)C + (long long)bi * sc * (long long)type_bytes(ct);
        if (!matrix_on_device(Ab, at, tA ? k : m, tA ? m : k, lda) ||
            !matrix_on_device(Bb, bt, tB ? n : k, tB ? k : n, ldb) ||
            !matrix_on_device(Cb, ct, m, n, ldc))
            return CUBLAS_STATUS_INVALID_VALUE; // a host pointer or past an allocation
        if (g_dry) continue;
        for (int i = 0; i < m; i++)
            for (int l = 0; l < k; l++)
                a[(size_t)i * k + l] =
                    load(Ab, at, tA ? (size_t)i * lda + l : (size_t)l * lda + i);
        for (int j = 0; j < n; j++)
            for (int l = 0; l < k; l++)
                b[(size_t)j * k + l] =
                    load(Bb, bt, tB ? (size_t)l * ldb + j : (size_t)j * ldb + l);
#pragma omp parallel for schedule(static) if ((double)m * n * k > 1e6)
        for (int j = 0; j < n; j++) {
            const float *bj = &b[(size_t)j * k];
            for (int i = 0; i < m; i++) {
                const float s = dot(&a[(size_t)i * k], bj, k);
                const size_t ci = (size_t)j * ldc + i;
                const float v = al * s + (be != 0.0f ? be * load(Cb, ct, ci) : 0.0f);
                store(Cb, ct, ci, v);
            }
        }
    }
    return CUBLAS_STATUS_SUCCESS;
}

} // namespace

extern "C" {

cublasStatus_t cublasCreate(cublasHandle_t *h)
{
    Handle *x = (Handle *)calloc(1, sizeof(Handle));
    if (!x) return CUBLAS_STATUS_ALLOC_FAILED;
    g_handles.insert((uintptr_t)x);
    *h = (cublasHandle_t)x;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t h)
{
    if (!valid_handle(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    g_handles.erase((uintptr_t)h);
    free((void *)h);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
    if (!valid_handle(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!valid_stream(s)) return CUBLAS_STATUS_INVALID_VALUE;
    ((Handle *)h)->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream(cublasHandle_t h, cudaStream_t *s)
{
    if (!valid_handle(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    *s = ((Handle *)h)->stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode)
{
    if (!valid_handle(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    const unsigned m = (unsigned)mode;
    if ((m & 0xf) != CUBLAS_DEFAULT_MATH || (m & ~0x1fu) != 0) return CUBLAS_STATUS_INVALID_VALUE;
    ((Handle *)h)->math = m;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *ws, size_t bytes)
{
    if (!valid_handle(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (bytes > 0 && !is_device(ws, bytes)) return CUBLAS_STATUS_INVALID_VALUE;
    if ((uintptr_t)ws % 256 != 0) return CUBLAS_STATUS_INVALID_VALUE;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                            int m, int n, int k, const void *alpha, const void *A,
                            cudaDataType at, int lda, const void *B, cudaDataType bt, int ldb,
                            const void *beta, void *C, cudaDataType ct, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
    (void)algo;
    return gemm(h, ta, tb, m, n, k, alpha, A, at, lda, 0, B, bt, ldb, 0, beta, C, ct, ldc, 0,
                1, compute);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType at,
                                          int lda, long long sa, const void *B,
                                          cudaDataType bt, int ldb, long long sb,
                                          const void *beta, void *C, cudaDataType ct, int ldc,
                                          long long sc, int batch, cublasComputeType_t compute,
                                          cublasGemmAlgo_t algo)
{
    (void)algo;
    return gemm(h, ta, tb, m, n, k, alpha, A, at, lda, sa, B, bt, ldb, sb, beta, C, ct, ldc,
                sc, batch, compute);
}

} // extern "C"
