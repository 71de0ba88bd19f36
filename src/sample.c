/* sample — see sample.h. Generation recomputes the forward over the window of the last
 * block_size tokens for each new token: simple, exact, and fast enough for the model
 * sizes a CPU trains. */
#include "sample.h"

#include "probe.h" /* probe_run */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../io/h5model.h"
#include "kernels_cpu.h"
#include "model.h"
#include "rng.h"
#include "util.h"

void sample_defaults(sample_options *o)
{
    memset(o, 0, sizeof *o);
    strcpy(o->prompt, "\n");
    o->tokens = 256;
    o->temperature = 1.0;
    o->top_k = 0;
    o->seed = 1337;
    o->threads = 0;
}

static int cmp_desc(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* Draws a token from logits[V] with temperature and top-k; work is [V] scratch. */
static int32_t draw(const float *logits, int V, double temperature, int top_k, float *work,
                    rng *r)
{
    float cut = -INFINITY;
    if (top_k > 0 && top_k < V) {
        memcpy(work, logits, (size_t)V * sizeof(float));
        qsort(work, (size_t)V, sizeof(float), cmp_desc);
        cut = work[top_k - 1];
    }
    float max = -INFINITY;
    for (int i = 0; i < V; i++)
        if (logits[i] >= cut && logits[i] > max) max = logits[i];
    double sum = 0.0;
    for (int i = 0; i < V; i++) {
        work[i] = logits[i] >= cut ? (float)exp((logits[i] - max) / temperature) : 0.0f;
        sum += work[i];
    }
    double u = rng_uniform(r) * sum, acc = 0.0;
    int32_t last = 0;
    for (int i = 0; i < V; i++) {
        if (work[i] == 0.0f) continue;
        acc += work[i];
        last = i;
        if (u < acc) return i;
    }
    return last; /* rounding left u at the very top */
}

static void emit(int32_t tok)
{
    if (tok < 256) putchar(tok);
    else printf("<%d>", tok); /* not a byte: this model was trained on another tokenizer */
}

/* Loads the parameters of model file `path` into m (made with the file's shape), by
 * m's table of named tensors. 0, or -1 (reported). */
static int load_model(const char *path, gpt_model *m)
{
    gt_tensor_table tab;
    if (gpt_tensor_table(m, &tab) != 0) return -1;
    const int rc = h5model_load_params(path, m->shape, &tab, m->params);
    gt_tensor_table_free(&tab);
    return rc;
}

/* A child's full read of the model file (probe.h): metadata, shape, every tensor with
 * its checksum and finiteness checks. 0 when it would load. */
#define PROBE_SECONDS 600
static int check_model(void *arg)
{
    const char *path = arg;
    gpt_shape shape;
    gpt_model m;
    if (h5model_read_meta(path, &shape, NULL, NULL) != 0 ||
        gpt_create(&m, shape, &backend_cpu, 1) != 0)
        return -1;
    const int rc = load_model(path, &m);
    gpt_free(&m);
    return rc;
}

int sample_run(const sample_options *o)
{
    int rc = -1;
    gpt_model m;
    int have_model = 0;
    int32_t *ctx = NULL;
    float *work = NULL;
    char path[GT_PATH_MAX];
    gpt_shape shape;
    int64_t step;

    int threads = gt_resolve_threads(o->threads);
    if (h5model_find_newest(o->checkpoint, path, sizeof path) != 0) goto done;
    /* read it once in a child first: a damaged file that crashes or hangs HDF5 then
     * costs one error line (probe.h) */
    if (probe_run("model", path, check_model, path, PROBE_SECONDS) != 0) goto done;
    if (h5model_read_meta(path, &shape, &step, NULL) != 0) goto done;
    if (gpt_create(&m, shape, &backend_cpu, threads) != 0) goto done;
    have_model = 1;
    if (load_model(path, &m) != 0 || gpt_alloc_acts(&m, 1, shape.block_size) != 0)
        goto done;

    const size_t plen = strlen(o->prompt);
    if (plen == 0) {
        gt_error("the prompt is empty; give at least one character");
        goto done;
    }
    const size_t total = plen + (size_t)o->tokens;
    ctx = gt_malloc(total * sizeof(int32_t), "sample context");
    work = gt_malloc((size_t)shape.vocab_size * sizeof(float), "sampling scratch");
    if (!ctx || !work) goto done;
    for (size_t i = 0; i < plen; i++) {
        ctx[i] = (unsigned char)o->prompt[i];
        if (ctx[i] >= shape.vocab_size) {
            gt_error("prompt byte %d at position %zu is outside the model's vocabulary "
                     "of %d tokens", ctx[i], i, shape.vocab_size);
            goto done;
        }
    }
    fprintf(stderr, "gentrain: sampling from %s (step %lld), seed %llu, temperature %g, "
            "top_k %d\n", path, (long long)step, (unsigned long long)o->seed,
            o->temperature, o->top_k);
    rng r;
    rng_seed(&r, o->seed);
    fwrite(o->prompt, 1, plen, stdout);
    size_t len = plen;
    for (int i = 0; i < o->tokens; i++) {
        int T = len < (size_t)shape.block_size ? (int)len : shape.block_size;
        gpt_forward(&m, ctx + len - T, NULL, 1, T, 0);
        const float *last = gpt_logits(&m) + (size_t)(T - 1) * shape.vocab_size;
        int32_t tok = draw(last, shape.vocab_size, o->temperature, o->top_k, work, &r);
        ctx[len++] = tok;
        emit(tok);
        fflush(stdout);
    }
    putchar('\n');
    if (fflush(stdout) != 0) {
        gt_error("writing the sample to standard output failed");
        goto done;
    }
    rc = 0;
done:
    free(ctx);
    free(work);
    if (have_model) gpt_free(&m);
    return rc;
}
