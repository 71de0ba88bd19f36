/* Whole-model gradient check on a tiny GPT: the analytic gradient of gpt_backward
 * against central finite differences of gpt_forward's loss, per tensor (a random
 * direction within the tensor) and for the largest entries one by one. The model is
 * FP32, so step sizes and tolerances are set for float round-off. Also: the ranges
 * gpt_backward reports through on_grads_ready tile the gradient buffer from its end to
 * its start, and each range already holds its final gradient when reported. */
#include <math.h>
#include <string.h>

#include "kernels_cpu.h"
#include "model.h"
#include "rng.h"
#include "testutil.h"

enum { B = 2, T = 5 };

/* on_grads_ready recorder: checks the tiling, snapshots each range when reported. */
typedef struct ready_log {
    const gpt_model *m;
    float *snap;
    size_t next_end;
    int calls, out_of_order;
} ready_log;

static void record_ready(void *ctx, size_t offset, size_t count)
{
    ready_log *r = ctx;
    if (offset + count != r->next_end) r->out_of_order++;
    memcpy(r->snap + offset, r->m->grads + offset, count * sizeof(float));
    r->next_end = offset;
    r->calls++;
}

static double loss_at(gpt_model *m, const int32_t *in, const int32_t *tg)
{
    return gpt_forward(m, in, tg, B, T, 0);
}

int main(void)
{
    gpt_shape s = {.vocab_size = 11, .block_size = 6, .n_layer = 2, .n_head = 2, .n_embd = 8};
    gpt_model m;
    if (gpt_create(&m, s, &backend_cpu, 2) != 0 || gpt_alloc_grads(&m) != 0 ||
        gpt_alloc_acts(&m, B, T) != 0)
        return 99;
    /* Larger-than-GPT-2 weights so every tensor gets gradients well above round-off. */
    rng r;
    rng_seed(&r, 7);
    for (size_t i = 0; i < m.n_params; i++) m.params[i] = 0.3f * rng_normal(&r);
    for (int i = 0; i < m.n_info; i++)
        if (strstr(m.info[i].name, "ln_") && strstr(m.info[i].name, "weight"))
            for (size_t j = 0; j < m.info[i].numel; j++)
                m.params[m.info[i].offset + j] += 1.0f;

    int32_t in[B * T], tg[B * T];
    for (int i = 0; i < B * T; i++) {
        in[i] = (int32_t)(rng_u64(&r) % 11);
        tg[i] = (int32_t)(rng_u64(&r) % 11);
    }
    gpt_zero_grad(&m);
    float loss = gpt_forward(&m, in, tg, B, T, 1);
    gpt_backward(&m);
    TU_CHECK(isfinite(loss) && loss > 0.5f, "loss %.4f is finite and plausible", loss);

    /* The same backward again, reporting its ranges. */
    ready_log rl = {&m, calloc(m.n_params, sizeof(float)), m.n_params, 0, 0};
    if (!rl.snap) return 99;
    m.on_grads_ready = record_ready;
    m.grads_ready_ctx = &rl;
    gpt_zero_grad(&m);
    gpt_forward(&m, in, tg, B, T, 1);
    gpt_backward(&m);
    m.on_grads_ready = NULL;
    TU_CHECK(rl.out_of_order == 0 && rl.next_end == 0 && rl.calls == 6 * s.n_layer + 2,
             "on_grads_ready: %d ranges tile the buffer from its end to its start", rl.calls);
    TU_CHECK(memcmp(rl.snap, m.grads, m.n_params * sizeof(float)) == 0,
             "on_grads_ready: every range was final when reported");
    free(rl.snap);

    float *saved = malloc(m.n_params * sizeof(float));
    float *dir = malloc(m.n_params * sizeof(float));
    if (!saved || !dir) return 99;
    memcpy(saved, m.params, m.n_params * sizeof(float));

    for (int t = 0; t < m.n_info; t++) {
        const gpt_param_info *p = &m.info[t];
        /* Directional derivative along a random unit direction inside this tensor. */
        double norm = 0.0, analytic = 0.0;
        for (size_t j = 0; j < p->numel; j++) {
            dir[j] = rng_normal(&r);
            norm += (double)dir[j] * dir[j];
        }
        norm = sqrt(norm);
        for (size_t j = 0; j < p->numel; j++) {
            dir[j] = (float)(dir[j] / norm);
            analytic += (double)dir[j] * m.grads[p->offset + j];
        }
        const double h = 1e-2;
        for (size_t j = 0; j < p->numel; j++) m.params[p->offset + j] = saved[p->offset + j] + (float)h * dir[j];
        double lp = loss_at(&m, in, tg);
        for (size_t j = 0; j < p->numel; j++) m.params[p->offset + j] = saved[p->offset + j] - (float)h * dir[j];
        double lm = loss_at(&m, in, tg);
        memcpy(m.params + p->offset, saved + p->offset, p->numel * sizeof(float));
        double numeric = (lp - lm) / (2 * h);
        double err = tu_relerr(analytic, numeric, 1e-3);
        TU_CHECK(err < 2e-2, "%-34s directional: analytic %+.6f numeric %+.6f (rel %.1e)",
                 p->name, analytic, numeric, err);

        /* The largest single entry of this tensor's gradient. */
        size_t jmax = 0;
        for (size_t j = 1; j < p->numel; j++)
            if (fabsf(m.grads[p->offset + j]) > fabsf(m.grads[p->offset + jmax])) jmax = j;
        float *w = &m.params[p->offset + jmax];
        const float w0 = *w;
        *w = w0 + (float)h;
        lp = loss_at(&m, in, tg);
        *w = w0 - (float)h;
        lm = loss_at(&m, in, tg);
        *w = w0;
        numeric = (lp - lm) / (2 * h);
        double g = m.grads[p->offset + jmax];
        err = tu_relerr(g, numeric, 1e-3);
        TU_CHECK(err < 2e-2, "%-34s [%zu]: analytic %+.6f numeric %+.6f (rel %.1e)",
                 p->name, jmax, g, numeric, err);
    }

    /* Gradients of the untouched vocabulary rows of wte come only from the tied output
     * head; a token never seen as input must still get a gradient from the softmax. */
    int seen[11] = {0};
    for (int i = 0; i < B * T; i++) seen[in[i]] = 1;
    for (int v = 0; v < 11; v++)
        if (!seen[v]) {
            double sum = 0;
            for (int c = 0; c < 8; c++) sum += fabs(m.grads[v * 8 + c]);
            TU_CHECK(sum > 0, "wte row %d (never an input) gets a gradient from the tied head", v);
            break;
        }

    free(saved);
    free(dir);
    gpt_free(&m);
    return tu_finish();
}
