/* Pipeline stages inside the model, without MPI: a tiny GPT cut into pp stages
 * (gpt_create_stage), run in one thread on M micro-batches (all forwards through the
 * stages, one activation slot per micro-batch, then all backwards in reverse, as a
 * pipeline schedule would interleave them), must compute what the whole model computes
 * on the whole batch:
 *  - the stages' layers cover the model once, in order (the first n_layer % pp stages
 *    one layer more), and each stage's initial weights are its part of the whole
 *    model's (both copies of the tied wte included);
 *  - the mean of the micro-batch losses equals the whole batch's loss (1e-5 relative);
 *  - the stages' gradients put together (the two wte copies added, as the trainer
 *    must) equal the whole model's (1e-4 of the largest);
 *  - on_grads_ready still tiles each stage's gradient buffer from its end;
 *  - more stages than layers is refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_cpu.h"
#include "model.h"
#include "rng.h"
#include "util.h"
#include "testutil.h"
#include "whole_model.h"

enum { M = 2, BM = 2, B = M * BM, T = 8, MAX_PP = 4 };
static const gpt_shape SHAPE = {48, 8, 4, 2, 16}; /* V, maxT, L, NH, C */
static int threads;

typedef struct tiling {
    size_t next_end;
    int bad;
} tiling;

static void record_ready(void *ctx, size_t offset, size_t count)
{
    tiling *t = ctx;
    if (offset + count != t->next_end) t->bad++;
    t->next_end = offset;
}

static void check_pp(int pp, const gpt_model *whole, const float *init, const int32_t *in,
                     const int32_t *tg, float whole_loss)
{
    gpt_model st[MAX_PP];
    memset(st, 0, sizeof st);
    int ok = 1, next_layer = 0;
    for (int s = 0; s < pp; s++) {
        ok &= gpt_create_stage(&st[s], SHAPE, &backend_cpu, threads, 1, 0, s, pp) == 0 &&
              gpt_alloc_grads(&st[s]) == 0 && gpt_alloc_act_slots(&st[s], BM, T, M) == 0 &&
              gpt_init_weights(&st[s], 5) == 0;
        if (!ok) break;
        const int want = SHAPE.n_layer / pp + (s < SHAPE.n_layer % pp);
        TU_CHECK(st[s].layer0 == next_layer && st[s].n_layers == want &&
                     st[s].has_embed == (s == 0) && st[s].has_head == (s == pp - 1),
                 "pp=%d stage %d: layers %d..%d, embed %d, head %d", pp, s, st[s].layer0,
                 st[s].layer0 + st[s].n_layers - 1, st[s].has_embed, st[s].has_head);
        next_layer += st[s].n_layers;
    }
    TU_CHECK(ok && next_layer == SHAPE.n_layer, "pp=%d: stages created, all layers once", pp);
    if (!ok) return;

    const size_t n = whole->n_params;
    float *full = calloc(n, sizeof(float)), *fullg = calloc(n, sizeof(float));
    /* Initial weights: the stages' parts put together = the whole model's. The last
     * stage's wte copy overwrites the first's: compare each stage on its own. */
    int same_init = 1;
    for (int s = 0; s < pp; s++) {
        memcpy(full, init, n * sizeof(float));
        gpt_shard_copy(&st[s], 0, full, st[s].params, 1);
        same_init &= memcmp(full, init, n * sizeof(float)) == 0;
    }
    TU_CHECK(same_init, "pp=%d: every stage's initial weights are the whole model's", pp);

    /* From here on the stages hold the whole model's current weights. */
    for (int s = 0; s < pp; s++) gpt_shard_copy(&st[s], 0, whole->params, st[s].params, 0);
    tiling til[MAX_PP];
    for (int s = 0; s < pp; s++) {
        gpt_zero_grad(&st[s]);
        st[s].loss_grad_scale = 1.0f / M;
        til[s].next_end = st[s].n_params;
        til[s].bad = 0;
        st[s].on_grads_ready = record_ready;
        st[s].grads_ready_ctx = &til[s];
    }
    /* Forwards: micro-batch j through every stage, in its own slot. */
    double loss_sum = 0.0;
    for (int j = 0; j < M; j++) {
        const float *x = NULL;
        float loss = 0.0f;
        for (int s = 0; s < pp; s++) {
            gpt_use_act_slot(&st[s], j);
            x = gpt_stage_forward(&st[s], in + j * BM * T, x, tg + j * BM * T, BM, T, 1,
                                  &loss);
        }
        loss_sum += loss;
    }
    const double mean = loss_sum / M;
    TU_CHECK(fabs(mean - whole_loss) <= 1e-5 * fabs(whole_loss),
             "pp=%d: mean micro-batch loss %.7f = whole batch %.7f", pp, mean, whole_loss);
    /* Backwards, last micro-batch first, each from the last stage down. */
    for (int j = M - 1; j >= 0; j--) {
        const float *d = NULL;
        for (int s = pp - 1; s >= 0; s--) {
            gpt_use_act_slot(&st[s], j);
            til[s].next_end = st[s].n_params;
            d = gpt_stage_backward(&st[s], d);
        }
        TU_CHECK(d == NULL, "pp=%d micro %d: the first stage returns no input gradient", pp,
                 j);
    }
    int tiles = 1;
    for (int s = 0; s < pp; s++) tiles &= til[s].bad == 0 && til[s].next_end == 0;
    TU_CHECK(tiles, "pp=%d: every stage's ready ranges tile its buffer from the end", pp);

    /* Gradients: each stage's part; the tied wte's two copies added. */
    memset(fullg, 0, n * sizeof(float));
    for (int s = 0; s < pp; s++) {
        float *tmp = calloc(n, sizeof(float));
        gpt_shard_copy(&st[s], 0, tmp, st[s].grads, 1);
        for (size_t i = 0; i < n; i++) fullg[i] += tmp[i];
        free(tmp);
    }
    double worst = 0.0, scale = max_abs(whole->grads, n);
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)fullg[i] - whole->grads[i]));
    TU_CHECK(worst <= 1e-4 * scale,
             "pp=%d: stage gradients put together = the whole model's (max diff %.3g, "
             "largest %.3g)", pp, worst, scale);
    for (int s = 0; s < pp; s++) gpt_free(&st[s]);
    free(full);
    free(fullg);
}

int main(void)
{
    threads = gt_resolve_threads(0);
    gpt_model whole;
    float *init = NULL;
    int32_t in[B * T], tg[B * T];
    const float loss = whole_model_make(&whole, SHAPE, threads, B, T, 5, 3, &init, in, tg);
    if (isnan(loss)) return tu_finish();
    for (int pp = 1; pp <= MAX_PP; pp++) check_pp(pp, &whole, init, in, tg, loss); /* 3: 2+1+1 */
    free(init);

    tu_capture_begin();
    gpt_model bad;
    const int rc = gpt_create_stage(&bad, SHAPE, &backend_cpu, 1, 1, 0, 0, 5);
    const char *msg = tu_capture_end();
    TU_CHECK(rc != 0 && strstr(msg, "stage 0 of 5 is impossible with n_layer = 4") != NULL,
             "5 stages of 4 layers are refused: %s", msg);
    gpt_free(&whole);
    return tu_finish();
}
