/* lossscale — see lossscale.h. The unscale pass converts in chunks through half.h's
 * (F16C when the CPU has it) array conversion, then scales and checks in one pass: an
 * inf or NaN half stays inf or NaN as a float, and a float is one exactly when its
 * exponent bits are all set, so an OR over that test finds any of them. (An integer OR
 * vectorises; a float sum used as the probe would be one long dependency chain.) */
#include "lossscale.h"

#include <string.h>

#include "half.h"

#ifdef _OPENMP
#include <omp.h>
#endif

enum { CHUNK = 4096 };

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

/* Both entry points: src holds n values, FP16 (is_half) or FP32. */
static int unscale(float *dst, const void *src, int is_half, size_t n, float inv_scale,
                   int accumulate, int threads)
{
    const size_t chunks = (n + CHUNK - 1) / CHUNK;
    int bad = 0;
    (void)threads;
#pragma omp parallel for num_threads(threads > 0 ? threads : 1) schedule(static) \
    reduction(| : bad)
    for (size_t k = 0; k < chunks; k++) {
        const size_t lo = k * CHUNK, len = (n - lo < CHUNK) ? n - lo : CHUNK;
        float tmp[CHUNK];
        if (is_half) {
            half_to_float(tmp, (const uint16_t *)src + lo, len);
            bad |= unscale_chunk(dst + lo, tmp, len, inv_scale, accumulate);
        } else {
            bad |= unscale_chunk(dst + lo, (const float *)src + lo, len, inv_scale, accumulate);
        }
    }
    return bad;
}

int unscale_half_grads(float *dst, const uint16_t *src, size_t n, float inv_scale,
                       int accumulate, int threads)
{
    return unscale(dst, src, 1, n, inv_scale, accumulate, threads);
}

int unscale_float_grads(float *dst, const float *src, size_t n, float inv_scale,
                        int accumulate, int threads)
{
    return unscale(dst, src, 0, n, inv_scale, accumulate, threads);
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
