/* train_data — the token datasets of a run: open and check them (each rank its share
 * of the tokens), read this rank's fixed validation windows once, evaluate on them,
 * and say what the data is (for the ranks to compare and checkpoints to record). */
#define GT_TRAIN_MODULE /* may include train_run.h */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"
#include "h5tok.h"
#include "grid.h"
#include "train_run.h"
#include "util.h"

/* Every file's meta (io/h5/h5set.h): rank r probes files r, r + world, ... and the ranks
 * sum their numbers (0 where they did not probe), so no rank opens every file. */
static int probe_files(h5set *s)
{
    const int n = h5set_files(s), rank = par_rank(), world = par_world();
    int64_t *m = gt_calloc((size_t)n * H5SET_META * sizeof *m, "data file shapes");
    int ok = m != NULL;
    for (int i = rank; ok && i < n; i += world) {
        ok = h5set_probe(s, i) == 0;
        if (ok) h5set_meta(s, i, m + (size_t)i * H5SET_META);
    }
    if (!par_all_ok(ok)) {
        free(m);
        return -1;
    }
    par_sum_int64(m, (size_t)n * H5SET_META);
    for (int i = 0; i < n; i++) h5set_set_meta(s, i, m + (size_t)i * H5SET_META);
    free(m);
    /* every rank now holds the same metas and reaches the same verdict: rank 0 says it */
    gt_mute_reports(!par_is_root());
    const int rc = h5set_settle(s);
    gt_mute_reports(0);
    return rc;
}

/* The windows of the set: windows_init for one file (its own error lines), else a list
 * of the files' shapes. */
static int set_windows(const run *r, h5set *s, const char *what, token_windows *w)
{
    const int n = h5set_files(s);
    if (n == 1)
        return windows_init(w, h5set_rows(s, 0), h5set_row_len(s, 0), r->c->block_size,
                            what);
    int64_t *rows = gt_malloc((size_t)n * 2 * sizeof *rows, "data file shapes");
    if (!rows) return -1;
    for (int i = 0; i < n; i++) {
        rows[i] = h5set_rows(s, i);
        rows[n + i] = h5set_row_len(s, i);
    }
    const int rc = windows_init_files(w, n, rows, rows + n, r->c->block_size, what);
    free(rows);
    return rc;
}

/* Opens a token dataset (one file or several, io/h5/h5set.h), settles the vocabulary,
 * checks every token (each rank its share of them: no rank reads the whole dataset)
 * and the length. Collective: every rank returns the same. */
static h5set *open_tokens(const run *r, const char *dataset, int64_t *vocab,
                          token_windows *w)
{
    const gt_config *c = r->c;
    h5set *s = h5set_create(c->data, dataset, r->mpi_io, c->data_max_open);
    if (!par_all_ok(s != NULL)) goto fail;
    double t0 = gt_now();
    if (probe_files(s) != 0) goto fail;
    const double t_open = gt_now() - t0;
    const int n = h5set_files(s);
    char what[GT_PATH_MAX + GT_NAME_MAX + 2];
    snprintf(what, sizeof what, "%s:%s", n == 1 ? h5set_file(s, 0) : c->data, dataset);
    if (*vocab == 0) {
        *vocab = h5set_vocab_attr(s);
        if (*vocab <= 0) { /* the same on every rank (shared metas): rank 0 says it */
            if (par_is_root())
                gt_error("%s has no vocab_size attribute; set vocab_size in the config", what);
            goto fail;
        }
    }
    t0 = gt_now();
    if (!par_all_ok(h5set_check_range_part(s, *vocab, par_rank(), par_world()) == 0))
        goto fail;
    const double dt = gt_now() - t0;
    gt_mute_reports(!par_is_root()); /* the shapes are the same on every rank */
    const int windows_rc = set_windows(r, s, what, w);
    gt_mute_reports(0);
    if (!par_all_ok(windows_rc == 0)) goto fail;
    if (n == 1)
        par_printf("data: %s: %s [%lld x %lld] %s, %lld windows of %d tokens (checked in "
                   "%.2f s)\n", what, h5set_rank(s) == 1 ? "stream" : "sequences",
                   (long long)h5set_rows(s, 0), (long long)h5set_row_len(s, 0),
                   h5set_type_name(s), (long long)w->count, c->block_size + 1, dt);
    else
        par_printf("data: %s: %d files, %s, %lld rows, %lld tokens %s, %lld windows of %d "
                   "tokens (opened in %.2f s, checked in %.2f s: each of %d rank%s 1/%d)\n",
                   what, n, h5set_rank(s) == 1 ? "streams" : "sequences",
                   (long long)h5set_total_rows(s), (long long)h5set_total_tokens(s),
                   h5set_type_name(s), (long long)w->count, c->block_size + 1, t_open, dt,
                   par_world(), par_world() == 1 ? "" : "s", par_world());
    return s;
fail:
    h5set_close(s);
    return NULL;
}

/* The validation set is read once: eval_batches global batches (batch_size x replicas
 * x micro-steps windows each) of fixed windows, replica r keeping the r-th contiguous
 * share of them: eval_batches x micro-steps batches of batch_size windows. */
static int read_eval_windows(run *r)
{
    const gt_config *c = r->c;
    const int B = c->batch_size, T = c->block_size;
    /* eval_batches x eval_accum x B x (T + 1) tokens must be a size this machine has. */
    if ((double)c->eval_batches * r->eval_accum * B * (T + 1) * sizeof(int32_t) > 0x1p62) {
        gt_error("eval_batches %d x batch_size %d x %d micro-step%s of %d tokens is too "
                 "large to hold; lower eval_batches", c->eval_batches, B, r->eval_accum,
                 r->eval_accum == 1 ? "" : "s", T + 1);
        return -1;
    }
    r->eval_windows = (int64_t)c->eval_batches * r->eval_accum * B;
    const int64_t all_windows = r->eval_windows * grid_dp_size();
    const int64_t first = r->eval_windows * grid_dp_rank(); /* tp peers: the same ones */
    if (all_windows > r->val_w.count && par_is_root())
        gt_warn("%s:%s has %lld windows, fewer than eval_batches x the global batch = "
                "%lld: evaluation repeats windows", c->data, c->val_dataset,
                (long long)r->val_w.count, (long long)all_windows);
    /* Past the data's windows the evaluation repeats them (windows_eval_at takes global
     * window g as g % count), so this rank's window k is its window k % count: only the
     * first count are read and held. Reading and holding every repeat made a large
     * eval_batches or batch_size spend minutes (or all of memory) before step 1. */
    r->eval_stored = r->eval_windows;
    if (all_windows > r->val_w.count && r->eval_stored > r->val_w.count)
        r->eval_stored = r->val_w.count;
    /* One error line for the first that fails. */
    if (!(r->eval_tokens = gt_malloc((size_t)r->eval_stored * (size_t)(T + 1) *
                                         sizeof(int32_t), "validation batches")) ||
        !(r->eval_in = gt_malloc((size_t)B * T * sizeof(int32_t), "eval inputs")) ||
        !(r->eval_tg = gt_malloc((size_t)B * T * sizeof(int32_t), "eval targets")))
        return -1;
    for (int64_t k = 0; k < r->eval_stored; k++) {
        int file;
        int64_t row, col;
        windows_eval_at(&r->val_w, first + k, all_windows, &file, &row, &col);
        if (h5set_read(r->val, file, row, col, T + 1, r->eval_tokens + k * (T + 1),
                       r->vocab) != 0)
            return -1;
    }
    return 0;
}

int train_open_data(run *r)
{
    const gt_config *c = r->c;
    r->vocab = c->vocab_size;
    /* compressed chunks stay cached while the batches in flight read them */
    h5data_set_read_hint((int64_t)c->block_size + 1, (int64_t)c->batch_size * (LOADER_DEPTH + 1));
    r->train = open_tokens(r, c->train_dataset, &r->vocab, &r->train_w);
    if (!r->train) return -1;
    r->train_w.random = c->sampling == SAMPLING_RANDOM;
    h5set_fingerprint(r->train, r->data_id, sizeof r->data_id);
    if (h5set_files(r->train) > 1)
        par_printf("data: at most %d file%s open at once per dataset and rank (data_max_open)\n",
                   c->data_max_open, c->data_max_open == 1 ? "" : "s");
    par_printf("data: read through %s\n",
               h5set_uses_mpi_io(r->train)
                   ? "MPI-IO (parallel HDF5, independent reads, each rank its own samples)"
                   : "HDF5's default driver (POSIX reads, each rank its own samples)");
    if (c->vocab_size == 0 && h5set_vocab_attr(r->train) > 0)
        par_printf("data: vocab_size %lld (from the dataset attribute)\n",
                   (long long)r->vocab);
    if (r->vocab > INT32_MAX) {
        gt_error("vocab_size %lld is too large", (long long)r->vocab);
        return -1;
    }
    /* One optimizer step reads B x replicas x accum windows; they must be distinct.
     * Checked here for one micro-step too (the loader checks it again), before the
     * validation windows are read: those are batch_size x replicas x eval_batches, and
     * a batch_size past the data took minutes to read before this was said. */
    const int most = r->auto_batch ? r->accum_max : r->accum;
    const int64_t per_step = (int64_t)c->batch_size * r->dp * most;
    if (r->train_w.count < per_step) {
        if (most == 1)
            gt_error("%s:%s has %lld windows; batch_size x replicas = %d x %d = %lld "
                     "sequences a step needs at least that many", c->data, c->train_dataset,
                     (long long)r->train_w.count, c->batch_size, r->dp, (long long)per_step);
        else
            gt_error("%s:%s has %lld windows; a global batch of %lld sequences (%s) needs at "
                     "least that many", c->data, c->train_dataset, (long long)r->train_w.count,
                     (long long)per_step,
                     r->auto_batch ? "global_batch_max" : "global_batch_size");
        return -1;
    }
    if (config_is_none(c->val_dataset)) return 0;
    int64_t val_vocab = r->vocab;
    r->val = open_tokens(r, c->val_dataset, &val_vocab, &r->val_w);
    if (!r->val) return -1;
    return par_all_ok(read_eval_windows(r) == 0) ? 0 : -1;
}

/* Mean loss over the fixed validation windows of all ranks: each rank evaluates its
 * share, the sums of batch means are added over the ranks (every batch has B x T
 * tokens, so the mean of the batch means is the mean over all windows). */
int train_evaluate(run *r, double *val)
{
    const int B = r->c->batch_size, T = r->c->block_size;
    const int64_t batches = (int64_t)r->c->eval_batches * r->eval_accum;
    double sum = 0.0;
    for (int64_t batch = 0; batch < batches; batch++) {
        for (int b = 0; b < B; b++) {
            const int64_t k = ((int64_t)batch * B + b) % r->eval_stored;
            const int32_t *win = r->eval_tokens + k * (T + 1);
            memcpy(r->eval_in + (size_t)b * T, win, (size_t)T * sizeof(int32_t));
            memcpy(r->eval_tg + (size_t)b * T, win + 1, (size_t)T * sizeof(int32_t));
        }
        double loss;
        if (engine_loss(r->engine, r->model.params, batch == 0, r->eval_in, r->eval_tg,
                        &loss) != 0)
            return -1; /* this rank only: the caller ends the job */
        sum += loss;
    }
    /* With pp > 1 only the last stages (world / pp ranks) have a loss. */
    *val = par_sum_double(sum) / ((double)batches * (r->world / r->pp));
    return 0;
}

/* Whether step (0-based) ends with an evaluation. */
int train_is_eval_step(const run *r, int64_t step)
{
    const gt_config *c = r->c;
    if (!r->val) return 0;
    if (r->auto_batch) {
        /* the current step (no async under auto): when its samples cross a multiple
         * of eval_every steps of global_batch_min, so evaluations keep their place in
         * tokens whatever the batch */
        const int64_t every = c->eval_every * r->batch_unit;
        return train_is_last_step(r, step) ||
               (every > 0 && step == r->step_now &&
                r->samples / every != r->step_samples_end / every);
    }
    return (c->eval_every > 0 && (step + 1) % c->eval_every == 0) || step + 1 == c->steps;
}

/* What identifies the datasets this rank reads, as text for par_check_same: the spec,
 * the hash of the full file names (a glob that expands differently on some node shows
 * here) and what the files hold. */
void train_dataset_identity(const run *r, char *buf, size_t cap)
{
    const gt_config *c = r->c;
    char fp[256];
    h5set_fingerprint(r->train, fp, sizeof fp);
    int n = snprintf(buf, cap, "train %s:%s files %d (names %016llx) %s vocab_size %lld\n",
                     c->data, c->train_dataset, h5set_files(r->train),
                     (unsigned long long)h5set_names_hash(r->train), fp, (long long)r->vocab);
    if (r->val && n > 0 && (size_t)n < cap) {
        h5set_fingerprint(r->val, fp, sizeof fp);
        snprintf(buf + n, cap - (size_t)n, "val %s:%s files %d (names %016llx) %s\n",
                 c->data, c->val_dataset, h5set_files(r->val),
                 (unsigned long long)h5set_names_hash(r->val), fp);
    }
}

/* The tokenizer stored in the data file (io/h5/h5tok.h), checked to load, kept for the
 * model file; none for byte-level data. Rank 0 only. 0 or -1 (reported). */
int train_read_tokenizer(run *r)
{
    /* the first file's (shards made together carry the same one) */
    int got = h5tok_read_path(h5set_file(r->train, 0), &r->tokenizer, &r->tok_len);
    if (got <= 0) return got;
    char err[300];
    bpe *t = bpe_load(r->tokenizer, r->tok_len, err, sizeof err);
    if (!t) {
        gt_error("%s: its tokenizer (/%s): %s", h5set_file(r->train, 0), H5TOK_DATASET, err);
        return -1;
    }
    printf("data: tokenizer: byte-level BPE of %lld tokens (%lld merges), saved with the "
           "model\n", (long long)bpe_vocab_size(t), (long long)bpe_n_merges(t));
    if (bpe_vocab_size(t) > r->vocab)
        gt_warn("the data's tokenizer has %lld tokens, the model %lld: the model cannot "
                "produce the last %lld", (long long)bpe_vocab_size(t), (long long)r->vocab,
                (long long)(bpe_vocab_size(t) - r->vocab));
    bpe_free(t);
    return 0;
}
