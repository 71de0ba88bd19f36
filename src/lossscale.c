/* lossscale — see lossscale.h. The unscale pass converts in chunks through half.h's
 * (F16C when the CPU has it) array conversion, then scales and checks in float: an
 * inf or NaN half stays inf or NaN as a float, and x - x is 0 exactly for finite x
 * and NaN otherwise, so one branch-free sum per chunk finds any of them. */
#include "lossscale.h"

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

int unscale_half_grads(float *dst, const uint16_t *src, size_t n, float inv_scale,
                       int accumulate, int threads)
{
    const size_t chunks = (n + CHUNK - 1) / CHUNK;
    int bad = 0;
    (void)threads;
#pragma omp parallel for num_threads(threads > 0 ? threads : 1) schedule(static) \
    reduction(| : bad)
    for (size_t k = 0; k < chunks; k++) {
        float tmp[CHUNK];
        const size_t lo = k * CHUNK, len = (n - lo < CHUNK) ? n - lo : CHUNK;
        half_to_float(tmp, src + lo, len);
        float probe = 0.0f;
        for (size_t i = 0; i < len; i++) probe += tmp[i] - tmp[i];
        if (!(probe == 0.0f)) {
            bad |= 1;
            continue;
        }
        float *d = dst + lo;
        if (accumulate)
            for (size_t i = 0; i < len; i++) d[i] += tmp[i] * inv_scale;
        else
            for (size_t i = 0; i < len; i++) d[i] = tmp[i] * inv_scale;
    }
    return bad;
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
