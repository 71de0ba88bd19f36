/* cpu_features — see cpu_features.h.
 *
 * The ISA bits come from CPUID and XGETBV directly (not __builtin_cpu_supports), so
 * the answer does not depend on what the compiler's runtime knows: AVX512_BF16 and
 * AMX are newer than some of the compilers we build with. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "cpu_features.h"

#include <errno.h>
#include <math.h> /* HUGE_VAL */
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h> /* sysconf */

#include "amx_tiles.h" /* header only: the tile configuration of the AMX peak loop */

/* No dependence on the rest of gentrain (util.c pulls in BLAS): the GPU step's test
 * driver links this file alone. */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#ifdef _OPENMP
#include <omp.h>
#endif

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define GT_X86 1
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#define GT_X86 0
#endif

#if GT_X86
static void cpuid(unsigned leaf, unsigned sub, unsigned r[4])
{
    r[0] = r[1] = r[2] = r[3] = 0;
    if ((unsigned)__get_cpuid_max(0, NULL) >= leaf)
        __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
}

static unsigned long long xgetbv0(void)
{
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

static enum cpu_isa detect_level(void)
{
    unsigned l1[4], l7[4], l71[4];
    cpuid(1, 0, l1);
    cpuid(7, 0, l7);
    cpuid(7, 1, l71);
    const int osxsave = (l1[2] >> 27) & 1;
    if (!osxsave) return CPU_ISA_GENERIC;
    const unsigned long long xcr0 = xgetbv0();
    /* XMM and YMM state (bits 1, 2); opmask, upper ZMM halves and ZMM16-31 (5, 6, 7) */
    const int os_ymm = (xcr0 & 0x6) == 0x6, os_zmm = (xcr0 & 0xe6) == 0xe6;
    const int avx = (l1[2] >> 28) & 1, fma = (l1[2] >> 12) & 1, avx2 = (l7[1] >> 5) & 1,
              f16c = (l1[2] >> 29) & 1;
    const int f = (l7[1] >> 16) & 1, dq = (l7[1] >> 17) & 1, bw = (l7[1] >> 30) & 1,
              vl = (l7[1] >> 31) & 1;
    const int bf16 = (l71[0] >> 5) & 1;
    if (!avx || !os_ymm) return CPU_ISA_GENERIC;
    if (!avx2 || !fma || !f16c) return CPU_ISA_AVX;
    if (!(f && dq && bw && vl) || !os_zmm) return CPU_ISA_AVX2;
    return bf16 ? CPU_ISA_AVX512_BF16 : CPU_ISA_AVX512;
}
#else
static enum cpu_isa detect_level(void) { return CPU_ISA_GENERIC; }
#endif

enum cpu_isa cpu_isa_level(void)
{
    static atomic_int level = -1;
    int l = atomic_load_explicit(&level, memory_order_relaxed);
    if (l < 0) {
        l = (int)detect_level();
        atomic_store_explicit(&level, l, memory_order_relaxed);
    }
    return (enum cpu_isa)l;
}

const char *cpu_isa_name(enum cpu_isa level)
{
    switch (level) {
    case CPU_ISA_AVX: return "AVX";
    case CPU_ISA_AVX2: return "AVX2+FMA";
    case CPU_ISA_AVX512: return "AVX-512";
    case CPU_ISA_AVX512_BF16: return "AVX-512+BF16";
    case CPU_ISA_GENERIC: break;
    }
    return "generic SSE2";
}

#if GT_X86 && defined(__linux__)
/* Why a CPU with AMX-BF16 in CPUID does not get the tile path (AMX_YES: it does) */
enum amx_answer { AMX_UNKNOWN = -1, AMX_YES, AMX_NOT_IN_CPU, AMX_NOT_BY_OS, AMX_SHAPE,
                  AMX_REFUSED };

/* The tile shapes the AMX kernel is written for (gemm_bf16_amx.h): 8 tiles of 16 rows
 * of 64 bytes, and TDPBF16PS taking 16 pairs deep and 64 bytes wide. Every AMX CPU so
 * far has exactly these (CPUID leaf 0x1D palette 1, leaf 0x1E); a future palette with
 * smaller tiles would fault or compute garbage, so it is checked, not assumed. */
static int amx_shape_fits(void)
{
    unsigned p0[4], p1[4], tm[4];
    cpuid(0x1d, 0, p0); /* EAX: the highest palette */
    cpuid(0x1d, 1, p1); /* palette 1: EBX bytes per row | names << 16, ECX max rows */
    cpuid(0x1e, 0, tm); /* TMUL: EBX max k (rows of B) | max n bytes << 8 */
    if (p0[0] < 1) return 0;
    const unsigned bytes_per_row = p1[1] & 0xffff, names = p1[1] >> 16,
                   rows = p1[2] & 0xffff, maxk = tm[1] & 0xff, maxn = (tm[1] >> 8) & 0xffff;
    return bytes_per_row >= 64 && names >= 8 && rows >= 16 && maxk >= 16 && maxn >= 64;
}

/* AMX as Linux's Documentation/arch/x86/xstate.rst asks a program to find it: CPUID
 * leaf 7 (EDX bit 22 AMX-BF16, bit 24 AMX-TILE), XCR0 bits 17 (XTILECFG) and 18
 * (XTILEDATA) set by the kernel, then permission for the 8 KB of tile data, which the
 * kernel hands out only on request (its first use traps, and without permission the
 * process gets SIGILL). The permission is per process; ARCH_GET_XCOMP_PERM confirms it.
 * *err: errno of a refused request. */
static enum amx_answer amx_granted(int *err)
{
    enum { ARCH_GET_XCOMP_PERM = 0x1022, ARCH_REQ_XCOMP_PERM = 0x1023, XTILECFG = 17,
           XTILEDATA = 18 };
    unsigned l1[4], l7[4];
    cpuid(1, 0, l1);
    cpuid(7, 0, l7);
    const int osxsave = (l1[2] >> 27) & 1;
    const int tile = (l7[3] >> 24) & 1, bf16 = (l7[3] >> 22) & 1;
    *err = 0;
    if (!tile || !bf16) return AMX_NOT_IN_CPU;
    const unsigned long long tiles = (1ull << XTILECFG) | (1ull << XTILEDATA);
    if (!osxsave || (xgetbv0() & tiles) != tiles) return AMX_NOT_BY_OS;
    if (!amx_shape_fits()) return AMX_SHAPE;
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XTILEDATA) != 0) {
        *err = errno;
        return AMX_REFUSED;
    }
    unsigned long long perm = 0;
    if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &perm) != 0) {
        *err = errno;
        return AMX_REFUSED;
    }
    return (perm & (1ull << XTILEDATA)) ? AMX_YES : AMX_REFUSED;
}

static atomic_int amx_answer = AMX_UNKNOWN, amx_errno = 0;

static enum amx_answer amx_status(void)
{
    int a = atomic_load_explicit(&amx_answer, memory_order_acquire);
    if (a == AMX_UNKNOWN) {
        int err;
        a = amx_granted(&err);
        atomic_store_explicit(&amx_errno, err, memory_order_relaxed);
        atomic_store_explicit(&amx_answer, a, memory_order_release);
    }
    return (enum amx_answer)a;
}
#endif

int cpu_has_amx_bf16(void)
{
#if GT_X86 && defined(__linux__)
    return amx_status() == AMX_YES;
#else
    return 0;
#endif
}

const char *cpu_amx_declined(void)
{
#if GT_X86 && defined(__linux__)
    static char why[160];
    switch (amx_status()) {
    case AMX_NOT_BY_OS:
        return "the CPU has AMX-BF16 but the kernel does not enable tile state (XCR0 "
               "bits 17, 18; Linux 5.16 or later does)";
    case AMX_SHAPE:
        return "the CPU's AMX tiles are not the 8 x 16 rows x 64 bytes the kernel is "
               "written for (CPUID leaves 0x1D, 0x1E)";
    case AMX_REFUSED:
        snprintf(why, sizeof why, "the CPU has AMX-BF16 but Linux refused the tile state "
                 "(arch_prctl ARCH_REQ_XCOMP_PERM: %s)",
                 strerror(atomic_load_explicit(&amx_errno, memory_order_relaxed)));
        return why;
    case AMX_UNKNOWN:
    case AMX_YES:
    case AMX_NOT_IN_CPU: break;
    }
#endif
    return NULL;
}

#ifdef __linux__
/* With OpenMP binding on (OMP_PROC_BIND, or OMP_PLACES), the runtime binds the initial
 * thread to the first place as it starts, before main: its affinity mask is then one
 * place, not what the process was given. The places, made from that given mask, still
 * hold all of it. Their union into *set: its count, or 0 where binding is off. */
#ifdef _OPENMP
/* Adds the CPUs of OpenMP place p to *set: 0, or -1 for a place past CPU_SETSIZE. */
static int add_place(cpu_set_t *set, int p)
{
    const int n = omp_get_place_num_procs(p);
    if (n <= 0) return 0;
    if (n > CPU_SETSIZE) return -1;
    int ids[CPU_SETSIZE];
    omp_get_place_proc_ids(p, ids);
    for (int i = 0; i < n; i++)
        if (ids[i] >= 0 && ids[i] < CPU_SETSIZE) CPU_SET(ids[i], set);
    return 0;
}
#endif

static int omp_places_union(cpu_set_t *set)
{
    CPU_ZERO(set);
#ifdef _OPENMP
    if (omp_get_proc_bind() == omp_proc_bind_false) return 0;
    const int places = omp_get_num_places();
    for (int p = 0; p < places; p++)
        if (add_place(set, p) != 0) return 0;
#endif
    return CPU_COUNT(set);
}
#endif

int cpu_available_count(void)
{
#ifdef __linux__
    cpu_set_t set;
    const int bound = omp_places_union(&set);
    if (bound > 0) return bound;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
#endif
    return cpu_online_count();
}

void cpu_thread_binding(int own_place)
{
#if defined(__linux__) && defined(_OPENMP)
    cpu_set_t set;
    if (omp_places_union(&set) == 0) return; /* binding is off */
    const int place = omp_get_place_num();
    cpu_set_t own;
    CPU_ZERO(&own);
    if (own_place && place >= 0 && add_place(&own, place) == 0 && CPU_COUNT(&own) > 0)
        set = own;
    /* refused (a cgroup narrower than the places): the thread keeps the binding it has */
    (void)sched_setaffinity(0, sizeof set, &set);
#else
    (void)own_place;
#endif
}

void cpu_unbind_before_exec(void)
{
#ifdef __linux__
    cpu_set_t set;
    if (omp_places_union(&set) > 0) /* refused: the restart binds as before, slower */
        (void)sched_setaffinity(0, sizeof set, &set);
#endif
}

int cpu_online_count(void)
{
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

const char *cpu_model_name(char *buf, int cap)
{
    snprintf(buf, (size_t)cap, "%s", "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return buf;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        const char *v = strchr(line, ':');
        if (!v) break;
        v++;
        while (*v == ' ' || *v == '\t') v++;
        size_t n = strcspn(v, "\n");
        if (n >= (size_t)cap) n = (size_t)cap - 1;
        memcpy(buf, v, n);
        buf[n] = '\0';
        break;
    }
    fclose(f);
    return buf;
}

/* ------------------------------------------------------------------------------------ */
/* FMA peak. Each loop keeps 12 independent accumulators in named registers (more than
 * latency x units on every core we know; an array could be left in memory at -O2 and
 * measure store forwarding instead), x = x * a + b with a just below 1 so nothing
 * overflows, and returns flops per second. The accumulators feed a volatile sink so
 * the compiler cannot drop the chain. */

#define PEAK_INNER 2048
static volatile float peak_sink;

/* Defines `static double NAME(double seconds, double *t0, double *t1)`: twelve chains
 * x = OP(x) of vector type VT (x0..x11 start at SET1(0) .. SET1(11); OP may use the
 * constants a and b, set by the statement CONSTS), repeated until `seconds` have
 * passed; FLOPS is what one OP does. Returns the flops done between *t0 and *t1 (its
 * own clock readings). The accumulators' bytes feed the sink. */
#define DEFINE_PEAK_LOOP(NAME, ATTR, VT, SET1, CONSTS, OP, FLOPS)                        \
    ATTR static double NAME(double seconds, double *t_start, double *t_end)             \
    {                                                                                   \
        CONSTS;                                                                         \
        VT x0 = SET1(0.f), x1 = SET1(1.f), x2 = SET1(2.f), x3 = SET1(3.f),              \
           x4 = SET1(4.f), x5 = SET1(5.f), x6 = SET1(6.f), x7 = SET1(7.f),              \
           x8 = SET1(8.f), x9 = SET1(9.f), x10 = SET1(10.f), x11 = SET1(11.f);          \
        double flops = 0.0, t0 = now_s();                                               \
        do {                                                                            \
            for (int it = 0; it < PEAK_INNER; it++) {                                   \
                x0 = OP(x0); x1 = OP(x1); x2 = OP(x2); x3 = OP(x3); x4 = OP(x4);         \
                x5 = OP(x5); x6 = OP(x6); x7 = OP(x7); x8 = OP(x8); x9 = OP(x9);         \
                x10 = OP(x10); x11 = OP(x11);                                           \
            }                                                                           \
            flops += (double)(FLOPS) * 12 * PEAK_INNER;                                 \
        } while (now_s() - t0 < seconds);                                               \
        *t_end = now_s();                                                               \
        *t_start = t0;                                                                  \
        VT all[12] = {x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11};                \
        float f = 0.0f;                                                                 \
        for (int i = 0; i < 12; i++) {                                                  \
            float lane;                                                                 \
            memcpy(&lane, &all[i], sizeof lane);                                        \
            f += lane;                                                                  \
        }                                                                               \
        peak_sink = f;                                                                  \
        return flops;                                                                   \
    }

#if GT_X86
#define FMA512(x) _mm512_fmadd_ps(x, a, b)
DEFINE_PEAK_LOOP(fma_loop_avx512, __attribute__((target("avx512f"))), __m512, _mm512_set1_ps,
                 const __m512 a = _mm512_set1_ps(0.9999999f);
                 const __m512 b = _mm512_set1_ps(1e-7f),
                 FMA512, 2 * 16)

#define FMA256(x) _mm256_fmadd_ps(x, a, b)
DEFINE_PEAK_LOOP(fma_loop_avx2, __attribute__((target("avx2,fma"))), __m256, _mm256_set1_ps,
                 const __m256 a = _mm256_set1_ps(0.9999999f);
                 const __m256 b = _mm256_set1_ps(1e-7f),
                 FMA256, 2 * 8)

#if (defined(__clang__) && __clang_major__ >= 9) || (!defined(__clang__) && __GNUC__ >= 10)
#define GT_PEAK_BF16 1
/* VDPBF16PS: 16 lanes, each two products and their sum into the accumulator (64 flops
 * an instruction, as the BF16 matrix products count them); a = (1, 1), b = (1e-7, 1e-7) */
#define DPBF16(x) _mm512_dpbf16_ps(x, a, b)
DEFINE_PEAK_LOOP(dpbf16_loop, __attribute__((target("avx512f,avx512bf16"))), __m512,
                 _mm512_set1_ps,
                 const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80);
                 const __m512bh b = (__m512bh)_mm512_set1_epi32(0x33d633d6), DPBF16, 4 * 16)
#endif

#if (defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && __GNUC__ >= 11)
#define GT_PEAK_AMX 1
/* TDPBF16PS: a 16 x 16 FP32 tile += 16 x 32 BF16 @ 32 x 16 BF16 (8192 multiply-adds,
 * 16384 flops an instruction), into four accumulators (tmm0-3) from two A and two B
 * tiles (tmm4-7), as the AMX matrix product runs them. The operands are all 2^-10 so
 * nothing overflows. Each thread loads its own tile configuration (tiles are per
 * thread); the caller has the OS's permission (cpu_has_amx_bf16). */
__attribute__((target("amx-tile,amx-bf16"))) static double amx_loop(double seconds,
                                                                    double *t_start,
                                                                    double *t_end)
{
    _Alignas(64) amx_tilecfg cfg;
    _Alignas(64) uint16_t ops[AMX_MAX_ROWS * AMX_MAX_COLSB / 2];
    _Alignas(64) float out[AMX_MAX_ROWS * AMX_MAX_COLSB / 4];
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) ops[i] = 0x3a80; /* 2^-10 */
    amx_tilecfg_uniform(&cfg, AMX_TILES, AMX_MAX_ROWS, AMX_MAX_COLSB);
    /* GCC's LDTILECFG names only 8 bytes as read: make every store to cfg happen */
    __asm__ volatile("" : : "r"(&cfg), "r"(ops) : "memory");
    _tile_loadconfig(&cfg);
    _tile_loadd(4, ops, AMX_MAX_COLSB);
    _tile_loadd(5, ops, AMX_MAX_COLSB);
    _tile_loadd(6, ops, AMX_MAX_COLSB);
    _tile_loadd(7, ops, AMX_MAX_COLSB);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    double flops = 0.0, t0 = now_s();
    do {
        for (int it = 0; it < PEAK_INNER; it++) {
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
        flops += 4.0 * 16384.0 * PEAK_INNER;
    } while (now_s() - t0 < seconds);
    *t_end = now_s();
    *t_start = t0;
    _tile_stored(0, out, AMX_MAX_COLSB);
    _tile_release();
    peak_sink = out[0];
    return flops;
}
#endif

/* SSE2: a separate multiply and add on 4 lanes (no FMA at this level) */
#define MULADD128(x) _mm_add_ps(_mm_mul_ps(x, a), b)
DEFINE_PEAK_LOOP(fma_loop_generic, , __m128, _mm_set1_ps,
                 const __m128 a = _mm_set1_ps(0.9999999f); const __m128 b = _mm_set1_ps(1e-7f),
                 MULADD128, 2 * 4)
#else
/* no x86 vector unit known: a scalar multiply-add chain */
#define SET1_SCALAR(v) (v)
#define MULADD1(x) ((x) * a + b)
DEFINE_PEAK_LOOP(fma_loop_generic, , float, SET1_SCALAR,
                 const float a = 0.9999999f; const float b = 1e-7f, MULADD1, 2)
#endif

typedef double (*peak_loop)(double seconds, double *t_start, double *t_end);

enum cpu_isa cpu_fma_level_upto(enum cpu_isa widest)
{
    const enum cpu_isa l = widest < cpu_isa_level() ? widest : cpu_isa_level();
    return l >= CPU_ISA_AVX512 ? CPU_ISA_AVX512 : l >= CPU_ISA_AVX2 ? CPU_ISA_AVX2
                                                                   : CPU_ISA_GENERIC;
}

/* The multiply-add loop of the widest unit up to `widest` that this CPU has */
static peak_loop fma_loop_upto(enum cpu_isa widest)
{
#if GT_X86
    switch (cpu_fma_level_upto(widest)) {
    case CPU_ISA_AVX512: return fma_loop_avx512;
    case CPU_ISA_AVX2: return fma_loop_avx2;
    default: break;
    }
#else
    (void)widest;
#endif
    return fma_loop_generic;
}

/* One thread's rate over `seconds` */
static double lone_rate(peak_loop loop, double seconds)
{
    double t0, t1;
    const double flops = loop(seconds, &t0, &t1);
    return t1 > t0 ? flops / (t1 - t0) : 0.0;
}

/* What `threads` threads together multiply-add per second, in GFLOP/s.
 *
 * A round runs the loop on every thread and divides all their flops by one window, from
 * the first thread's start to the last one's end: threads that share a core for a
 * while then add up to that core's rate, as they really do. (Each thread's own best of
 * a few short windows, summed, counted each at a moment it had a core to itself: 3
 * threads on 2 cores read 500 GFLOP/s where 2 cores do 460.) No more threads than this
 * process has CPUs take part: more would only share them.
 *
 * A shared machine also runs two threads on one core now and then, for a whole round:
 * right after start-up Linux may leave a new OpenMP thread on its parent's CPU, and a
 * hypervisor may run two virtual CPUs on one physical core, which the guest cannot see
 * (it happened in `make bench` runs, whose MFU then read 136% and 172%). So: one thread
 * alone first, which no other thread slows; then at least 3 rounds of all threads, more
 * until one reaches 3/4 of the lone thread's rate times the threads or 20 rounds went
 * by (a core whose hardware threads share one unit never gets there); the best round. */
static double measure(peak_loop loop, int threads)
{
    enum { MIN_ROUNDS = 3, MAX_ROUNDS = 20 };
    const int cpus = cpu_available_count();
    if (threads > cpus) threads = cpus;
    if (threads < 1) threads = 1;
    (void)lone_rate(loop, 0.01); /* warm up: clocks, caches */
    double single = 0.0;
    for (int k = 0; k < 3; k++) {
        const double r = lone_rate(loop, 0.01);
        single = r > single ? r : single;
    }
    if (threads == 1) return single * 1e-9;
    const double expect = 0.75 * single * threads;
    double best_total = 0.0;
    for (int round = 0;
         round < MAX_ROUNDS && (round < MIN_ROUNDS || best_total < expect); round++) {
        double flops = 0.0, first = HUGE_VAL, last = -HUGE_VAL;
#pragma omp parallel num_threads(threads) reduction(+ : flops) reduction(min : first) \
    reduction(max : last)
        {
            if (round == 0) (void)lone_rate(loop, 0.01); /* the other threads warm up */
#pragma omp barrier
            double t0, t1;
            flops += loop(0.03, &t0, &t1);
            first = t0;
            last = t1;
        }
        const double total = last > first ? flops / (last - first) : 0.0;
        if (total > best_total) best_total = total;
    }
    return best_total * 1e-9;
}

double cpu_fma_peak_gflops(int threads)
{
    return cpu_fma_peak_gflops_upto(threads, cpu_isa_level());
}

double cpu_fma_peak_gflops_upto(int threads, enum cpu_isa widest)
{
    return measure(fma_loop_upto(widest), threads);
}

double cpu_bf16_peak_gflops(int threads, int amx_tiles)
{
#if GT_X86 && defined(GT_PEAK_AMX)
    if (amx_tiles && cpu_has_amx_bf16()) return measure(amx_loop, threads);
#else
    (void)amx_tiles;
#endif
#if GT_X86 && defined(GT_PEAK_BF16)
    if (cpu_isa_level() >= CPU_ISA_AVX512_BF16) return measure(dpbf16_loop, threads);
#endif
    return cpu_fma_peak_gflops(threads);
}

/* Set by cpu_bf16_dot_over_fma_use (a job's agreed figure); < 0 until measured */
static double dot_over_fma = -1.0;

/* Many short windows, not a few long ones: the ratio picks a path, and another process
 * that takes the core for part of a 10 ms window moved it from 0.5 to 0.72 on a loaded
 * Xeon (three busy loops on 2 cores). A 1 ms window now and then runs whole; the best
 * of 15 of each, taken in turn, finds one for both loops. */
double cpu_bf16_dot_over_fma(void)
{
    if (dot_over_fma >= 0.0) return dot_over_fma;
    dot_over_fma = 0.0;
#if GT_X86 && defined(GT_PEAK_BF16)
    if (cpu_isa_level() >= CPU_ISA_AVX512_BF16) {
        enum { WINDOWS = 15 };
        const peak_loop fma = fma_loop_upto(cpu_isa_level());
        double best_fma = 0.0, best_dot = 0.0;
        (void)lone_rate(fma, 0.01); /* warm up: clocks, caches */
        for (int k = 0; k < WINDOWS; k++) {
            const double f = lone_rate(fma, 0.001), d = lone_rate(dpbf16_loop, 0.001);
            best_fma = f > best_fma ? f : best_fma;
            best_dot = d > best_dot ? d : best_dot;
        }
        dot_over_fma = best_fma > 0.0 ? best_dot / best_fma : 0.0;
    }
#endif
    return dot_over_fma;
}

void cpu_bf16_dot_over_fma_use(double ratio)
{
    dot_over_fma = ratio > 0.0 ? ratio : 0.0;
}
