/* lossscale — see lossscale.h. The unscale pass converts in chunks through half.h's
 * array conversion, then scales and checks in one pass (and, for the _sumsq variant,
 * sums the squares of the chunk it just wrote), with the loops of the SIMD path in use
 * (simd.h): an inf or NaN half stays inf or NaN as a float, and the check finds a
 * float whose exponent bits are all set. */
#include "lossscale.h"

#include <string.h>

#include "half.h"
#include "simd.h"

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
    const simd_kernels *kr = simd_kernels_get();
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
                bad |= kr->unscale(dst + lo, tmp, len, inv_scale, accumulate);
            } else {
                bad |= kr->unscale(dst + lo, (const float *)src + lo, len, inv_scale,
                                  accumulate);
            }
            if (sumsq) acc += kr->sumsq(dst + lo, len);
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
