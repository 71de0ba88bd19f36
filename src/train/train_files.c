/* train_files — the model files a run reads and writes besides its data: checkpoints
 * (which to resume from, loading one into this rank's part, saving one whole model
 * whatever the grid), the final model file and init_from's weights. Formats:
 * io/ckpt/ckpt.h, io/h5/h5model.h, io/hf/hf_gpt2.h. The run folder they go to (lock,
 * log) is train_outdir.c's. */
#define GT_TRAIN_MODULE /* may include train_run.h */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "h5model.h"
#include "hf_gpt2.h"
#include "grid.h"
#include "run_folder.h" /* RUN_FOLDER_MODEL */
#include "train_run.h"
#include "util.h"

void train_model_path(const char *out, char path[TRAIN_MODEL_PATH_CAP])
{
    snprintf(path, TRAIN_MODEL_PATH_CAP, "%s/" RUN_FOLDER_MODEL, out);
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
        int k = ckpt_find_latest(dir, 1, path, sizeof path);
        if (k == 0) found = -1.0;
        if (k == 2)
            gt_error("resume = auto: no checkpoint in %s verifies (see the warnings above); "
                     "none was changed. Move them away to start fresh, or resume one by "
                     "its path", dir);
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

/* 1 when the folder of file is dir (the same folder by device and inode, however
 * either is spelled), else 0. */
static int same_folder_as(const char *file, const char *dir)
{
    char parent[GT_PATH_MAX];
    if (gt_strlcpy(parent, file, sizeof parent) != 0) return 0;
    char *slash = strrchr(parent, '/');
    if (!slash) strcpy(parent, ".");
    else if (slash == parent) parent[1] = '\0';
    else *slash = '\0';
    struct stat a, b;
    return stat(parent, &a) == 0 && stat(dir, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* A run writes its checkpoints into r->ckpt_dir and prunes the lowest steps there, so
 * checkpoints of another run, or of this one past the step it starts from (-1: a fresh
 * run), would be overwritten or pruned, and the next resume = auto would continue from
 * them: that run is refused before it starts. 0, or -1 (reported; rank 0 looks, the
 * others return 0). */
static int ckpt_dir_ok_from(const run *r, int64_t start_step)
{
    if (!r->can_ckpt || !par_is_root()) return 0;
    const int64_t newest = ckpt_newest_step(r->ckpt_dir);
    if (newest == -2) return -1;
    char path[GT_PATH_MAX + 64];
    if (newest >= 0 && start_step >= 0 && r->from && !same_folder_as(r->from, r->ckpt_dir)) {
        /* another run's checkpoints (this one's came from elsewhere): its pruning would
         * delete them, and leave a folder of two runs */
        if (ckpt_path(r->ckpt_dir, newest, path, sizeof path) != 0) return -1;
        gt_error("%s holds checkpoints up to step %" PRId64 " (%s), not of the folder of "
                 "%s (the one resumed): this run would prune them; give another out, or "
                 "move them away", r->ckpt_dir, newest, path, r->from);
        return -1;
    }
    if (newest <= start_step) return 0;
    if (ckpt_path(r->ckpt_dir, newest, path, sizeof path) != 0) return -1;
    char from[64] = "(a fresh one: resume = none)";
    if (start_step >= 0) snprintf(from, sizeof from, "(from step %" PRId64 ")", start_step);
    gt_error("%s holds checkpoints up to step %" PRId64 " (%s), which this run %s would "
             "overwrite or prune: %s, give another out, or move them away",
             r->ckpt_dir, newest, path, from,
             start_step < 0 ? "set resume = auto to continue that run"
                            : "resume from the newest (resume = auto)");
    return -1;
}

/* What a run must know of its checkpoint before it settles its batch and starts its
 * loader: the global batch, the data cursor and the replicas (rank 0 reads the
 * attributes, every rank learns them). A collective. */
static int read_resume_batch(run *r)
{
    double v[3] = {-1.0, 0.0, 0.0};
    if (par_is_root()) {
        ckpt_meta meta;
        if (ckpt_read_meta(r->from, &meta) == 0) {
            /* resume = auto took the newest that verifies: newer ones are damaged */
            if (strcmp(r->c->resume, "auto") == 0 || ckpt_dir_ok_from(r, meta.step) == 0) {
                v[0] = (double)meta.global_batch;
                v[1] = (double)meta.samples;
                v[2] = meta.world_size;
            }
            ckpt_meta_free(&meta);
        }
    }
    for (int i = 0; i < 3; i++) v[i] = par_bcast_double(v[i]);
    if (v[0] < 1.0) return -1;
    r->resume_batch = (int64_t)v[0];
    r->first_sample = (int64_t)v[1];
    r->resume_replicas = (int)v[2];
    return 0;
}

/* Which checkpoint to continue from, if any (r->from; NULL: a fresh run): every rank
 * loads the same file; its global batch and data cursor are read now. A collective. */
int train_find_resume(run *r)
{
    const gt_config *c = r->c;
    r->from = NULL;
    if (strcmp(c->resume, "auto") == 0) {
        const int64_t step = find_resume_step(r->ckpt_dir);
        if (step == -2) return -1;
        if (step == -1) {
            par_printf("resume: no checkpoint in %s; starting fresh\n", r->ckpt_dir);
        } else {
            if (ckpt_path(r->ckpt_dir, step, r->resume_path, sizeof r->resume_path) != 0)
                return -1;
            r->from = r->resume_path;
        }
    } else if (!config_is_none(c->resume)) {
        r->from = c->resume;
    }
    if (!r->from && !par_all_ok(ckpt_dir_ok_from(r, -1) == 0)) return -1;
    return r->from ? read_resume_batch(r) : 0;
}

enum { MAX_BUFS = 3 + CKPT_MAX_IN_FLIGHT + 1 };

/* dst: src's count, flags and sums, and buffers of n floats (a whole model's, or this
 * rank's part) for its gradients in flight and, when src has one, before_update; not
 * filled. 0, or -1 (reported; ckpt_async_free(dst) frees what was made). */
static int alloc_async_like(ckpt_async *dst, const ckpt_async *src, size_t n)
{
    *dst = *src;
    memset(dst->grads, 0, sizeof dst->grads);
    dst->before_update = NULL;
    for (int i = 0; i < src->n; i++)
        if (!(dst->grads[i] = gt_malloc(n * sizeof(float), "gradients in flight"))) return -1;
    if (src->before_update &&
        !(dst->before_update = gt_malloc(n * sizeof(float), "parameters before the update")))
        return -1;
    return 0;
}

/* The buffers of one model part to gather or scatter, in order: parameters, moments (opt
 * not NULL), the gradients in flight and before_update (as not NULL). Returns how many. */
static int part_buffers(float *params, const adamw_state *opt, const ckpt_async *as,
                        float **out)
{
    int n = 0;
    out[n++] = params;
    if (opt) {
        out[n++] = opt->m;
        out[n++] = opt->v;
    }
    for (int i = 0; as && i < as->n; i++) out[n++] = as->grads[i];
    if (as && as->before_update) out[n++] = as->before_update;
    return n;
}

/* With tp or pp > 1: puts the parts of this replica (pp x tp ranks) together, on its
 * first rank, into `whole` (created here, the layout of one process; the caller frees
 * it) and, when whole_opt is not NULL, AdamW's moments into whole_opt the same way,
 * and when whole_as is not NULL, the gradients in flight `mine` (this rank's layout)
 * into whole_as (ckpt_async_free it). A collective over the replica; the other ranks get
 * nothing. With one part it does nothing (the model is whole). Returns 0, or -1 on every
 * rank of the replica (reported). */
static int gather_whole(const run *r, gpt_model *whole, adamw_state *whole_opt,
                        const ckpt_async *mine, ckpt_async *whole_as)
{
    const int parts = grid_mp_size(), tp = grid_tp_size(), pp = grid_pp_size();
    if (parts == 1) return 0;
    const int root = grid_mp_rank() == 0;
    int ok = 1;
    if (root) {
        ok = gpt_create(whole, r->model.shape, r->model.be, r->threads) == 0;
        if (ok && whole_opt) ok = adamw_init(whole_opt, whole->n_params) == 0;
        if (ok && whole_as) ok = alloc_async_like(whole_as, mine, whole->n_params) == 0;
    }
    /* The others must not start sending to a root that could not take it. */
    if (!grid_mp_all_ok(ok)) return -1;
    float *src[MAX_BUFS], *dest[MAX_BUFS];
    const int n_bufs = part_buffers(r->model.params, whole_opt ? &r->opt : NULL,
                                    whole_as ? mine : NULL, src);
    if (!root) {
        for (int k = 0; k < n_bufs; k++) grid_mp_send_root(src[k], r->model.n_params);
        return 0;
    }
    part_buffers(whole->params, whole_opt, whole_as, dest);
    if (whole_opt) whole_opt->t = r->opt.t;
    for (int k = 0; k < n_bufs; k++) gpt_shard_copy(&r->model, grid_tp_rank(), dest[k], src[k], 1);
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

/* Loads checkpoint `from` into model m, its optimizer state opt and its gradients in
 * flight as (buffers allocated here). */
static int ckpt_load_model(const char *from, gpt_model *m, adamw_state *opt, ckpt_async *as,
                           ckpt_meta *meta)
{
    gt_tensor_table tab;
    if (gpt_tensor_table(m, &tab) != 0) return -1;
    ckpt_state st = {.shape = m->shape, .table = &tab, .params = m->params, .m = opt->m,
                     .v = opt->v, .adam_t = opt->t, .async = as};
    int rc = -1;
    if (opt->n != tab.total)
        gt_error("cannot load checkpoint %s: optimizer state does not match the model", from);
    else
        rc = ckpt_load(from, &st, meta);
    opt->t = st.adam_t;
    gt_tensor_table_free(&tab);
    return rc;
}

/* Loads checkpoint `from` into the run's model, optimizer and gradients in flight:
 * directly with one part per replica; with tp or pp > 1 every rank reads the whole
 * model and keeps its part (memory: one whole model, its moments and gradients in
 * flight, briefly). 0, or -1 (reported). */
static int load_checkpoint(run *r, const char *from)
{
    if (grid_mp_size() == 1)
        return ckpt_load_model(from, &r->model, &r->opt, &r->inflight, &r->meta);
    gpt_model whole;
    adamw_state whole_opt;
    ckpt_async whole_as;
    memset(&whole_opt, 0, sizeof whole_opt);
    memset(&whole_as, 0, sizeof whole_as);
    int rc = -1;
    if (gpt_create(&whole, r->model.shape, r->model.be, r->threads) != 0) return -1;
    if (adamw_init(&whole_opt, whole.n_params) == 0 &&
        ckpt_load_model(from, &whole, &whole_opt, &whole_as, &r->meta) == 0 &&
        alloc_async_like(&r->inflight, &whole_as, r->model.n_params) == 0) {
        float *src[MAX_BUFS], *dest[MAX_BUFS];
        const int n_bufs = part_buffers(whole.params, &whole_opt, &whole_as, src);
        part_buffers(r->model.params, &r->opt, &r->inflight, dest);
        for (int k = 0; k < n_bufs; k++)
            gpt_shard_copy(&r->model, grid_tp_rank(), src[k], dest[k], 0);
        r->opt.t = whole_opt.t;
        rc = 0;
    }
    gpt_free(&whole);
    adamw_free(&whole_opt);
    ckpt_async_free(&whole_as);
    return rc;
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
    char what[768];
    h5set_fingerprint_diff(meta->data, now, what, sizeof what);
    gt_error("resume: the training data %s is not what checkpoint %s was trained on "
             "(%s); resume on that data, or start fresh with resume = none",
             path, meta->path, what);
    return 0;
}

/* The gradients in flight at the boundary before step `step` (async: the last
 * min(staleness, step) steps' gradients, oldest first; none for sync), in this rank's
 * layout (as points into the ring). Their reductions are completed first, on every
 * rank, so the file holds averaged gradients and the steps that apply them later take
 * them as reduced (parallel.h): the run goes on bit for bit as without the checkpoint.
 * The local squared norms are averaged over the ranks. A collective. */
static void inflight_of(run *r, int64_t step, ckpt_async *as)
{
    memset(as, 0, sizeof *as);
    as->n = (int)(step < r->ring.lag ? step : r->ring.lag);
    for (int i = 0; i < as->n; i++) {
        const int slot = grad_ring_slot_of(&r->ring, step - as->n + i);
        as->sumsq[i] = par_mean_double(r->red ? par_reducer_complete(r->red, slot) : 0.0);
        as->overflow[i] = r->ring.overflow[slot];
        as->grads[i] = r->ring.slot[slot];
    }
    as->before_update = as->n > 0 ? r->ring.before_update : NULL;
}

/* Rank 0: the checkpoint file of `step` steps done, from the whole model sm, its
 * optimizer so and gradients in flight as; then the folder pruned. 0 or -1. */
static int write_checkpoint(run *r, int64_t step, const gpt_model *sm, const adamw_state *so,
                            ckpt_async *as, double t0)
{
    const gt_config *c = r->c;
    const loss_scaler *scaler = r->engine->scaler;
    gt_tensor_table tab;
    int ok = gpt_tensor_table(sm, &tab) == 0;
    /* The schedule state (ckpt.h /schedule): the noise scale's EMAs, the step costs'. */
    const double sched[CKPT_SCHED_N] = {r->gns.ema_g2, r->gns.ema_s, r->gns.weight,
                                        r->cost_fixed, r->cost_micro, r->cost_w};
    /* The data cursor: the samples read before the next step; the global batch of the
     * next step. */
    const ckpt_state st = {.shape = sm->shape, .table = &tab, .params = sm->params,
                           .m = so->m, .v = so->v, .adam_t = so->t,
                           .global_batch = r->global_batch,
                           .samples = r->samples,
                           .schedule = sched,
                           .async = as};
    /* The world size recorded is the number of replicas: what split each step's data. */
    ok = ok &&
         ckpt_save(r->ckpt_dir, step, &st, r->saved_text, grid_dp_size(), c->seed,
                   scaler ? (double)scaler->scale : 1.0,
                   scaler ? (int64_t)scaler->clean_steps : 0,
                   r->data_id[0] ? r->data_id : NULL, r->ckpt_file, sizeof r->ckpt_file) == 0 &&
         ckpt_prune(r->ckpt_dir, c->keep_ckpts, step) >= 0;
    gt_tensor_table_free(&tab);
    if (ok)
        printf("checkpoint: step %lld saved to %s in %.2f s%s\n", (long long)step,
               r->ckpt_file, gt_now() - t0, as->n ? " (with the gradients in flight)" : "");
    fflush(stdout);
    return ok ? 0 : -1;
}

/* Rank 0 writes the checkpoint of `step` steps done into dir and prunes the folder to
 * keep_ckpts files; every rank learns whether it worked. r->ckpt_file gets the file
 * (rank 0). One whole model whatever the grid (tp or pp > 1: replica 0's parts put
 * together on rank 0), so any tp and pp can resume it. A collective. */
int train_save_checkpoint(run *r, int64_t step)
{
    const int split = grid_mp_size() > 1;
    const double t0 = gt_now();
    ckpt_async mine, whole_as;
    gpt_model whole;
    adamw_state whole_opt;
    memset(&whole, 0, sizeof whole);
    memset(&whole_opt, 0, sizeof whole_opt);
    memset(&whole_as, 0, sizeof whole_as);
    inflight_of(r, step, &mine);
    int ok = 1;
    if (split && grid_dp_rank() == 0)
        ok = gather_whole(r, &whole, &whole_opt, &mine, &whole_as) == 0;
    if (par_is_root() && ok)
        ok = write_checkpoint(r, step, split ? &whole : &r->model, split ? &whole_opt : &r->opt,
                              split ? &whole_as : &mine, t0) == 0;
    gpt_free(&whole);
    adamw_free(&whole_opt);
    ckpt_async_free(&whole_as);
    if (!par_all_ok(ok)) return -1;
    r->last_save = gt_now();
    return 0;
}

/* Loads the checkpoint r->from into this rank's part and the optimizer; training then
 * continues at its step. 0, or -1 (reported). */
int train_load_checkpoint(run *r)
{
    if (!r->from) return 0;
    /* Parameters, moments and AdamW's t; the step is the data cursor (ckpt.h). */
    if (load_checkpoint(r, r->from) != 0) return -1;
    r->resumed = 1;
    r->first_step = r->meta.step;
    /* the smoothed statistics go on where they were (zeros from a version 3 file) */
    const double *sched = r->meta.schedule;
    r->gns = (gns_state){sched[0], sched[1], sched[2]};
    r->cost_fixed = sched[3];
    r->cost_micro = sched[4];
    r->cost_w = sched[5];
    return 0;
}

/* The checkpoint loaded is the one whose global batch and data cursor the run settled
 * on (not replaced in between), and holds the gradients in flight this run's ring
 * expects (staleness, prediction: the configs agree, so only a damaged pair differs). */
static int same_run_state(const run *r)
{
    const ckpt_meta *m = &r->meta;
    const int64_t lag = r->c->sync == SYNC_ASYNC ? r->c->staleness : 0;
    const int64_t want = m->step < lag ? m->step : lag;
    const int predict = r->c->sync == SYNC_ASYNC && r->c->async_predict == PREDICT_ON;
    if (m->global_batch != r->resume_batch || m->samples != r->first_sample) {
        gt_error("resume: checkpoint %s changed while this run started; start it again",
                 m->path);
        return 0;
    }
    if (m->in_flight != want || (want > 0 && m->predict != predict)) {
        gt_error("resume: checkpoint %s holds %d gradient%s in flight%s; this run (sync = %s, "
                 "staleness %d) needs %lld%s", m->path, m->in_flight,
                 m->in_flight == 1 ? "" : "s", m->predict ? " with weight prediction" : "",
                 r->c->sync == SYNC_ASYNC ? "async" : "sync", r->c->staleness,
                 (long long)want, predict ? " with weight prediction" : "");
        return 0;
    }
    return 1;
}

/* A resumed run: may it continue from that checkpoint with this config and data
 * (rank 0 decides; every rank learns)? Says what changed. A collective. */
int train_check_resume(run *r)
{
    if (!r->resumed) return 0;
    int ok = 1;
    if (par_is_root()) {
        char changes[4096];
        ok = ckpt_check_compatible(&r->meta, r->saved_text, r->dp, changes,
                                   sizeof changes) == 0 &&
             same_data(&r->meta, r->data_id, r->c->data) && same_run_state(r);
        if (ok) {
            printf("resuming from %s at step %lld\n", r->from, (long long)r->first_step);
            if (changes[0]) printf("resume: changed since the checkpoint: %s\n", changes);
        }
    }
    return par_all_ok(ok) ? 0 : -1;
}

/* <out>/model.h5: the whole model whatever the grid (replica 0's parts put together on
 * rank 0). A collective; 0 or -1 on every rank. */
int train_save_model(run *r)
{
    const gt_config *c = r->c;
    if (config_is_none(c->out)) return 0;
    gpt_model whole;
    memset(&whole, 0, sizeof whole);
    const int split = grid_mp_size() > 1;
    int saved = 1;
    if (grid_dp_rank() == 0) saved = gather_whole(r, &whole, NULL, NULL, NULL) == 0;
    if (par_is_root() && saved) {
        char path[TRAIN_MODEL_PATH_CAP];
        train_model_path(c->out, path);
        const gpt_model *sm = split ? &whole : &r->model;
        gt_tensor_table tab;
        saved = gpt_tensor_table(sm, &tab) == 0 &&
                h5model_save_tok(path, sm->shape, &tab, sm->params, r->saved_text, r->end_step,
                                 r->tokenizer, r->tok_len) == 0;
        gt_tensor_table_free(&tab);
        if (saved) printf("saved %s\n", path);
    }
    if (split) gpt_free(&whole);
    return par_all_ok(saved) ? 0 : -1;
}

/* init_from: a fresh run starts from a Hugging Face GPT-2 folder's weights, laid over
 * the run's own initialisation (rows the folder lacks keep theirs). A whole model is
 * initialised and loaded in place; with tp or pp > 1 every rank reads the folder into
 * a whole model and keeps its part. 0, or -1 (reported). */
int train_init_from(run *r)
{
    const gt_config *c = r->c;
    const int split = grid_mp_size() > 1;
    gpt_model whole;
    memset(&whole, 0, sizeof whole);
    gpt_model *m = split ? &whole : &r->model;
    gt_tensor_table tab = {0};
    hf_gpt2_config found;
    int rc = -1;
    if ((!split || gpt_create(&whole, r->model.shape, r->model.be, r->threads) == 0) &&
        gpt_init_weights(m, c->seed) == 0 && gpt_tensor_table(m, &tab) == 0 &&
        hf_gpt2_load(c->init_from, m->shape, &tab, m->params, &found) == 0)
        rc = 0;
    if (rc == 0) {
        if (split) gpt_shard_copy(&r->model, grid_tp_rank(), whole.params, r->model.params, 0);
        par_printf("init_from: %s: GPT-2 n_layer %d n_head %d n_embd %d, %d positions (the "
                   "first %d used), a vocabulary of %d (%s)\n", c->init_from, found.n_layer,
                   found.n_head, found.n_embd, found.n_positions, m->shape.block_size,
                   found.vocab_size,
                   found.vocab_size == m->shape.vocab_size ? "the run's"
                   : found.vocab_size > m->shape.vocab_size
                       ? "the run uses its first rows"
                       : "the run's other rows start from its own initialisation");
    }
    gt_tensor_table_free(&tab);
    if (split) gpt_free(&whole);
    return rc;
}
