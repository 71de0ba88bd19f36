/* optim — the optimizer step on the flat FP32 parameter buffer: AdamW with decoupled
 * weight decay (matrices only), warmup + cosine learning-rate schedule, clipping by
 * global gradient norm. SIMD + OpenMP over the buffer; deterministic for a thread
 * count and SIMD path (the norm is summed in double in a fixed order).
 *
 * Clipping is not a pass of its own: grad_clip_factor turns the norm into a factor and
 * adamw_step multiplies each gradient by it as it reads it, so the clip adds no read and
 * write of the whole buffer to a step that is memory-bound (the gradients are left as
 * they were). */
#ifndef GT_OPTIM_H
#define GT_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

typedef struct adamw_state {
    size_t n;
    float *m, *v;   /* first and second moments, [n], start at 0 */
    int64_t t;      /* updates applied so far */
} adamw_state;

int adamw_init(adamw_state *s, size_t n);
void adamw_free(adamw_state *s);

/* Learning rate at step `step` (0-based): linear warmup lr*(step+1)/warmup for
 * step < warmup, then cosine from lr down to min_lr at step == total-1 and after. */
double lr_at_step(int64_t step, int64_t warmup, int64_t total, double lr, double min_lr);

/* sqrt(sum g^2) over n floats, accumulated in double (simd.h's sumsq on each thread's
 * range: the bits depend on the thread count and the SIMD path, not on the run). */
double grad_global_norm(const float *g, size_t n);
/* The factor that clips a gradient of global norm `norm` to `clip`: (float)(clip /
 * (norm + 1e-6)) when norm > clip > 0, else exactly 1 (clip <= 0 disables clipping).
 * Pass it to adamw_step as grad_scale. */
float grad_clip_factor(double norm, double clip);

/* One AdamW update of every tensor in the table (weight decay where info[i].decay),
 * with the gradient g = grads[i] * grad_scale (a float product, as if grads had been
 * scaled in place first; grads itself is not written):
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 *   p -= lr * ( mhat / (sqrt(vhat) + eps) + wd * p ) */
void adamw_step(adamw_state *s, float *params, const float *grads, float grad_scale,
                const gpt_param_info *info, int n_info, double lr, double beta1,
                double beta2, double eps, double weight_decay);

#endif
