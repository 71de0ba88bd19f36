/* lossscale — see lossscale.h. The unscale pass converts in chunks through half.h's
 * (F16C when the CPU has it) array conversion, then scales and checks in one pass (and,
 * for the _sumsq variant, sums the squares of the chunk it just wrote): an
 * inf or NaN half stays inf or NaN as a float, and a float is one exactly when its
 * exponent bits are all set, so an OR over that test finds any of them. (An integer OR
 * vectorises; a float sum used as the probe would be one long dependency chain.) */
#include "lossscale.h"

#include <string.h>

#include "half.h"

#ifdef _OPENMP
#include <omp.h>
#endif

enum { CHUNK = 4096, MAXT = 256 };

void loss_scaler_init(loss_scaler *s, float scale, int growth_interval)
{
    s->scale = scale > 0.0f ? scale : LOSS_SCALE_INIT;
    s->growth_interval = growth_interval > 0 ? growth_interval : LOSS_SCALE_GROWTH_INTERVAL;
    s->clean_steps = 0;
    s->skipped = 0;
}

/* One chunk of len floats: dst (+)= src * inv_scale; returns 1 when one is inf or NaN
 * (dst is then unusable). */
static int unscale_chunk(float *dst, const float *src, size_t len, float inv_scale,
                         int accumulate)
{
    uint32_t nonfinite = 0;
    for (size_t i = 0; i < len; i++) {
        uint32_t bits;
        memcpy(&bits, &src[i], sizeof bits);
        nonfinite |= (bits & 0x7F800000u) == 0x7F800000u;
    }
    if (accumulate)
        for (size_t i = 0; i < len; i++) dst[i] += src[i] * inv_scale;
    else
        for (size_t i = 0; i < len; i++) dst[i] = src[i] * inv_scale;
    return nonfinite != 0;
}

/* sum d[i]^2 over one chunk, in double. Eight independent sums, combined in a fixed
 * order: the adds of one long sum would form a chain of dependent additions that runs
 * slower than the memory pass it rides on; eight can pipeline (and vectorise). */
static double chunk_sumsq(const float *d, size_t len)
{
    /* Named sums rather than an array: GCC keeps an array in memory and adds through it. */
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0, a4 = 0.0, a5 = 0.0, a6 = 0.0, a7 = 0.0;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        a0 += (double)d[i] * (double)d[i];
        a1 += (double)d[i + 1] * (double)d[i + 1];
        a2 += (double)d[i + 2] * (double)d[i + 2];
        a3 += (double)d[i + 3] * (double)d[i + 3];
        a4 += (double)d[i + 4] * (double)d[i + 4];
        a5 += (double)d[i + 5] * (double)d[i + 5];
        a6 += (double)d[i + 6] * (double)d[i + 6];
        a7 += (double)d[i + 7] * (double)d[i + 7];
    }
    for (; i < len; i++) a0 += (double)d[i] * (double)d[i];
    return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
}

/* Every entry point: src holds n values, FP16 (is_half) or FP32; with sumsq, the sum of
 * the squares of dst afterwards, taken from each chunk while it is still in cache. */
static int unscale(float *dst, const void *src, int is_half, size_t n, float inv_scale,
                   int accumulate, int threads, double *sumsq)
{
    const size_t chunks = (n + CHUNK - 1) / CHUNK;
    const int nt = threads < 1 ? 1 : threads > MAXT ? MAXT : threads;
    /* One partial sum per thread, added in thread order below: the static schedule gives
     * each thread the same contiguous chunks every call, so the total's bits depend on
     * the thread count alone (an OpenMP reduction adds in whatever order threads end). */
    double partial[MAXT];
    int bad = 0, used = 1;
    (void)nt; /* unused without OpenMP */
#pragma omp parallel num_threads(nt) reduction(| : bad)
    {
        int t = 0;
#ifdef _OPENMP
        t = omp_get_thread_num();
        if (t == 0) used = omp_get_num_threads();
#endif
        double acc = 0.0;
#pragma omp for schedule(static)
        for (size_t k = 0; k < chunks; k++) {
            const size_t lo = k * CHUNK, len = (n - lo < CHUNK) ? n - lo : CHUNK;
            float tmp[CHUNK];
            if (is_half) {
                half_to_float(tmp, (const uint16_t *)src + lo, len);
                bad |= unscale_chunk(dst + lo, tmp, len, inv_scale, accumulate);
            } else {
                bad |= unscale_chunk(dst + lo, (const float *)src + lo, len, inv_scale,
                                     accumulate);
            }
            if (sumsq) acc += chunk_sumsq(dst + lo, len);
        }
        partial[t] = acc;
    }
    if (sumsq) {
        double total = 0.0;
        for (int t = 0; t < used; t++) total += partial[t];
        *sumsq = total;
    }
    return bad;
}

int unscale_half_grads(float *dst, const uint16_t *src, size_t n, float inv_scale,
                       int accumulate, int threads)
{
    return unscale(dst, src, 1, n, inv_scale, accumulate, threads, NULL);
}

int unscale_half_grads_sumsq(float *dst, const uint16_t *src, size_t n, float inv_scale,
                             int accumulate, int threads, double *sumsq)
{
    return unscale(dst, src, 1, n, inv_scale, accumulate, threads, sumsq);
}

int unscale_float_grads(float *dst, const float *src, size_t n, float inv_scale,
                        int accumulate, int threads)
{
    return unscale(dst, src, 0, n, inv_scale, accumulate, threads, NULL);
}

loss_scale_event loss_scaler_update(loss_scaler *s, int overflow)
{
    if (overflow) {
        s->skipped++;
        s->clean_steps = 0;
        if (s->scale > 1.0f) s->scale *= 0.5f;
        return LOSS_SCALE_SKIPPED;
    }
    if (++s->clean_steps >= s->growth_interval) {
        s->clean_steps = 0;
        if (s->scale < LOSS_SCALE_MAX) {
            s->scale *= 2.0f;
            return LOSS_SCALE_GREW;
        }
    }
    return LOSS_SCALE_KEPT;
}
