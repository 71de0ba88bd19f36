/* lossscale — dynamic loss scaling for FP16 gradients, the host side of mixed
 * precision. Plain C with no dependency beyond half.h, so the standalone GPU driver
 * (offload/tests/gpu_train.cu) builds it too.
 *
 * The GPU multiplies the loss gradient by `scale` so small gradients survive FP16;
 * the FP16 gradients that come back are unscaled here into the FP32 buffer the
 * optimizer reads, and checked: one inf or NaN anywhere means FP16 overflowed, the
 * step is skipped and the scale halved. After `growth_interval` clean steps in a row
 * the scale doubles again (it never goes above 2^24 or below 1). */
#ifndef GT_LOSSSCALE_H
#define GT_LOSSSCALE_H

#include <stddef.h>
#include <stdint.h>

typedef struct loss_scaler {
    float scale;          /* current multiplier of the loss gradient */
    int growth_interval;  /* clean steps before the scale doubles */
    int clean_steps;      /* clean steps since the last change */
    int64_t skipped;      /* steps skipped for overflow so far */
} loss_scaler;

/* What loss_scaler_update did. */
typedef enum loss_scale_event {
    LOSS_SCALE_KEPT = 0,    /* clean step, scale unchanged */
    LOSS_SCALE_GREW = 1,    /* clean step, scale doubled */
    LOSS_SCALE_SKIPPED = 2, /* overflow: skip this step, scale halved */
} loss_scale_event;

#define LOSS_SCALE_INIT 65536.0f
#define LOSS_SCALE_MAX 16777216.0f
#define LOSS_SCALE_GROWTH_INTERVAL 1000

void loss_scaler_init(loss_scaler *s, float scale, int growth_interval);

/* dst[i] (+)= half(src[i]) * inv_scale for n gradients: accumulate = 0 overwrites,
 * 1 adds (micro-batches). Returns 1 when any src value is inf or NaN (dst is then
 * unusable), else 0. OpenMP over `threads` threads. */
int unscale_half_grads(float *dst, const uint16_t *src, size_t n, float inv_scale,
                       int accumulate, int threads);

/* The same, and *sumsq = the sum of dst[i]^2 over the n values dst holds afterwards, in
 * double: the squared global norm of the gradient (for the clip) when this call writes
 * the whole gradient or, accumulating, its last micro-batch, without a second pass over
 * dst. Deterministic for a thread count (each thread sums its own contiguous range, the
 * partial sums are added in thread order), not bit-equal to optim.h's grad_global_norm
 * (another order). Meaningless when the result is 1 (inf or NaN). */
int unscale_half_grads_sumsq(float *dst, const uint16_t *src, size_t n, float inv_scale,
                             int accumulate, int threads, double *sumsq);

/* The same for gradients computed in FP32 but scaled the same way (offload = blocks:
 * the embedding's and the head's, on the host): dst[i] (+)= src[i] * inv_scale,
 * returning 1 when any src value is inf or NaN (dst is then unusable), else 0. */
int unscale_float_grads(float *dst, const float *src, size_t n, float inv_scale,
                        int accumulate, int threads);

/* Records whether this step's gradients overflowed (on any rank: the caller agrees
 * on it first) and adjusts the scale. */
loss_scale_event loss_scaler_update(loss_scaler *s, int overflow);

#endif
