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
#include "simd.h" /* simd_adamw_consts */

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

/* One tensor's share of an update: its parameters, moments and gradient, and the
 * constants of this update with its weight decay. */
typedef struct adamw_tensor {
    float *p, *m, *v;
    const float *g;
    size_t n;
    simd_adamw_consts k;
} adamw_tensor;
/* Elements [first, first + count) of t's update, on the calling thread: a caller that
 * takes a tensor over (below) splits it over its own threads. */
void adamw_tensor_apply(const adamw_tensor *t, size_t first, size_t count);
/* adamw_step with some tensors' updates taken over by the caller, so that work which
 * reads the new values (the BF16 products' packed weights) runs while they are in
 * cache. take(ctx, t) is called for each tensor in table order, outside any parallel
 * region; it returns 1 when it applied all of t through adamw_tensor_apply, each
 * element once, and 0 to leave t to adamw_step. The result is adamw_step's, bit for
 * bit (the update is elementwise). */
typedef int (*adamw_take_fn)(void *ctx, const adamw_tensor *t);
void adamw_step_taking(adamw_state *s, float *params, const float *grads, float grad_scale,
                       const gpt_param_info *info, int n_info, double lr, double beta1,
                       double beta2, double eps, double weight_decay, adamw_take_fn take,
                       void *ctx);

#endif
