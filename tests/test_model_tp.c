/* Tensor parallelism inside the model, without MPI: tp shards of a tiny GPT run in tp
 * threads that add up their partial results through a barrier (the role MPI plays in
 * training), and must compute what the whole model computes:
 *  - gpt_shard_copy takes a full buffer apart and puts it back exactly, and a shard's
 *    initial weights are its part of the full model's;
 *  - every shard's loss equals the whole model's (1e-5 relative), and the shards'
 *    gradients, put together, equal the whole model's (1e-4 of the largest);
 *    (the vocabulary is cut too: wte's rows, the head's softmax over the shards);
 *  - a tp that does not divide n_head, or vocab_size, is refused. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_cpu.h"
#include "model.h"
#include "rng.h"
#include "util.h"
#include "testutil.h"
#include "whole_model.h"

enum { B = 2, T = 12, MAX_TP = 4 };
static const gpt_shape SHAPE = {64, 16, 2, 4, 32}; /* V, maxT, L, NH, C */
/* OpenMP threads the kernels may use in any thread (their scratch is sized for it). */
static int threads;

/* The threads' all-reduce: each publishes its buffer, all sum every buffer in rank
 * order (so all get the same bits), then each writes the sum back into its own. */
typedef struct tp_world {
    int tp;
    pthread_barrier_t barrier;
    float *bufs[MAX_TP];
} tp_world;

typedef struct shard {
    tp_world *w;
    int rank;
    gpt_model m;
    float *scratch;
    size_t cap;
    const int32_t *in, *tg;
    float loss;
    int failed;
} shard;

/* op 0: sum, 1: max. */
static void thread_reduce(shard *s, float *buf, size_t n, int op)
{
    tp_world *w = s->w;
    if (n > s->cap) {
        s->failed = 1; /* cannot happen with the sizes below; checked in main */
        n = s->cap;
    }
    w->bufs[s->rank] = buf;
    pthread_barrier_wait(&w->barrier);
    for (size_t i = 0; i < n; i++) {
        float acc = w->bufs[0][i];
        for (int p = 1; p < w->tp; p++)
            acc = op ? (w->bufs[p][i] > acc ? w->bufs[p][i] : acc) : acc + w->bufs[p][i];
        s->scratch[i] = acc;
    }
    pthread_barrier_wait(&w->barrier);
    memcpy(buf, s->scratch, n * sizeof(float));
    pthread_barrier_wait(&w->barrier);
}

static void thread_allreduce(void *ctx, float *buf, size_t n) { thread_reduce(ctx, buf, n, 0); }
static void thread_allmax(void *ctx, float *buf, size_t n) { thread_reduce(ctx, buf, n, 1); }

static void *run_shard(void *p)
{
    shard *s = p;
    gpt_zero_grad(&s->m);
    s->loss = gpt_forward(&s->m, s->in, s->tg, B, T, 1);
    gpt_backward(&s->m);
    return NULL;
}

/* whole: the whole model after its forward and backward on in/tg; init: its weights
 * as initialised (before the biases were perturbed). */
static void check_tp(int tp, const gpt_model *whole, const float *init, const int32_t *in,
                     const int32_t *tg, float whole_loss)
{
    tp_world w = {.tp = tp};
    pthread_barrier_init(&w.barrier, NULL, (unsigned)tp);
    shard s[MAX_TP];
    memset(s, 0, sizeof s);
    int ok = 1;
    for (int r = 0; r < tp; r++) {
        s[r].w = &w;
        s[r].rank = r;
        s[r].in = in;
        s[r].tg = tg;
        s[r].cap = (size_t)B * T * SHAPE.n_embd;
        s[r].scratch = malloc(s[r].cap * sizeof(float));
        ok &= s[r].scratch != NULL &&
              gpt_create_tp(&s[r].m, SHAPE, &backend_cpu, threads, tp, r) == 0 &&
              gpt_alloc_grads(&s[r].m) == 0 && gpt_alloc_acts(&s[r].m, B, T) == 0 &&
              gpt_init_weights(&s[r].m, 5) == 0;
        s[r].m.tp_allreduce = thread_allreduce;
        s[r].m.tp_allreduce_max = thread_allmax;
        s[r].m.tp_ctx = &s[r];
    }
    TU_CHECK(ok, "tp=%d: shards created", tp);
    if (!ok) return;

    const size_t nfull = whole->n_params;
    TU_CHECK(gpt_full_params(&s[0].m) == nfull, "tp=%d: full size %zu = the whole model's",
             tp, gpt_full_params(&s[0].m));
    /* Initial weights: each shard's part of the whole model's, exactly. */
    float *full = calloc(nfull, sizeof(float)), *fullg = calloc(nfull, sizeof(float));
    for (int r = 0; r < tp; r++) gpt_shard_copy(&s[r].m, r, full, s[r].m.params, 1);
    TU_CHECK(memcmp(full, init, nfull * sizeof(float)) == 0,
             "tp=%d: shards' initial weights put together = the whole model's", tp);
    /* From here on the shards hold their parts of the whole model's current weights. */
    for (int r = 0; r < tp; r++) gpt_shard_copy(&s[r].m, r, whole->params, s[r].m.params, 0);
    /* Round trip: full -> shard -> full. */
    float *back = calloc(nfull, sizeof(float));
    for (int r = 0; r < tp; r++) {
        float *tmp = malloc(s[r].m.n_params * sizeof(float));
        gpt_shard_copy(&s[r].m, r, whole->params, tmp, 0);
        gpt_shard_copy(&s[r].m, r, back, tmp, 1);
        free(tmp);
    }
    TU_CHECK(memcmp(back, whole->params, nfull * sizeof(float)) == 0,
             "tp=%d: full -> shards -> full is exact", tp);

    pthread_t th[MAX_TP];
    for (int r = 0; r < tp; r++) pthread_create(&th[r], NULL, run_shard, &s[r]);
    for (int r = 0; r < tp; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < tp; r++) {
        TU_CHECK(!s[r].failed, "tp=%d rank %d: all-reduce sizes fit", tp, r);
        TU_CHECK(fabsf(s[r].loss - whole_loss) <= 1e-5f * fabsf(whole_loss),
                 "tp=%d rank %d: loss %.7f = whole %.7f", tp, r, s[r].loss, whole_loss);
        gpt_shard_copy(&s[r].m, r, fullg, s[r].m.grads, 1);
    }
    /* Every shard computes the whole tensors' gradients itself: put each shard into
     * the assembled gradient in turn, so every shard's copy is compared. */
    double worst = 0.0, scale = max_abs(whole->grads, nfull);
    size_t worst_i = 0;
    for (int r = 0; r < tp; r++) {
        memcpy(back, fullg, nfull * sizeof(float));
        gpt_shard_copy(&s[r].m, r, back, s[r].m.grads, 1);
        for (size_t i = 0; i < nfull; i++)
            if (fabs((double)back[i] - whole->grads[i]) > worst) {
                worst = fabs((double)back[i] - whole->grads[i]);
                worst_i = i;
            }
    }
    /* Name the tensor (offsets of the whole model are the full layout's). */
    const char *where = "?";
    for (int t = 0; t < whole->n_info; t++)
        if (worst_i >= whole->info[t].offset &&
            worst_i < whole->info[t].offset + whole->info[t].numel)
            where = whole->info[t].name;
    TU_CHECK(worst <= 1e-4 * scale,
             "tp=%d: gradients put together = the whole model's (max diff %.3g in %s, "
             "largest %.3g)", tp, worst, where, scale);
    for (int r = 0; r < tp; r++) {
        gpt_free(&s[r].m);
        free(s[r].scratch);
    }
    free(full);
    free(fullg);
    free(back);
    pthread_barrier_destroy(&w.barrier);
}

int main(void)
{
    threads = gt_resolve_threads(0);
    gpt_model whole;
    float *init = NULL;
    int32_t in[B * T], tg[B * T];
    const float loss = whole_model_make(&whole, SHAPE, threads, B, T, 5, 9, &init, in, tg);
    if (isnan(loss)) return tu_finish();
    for (int tp = 2; tp <= MAX_TP; tp *= 2) check_tp(tp, &whole, init, in, tg, loss);
    free(init);

    tu_capture_begin();
    gpt_model bad;
    const int rc = gpt_create_tp(&bad, SHAPE, &backend_cpu, 1, 3, 0);
    const char *msg = tu_capture_end();
    TU_CHECK(rc != 0 && strstr(msg, "tp = 3 must divide n_head = 4") != NULL,
             "tp = 3 with 4 heads is refused: %s", msg);
    gpt_shape odd = SHAPE;
    odd.vocab_size = 65;
    tu_capture_begin();
    const int rc2 = gpt_create_tp(&bad, odd, &backend_cpu, 1, 2, 0);
    const char *msg2 = tu_capture_end();
    TU_CHECK(rc2 != 0 && strstr(msg2, "tp = 2 must divide vocab_size = 65") != NULL,
             "tp = 2 with a vocabulary of 65 is refused: %s", msg2);
    gpt_free(&whole);
    return tu_finish();
}
