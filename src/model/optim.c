/* optim — see optim.h. The update is memory-bound (it streams params, grads and two
 * moments), so it is one fused pass per tensor: OpenMP splits the elements statically
 * into chunks, and each chunk runs the AdamW loop of the SIMD path in use (simd.h; all
 * paths give the same bits). */
#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "simd.h"
#include "util.h"

#ifdef _OPENMP
#include <omp.h>
#endif

int adamw_init(adamw_state *s, size_t n)
{
    memset(s, 0, sizeof *s);
    s->n = n;
    s->m = gt_calloc(n * sizeof(float), "AdamW first moments");
    s->v = gt_calloc(n * sizeof(float), "AdamW second moments");
    if (!s->m || !s->v) {
        adamw_free(s);
        return -1;
    }
    return 0;
}

void adamw_free(adamw_state *s)
{
    free(s->m);
    free(s->v);
    memset(s, 0, sizeof *s);
}

double lr_at_step(int64_t step, int64_t warmup, int64_t total, double lr, double min_lr)
{
    if (step < warmup) return lr * (double)(step + 1) / (double)warmup;
    int64_t span = total - 1 - warmup;
    if (span <= 0 || step >= total - 1) return min_lr;
    double progress = (double)(step - warmup) / (double)span;
    double cosine = 0.5 * (1.0 + cos(M_PI * progress));
    return min_lr + cosine * (lr - min_lr);
}

double grad_global_norm(const float *g, size_t n)
{
    /* Static schedule + reduction over a fixed thread count gives the same bits every
     * run: each thread sums its own contiguous range with the SIMD path's sumsq (a fixed
     * order for a path and length; a plain double loop is one dependent add an element,
     * latency-bound at about a quarter of what memory delivers), and the partial sums
     * are combined in thread order below. */
    enum { MAXT = 256 };
    double partial[MAXT] = {0};
    int used = 1;
    const simd_kernels *kr = simd_kernels_get();
#pragma omp parallel
    {
#ifdef _OPENMP
        int nt = omp_get_num_threads(), t = omp_get_thread_num();
#else
        int nt = 1, t = 0;
#endif
        if (nt > MAXT) nt = MAXT;
        if (t < nt) {
            size_t lo = n * (size_t)t / (size_t)nt, hi = n * (size_t)(t + 1) / (size_t)nt;
            partial[t] = kr->sumsq(g + lo, hi - lo);
        }
        if (t == 0) used = nt;
    }
    double sum = 0.0;
    for (int t = 0; t < used; t++) sum += partial[t];
    return sqrt(sum);
}

float grad_clip_factor(double norm, double clip)
{
    /* Written so a NaN norm or clip gives 1, not a NaN factor. */
    if (!(clip > 0.0) || !(norm > clip)) return 1.0f;
    return (float)(clip / (norm + 1e-6));
}

void adamw_tensor_apply(const adamw_tensor *t, size_t first, size_t count)
{
    simd_kernels_get()->adamw(t->p + first, t->m + first, t->v + first, t->g + first, count,
                              &t->k);
}

void adamw_step(adamw_state *s, float *params, const float *grads, float grad_scale,
                const gpt_param_info *info, int n_info, double lr, double beta1,
                double beta2, double eps, double weight_decay)
{
    adamw_step_taking(s, params, grads, grad_scale, info, n_info, lr, beta1, beta2, eps,
                      weight_decay, NULL, NULL);
}

void adamw_step_taking(adamw_state *s, float *params, const float *grads, float grad_scale,
                       const gpt_param_info *info, int n_info, double lr, double beta1,
                       double beta2, double eps, double weight_decay, adamw_take_fn take,
                       void *ctx)
{
    s->t++;
    const float b1 = (float)beta1, b2 = (float)beta2;
    /* Bias corrections folded into two scalars: p -= lr_t * m / (sqrt(v) * c2 + eps). */
    const double c1 = 1.0 - pow(beta1, (double)s->t);
    const double c2 = 1.0 - pow(beta2, (double)s->t);
    const float step_size = (float)(lr / c1);
    const float inv_sqrt_c2 = (float)(1.0 / sqrt(c2));
    simd_adamw_consts k = {.b1 = b1, .b2 = b2, .omb1 = 1.0f - b1, .omb2 = 1.0f - b2,
                           .step_size = step_size, .inv_sqrt_c2 = inv_sqrt_c2,
                           .eps = (float)eps, .grad_scale = grad_scale};
    enum { CHUNK = 16384 };
    for (int i = 0; i < n_info; i++) {
        const size_t off = info[i].offset, n = info[i].numel;
        /* The clip is folded in as grad_scale: the product g * scale is rounded to float
         * as the former in-place pass g *= factor rounded it, so the update is
         * bit-identical to clipping first; x * 1.0f == x without a clip. */
        k.decay = info[i].decay ? (float)(lr * weight_decay) : 0.0f;
        const adamw_tensor t = {params + off, s->m + off, s->v + off, grads + off, n, k};
        if (take && take(ctx, &t)) continue;
        const size_t chunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) if (chunks > 1)
        for (size_t c = 0; c < chunks; c++) {
            const size_t first = c * CHUNK;
            adamw_tensor_apply(&t, first, n - first < CHUNK ? n - first : CHUNK);
        }
    }
}
