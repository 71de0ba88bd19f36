/* sample — see sample.h. Generation recomputes the forward over the window of the last
 * block_size tokens for each new token: simple, exact, and fast enough for the model
 * sizes a CPU trains. */
#include "sample.h"

#include "probe.h" /* probe_run */

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bpe.h"
#include "h5model.h"
#include "h5tok.h"
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

/* Draws a token from logits[V] with temperature and top-k; work is [V] scratch.
 * -1 when a logit is not finite: the probabilities would be NaN and the loop below
 * would return token 0 (a NUL byte) as if it had been drawn. */
static int32_t draw(const float *logits, int V, double temperature, int top_k, float *work,
                    rng *r)
{
    for (int i = 0; i < V; i++)
        if (!isfinite(logits[i])) return -1;
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

/* Prints a token: its bytes through the tokenizer, else as a byte. An id that neither
 * knows is printed as <id>. */
static void emit(const bpe *t, int32_t tok)
{
    size_t n;
    const unsigned char *b = t ? bpe_token_bytes(t, tok, &n) : NULL;
    if (b) fwrite(b, 1, n, stdout);
    else if (!t && tok < 256) putchar(tok);
    else printf("<%d>", tok);
}

/* The tokenizer to decode with: --tokenizer (a tokenizer.json, or an HDF5 data or
 * model file holding one), else the model file's own; NULL in *t for bytes. */
static int load_tokenizer(const char *given, const char *model, bpe **t)
{
    char *json = NULL, err[300], head[4] = {0};
    size_t len = 0;
    int got;
    const char *from = given[0] ? given : model;
    *t = NULL;
    if (given[0]) { /* a regular file only: a named pipe would block the read */
        const int fd = gt_open_regular(given, "the tokenizer", 0, NULL);
        if (fd < 0) return -1;
        if (read(fd, head, 4) != 4) head[0] = 0;
        close(fd);
    }
    if (given[0] && memcmp(head, "\x89HDF", 4) != 0) {
        got = bpe_read_file(given, &json, &len, err, sizeof err) == 0 ? 1 : -1;
        if (got < 0) gt_error("cannot read the tokenizer %s: %s", given, err);
    } else {
        got = h5tok_read_path(from, &json, &len);
        if (got == 0 && given[0]) gt_error("%s holds no tokenizer", given);
        if (got == 0 && given[0]) got = -1;
    }
    if (got <= 0) return got;
    *t = bpe_load(json, len, err, sizeof err);
    free(json);
    if (!*t) gt_error("tokenizer of %s: %s", from, err);
    return *t ? 0 : -1;
}

/* The prompt's ids into ctx (room for plen + 1 ids: bytes take one each, BPE no more
 * but the space add_prefix_space may add). */
static int encode_prompt(const bpe *t, const char *prompt, size_t plen, int vocab,
                         int32_t *ctx, size_t *n)
{
    *n = 0;
    if (!t) {
        for (size_t i = 0; i < plen; i++) ctx[(*n)++] = (unsigned char)prompt[i];
    } else {
        bpe_encoder *e = bpe_encoder_new(t);
        bpe_ids ids = {0};
        int ok = e && bpe_encode(e, prompt, plen, 1, &ids) == 0 && ids.n <= plen + 1;
        if (ok) memcpy(ctx, ids.v, ids.n * sizeof *ctx);
        *n = ok ? ids.n : 0;
        bpe_ids_free(&ids);
        bpe_encoder_free(e);
        if (!ok) {
            gt_error("out of memory encoding the prompt");
            return -1;
        }
    }
    for (size_t i = 0; i < *n; i++)
        if (ctx[i] >= vocab) {
            gt_error("prompt token %d at position %zu is outside the model's vocabulary of %d "
                     "tokens", ctx[i], i, vocab);
            return -1;
        }
    if (*n == 0) gt_error("the prompt encodes to no tokens");
    return *n ? 0 : -1;
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
 * its checksum and finiteness checks. Quiet, as train's (train_probe.c): it only has to
 * survive the reading; the parent reads the same file next and says what is wrong with
 * it, and its warnings, once (the child's were printed too: each warning twice). */
#define PROBE_SECONDS 600
typedef struct {
    const char *path;
    pid_t parent;
} check_job;

static int check_model(void *arg)
{
    const check_job *j = arg;
    /* In this process (GENTRAIN_PROBE=off, or no fork): nothing to gain, sample_run
     * reads the file itself next, and the redirection below would silence it. */
    if (getpid() == j->parent) return 0;
    const int fd = open("/dev/null", O_WRONLY);
    if (fd >= 0) {
        (void)dup2(fd, STDOUT_FILENO);
        (void)dup2(fd, STDERR_FILENO);
        close(fd);
    }
    gpt_shape shape;
    gpt_model m;
    if (h5model_read_meta(j->path, &shape, NULL, NULL) != 0 ||
        gpt_create(&m, shape, &backend_cpu, 1) != 0)
        return -1;
    int rc = load_model(j->path, &m);
    gpt_free(&m);
    char *json = NULL;
    size_t len;
    if (rc == 0 && h5tok_read_path(j->path, &json, &len) < 0) rc = -1;
    free(json);
    return rc;
}

int sample_run(const sample_options *o)
{
    int rc = -1;
    gpt_model m;
    int have_model = 0;
    int32_t *ctx = NULL;
    float *work = NULL;
    bpe *tok = NULL;
    char path[GT_PATH_MAX];
    gpt_shape shape;
    int64_t step;

    int threads = gt_resolve_threads(o->threads);
    if (threads < 0) goto done;
    if (h5model_find_newest(o->checkpoint, path, sizeof path) != 0) goto done;
    /* read it once in a child first: a damaged file that crashes or hangs HDF5 then
     * costs one error line (probe.h); one the child merely refuses is refused below,
     * in this process, which says why */
    check_job job = {path, getpid()};
    if (probe_run("model", path, check_model, &job, PROBE_SECONDS) < 0) goto done;
    if (h5model_read_meta(path, &shape, &step, NULL) != 0) goto done;
    if (gpt_create(&m, shape, &backend_cpu, threads) != 0) goto done;
    have_model = 1;
    if (load_model(path, &m) != 0 || gpt_alloc_acts(&m, 1, shape.block_size) != 0)
        goto done;
    if (o->tokenizer[0]) {
        /* the file's own tokenizer is not used, but a damaged one is a damaged file, as
         * the check above finds it (h5tok says so) */
        char *json = NULL;
        size_t len;
        const int got = h5tok_read_path(path, &json, &len);
        free(json);
        if (got < 0) goto done;
    }

    const size_t plen = strlen(o->prompt);
    if (plen == 0) {
        gt_error("the prompt is empty; give at least one character");
        goto done;
    }
    if (load_tokenizer(o->tokenizer, path, &tok) != 0) goto done;
    /* train sizes a model's vocabulary to its data's tokenizer: one with more tokens is
     * another tokenizer, whose ids mean other text, and every token would be decoded
     * wrong without a word said */
    if (tok && bpe_vocab_size(tok) > shape.vocab_size) {
        gt_error("the tokenizer %s%s has %lld tokens, more than the model's vocabulary of %d: "
                 "it is not the tokenizer the model was trained with",
                 o->tokenizer[0] ? "" : "stored in ", o->tokenizer[0] ? o->tokenizer : path,
                 (long long)bpe_vocab_size(tok), shape.vocab_size);
        goto done;
    }
    /* Room for the prompt's ids and a window of 2 x block_size new ones: the forward
     * sees only the last block_size ids, so the window slides instead of growing with
     * --tokens (2^31 - 1 of them asked for 8 GB here, refused as out of memory). */
    const size_t total = plen + 1 + 2 * (size_t)shape.block_size;
    size_t len;
    ctx = gt_malloc(total * sizeof(int32_t), "sample context");
    work = gt_malloc((size_t)shape.vocab_size * sizeof(float), "sampling scratch");
    if (!ctx || !work ||
        encode_prompt(tok, o->prompt, plen, shape.vocab_size, ctx, &len) != 0)
        goto done;
    fprintf(stderr, "gentrain: sampling from %s (step %lld), seed %llu, temperature %g, "
            "top_k %d\n", path, (long long)step, (unsigned long long)o->seed,
            o->temperature, o->top_k);
    rng r;
    rng_seed(&r, o->seed);
    if (o->tokens <= 0) fwrite(o->prompt, 1, plen, stdout);
    for (int i = 0; i < o->tokens; i++) {
        int T = len < (size_t)shape.block_size ? (int)len : shape.block_size;
        gpt_forward(&m, ctx + len - T, NULL, 1, T, 0);
        const float *last = gpt_logits(&m) + (size_t)(T - 1) * shape.vocab_size;
        int32_t id = draw(last, shape.vocab_size, o->temperature, o->top_k, work, &r);
        if (id < 0) {
            /* finite weights can still overflow (a file without a checksum, edited or
             * damaged): no text is better than NUL bytes and exit 0 */
            if (i > 0) putchar('\n');
            fflush(stdout);
            gt_error("%s: the model's output for token %d is not a number (its weights "
                     "overflow: the file is damaged or not a trained model); no text from it",
                     path, i + 1);
            goto done;
        }
        if (i == 0) fwrite(o->prompt, 1, plen, stdout); /* only once a token is drawn */
        if (len == total) { /* keep the last block_size - 1: the next forward's context */
            const size_t keep = (size_t)shape.block_size - 1;
            memmove(ctx, ctx + len - keep, keep * sizeof *ctx);
            len = keep;
        }
        ctx[len++] = id;
        emit(tok, id);
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
    bpe_free(tok);
    return rc;
}
