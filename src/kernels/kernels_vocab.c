/* kernels_vocab — the vocabulary-parallel ops of the CPU backend (kernels_cpu.h): the
 * token embedding and the softmax cross-entropy when the vocabulary (rows of wte, and
 * the logits' columns) is cut over tensor-parallel ranks. Each rank works on its rows
 * [v0, v0 + Vl); the model adds the ranks' partial results between the steps (max and
 * sums of every row), so these kernels see one shard only. Scalar loops with OpenMP over
 * rows: on the CPU the head is a small share of a step, and a shard is 1/tp of it. */
#include <math.h>

#include "kernels_cpu.h"

void encoder_forward_shard(float *out, const int32_t *inp, const float *wte,
                           const float *wpe, int B, int T, int C, int v0, int Vl)
{
    const long rows = (long)B * T;
#pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        const int t = (int)(r % T), tok = inp[r] - v0;
        const float *e = tok >= 0 && tok < Vl ? wte + (size_t)tok * C : NULL;
        const float *p = wpe ? wpe + (size_t)t * C : NULL;
        float *o = out + (size_t)r * C;
        for (int c = 0; c < C; c++) o[c] = (e ? e[c] : 0.0f) + (p ? p[c] : 0.0f);
    }
}

void encoder_backward_shard(float *dwte, float *dwpe, const float *dout,
                            const int32_t *inp, int B, int T, int C, int v0, int Vl)
{
    /* Columns split over threads, (b, t) walked in order: a fixed summation order. */
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++)
        for (int t = 0; t < T; t++)
            for (int b = 0; b < B; b++) {
                const size_t r = (size_t)b * T + t;
                const float d = dout[r * C + c];
                dwpe[(size_t)t * C + c] += d;
                const int tok = inp[r] - v0;
                if (tok >= 0 && tok < Vl) dwte[(size_t)tok * C + c] += d;
            }
}

void xent_shard_max(float *rowmax, const float *logits, size_t N, int Vl)
{
#pragma omp parallel for schedule(static)
    for (size_t n = 0; n < N; n++) {
        const float *x = logits + n * Vl;
        float m = x[0];
        for (int j = 1; j < Vl; j++) m = x[j] > m ? x[j] : m;
        rowmax[n] = m;
    }
}

void xent_shard_sums(float *sums, const float *logits, const int32_t *targets,
                     const float *rowmax, size_t N, int Vl, int v0)
{
#pragma omp parallel for schedule(static)
    for (size_t n = 0; n < N; n++) {
        const float *x = logits + n * Vl;
        double s = 0.0;
        for (int j = 0; j < Vl; j++) s += expf(x[j] - rowmax[n]);
        sums[n] = (float)s;
        const int t = targets[n] - v0;
        sums[N + n] = t >= 0 && t < Vl ? x[t] : 0.0f;
    }
}

void xent_shard_finish(float *losses, float *logits, const int32_t *targets,
                       const float *rowmax, const float *sums, size_t N, int Vl, int v0,
                       float dloss_scale, int want_grad)
{
#pragma omp parallel for schedule(static)
    for (size_t n = 0; n < N; n++) {
        const float sum = sums[n], target_logit = sums[N + n];
        losses[n] = logf(sum) - (target_logit - rowmax[n]);
        if (!want_grad) continue;
        float *g = logits + n * Vl;
        const float k = dloss_scale / sum;
        for (int j = 0; j < Vl; j++) g[j] = expf(g[j] - rowmax[n]) * k;
        const int t = targets[n] - v0;
        if (t >= 0 && t < Vl) g[t] -= dloss_scale;
    }
}
