// driver_util — small helpers shared by the standalone GPU driver (gpu_train.cu) and
// its headers (host_trainer.h, ref_model.h): failure reporting, wall clocks, the
// OpenMP thread count and a seeded random generator.
//
// Header-only, for one translation unit (gpu_train.cu): everything is `static`.
// Conventions:
//  - `why` is the one buffer every engine call (gpu_model.h) writes its reason into;
//    die(what) prints "FAIL what: why" and exits 1, eng(rc, what) does so when rc != 0;
//  - report(ok, ...) prints one "ok  ..." or "FAIL ..." line and counts it in
//    `checks` / `failures` (the modes exit 1 when failures > 0);
//  - now_ms() is a monotonic wall clock in milliseconds;
//  - Rng is xorshift64* seeded through splitmix64, with Box-Muller normals: the same
//    seed gives the same stream on any machine and thread count.
#ifndef GT_OFFLOAD_TESTS_DRIVER_UTIL_H
#define GT_OFFLOAD_TESTS_DRIVER_UTIL_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <chrono>

#ifdef _OPENMP
#include <omp.h>
#endif

// ------------------------------------------------------------------ errors, clocks

static char why[512];
static int checks = 0, failures = 0;

// A failed engine or CUDA call ends the run: one line, exit 1.
static inline void die(const char *what)
{
    printf("FAIL %s: %s\n", what, why[0] ? why : "(no reason given)");
    fflush(stdout);
    exit(1);
}
static inline void eng(int rc, const char *what)
{
    if (rc != 0) die(what);
}

static inline void report(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void report(bool ok, const char *fmt, ...)
{
    checks++;
    if (!ok) failures++;
    printf("%s ", ok ? "ok  " : "FAIL");
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

static inline double now_ms()
{
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

static inline int nthreads()
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

// ------------------------------------------------------------------ random numbers

static inline uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// xorshift64* with Box-Muller normals.
struct Rng {
    uint64_t s;
    double spare = 0.0;
    bool has_spare = false;
    explicit Rng(uint64_t seed) : s(splitmix64(seed) | 1) {}
    uint64_t next()
    {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        return s * 2685821657736338717ull;
    }
    double uniform() { return ((double)(next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
    uint32_t below(uint32_t n) { return (uint32_t)(((next() >> 32) * (uint64_t)n) >> 32); }
    double normal()
    {
        if (has_spare) {
            has_spare = false;
            return spare;
        }
        const double r = sqrt(-2.0 * log(uniform())), a = 6.283185307179586 * uniform();
        spare = r * sin(a);
        has_spare = true;
        return r * cos(a);
    }
};

#endif
