/* optim — the optimizer step on the flat FP32 parameter buffer: AdamW with decoupled
 * weight decay (matrices only), warmup + cosine learning-rate schedule, clipping by
 * global gradient norm. SIMD + OpenMP over the buffer; deterministic for a thread
 * count (the norm is summed in double in a fixed order). */
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

/* sqrt(sum g^2) over n floats, accumulated in double. */
double grad_global_norm(const float *g, size_t n);
/* Scales g by clip/norm when norm > clip > 0. Returns the factor applied (1 if none). */
float grad_clip_by_norm(float *g, size_t n, double norm, double clip);

/* One AdamW update of every tensor in the table (weight decay where info[i].decay):
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 *   p -= lr * ( mhat / (sqrt(vhat) + eps) + wd * p ) */
void adamw_step(adamw_state *s, float *params, const float *grads,
                const gpt_param_info *info, int n_info, double lr, double beta1,
                double beta2, double eps, double weight_decay);

#endif
