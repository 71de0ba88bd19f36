/* train — see train.h. Order of a step: take the loader's batch, forward with the loss
 * gradient, backward (with several ranks, each finished bucket of gradients starts its
 * reduction while backward goes on: parallel.h), wait for the reduction, global-norm
 * clip, AdamW, then log. With sync = async the gradient waited for and applied is the
 * one of `staleness` steps before, from a ring of gradient buffers, and (async_predict)
 * forward and backward run on weights extrapolated to where that gradient will be
 * applied. Everything that can fail for a user reason (data, output folder, log file,
 * ranks that disagree) is checked before the first step.
 *
 * Data parallel (parallel.h): every rank holds the whole model and the optimizer state,
 * reads its own B samples of the global batch of B x ranks (loader.h), and applies the
 * same averaged gradient, so the parameters stay identical on every rank (checked once
 * at the end). Rank 0 alone prints, writes the log and saves the model. Failures during
 * setup are agreed by all ranks (par_all_ok) so every rank leaves cleanly; a failure one
 * rank meets alone during the steps (a read error, the log) ends the job (par_abort). */
#include "train.h"

#include <cblas.h>
#include <errno.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../io/bpe.h"
#include "../io/ckpt.h"
#include "../io/h5data.h"
#include "../io/h5model.h"
#include "../io/h5tok.h"
#include "../offload/offload.h"
#include "blas_core.h"
#include "cpu_features.h"
#include "device_step.h"
#include "gemm_bf16.h"
#include "kernels_cpu.h"
#include "loader.h"
#include "grid.h"
#include "model.h"
#include "optim.h"
#include "parallel.h"
#include "pipeline.h"
#include "signals.h"
#include "util.h"
#include "windows.h"

enum { LOADER_DEPTH = 4 };
enum { MAX_SLOTS = 9 }; /* gradient buffers: staleness (at most 8) + 1 */

/* Everything a run holds, so one cleanup path frees it whatever failed. */
typedef struct run {
    h5data *train, *val;
    token_windows train_w, val_w;
    int32_t *eval_tokens;   /* [eval_batches*accum*B, T+1] this rank's validation windows */
    int32_t *eval_in, *eval_tg; /* [B,T] */
    int64_t eval_windows;
    gpt_model model;
    int have_model;
    adamw_state opt;
    loader *ld;
    FILE *log;
    int threads;
    double peak_gflops;
    float *ring[MAX_SLOTS]; /* gradient buffers; ring[0] is the model's own */
    int n_slots;
    par_reducer *red;       /* with more than one rank */
    float *master;          /* async weight prediction: the real parameters while the */
    float *predicted;       /* step runs on predicted ones, and the parameters before */
    float *before_update;   /* the last update (their difference is the last update) */
    int64_t first_step;     /* 0, or the step of the checkpoint resumed from */
    int accum;              /* micro-steps per optimizer step (global_batch_size) */
    int mpi_io;             /* data read through parallel HDF5's MPI-IO driver */
    pipeline *pipe;         /* pp > 1: this stage's micro-batch schedule */
    int micro;              /* its micro-batches per step */
    ckpt_meta meta;         /* of that checkpoint */
    int resumed;
    int on_gpu;             /* offload = all or blocks: this rank's GPU trains */
    int slot_overflow[MAX_SLOTS]; /* on_gpu: the gradient in ring[i] overflowed FP16 */
    device_step dev;        /* its GPU model, the host's part and the loss scale (on_gpu) */
    char data_id[256];      /* h5data_fingerprint of the training data (rank 0) */
    char *tokenizer;        /* the data's tokenizer.json (rank 0; NULL: bytes), saved */
    size_t tok_len;         /* with the model so that sample decodes its ids */
} run;

/* The tokenizer stored in the data file (io/h5tok.h), checked to load; none for
 * byte-level data. 0 or -1 (reported). */
static int read_tokenizer(run *r, const gt_config *c, int64_t vocab)
{
    int got = h5tok_read_path(c->data, &r->tokenizer, &r->tok_len);
    if (got <= 0) return got;
    char err[300];
    bpe *t = bpe_load(r->tokenizer, r->tok_len, err, sizeof err);
    if (!t) {
        gt_error("%s: its tokenizer (/%s): %s", c->data, H5TOK_DATASET, err);
        return -1;
    }
    printf("data: tokenizer: byte-level BPE of %lld tokens (%lld merges), saved with the "
           "model\n", (long long)bpe_vocab_size(t), (long long)bpe_n_merges(t));
    if (bpe_vocab_size(t) > vocab)
        gt_warn("the data's tokenizer has %lld tokens, the model %lld: the model cannot "
                "produce the last %lld", (long long)bpe_vocab_size(t), (long long)vocab,
                (long long)(bpe_vocab_size(t) - vocab));
    bpe_free(t);
    return 0;
}

static int is_none(const char *s) { return s[0] == '\0' || strcmp(s, "none") == 0; }

/* Opens a token dataset, settles the vocabulary, checks every token (each rank its
 * share of them: no rank reads the whole dataset) and the length. */
static h5data *open_tokens(const gt_config *c, const char *dataset, int mpi_io,
                           int64_t *vocab, token_windows *w)
{
    h5data *d = mpi_io ? h5data_open_mpi(c->data, dataset) : h5data_open(c->data, dataset);
    if (!d) return NULL;
    char what[GT_PATH_MAX + GT_NAME_MAX + 2];
    snprintf(what, sizeof what, "%s:%s", c->data, dataset);
    if (*vocab == 0) {
        *vocab = h5data_vocab_attr(d);
        if (*vocab <= 0) {
            gt_error("%s has no vocab_size attribute; set vocab_size in the config", what);
            goto fail;
        }
    }
    double t0 = gt_now();
    if (h5data_check_range_part(d, *vocab, par_rank(), par_world()) != 0) goto fail;
    double dt = gt_now() - t0;
    if (windows_init(w, h5data_rows(d), h5data_row_len(d), c->block_size, what) != 0)
        goto fail;
    par_printf("data: %s: %s [%lld x %lld] %s, %lld windows of %d tokens (checked in %.2f s)\n",
           what, h5data_rank(d) == 1 ? "stream" : "sequences", (long long)h5data_rows(d),
           (long long)h5data_row_len(d), h5data_type_name(d), (long long)w->count,
           c->block_size + 1, dt);
    return d;
fail:
    h5data_close(d);
    return NULL;
}

static int setup_data(run *r, const gt_config *c, int64_t *vocab)
{
    *vocab = c->vocab_size;
    r->train = open_tokens(c, c->train_dataset, r->mpi_io, vocab, &r->train_w);
    if (!r->train) return -1;
    r->train_w.random = strcmp(c->sampling, "random") == 0;
    par_printf("data: read through %s\n",
               h5data_uses_mpi_io(r->train)
                   ? "MPI-IO (parallel HDF5, independent reads, each rank its own samples)"
                   : "HDF5's default driver (POSIX reads, each rank its own samples)");
    if (c->vocab_size == 0 && h5data_vocab_attr(r->train) > 0)
        par_printf("data: vocab_size %lld (from the dataset attribute)\n", (long long)*vocab);
    if (*vocab > INT32_MAX) {
        gt_error("vocab_size %lld is too large", (long long)*vocab);
        return -1;
    }
    if (is_none(c->val_dataset)) return 0;

    int64_t val_vocab = *vocab;
    r->val = open_tokens(c, c->val_dataset, r->mpi_io, &val_vocab, &r->val_w);
    if (!r->val) return -1;
    /* The validation set is read once: eval_batches global batches (batch_size x ranks
     * x micro-steps windows each) of fixed windows, rank r keeping the r-th contiguous
     * share of them: eval_batches x micro-steps batches of batch_size windows. */
    const int B = c->batch_size, T = c->block_size;
    r->eval_windows = (int64_t)c->eval_batches * r->accum * B;
    const int64_t all_windows = r->eval_windows * grid_dp_size();
    const int64_t first = r->eval_windows * grid_dp_rank(); /* tp peers: the same ones */
    if (all_windows > r->val_w.count && par_is_root())
        gt_warn("%s:%s has %lld windows, fewer than eval_batches x the global batch = "
                "%lld: evaluation repeats windows", c->data, c->val_dataset,
                (long long)r->val_w.count, (long long)all_windows);
    r->eval_tokens = gt_malloc((size_t)r->eval_windows * (size_t)(T + 1) * sizeof(int32_t),
                               "validation batches");
    if (!r->eval_tokens) return -1;
    for (int64_t k = 0; k < r->eval_windows; k++) {
        int64_t row, col;
        windows_eval(&r->val_w, first + k, all_windows, &row, &col);
        if (h5data_read(r->val, row, col, T + 1, r->eval_tokens + k * (T + 1), *vocab) != 0)
            return -1;
    }
    return 0;
}

/* Mean loss over the fixed validation windows of all ranks: each rank evaluates its
 * share, the sums of batch means are added over the ranks (every batch has B x T
 * tokens, so the mean of the batch means is the mean over all windows). */
static int evaluate(run *r, const gt_config *c, int32_t *in, int32_t *tg, double *val)
{
    const int B = c->batch_size, T = c->block_size;
    const int64_t batches = (int64_t)c->eval_batches * r->accum;
    double sum = 0.0;
    for (int64_t batch = 0; batch < batches; batch++) {
        for (int b = 0; b < B; b++) {
            const int32_t *win = r->eval_tokens + ((int64_t)batch * B + b) * (T + 1);
            memcpy(in + (size_t)b * T, win, (size_t)T * sizeof(int32_t));
            memcpy(tg + (size_t)b * T, win + 1, (size_t)T * sizeof(int32_t));
        }
        if (r->on_gpu) {
            float loss;
            if (device_step_loss(&r->dev, r->model.params, batch == 0, in, tg, B, T, &loss) != 0)
                return -1; /* this rank only: the caller ends the job */
            sum += loss;
        } else {
            sum += r->pipe ? pipeline_eval(r->pipe, in, tg)
                           : gpt_forward(&r->model, in, tg, B, T, 0);
        }
    }
    /* With pp > 1 only the last stages (world / pp ranks) have a loss. */
    *val = par_sum_double(sum) / ((double)batches * (par_world() / grid_pp_size()));
    return 0;
}

/* Whether step (0-based) ends with an evaluation. */
static int is_eval_step(const run *r, const gt_config *c, int64_t step)
{
    return r->val && ((c->eval_every > 0 && (step + 1) % c->eval_every == 0) ||
                      step + 1 == c->steps);
}

/* Gradient noise scale (McCandlish et al., "An empirical model of large-batch
 * training"): from |g|^2 of batches of b_small tokens (mean over the ranks of their own
 * gradients) and |G|^2 of the averaged batch of b_big = b_small x world tokens,
 *   |G_true|^2 ~ (b_big |G|^2 - b_small |g|^2) / (b_big - b_small)
 *   tr(Sigma)  ~ (|g|^2 - |G|^2) / (1/b_small - 1/b_big)
 * and B_noise = tr(Sigma) / |G_true|^2 tokens. Both estimates are noisy, so each is
 * smoothed by an exponential moving average over evaluations (bias-corrected) before
 * the ratio is taken. Returns B_noise in tokens, NaN while |G_true|^2 is not positive. */
static double noise_scale_update(double g_small2, double g_big2, double b_small, int world,
                                 double *ema_g2, double *ema_s, double *weight)
{
    const double beta = 0.7, b_big = b_small * world;
    const double g_true2 = (b_big * g_big2 - b_small * g_small2) / (b_big - b_small);
    const double trace = (g_small2 - g_big2) / (1.0 / b_small - 1.0 / b_big);
    *ema_g2 = beta * *ema_g2 + (1.0 - beta) * g_true2;
    *ema_s = beta * *ema_s + (1.0 - beta) * trace;
    *weight = beta * *weight + (1.0 - beta);
    const double g2 = *ema_g2 / *weight, s = *ema_s / *weight;
    return g2 > 0.0 ? s / g2 : NAN;
}

/* The JSON Lines log: a regular file is created, truncated or appended to; a terminal,
 * /dev/stdout or another character device is written as it is; a named pipe only when
 * a reader is there already (a plain open would wait for one forever); a folder or a
 * socket is refused. Reports and returns NULL on failure. */
static FILE *open_log(const char *path, int append)
{
    struct stat st;
    const int exists = stat(path, &st) == 0;
    if (exists && (S_ISDIR(st.st_mode) || S_ISSOCK(st.st_mode) || S_ISBLK(st.st_mode))) {
        gt_error("log file %s is %s, not a file to write JSON lines to", path,
                 S_ISDIR(st.st_mode) ? "a folder" : S_ISSOCK(st.st_mode) ? "a socket"
                                                                      : "a block device");
        return NULL;
    }
    const int special = exists && !S_ISREG(st.st_mode);
    int flags = O_WRONLY | O_CLOEXEC |
                (special ? O_APPEND | O_NONBLOCK : O_CREAT | (append ? O_APPEND : O_TRUNC));
    int fd = open(path, flags, 0666);
    if (fd < 0) {
        if (errno == ENXIO && special && S_ISFIFO(st.st_mode))
            gt_error("log file %s is a named pipe (FIFO) with no reader; start the reader "
                     "first", path);
        else
            gt_error("cannot open log file %s for writing: %s", path, strerror(errno));
        return NULL;
    }
    if (special) { /* writes block again, as to any pipe */
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    }
    FILE *f = fdopen(fd, append || special ? "a" : "w");
    if (!f) {
        gt_error("cannot open log file %s for writing: %s", path, strerror(errno));
        close(fd);
    }
    return f;
}

/* Rank 0 only: the output folder, the checkpoint folder (ckpt_dir, NULL = none) and
 * the log file; a resumed run appends to the log. */
static int check_output_paths(const gt_config *c, run *r, const char *ckpt_dir, int append)
{
    if (!par_is_root()) return 0;
    if (!is_none(c->out)) {
        if (gt_mkdirs(c->out) != 0) return -1;
        if (access(c->out, W_OK) != 0) {
            gt_error("output folder %s is not writable", c->out);
            return -1;
        }
    }
    if (ckpt_dir && gt_mkdirs(ckpt_dir) != 0) return -1;
    if (c->log[0]) {
        char dir[GT_PATH_MAX];
        memcpy(dir, c->log, sizeof dir);
        char *slash = strrchr(dir, '/');
        if (slash && slash != dir) {
            *slash = '\0';
            if (gt_mkdirs(dir) != 0) return -1;
        }
        if (!(r->log = open_log(c->log, append))) return -1;
    }
    return 0;
}

static void free_run(run *r)
{
    free(r->tokenizer);
    if (r->ld) loader_stop(r->ld);
    par_reducer_drain(r->red); /* MPI must not write into freed buffers */
    pipeline_free(r->pipe);
    par_reducer_free(r->red);
    if (r->have_model) r->model.grads = r->ring[0] ? r->ring[0] : r->model.grads;
    for (int i = 1; i < MAX_SLOTS; i++) free(r->ring[i]);
    if (r->have_model && r->master) r->model.params = r->master;
    free(r->predicted);
    free(r->before_update);
    if (r->on_gpu) device_step_free(&r->dev);
    if (r->have_model) gpt_free(&r->model);
    adamw_free(&r->opt);
    free(r->eval_tokens);
    free(r->eval_in);
    free(r->eval_tg);
    h5data_close(r->train);
    h5data_close(r->val);
    ckpt_meta_free(&r->meta);
    if (r->log && fclose(r->log) != 0) gt_error("writing the log file failed");
}

/* With tp or pp > 1: puts the parts of this replica (pp x tp ranks) together, on its
 * first rank, into `whole` (created here, the layout of one process; the caller frees
 * it) and, when whole_opt is not NULL, AdamW's moments into whole_opt the same way. A
 * collective over the replica; the other ranks get nothing. With one part it does
 * nothing (the model is whole). Returns 0, or -1 on every rank of the replica
 * (reported). */
static int gather_whole(const run *r, gpt_model *whole, adamw_state *whole_opt)
{
    const int parts = grid_mp_size(), tp = grid_tp_size(), pp = grid_pp_size();
    if (parts == 1) return 0;
    const int root = grid_mp_rank() == 0;
    int ok = 1;
    if (root) {
        ok = gpt_create(whole, r->model.shape, r->model.be, r->threads) == 0;
        if (ok && whole_opt) ok = adamw_init(whole_opt, whole->n_params) == 0;
    }
    /* The others must not start sending to a root that could not take it. */
    if (!grid_mp_all_ok(ok)) return -1;
    const float *mine[3] = {r->model.params, r->opt.m, r->opt.v};
    const int n_bufs = whole_opt ? 3 : 1;
    if (!root) {
        for (int k = 0; k < n_bufs; k++) grid_mp_send_root(mine[k], r->model.n_params);
        return 0;
    }
    float *dest[3] = {whole->params, whole_opt ? whole_opt->m : NULL,
                      whole_opt ? whole_opt->v : NULL};
    if (whole_opt) whole_opt->t = r->opt.t;
    for (int k = 0; k < n_bufs; k++)
        gpt_shard_copy(&r->model, grid_tp_rank(), dest[k], (float *)mine[k], 1);
    /* Each other part: its layout (a model of that stage and shard, whose parameter
     * buffer receives), then its buffers in order. */
    for (int q = 1; q < parts; q++) {
        gpt_model part;
        if (gpt_create_stage(&part, r->model.shape, r->model.be, 1, tp, q % tp, q / tp, pp) !=
            0)
            par_abort_reported(); /* the peers are already sending */
        for (int k = 0; k < n_bufs; k++) {
            grid_mp_recv(part.params, part.n_params, q);
            gpt_shard_copy(&part, q % tp, dest[k], part.params, 1);
        }
        gpt_free(&part);
    }
    return 0;
}

/* Loads checkpoint `from` into the run's model and optimizer: directly with one part
 * per replica; with tp or pp > 1 every rank reads the whole model and keeps its part
 * (memory: one whole model and its moments, briefly). 0, or -1 (reported). */
static int load_checkpoint(run *r, const char *from)
{
    if (grid_mp_size() == 1) return ckpt_load(from, &r->model, &r->opt, &r->meta);
    gpt_model whole;
    adamw_state whole_opt;
    memset(&whole_opt, 0, sizeof whole_opt);
    int rc = -1;
    if (gpt_create(&whole, r->model.shape, r->model.be, r->threads) != 0) return -1;
    if (adamw_init(&whole_opt, whole.n_params) == 0 &&
        ckpt_load(from, &whole, &whole_opt, &r->meta) == 0) {
        const int me = grid_tp_rank();
        gpt_shard_copy(&r->model, me, whole.params, r->model.params, 0);
        gpt_shard_copy(&r->model, me, whole_opt.m, r->opt.m, 0);
        gpt_shard_copy(&r->model, me, whole_opt.v, r->opt.v, 0);
        r->opt.t = whole_opt.t;
        rc = 0;
    }
    gpt_free(&whole);
    adamw_free(&whole_opt);
    return rc;
}

/* Everything before the first step that can fail on one rank alone: output folder and
 * log (rank 0), data, model, optimizer (initialised, or loaded from the checkpoint
 * `from` when not NULL: then training continues at its step), the loader, buffers.
 * Returns 0 or -1 (reported). */
static int setup_run(run *r, const gt_config *c, int64_t *vocab, const char *from,
                     const char *ckpt_dir, int gpu)
{
    const int B = c->batch_size, T = c->block_size;
    if (check_output_paths(c, r, ckpt_dir, from != NULL) != 0) return -1;
    if (setup_data(r, c, vocab) != 0) return -1;
    gpt_shape shape = {(int)*vocab, T, c->n_layer, c->n_head, c->n_embd};
    const gt_backend *be = strcmp(c->precision, "bf16") == 0 ? &backend_cpu_bf16 : &backend_cpu;
    if (gpt_create_stage(&r->model, shape, be, r->threads, grid_tp_size(),
                         grid_tp_rank(), grid_pp_rank(), grid_pp_size()) != 0)
        return -1;
    r->have_model = 1;
    r->model.tp_allreduce = grid_tp_allreduce_hook;
    r->model.tp_allreduce_max = grid_tp_allreduce_max_hook;
    if (gpt_alloc_grads(&r->model) != 0 || adamw_init(&r->opt, r->model.n_params) != 0)
        return -1;
    /* Activations: one slot for the batch, or the pipeline's for its micro-batches;
     * none here when the GPU trains (they live on the device; with offload = blocks
     * device_step holds the embedding's and the head's). */
    if (grid_pp_size() > 1) {
        if (!(r->pipe = pipeline_create(&r->model, r->micro, B, T))) return -1;
    } else if (!gpu && gpt_alloc_acts(&r->model, B, T) != 0) {
        return -1;
    }
    if (from) {
        /* Parameters, moments and AdamW's t; the step is the data cursor (ckpt.h). */
        if (load_checkpoint(r, from) != 0) return -1;
        r->resumed = 1;
        r->first_step = r->meta.step;
    } else {
        if (gpt_init_weights(&r->model, c->seed) != 0) return -1;
    }
    /* One optimizer step reads B x ranks x accum windows; they must be distinct. */
    const int64_t per_step = (int64_t)B * grid_dp_size() * r->accum;
    if (r->accum > 1 && r->train_w.count < per_step) {
        gt_error("%s:%s has %lld windows; global_batch_size %d needs at least that many",
                 c->data, c->train_dataset, (long long)r->train_w.count,
                 c->global_batch_size);
        return -1;
    }
    /* The loader counts micro-steps: micro-step m of every rank together reads the
     * samples m*B*ranks .. (m+1)*B*ranks-1, so a step reads the same global batch
     * whatever the split into ranks and micro-steps. */
    r->ld = loader_start(r->train, &r->train_w, c->seed, B, T, *vocab,
                         r->first_step * r->accum, LOADER_DEPTH, grid_dp_rank(),
                         grid_dp_size());
    if (!r->ld) return -1;
    r->eval_in = gt_malloc((size_t)B * T * sizeof(int32_t), "eval inputs");
    r->eval_tg = gt_malloc((size_t)B * T * sizeof(int32_t), "eval targets");
    return r->eval_in && r->eval_tg ? 0 : -1;
}

/* The config text saved with the model: as given, but with the vocabulary actually
 * used in place of "0 = from the data". malloc'd; NULL on failure (reported). */
static char *effective_config_text(const gt_config *c, int vocab)
{
    gt_config *effective = gt_malloc(sizeof *effective, "config copy");
    if (!effective) return NULL;
    *effective = *c;
    effective->vocab_size = vocab;
    char *text = config_to_text(effective);
    free(effective);
    return text;
}

/* What identifies the datasets this rank reads, as text for par_check_same. */
static void dataset_identity(const run *r, const gt_config *c, int64_t vocab, char *buf,
                             size_t cap)
{
    int n = snprintf(buf, cap, "train %s:%s %s [%lld x %lld] vocab_size %lld\n", c->data,
                     c->train_dataset, h5data_type_name(r->train),
                     (long long)h5data_rows(r->train), (long long)h5data_row_len(r->train),
                     (long long)vocab);
    if (r->val && n > 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, "val %s:%s %s [%lld x %lld]\n", c->data,
                 c->val_dataset, h5data_type_name(r->val), (long long)h5data_rows(r->val),
                 (long long)h5data_row_len(r->val));
}

/* Whether the checkpoint was trained on the data this run has (rank 0): a file replaced
 * between a checkpoint and its resume would continue the run on other tokens. Names
 * the first field that differs. A checkpoint from before fingerprints gets a note. */
static int same_data(const ckpt_meta *meta, const char *now, const char *path)
{
    if (!meta->data) {
        printf("resume: %s does not record its training data (an older gentrain wrote "
               "it): not compared\n", meta->path);
        return 1;
    }
    if (strcmp(meta->data, now) == 0) return 1;
    /* fields "key=value" separated by spaces; the first that differs */
    const char *a = meta->data, *b = now;
    while (*a && *a == *b) a++, b++;
    while (a > meta->data && a[-1] != ' ') a--, b--;
    gt_error("resume: the training data %s is not what checkpoint %s was trained on "
             "(%.*s then, %.*s now); resume on that data, or start fresh with resume = none",
             path, meta->path, (int)strcspn(a, " "), a, (int)strcspn(b, " "), b);
    return 0;
}

/* resume = auto: the step of the newest checkpoint of dir that verifies, found by rank
 * 0 and broadcast: >= 0, -1 when there is none (a fresh run), -2 on an error
 * (reported by rank 0), and so when every checkpoint there is damaged: starting fresh
 * would overwrite them. A collective. */
static int64_t find_resume_step(const char *dir)
{
    double found = -2.0;
    if (par_is_root()) {
        char path[GT_PATH_MAX + 64];
        int k = ckpt_find_latest(dir, path, sizeof path);
        if (k == 0) found = -1.0;
        if (k == 2)
            gt_error("resume = auto: no checkpoint in %s verifies (see the warnings above); "
                     "none was changed. Move them away, or set resume = none to start "
                     "fresh", dir);
        if (k == 1) {
            const char *base = strrchr(path, '/');
            long long step = -1;
            if (sscanf(base ? base + 1 : path, "ckpt_%lld.h5", &step) == 1 && step >= 0)
                found = (double)step;
            else
                gt_error("checkpoint %s: cannot read the step from its name", path);
        }
    }
    return (int64_t)par_bcast_double(found);
}

/* Rank 0 writes the checkpoint of `step` steps done into dir and prunes the folder to
 * keep_ckpts files; every rank learns whether it worked. path gets the file (rank 0). */
static int save_checkpoint(const run *r, const gt_config *c, const char *dir, int64_t step,
                           const char *config_text, char *path, size_t cap)
{
    /* One whole model whatever the grid (tp or pp > 1: replica 0's parts put together
     * on rank 0), so any tp and pp can resume it. The world size recorded is the number
     * of replicas: what fixes each one's data. */
    const int split = grid_mp_size() > 1;
    const double t0 = gt_now();
    gpt_model whole;
    adamw_state whole_opt;
    memset(&whole, 0, sizeof whole);
    memset(&whole_opt, 0, sizeof whole_opt);
    int ok = 1;
    if (split && grid_dp_rank() == 0) ok = gather_whole(r, &whole, &whole_opt) == 0;
    if (par_is_root() && ok) {
        ok = ckpt_save(dir, step, split ? &whole : &r->model, split ? &whole_opt : &r->opt,
                       config_text, grid_dp_size(), c->seed,
                       r->on_gpu ? (double)r->dev.scaler.scale : 1.0,
                       r->on_gpu ? (int64_t)r->dev.scaler.clean_steps : 0,
                       r->data_id[0] ? r->data_id : NULL, path, cap) == 0 &&
             ckpt_prune(dir, c->keep_ckpts) >= 0;
        if (ok) printf("checkpoint: step %lld saved to %s in %.2f s\n", (long long)step,
                       path, gt_now() - t0);
        fflush(stdout);
    }
    gpt_free(&whole);
    adamw_free(&whole_opt);
    return par_all_ok(ok) ? 0 : -1;
}

/* The global gradient norm of a model split over the ranks of a replica: the split
 * tensors' squares added over the tp peers, the whole ones (the same on every peer)
 * counted once (tp rank 0), every stage's added, and the last stage's copy of the
 * tied wte left out (after grid_tie_allreduce_sum it equals the first stage's). */
static double grad_norm_parts(const gpt_model *m, const float *g)
{
    double sq = 0.0;
    for (int i = 0; i < m->n_info; i++) {
        const gpt_param_info *p = &m->info[i];
        if (p->split == GPT_SPLIT_NONE && grid_tp_rank() != 0) continue;
        if (i == m->i_wte && !m->has_embed) continue;
        const double norm = grad_global_norm(g + p->offset, p->numel); /* SIMD + OpenMP */
        sq += norm * norm;
    }
    return sqrt(grid_mp_sum_double(sq));
}

/* Where settle_offload puts the training (0: the CPU). */
enum { GPU_ALL = 1, GPU_BLOCKS = 2 };

/* Which device trains (offload): each rank takes the GPU of its index on its node
 * (modulo the GPUs there). The GPU trains only when every rank has one (a step is a
 * collective; mixed devices would only wait for the slowest) and the model is whole on
 * each rank (tp = pp = 1); otherwise one line says why the
 * CPU trains, or, with offload = required, that is an error. Where the GPU trains, one
 * line says which layers run where. Every rank decides the same; sets *gpu (0: the
 * CPU, GPU_ALL, GPU_BLOCKS) and returns 0, or -1 on every rank. */
static int settle_offload(const gt_config *c, int *gpu)
{
    *gpu = 0;
    if (strcmp(c->offload, "none") == 0) return 0;
    const int local = par_local_rank(); /* a collective: before any branch */
    const int required = strcmp(c->offload, "required") == 0;
    char why[256] = "", name[256] = "";
    const int n = offload_device_count(why, sizeof why);
    int bound = n > 0 && offload_use_device(local % n, name, sizeof name, why,
                                            sizeof why) == 0;
    if (n > 0 && !bound) {
        gt_error("offload: %s", why);
        return par_all_ok(0) ? 0 : -1;
    }
    if (!par_all_ok(1)) return -1;
    const int everyone = par_all_ok(bound);
    const char *cpu_because = NULL;
    if (!everyone)
        cpu_because = n == 0 ? why : "not every rank has a GPU";
    else if (grid_tp_size() > 1 || grid_pp_size() > 1)
        cpu_because = "tp or pp > 1 runs on the CPU for now (the GPU step takes the whole "
                      "model)";
    if (cpu_because) {
        if (required) {
            if (par_is_root()) gt_error("offload = required, but %s", cpu_because);
            return -1;
        }
        if (n == 0)
            par_printf("offload: no GPU (%s); every layer runs on the CPU\n", cpu_because);
        else
            par_printf("offload: %s; every layer runs on the CPU\n", cpu_because);
        return 0;
    }
    if (strcmp(c->offload, "blocks") == 0) {
        par_printf("offload: the %d transformer blocks on the GPU (rank %d: GPU %d of %d on "
                   "its node, %s) in FP16, the embeddings, final LayerNorm, head and loss on "
                   "the CPU in FP32; FP32 master weights and AdamW on the host, dynamic loss "
                   "scaling from %.0f\n", c->n_layer, par_rank(), local % n, n, name,
                   (double)LOSS_SCALE_INIT);
        *gpu = GPU_BLOCKS;
        return 0;
    }
    par_printf("offload: every layer on the GPU (rank %d: GPU %d of %d on its node, %s): "
               "FP16 weights and activations, FP32 master weights and AdamW on the host, "
               "dynamic loss scaling from %.0f\n", par_rank(), local % n, n, name,
               (double)LOSS_SCALE_INIT);
    *gpu = GPU_ALL;
    return 0;
}

int train_run(const gt_config *c)
{
    run r;
    memset(&r, 0, sizeof r);
    int rc = -1;
    char *config_text = NULL, *saved_text = NULL;
    const int B = c->batch_size, T = c->block_size;
    const int world = par_world();
    int dp = 1, tp = 1, pp = 1; /* the grid: replicas x stages x shards (grid.h) */
    const int async = strcmp(c->sync, "async") == 0;
    /* Checkpoints need a run folder, and sync steps (config_validate refuses the
     * checkpoint keys otherwise; a stop signal then ends the run without one). */
    char ckpt_dir[GT_PATH_MAX + 16] = "";
    const int can_ckpt = !is_none(c->out) && !async;
    if (can_ckpt) snprintf(ckpt_dir, sizeof ckpt_dir, "%s/checkpoints", c->out);

    /* Every rank must train the same run: compare the configs before anything else. */
    config_text = config_to_text(c);
    if (!par_all_ok(config_text != NULL)) goto done;
    if (par_check_same("config", config_text, strlen(config_text)) != 0) goto done;

    /* The grid: the same config on every rank, so the same answer everywhere. */
    if (grid_init(c->tp, c->pp) != 0) goto done;
    dp = grid_dp_size();
    tp = grid_tp_size();
    pp = grid_pp_size();
    r.micro = c->micro_batches > 0 ? c->micro_batches : pp;
    if (pp > 1 && (B % r.micro != 0 || async)) {
        if (par_is_root() && async)
            gt_error("pp = %d with sync = async is not supported (a pipeline step applies "
                     "its own gradient)", pp);
        else if (par_is_root())
            gt_error("pp = %d: micro_batches = %d must divide batch_size = %d", pp, r.micro,
                     B);
        goto done;
    }

    int gpu = 0;
    if (settle_offload(c, &gpu) != 0) goto done;

    r.threads = gt_resolve_threads(c->threads);
    /* MFU: against the CPU's measured multiply-add peak, or, on a GPU, only when peak_gflops says
     * what the GPU's is. */
    const int bf16 = !gpu && strcmp(c->precision, "bf16") == 0;
    r.peak_gflops = c->peak_gflops > 0 ? c->peak_gflops
                    : gpu              ? 0.0
                    : bf16             ? cpu_bf16_peak_gflops(r.threads)
                                       : cpu_fma_peak_gflops(r.threads);
    par_printf("threads: %d OpenMP, kernels %s, OpenBLAS %s; ", r.threads,
               kernels_simd_name(), openblas_get_parallel() == 2 ? "openmp" :
               openblas_get_parallel() == 1 ? "pthreads" : "sequential");
    if (r.peak_gflops > 0)
        par_printf("peak %.1f GFLOP/s%s\n", r.peak_gflops,
                   c->peak_gflops > 0 ? ""
                   : bf16 ? " (measured BF16 dot-product peak; set peak_gflops to override)"
                          : " (measured FMA peak; set peak_gflops to override)");
    else
        par_printf("no MFU (set peak_gflops to the GPU's peak for it)\n");
    par_printf("BLAS: %s\n", blas_core_summary());
    if (bf16) {
        /* reserve the BF16 products' buffers (on every rank: a collective answer) */
        if (!par_all_ok(gemm_bf16_init(r.threads) == 0)) goto done;
        par_printf("precision: bf16 matrix products (%s path), FP32 accumulation, weights "
                   "and optimizer\n", gemm_bf16_path_name());
    } else if (gpu && strcmp(c->precision, "bf16") == 0) {
        par_printf("precision: bf16 applies to the CPU; the GPU trains in FP16 with loss "
                   "scaling\n");
    }
    /* How the data is read: MPI-IO needs parallel HDF5, an MPI run, and MPI calls from
     * the loader thread (MPI_THREAD_MULTIPLE). The same answer on every rank. */
    const int mpi_io_ok = h5data_mpi_io_available() && par_thread_multiple();
    if (strcmp(c->data_io, "mpi-io") == 0 && !mpi_io_ok) {
        if (par_is_root())
            gt_error("data_io = mpi-io: %s; use data_io = posix (or auto)",
                     !h5data_mpi_io_available()
                         ? "this gentrain was built with serial HDF5, which has no MPI-IO "
                           "driver"
                     : !par_launched() ? "MPI-IO needs an MPI run (mpirun or srun)"
                                       : "MPI does not give MPI_THREAD_MULTIPLE, which "
                                         "reading from the loader thread needs");
        goto done;
    }
    r.mpi_io = strcmp(c->data_io, "posix") != 0 && mpi_io_ok;

    /* global_batch_size: whole micro-steps of batch_size x ranks sequences. */
    r.accum = 1;
    if (c->global_batch_size > 0) {
        const int64_t per_micro = (int64_t)B * dp;
        if (c->global_batch_size % per_micro != 0) {
            if (par_is_root())
                gt_error("global_batch_size %d is not a multiple of batch_size x %s = "
                         "%d x %d = %lld (it must be a whole number of micro-steps)",
                         c->global_batch_size, tp > 1 ? "replicas" : "ranks", B, dp,
                         (long long)per_micro);
            goto done;
        }
        r.accum = (int)(c->global_batch_size / per_micro);
        if (pp > 1 && r.accum > 1) {
            if (par_is_root())
                gt_error("global_batch_size %d with pp = %d: gradient accumulation over "
                         "pipeline steps is not supported; raise batch_size and "
                         "micro_batches instead", c->global_batch_size, pp);
            goto done;
        }
    }
    if (tp > 1 || pp > 1)
        par_printf("grid: %d replica%s (data parallel) x pp %d (stages of contiguous "
                   "layers, %d micro-batches of %d, 1F1B) x tp %d (heads and MLP units "
                   "split): ranks 0..%d hold replica 0\n", dp, dp == 1 ? "" : "s", pp,
                   r.micro, B / r.micro, tp, tp * pp - 1);
    if (dp > 1 || r.accum > 1)
        par_printf("global batch: %lld sequences = batch_size %d x %d %s%s x %d "
                   "micro-step%s%s\n", (long long)B * dp * r.accum, B, dp,
                   tp > 1 ? "replica" : "rank", dp == 1 ? "" : "s", r.accum,
                   r.accum == 1 ? "" : "s", r.accum > 1 ? " (gradients accumulated)" : "");

    /* A stop signal from here on ends the run at a step boundary (signals.h). */
    if (!par_all_ok(signals_install() == 0)) goto done;

    /* Which checkpoint to continue from, if any: every rank loads the same file. */
    char resume_path[GT_PATH_MAX + 64];
    const char *from = NULL;
    if (strcmp(c->resume, "auto") == 0) {
        const int64_t step = find_resume_step(ckpt_dir);
        if (step == -2) goto done;
        if (step == -1) {
            par_printf("resume: no checkpoint in %s; starting fresh\n", ckpt_dir);
        } else {
            if (ckpt_path(ckpt_dir, step, resume_path, sizeof resume_path) != 0) goto done;
            from = resume_path;
        }
    } else if (!is_none(c->resume)) {
        from = c->resume;
    }

    int64_t vocab = 0;
    if (!par_all_ok(setup_run(&r, c, &vocab, from, can_ckpt ? ckpt_dir : NULL, gpu) == 0))
        goto done;
    char identity[2 * (GT_PATH_MAX + GT_NAME_MAX) + 256];
    dataset_identity(&r, c, vocab, identity, sizeof identity);
    if (par_check_same("dataset", identity, strlen(identity)) != 0) goto done;
    /* What the training data is, recorded in checkpoints and compared on resume (rank 0,
     * before the loader takes the dataset over). */
    if (!par_all_ok(!par_is_root() ||
                    h5data_fingerprint(r.train, r.data_id, sizeof r.data_id) == 0))
        goto done;

    /* The data's tokenizer, for the model file (rank 0). */
    if (!par_all_ok(!par_is_root() || read_tokenizer(&r, c, vocab) == 0)) goto done;

    /* The config saved with checkpoints and the model, and compared on resume. */
    saved_text = effective_config_text(c, (int)vocab);
    if (!par_all_ok(saved_text != NULL)) goto done;
    if (r.resumed) {
        int ok = 1;
        if (par_is_root()) {
            char changes[4096];
            ok = ckpt_check_compatible(&r.meta, saved_text, dp, changes,
                                       sizeof changes) == 0 &&
                 same_data(&r.meta, r.data_id, c->data);
            if (ok) {
                printf("resuming from %s at step %lld\n", from, (long long)r.first_step);
                if (changes[0]) printf("resume: changed since the checkpoint: %s\n", changes);
            }
        }
        if (!par_all_ok(ok)) goto done;
    }

    if (gpu) {
        if (!par_all_ok(device_step_init(&r.dev, &r.model, B, T, r.threads,
                                         gpu == GPU_BLOCKS) == 0))
            goto done;
        r.on_gpu = 1;
        /* The scale the checkpoint's run had reached (a CPU run's checkpoint says 1). */
        if (r.resumed && r.meta.loss_scale > 1.0) {
            r.dev.scaler.scale = (float)r.meta.loss_scale;
            /* When the scale next doubles, as in the run that saved it. */
            r.dev.scaler.clean_steps = (int)(r.meta.loss_scale_clean % LOSS_SCALE_GROWTH_INTERVAL);
        }
    }

    const gpt_shape shape = r.model.shape;
    const double flops = gpt_flops_per_step(&shape, B, T);
    par_printf("model: %.2fM parameters, %.2f GFLOP per %s of %d x %d tokens%s\n",
               r.model.n_params / 1e6, flops / 1e9, r.accum > 1 ? "micro-step" : "step", B,
               T, world > 1 ? " on each rank" : "");
    fflush(stdout);

    /* Gradient buffers: one for sync, a ring of staleness + 1 for async (the gradient of
     * step t is applied at step t + lag). Slot 0 is the model's own buffer. */
    const int lag = async ? c->staleness : 0, n_slots = lag + 1;
    for (int i = 1; i < n_slots; i++) {
        r.ring[i] = gt_malloc(r.model.n_params * sizeof(float), "async gradient buffers");
        if (!r.ring[i]) goto local_failure;
    }
    r.ring[0] = r.model.grads;
    r.n_slots = n_slots;
    if (world > 1) {
        size_t bucket = (size_t)(c->bucket_mb * 1048576.0 / sizeof(float));
        r.red = par_reducer_create(r.model.n_params, bucket, n_slots,
                                   strcmp(c->grad_comm, "fp16") == 0);
        if (!r.red) goto local_failure;
        r.model.on_grads_ready = par_reducer_ready;
        r.model.grads_ready_ctx = r.red;
        par_printf("gradients: %zu bucket%s of up to %g MiB, %s on the wire (%.1f MB per "
                   "step), reduced while backward runs%s\n", par_reducer_buckets(r.red),
                   par_reducer_buckets(r.red) == 1 ? "" : "s", c->bucket_mb, c->grad_comm,
                   par_reducer_bytes(r.red) / 1e6, async ? " and during the next step(s)" : "");
    }
    /* Weight prediction (async_predict): a gradient computed now is applied `lag`
     * updates later, to weights that have moved on; computing it at the current
     * weights plus lag times the last update instead cancels most of that lag, since
     * AdamW's momentum makes consecutive updates alike. Costs two parameter copies. */
    const int predict = async && strcmp(c->async_predict, "on") == 0;
    if (predict) {
        r.master = r.model.params;
        r.predicted = gt_malloc(r.model.n_params * sizeof(float), "predicted parameters");
        r.before_update = gt_malloc(r.model.n_params * sizeof(float), "parameters");
        if (!r.predicted || !r.before_update) goto local_failure;
        memcpy(r.before_update, r.master, r.model.n_params * sizeof(float));
    }
    if (async)
        par_printf("async: each step applies the gradient of %d step%s before (the first "
                   "%d apply nothing), taken at %s weights (async_predict = %s)\n", lag,
                   lag == 1 ? "" : "s", lag, predict ? "predicted" : "current",
                   c->async_predict);
    fflush(stdout);

    const double t_start = gt_now();
    double t_compute = 0.0, last_val = NAN, total_bytes = 0.0, last_save = t_start;
    double noise_g2 = 0.0, noise_s = 0.0, noise_w = 0.0; /* EMAs and their weight */
    char ckpt_file[GT_PATH_MAX + 64] = "";
    /* The step index is global: the lr schedule, evaluations and the data continue
     * where the checkpoint left them. */
    for (int64_t step = r.first_step; step < c->steps; step++) {
        const double t0 = gt_now();
        const int slot = (int)(step % n_slots);
        r.model.grads = r.ring[slot];
        /* This rank's own gradient norm is needed where the step that applies this
         * gradient evaluates (the gradient noise scale). */
        if (r.red) par_reducer_begin(r.red, slot, r.ring[slot], is_eval_step(&r, c, step + lag));
        gpt_zero_grad(&r.model);
        if (predict) {
            /* The gradient of this step is applied after `lag` more updates: take it
             * where the parameters will be by then if each update repeats the last. */
            const float *w = r.master, *w0 = r.before_update;
            float *p = r.predicted;
            const float k = (float)lag;
#pragma omp parallel for num_threads(r.threads) schedule(static)
            for (size_t i = 0; i < r.model.n_params; i++) p[i] = w[i] + k * (w[i] - w0[i]);
            r.model.params = p;
        }
        /* Micro-steps: gradients add up over accum batches, each scaled by 1/accum so
         * the sum is the mean; only the last backward hands buckets to the reducer. */
        double wait_s = 0.0, loss_sum = 0.0;
        int overflow = 0; /* FP16 gradients overflowed on the GPU (on_gpu) */
        r.model.loss_grad_scale = 1.0f / (float)r.accum;
        for (int micro = 0; micro < r.accum; micro++) {
            const int32_t *in, *tg;
            double waited;
            if (loader_next(r.ld, &in, &tg, &waited) != 0) goto local_failure;
            wait_s += waited;
            const int last = micro == r.accum - 1;
            r.model.on_grads_ready = r.red && last ? par_reducer_ready : NULL;
            if (r.on_gpu) {
                float micro_loss;
                int micro_overflow = 0;
                if (device_step_grad(&r.dev, r.model.params, r.model.grads, in, tg, B, T,
                                     micro > 0, last, r.model.loss_grad_scale, &micro_loss,
                                     &micro_overflow) != 0)
                    goto local_failure;
                loss_sum += micro_loss;
                overflow |= micro_overflow;
                /* The whole gradient is on the host at once: reduce it in buckets now. */
                if (r.red && last) par_reducer_ready(r.red, 0, r.model.n_params);
            } else if (r.pipe) {
                loss_sum += pipeline_train(r.pipe, in, tg);
            } else {
                loss_sum += gpt_forward(&r.model, in, tg, B, T, 1);
                gpt_backward(&r.model);
            }
        }
        const float local_loss = (float)(loss_sum / r.accum);
        if (predict) r.model.params = r.master;
        /* Loss and gradient of the global batch: means over the ranks. The norm is rank
         * 0's, so the clip factor cannot differ with the ranks' thread counts. */
        /* Mixed precision: an FP16 overflow on any rank halves the loss scale now and
         * skips, on every rank, the update that would apply this gradient (this step's,
         * or with async `lag` steps later: the flag travels with the gradient's slot).
         * The gradient is still reduced, so every rank's MPI requests complete. */
        const float scale_before = r.on_gpu ? r.dev.scaler.scale : 1.0f;
        loss_scale_event scale_event = LOSS_SCALE_KEPT;
        if (r.on_gpu) {
            overflow = !par_all_ok(!overflow);
            scale_event = loss_scaler_update(&r.dev.scaler, overflow);
        }
        r.slot_overflow[slot] = overflow;
        const int reduced = step >= lag;
        const int skipped = reduced && r.slot_overflow[(step + n_slots - lag) % n_slots];
        const int apply = reduced && !skipped;
        float *g = r.ring[(step + n_slots - lag) % n_slots];
        double loss = local_loss, comm_s = 0.0, norm = NAN, local_sq = 0.0;
        if (world > 1) {
            double t_comm = gt_now();
            if (reduced) {
                local_sq = par_reducer_wait(r.red, (int)((step - lag) % n_slots));
                total_bytes += (double)par_reducer_bytes(r.red);
            }
            /* With pp > 1 only the last stages (world / pp ranks) have a loss. */
            loss = pp > 1 ? par_sum_double(local_loss) / (world / pp)
                          : par_mean_double(local_loss);
            comm_s = gt_now() - t_comm;
            if (apply) {
                /* The two copies of the tied wte (first and last stage) add up. */
                if (pp > 1 && r.model.i_wte >= 0)
                    grid_tie_allreduce_sum(g + r.model.info[r.model.i_wte].offset,
                                           r.model.info[r.model.i_wte].numel);
                norm = tp > 1 || pp > 1 ? grad_norm_parts(&r.model, g)
                                        : grad_global_norm(g, r.model.n_params);
                t_comm = gt_now();
                norm = par_bcast_double(norm);
                comm_s += gt_now() - t_comm;
            }
        } else if (apply) {
            norm = grad_global_norm(g, r.model.n_params);
        }
        if (!isfinite(loss) || (apply && !isfinite(norm))) {
            /* The same values on every rank: they all stop here, rank 0 says why. */
            if (par_is_root())
                gt_error("step %lld: loss %g, gradient norm %g: training diverged (try a "
                         "lower lr or a grad_clip)", (long long)step + 1, loss, norm);
            goto done;
        }
        double lr = lr_at_step(step, c->warmup_steps, c->steps, c->lr, c->min_lr);
        if (apply) {
            if (predict)
                memcpy(r.before_update, r.master, r.model.n_params * sizeof(float));
            /* Clipping by the global norm happens inside the update (one pass). */
            adamw_step(&r.opt, r.model.params, g, grad_clip_factor(norm, c->grad_clip),
                       r.model.info, r.model.n_info, lr, c->beta1, c->beta2, 1e-8,
                       c->weight_decay);
        }
        const double dt = gt_now() - t0;
        t_compute += dt;

        const double tok_s = (double)B * T * dp * r.accum / dt,
                     gflops = flops * dp * r.accum / dt * 1e-9;
        par_printf("step %5lld/%lld | loss %.4f | lr %.2e | ", (long long)step + 1,
                   (long long)c->steps, loss, lr);
        if (apply)
            par_printf("norm %.3f", norm);
        else if (skipped && lag == 0)
            par_printf("FP16 overflow: step skipped");
        else if (skipped)
            par_printf("FP16 overflow in the gradient of step %lld: update skipped",
                       (long long)(step + 1 - lag));
        else
            par_printf("no update (async warm-up)");
        par_printf(" | %7.1f ms | %7.0f tok/s | %6.1f GFLOP/s", dt * 1e3, tok_s, gflops);
        if (r.peak_gflops > 0)
            par_printf(" | MFU %4.1f%%", 100.0 * gflops / (r.peak_gflops * world));
        par_printf(" | wait %.2f ms", wait_s * 1e3);
        if (world > 1) par_printf(" | comm %.2f ms", comm_s * 1e3);
        if (r.on_gpu) {
            par_printf(" | scale %.0f", (double)scale_before);
            if (scale_event != LOSS_SCALE_KEPT)
                par_printf(" -> %.0f", (double)r.dev.scaler.scale);
        }
        par_printf("\n");

        const int do_eval = is_eval_step(&r, c, step);
        double noise_tokens = NAN;
        if (do_eval) {
            double t_eval = gt_now();
            if (evaluate(&r, c, r.eval_in, r.eval_tg, &last_val) != 0) goto local_failure;
            par_printf("step %5lld/%lld | val_loss %.4f | %d batches in %.2f s",
                       (long long)step + 1, (long long)c->steps, last_val, c->eval_batches,
                       gt_now() - t_eval);
            /* (Not with tp or pp > 1: a rank's own squared norm covers its part only.) */
            if (dp > 1 && tp == 1 && pp == 1 && apply) {
                noise_tokens = noise_scale_update(par_mean_double(local_sq), norm * norm,
                                                  (double)B * T * r.accum, dp, &noise_g2,
                                                  &noise_s, &noise_w);
                if (isfinite(noise_tokens))
                    par_printf(" | noise scale %.0f tokens (%.1f sequences)", noise_tokens,
                               noise_tokens / T);
                else
                    par_printf(" | noise scale n/a (no gradient signal yet)");
            }
            par_printf("\n");
        }
        if (r.log) {
            fprintf(r.log, "{\"step\":%lld,\"loss\":%.6f,\"lr\":%.6e,", (long long)step + 1,
                    loss, lr);
            if (apply)
                fprintf(r.log, "\"grad_norm\":%.6f,", norm);
            else
                fprintf(r.log, "\"grad_norm\":null,");
            if (r.on_gpu)
                fprintf(r.log, "\"loss_scale\":%.1f,\"skipped\":%s,", (double)scale_before,
                        skipped ? "true" : "false");
            fprintf(r.log, "\"ms\":%.3f,\"tokens_per_s\":%.1f,\"gflops\":%.3f,"
                    "\"load_wait_ms\":%.4f,\"comm_ms\":%.4f,\"comm_bytes\":%.0f",
                    dt * 1e3, tok_s, gflops, wait_s * 1e3, comm_s * 1e3,
                    world > 1 && reduced ? (double)par_reducer_bytes(r.red) : 0.0);
            if (do_eval) fprintf(r.log, ",\"val_loss\":%.6f", last_val);
            if (isfinite(noise_tokens)) fprintf(r.log, ",\"noise_scale\":%.1f", noise_tokens);
            fprintf(r.log, "}\n");
            if (fflush(r.log) != 0) {
                gt_error("writing the log file %s failed", c->log);
                goto local_failure;
            }
        }
        fflush(stdout);

        /* Step boundary: stop on a signal any rank got, and checkpoint (rank 0). */
        const int64_t done_steps = step + 1;
        const int stop = !par_all_ok(!signals_stop_requested()) && done_steps < c->steps;
        int save = 0;
        if (can_ckpt && done_steps < c->steps) {
            if (c->ckpt_every > 0 && done_steps % c->ckpt_every == 0) save = 1;
            if (c->ckpt_minutes > 0) {
                /* Rank 0's clock decides, so every rank agrees. */
                const double due = gt_now() - last_save >= c->ckpt_minutes * 60.0;
                if (par_bcast_double(due) != 0.0) save = 1;
            }
            save |= stop;
        }
        if (stop && !can_ckpt) {
            if (par_is_root())
                gt_error("stopped by signal at step %lld without a checkpoint (%s)",
                         (long long)done_steps,
                         async ? "sync = async runs cannot checkpoint yet" : "out = none");
            goto done;
        }
        if (save) {
            if (save_checkpoint(&r, c, ckpt_dir, done_steps, saved_text, ckpt_file,
                                sizeof ckpt_file) != 0)
                goto done;
            last_save = gt_now();
        }
        if (stop) {
            par_printf("stopped by signal at step %lld; checkpoint %s; exit %d (requeue)\n",
                       (long long)done_steps, ckpt_file, GT_EXIT_REQUEUE);
            rc = TRAIN_STOPPED;
            goto done;
        }
    }
    /* The gradients of the last `lag` async steps are never applied. */
    par_reducer_drain(r.red);
    loader_stop(r.ld);
    r.ld = NULL;

    const double wall = gt_now() - t_start;
    const int64_t ran = c->steps - r.first_step;
    par_printf("done: %lld steps in %.1f s (%.0f tok/s in steps)", (long long)ran, wall,
               ran > 0 ? (double)ran * B * T * dp * r.accum / t_compute : 0.0);
    if (world > 1) par_printf(", %.1f MB of gradients reduced per rank", total_bytes / 1e6);
    if (!isnan(last_val)) par_printf(", final val_loss %.4f", last_val);
    par_printf("\n");
    /* Every rank applied the same updates; a difference here is a bug (or a machine
     * that computes differently), not a user error. One hash per rank, once. */
    if (world > 1 && tp == 1 && pp == 1) {
        if (par_check_same("model after training", r.model.params,
                           r.model.n_params * sizeof(float)) != 0)
            goto done;
        par_printf("check: the parameters are identical on all %d ranks\n", world);
    } else if (world > 1) {
        if (grid_check_same_replicas("model after training", r.model.params,
                                     r.model.n_params * sizeof(float)) != 0)
            goto done;
        par_printf("check: each of the %d parts (pp x tp) is identical in all %d replicas\n",
                   tp * pp, dp);
    }
    /* The final checkpoint when checkpoints are periodic (none when this run only
     * re-read the last one). */
    if (can_ckpt && (c->ckpt_every > 0 || c->ckpt_minutes > 0) && ran > 0 &&
        save_checkpoint(&r, c, ckpt_dir, c->steps, saved_text, ckpt_file,
                        sizeof ckpt_file) != 0)
        goto done;
    int saved = 1;
    if (!is_none(c->out)) {
        /* The file holds the whole model whatever the grid: replica 0's shards are put
         * together on rank 0 (tp = 1: the model itself). */
        gpt_model whole;
        memset(&whole, 0, sizeof whole);
        int have = 1;
        if (grid_dp_rank() == 0) have = gather_whole(&r, &whole, NULL) == 0;
        if (par_is_root() && have) {
            char path[GT_PATH_MAX + 16];
            snprintf(path, sizeof path, "%s/model.h5", c->out);
            saved = h5model_save_tok(path, tp * pp > 1 ? &whole : &r.model, saved_text,
                                     c->steps, r.tokenizer, r.tok_len) == 0;
            if (saved) printf("saved %s\n", path);
        }
        saved &= have;
        if (tp * pp > 1) gpt_free(&whole);
    }
    if (!par_all_ok(saved)) goto done;
    rc = 0;
    goto done;

local_failure:
    /* Only this rank failed (already reported) and the others may be waiting for it in
     * a collective: end the whole job. */
    if (world > 1) par_abort_reported();
done:
    fflush(stdout);
    free(config_text);
    free(saved_text);
    free_run(&r);
    gemm_bf16_free();
    grid_free();
    signals_uninstall();
    return rc;
}
