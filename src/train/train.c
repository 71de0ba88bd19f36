/* train — see train.h. train_run is set-up, the step loop and clean-up; the files
 * around it are listed in train_run.h, and the step engine (engine.h) computes each
 * micro-batch's forward and backward on whatever device and model part this rank has.
 *
 * A step, as named phases: take the loader's micro-batches and compute their gradient
 * (with several ranks each finished bucket starts its reduction while backward goes
 * on: parallel.h); reduce (wait for the gradient due, agree on FP16 overflow and the
 * loss scale, the mean loss, the global norm); update (global-norm clip inside AdamW);
 * report (the step line, an evaluation when due, the log record); and the step
 * boundary (checkpoint when due, stop on a signal). With sync = async the gradient
 * waited for and applied is the one of `staleness` steps before (grad_ring.h); a
 * checkpoint completes the reductions still in flight and saves those gradients, and a
 * resumed run puts them back as already reduced (make_gradients).
 *
 * Data parallel (parallel.h): every replica holds the model (or with tp, pp > 1 its
 * parts, grid.h) and the optimizer state, reads its own B samples of the global batch
 * (loader.h), and applies the same averaged gradient, so the parameters stay identical
 * on every replica (checked once at the end). Rank 0 alone prints, writes the log and
 * saves. Everything that can fail for a user reason (data, output folder, log file,
 * ranks that disagree) is checked before the first step and agreed by all ranks
 * (par_all_ok), so every rank leaves cleanly; a failure one rank meets alone during the
 * steps (a read error, the log) ends the job (par_abort). */
#define GT_TRAIN_MODULE /* may include train_run.h */
#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "amx_emul_counts.h" /* defines: amx_emul_counts_reset, amx_emul_counts_read */
#include "dot_counts.h"      /* defines: dot_counts_reset, dot_counts_read */
#include "gemm_bf16.h"
#include "gemm_bf16_weights.h"
#include "grid.h"
#include "signals.h"
#include "team.h"
#include "run_folder.h" /* RUN_FOLDER_CKPTS */
#include "train_run.h"
#include "util.h"


/* A failure this rank met alone (reported): the others may wait in a collective. */
enum { LOCAL_FAILURE = -2 };

/* ------------------------------------------------------------------ set-up */

/* Every rank must train the same run: compare the configs before anything else. */
static int check_same_config(const gt_config *c)
{
    char *text = config_to_text(c);
    int rc = par_all_ok(text != NULL) && par_check_same("config", text, strlen(text)) == 0
                 ? 0 : -1;
    free(text);
    return rc;
}

/* This machine's memory in bytes (0: unknown). Test hook, for tests/test_hardening.sh
 * only: GENTRAIN_TEST_MEMORY=BYTES stands for it, so that a test can see a model refused
 * as too large without allocating one that is. */
static int64_t machine_memory(void)
{
    const char *e = getenv("GENTRAIN_TEST_MEMORY");
    const long long test = e ? strtoll(e, NULL, 10) : 0;
    return test > 0 ? (int64_t)test : gt_physical_memory();
}

/* This rank's part of the model and its optimizer, initialised or loaded from the
 * checkpoint resumed from. */
static int make_model(run *r)
{
    const gt_config *c = r->c;
    const gpt_shape shape = {(int)r->vocab, c->block_size, c->n_layer, c->n_head, c->n_embd};
    const gt_backend *be = c->precision == PRECISION_BF16 && r->device == DEVICE_CPU
                               ? &backend_cpu_bf16 : &backend_cpu;
    if (gpt_create_stage(&r->model, shape, be, r->threads, r->tp, grid_tp_rank(),
                         grid_pp_rank(), r->pp) != 0)
        return -1;
    r->have_model = 1;
    /* Weights, a gradient and AdamW's two moments: 16 bytes a parameter at the least.
     * Past this machine's memory the allocations still succeed (they are not touched
     * yet) and the kernel kills the rank later, with no line saying why. */
    const double need = 16.0 * (double)r->model.n_params;
    const int64_t have = machine_memory();
    if (have > 0 && need > (double)have) {
        gt_error("the model's %.3g parameters on this rank need at least %.1f GiB "
                 "(weights, gradient and AdamW's two moments), more than this machine's "
                 "%.1f GiB of memory: lower vocab_size, n_embd or n_layer, or split the "
                 "model with tp or pp", (double)r->model.n_params, need / 0x1p30,
                 (double)have / 0x1p30);
        return -1;
    }
    r->model.tp_allreduce = grid_tp_allreduce_hook;
    r->model.tp_allreduce_max = grid_tp_allreduce_max_hook;
    if (adamw_init(&r->opt, r->model.n_params) != 0) return -1;
    if (r->from) return train_load_checkpoint(r);
    if (c->init_from[0]) return train_init_from(r); /* its own initialisation underneath */
    return gpt_init_weights(&r->model, c->seed);
}

/* Everything before the first step that can fail on one rank alone: model, optimizer,
 * the loader. */
static int setup_local(run *r)
{
    const gt_config *c = r->c;
    if (make_model(r) != 0) return -1;
    /* The loader reads on from the data cursor (0, or the checkpoint's): micro-step m of
     * this run, every replica together, reads the samples first_sample + m*B*replicas
     * onwards, so step s reads first_sample + (s - first_step) * global_batch onwards
     * whatever the split into replicas and micro-steps (s * global_batch when the
     * global batch never changed). */
    r->ld = loader_start(r->train, &r->train_w, c->seed, c->batch_size, c->block_size,
                         r->vocab, r->first_sample, LOADER_DEPTH, grid_dp_rank(), r->dp);
    return r->ld ? 0 : -1;
}

/* The data the ranks read must be the same (what the training data is was recorded
 * when it was opened: train_open_data). */
static int settle_data_identity(run *r)
{
    char identity[2 * (GT_PATH_MAX + GT_NAME_MAX) + 256];
    train_dataset_identity(r, identity, sizeof identity);
    if (par_check_same("dataset", identity, strlen(identity)) != 0) return -1;
    /* The data's tokenizer, for the model file (rank 0). */
    return par_all_ok(!par_is_root() || train_read_tokenizer(r) == 0) ? 0 : -1;
}

/* The config saved with checkpoints and the model (and compared on resume): as given,
 * but with the vocabulary actually used in place of "0 = from the data", and the global
 * batch where "0 = batch_size x replicas" is not what trains (a resume that kept its
 * checkpoint's on another split). */
static int make_saved_text(run *r)
{
    gt_config *effective = gt_malloc(sizeof *effective, "config copy");
    if (effective) {
        *effective = *r->c;
        effective->vocab_size = (int)r->vocab;
        if (r->auto_batch) { /* the limits as this run settled them (a resume compares) */
            effective->global_batch_min = (int)r->batch_unit;
            effective->global_batch_max = (int)r->batch_hi;
        } else if (r->global_batch != (int64_t)r->c->batch_size * r->dp) {
            effective->global_batch_size = (int)r->global_batch;
        }
        r->saved_text = config_to_text(effective);
        free(effective);
    }
    return par_all_ok(r->saved_text != NULL) ? 0 : -1;
}

/* The step engine on this rank's device; a GPU run resumed continues with the loss
 * scale its checkpoint had reached (a CPU run's checkpoint says 1). */
static int make_engine(run *r)
{
    const int B = r->c->batch_size, T = r->c->block_size;
    /* On GPUs a stage, a shard of one, or a whole model with offload = blocks trains in
     * the pipeline's schedule (of one stage when pp = 1), offload = all in one step. */
    if (r->device == DEVICE_CPU)
        r->engine = engine_cpu_create(&r->model, B, T, r->micro);
    else if (r->device == DEVICE_GPU_STAGE)
        r->engine = engine_gpu_pipeline_create(&r->model, B, T, r->micro, r->threads,
                                               r->tp_nccl);
    else
        r->engine = engine_gpu_create(&r->model, B, T, r->threads);
    if (!par_all_ok(r->engine != NULL)) return -1;
    loss_scaler *scaler = r->engine->scaler;
    /* ckpt.c refuses a scale that is not positive and finite; one past the scaler's
     * ceiling (as a float, infinite) would scale every loss to inf */
    if (scaler && r->resumed && r->meta.loss_scale > LOSS_SCALE_MAX) {
        gt_error("cannot resume from %s: its loss scale %g is past the largest, %g",
                 r->meta.path, r->meta.loss_scale, (double)LOSS_SCALE_MAX);
        return -1;
    }
    if (scaler && r->resumed && r->meta.loss_scale > 1.0) {
        scaler->scale = (float)r->meta.loss_scale;
        /* When the scale next doubles, as in the run that saved it. */
        scaler->clean_steps = (int)(r->meta.loss_scale_clean % LOSS_SCALE_GROWTH_INTERVAL);
    }
    return 0;
}

/* A resumed async run: the gradients its checkpoint had in flight go back into the
 * ring slots of their steps, already reduced (the reducer does not reduce them again),
 * with their overflow flags, and the weights before the last update for the
 * prediction. */
static void restore_inflight(run *r)
{
    ckpt_async *as = &r->inflight;
    for (int i = 0; i < as->n; i++) {
        const int slot = grad_ring_slot_of(&r->ring, r->first_step - as->n + i);
        memcpy(r->ring.slot[slot], as->grads[i], r->ring.n_params * sizeof(float));
        r->ring.overflow[slot] = as->overflow[i];
        if (r->red) par_reducer_set_reduced(r->red, slot, r->ring.slot[slot], as->sumsq[i]);
    }
    if (as->before_update && r->ring.before_update)
        memcpy(r->ring.before_update, as->before_update, r->ring.n_params * sizeof(float));
    ckpt_async_free(as);
}

/* Gradient buffers (one, or async's ring) and, with several ranks, the bucketed
 * reduction that the engine feeds while backward runs; a resumed run's gradients in
 * flight put back. */
static int make_gradients(run *r)
{
    const gt_config *c = r->c;
    const int async = c->sync == SYNC_ASYNC;
    if (grad_ring_init(&r->ring, r->model.n_params, async ? c->staleness : 0,
                       async && c->async_predict == PREDICT_ON, r->model.params,
                       r->threads) != 0)
        return -1;
    if (r->world > 1) {
        const size_t bucket = (size_t)(c->bucket_mb * 1048576.0 / sizeof(float));
        r->red = par_reducer_create(r->model.n_params, bucket, r->ring.n,
                                    c->grad_comm == GRAD_COMM_FP16);
        if (!r->red) return -1;
    }
    if (train_noise_setup(r) != 0) return -1;
    restore_inflight(r);
    return 0;
}

/* Everything before the first step, in order. -1: every rank failed together;
 * LOCAL_FAILURE: this rank alone. */
static int setup(run *r)
{
    const gt_config *c = r->c;
    r->last_val = NAN;
    if (check_same_config(c) != 0 || train_settle_grid(r) != 0 ||
        train_settle_device(r) != 0 || train_report_compute(r) != 0 ||
        train_settle_data_io(r) != 0)
        return -1;
    /* A stop signal from here on ends the run at a step boundary (signals.h). */
    if (!par_all_ok(signals_install() == 0)) return -1;
    /* Checkpoints need a run folder (config_validate refuses the checkpoint keys
     * otherwise; a stop signal then ends the run without one). */
    r->can_ckpt = c->out[0] && strcmp(c->out, "none") != 0;
    if (r->can_ckpt) snprintf(r->ckpt_dir, sizeof r->ckpt_dir, "%s/" RUN_FOLDER_CKPTS, c->out);
    /* The run folder's lock first (no other run may be writing it). Then the
     * checkpoint: the global batch it trained decides the micro-steps. Then
     * the output folder and log (rank 0), and the data (a collective: the ranks share
     * opening and checking the files). */
    if (!par_all_ok(train_lock_out(r) == 0) || train_find_resume(r) != 0 ||
        train_settle_batch(r) != 0 ||
        !par_all_ok(train_check_output_paths(r) == 0) || train_open_data(r) != 0 ||
        !par_all_ok(setup_local(r) == 0) ||
        settle_data_identity(r) != 0 || make_saved_text(r) != 0 ||
        train_check_resume(r) != 0 || make_engine(r) != 0 || train_pack_weights(r) != 0)
        return -1;
    r->flops = gpt_flops_per_step(&r->model.shape, c->batch_size, c->block_size);
    if (make_gradients(r) != 0) return LOCAL_FAILURE;
    r->team = team_create(r->threads, c->thread_team == THREAD_TEAM_FIXED ? TEAM_FIXED
                                                                        : TEAM_ADAPTIVE);
    if (!par_all_ok(r->team != NULL)) return -1;
    train_report_setup(r);
    return 0;
}

/* ------------------------------------------------------------------ a step */

/* Phase 1: the step's micro-batches through the engine into this step's gradient
 * slot: gradients add up over accum micro-batches, each scaled by 1/accum so the sum
 * is the mean. The rank's own gradient norm is needed where the step that applies
 * this gradient evaluates (the gradient noise scale). */
static int phase_gradients(run *r, step_result *s)
{
    const int slot = grad_ring_slot_of(&r->ring, s->step);
    float *grads = r->ring.slot[slot];
    if (r->red)
        par_reducer_begin(r->red, slot, grads,
                          train_noise_wants_sumsq(r, s->step + r->ring.lag));
    train_noise_begin(r, s, grads);
    const float *weights = grad_ring_weights(&r->ring, r->model.params);
    double loss_sum = 0.0;
    int overflow = 0;
    for (int micro = 0; micro < r->accum; micro++) {
        const int32_t *in, *tg;
        double waited, loss;
        int micro_overflow = 0;
        if (loader_next(r->ld, &in, &tg, &waited) != 0) return -1;
        s->wait_s += waited;
        const double t_micro = gt_now();
        if (engine_grad(r->engine, weights, grads, in, tg, micro > 0, micro == r->accum - 1,
                        1.0f / (float)r->accum, &loss, &micro_overflow) != 0)
            return -1;
        s->compute_s += gt_now() - t_micro;
        loss_sum += loss;
        overflow |= micro_overflow;
        train_noise_after_micro(r, micro, grads);
    }
    s->loss = loss_sum / r->accum;
    r->ring.overflow[slot] = overflow;
    return 0;
}

/* The global gradient norm of gradient g over this replica. With tp or pp > 1: the
 * two copies of the tied wte (first and last stage) are added first; then the split
 * tensors' squares added over the tp peers, the whole ones (the same on every peer)
 * counted once (tp rank 0), every stage's added, and the last stage's copy of wte
 * left out (after the tie it equals the first stage's). */
static double global_grad_norm(const run *r, float *g)
{
    const gpt_model *m = &r->model;
    if (r->tp == 1 && r->pp == 1) return grad_global_norm(g, m->n_params);
    if (r->pp > 1 && m->i_wte >= 0)
        grid_tie_allreduce_sum(g + m->info[m->i_wte].offset, m->info[m->i_wte].numel);
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

/* Phase 2: mixed precision first: an FP16 overflow on any rank halves the loss scale
 * now and skips, on every rank, the update that would apply this gradient (this
 * step's, or with async `lag` steps later: the flag travels with the gradient's
 * slot); the gradient is still reduced, so every rank's MPI requests complete. Then
 * the gradient due (means over the ranks), the loss of the global batch, and the
 * global norm (rank 0's, so the clip factor cannot differ with thread counts). */
static int phase_reduce(run *r, step_result *s)
{
    const int slot = grad_ring_slot_of(&r->ring, s->step);
    loss_scaler *scaler = r->engine->scaler;
    s->scale_before = engine_loss_scale(r->engine);
    s->scale_event = LOSS_SCALE_KEPT;
    if (scaler) {
        r->ring.overflow[slot] = !par_all_ok(!r->ring.overflow[slot]);
        s->scale_event = loss_scaler_update(scaler, r->ring.overflow[slot]);
    }
    s->reduced = grad_ring_due(&r->ring, s->step);
    const int due = s->reduced ? grad_ring_due_slot(&r->ring, s->step) : 0;
    s->skipped = s->reduced && r->ring.overflow[due];
    s->apply = s->reduced && !s->skipped;
    s->norm = NAN;
    float *g = r->ring.slot[due];
    if (r->world > 1) {
        double t_comm = gt_now();
        if (s->reduced) {
            s->local_sq = par_reducer_wait(r->red, due);
            r->total_bytes += (double)par_reducer_bytes(r->red);
        }
        /* With pp > 1 only the last stages (world / pp ranks) have a loss. */
        s->loss = r->pp > 1 ? par_sum_double(s->loss) / (r->world / r->pp)
                            : par_mean_double(s->loss);
        s->comm_s = gt_now() - t_comm;
        train_noise_replica_parts(r, s);
        if (s->apply) {
            s->norm = global_grad_norm(r, g);
            t_comm = gt_now();
            s->norm = par_bcast_double(s->norm);
            s->comm_s += gt_now() - t_comm;
        }
    } else if (s->apply) {
        s->norm = global_grad_norm(r, g);
    }
    if (!isfinite(s->loss) || (s->apply && !isfinite(s->norm))) {
        /* The same values on every rank: they all stop here, rank 0 says why. */
        if (par_is_root())
            gt_error("step %lld: loss %g, gradient norm %g: training diverged (try a "
                     "lower lr or a grad_clip)", (long long)s->step + 1, s->loss, s->norm);
        return -1;
    }
    train_noise_estimate(r, s);
    return 0;
}

static void apply_adamw(const void *tensor, size_t first, size_t count)
{
    adamw_tensor_apply(tensor, first, count);
}

/* AdamW's take (optim.h): a weight matrix of the BF16 products is updated band by band
 * by gemm_bf16_weights_update, which packs its copies from the new values in cache */
static int update_and_pack(void *ctx, const adamw_tensor *t)
{
    (void)ctx;
    return gemm_bf16_weights_update(t->p, apply_adamw, t);
}

/* Phase 3: AdamW with the global-norm clip inside the update (one pass), writing the
 * BF16 products' packed weights as it goes. */
static void phase_update(run *r, step_result *s)
{
    const gt_config *c = r->c;
    s->lr = train_batch_lr(r, s);
    if (!s->apply) return;
    grad_ring_before_update(&r->ring, r->model.params);
    const int fused = r->packed_weights && gemm_bf16_weights_current();
    adamw_step_taking(&r->opt, r->model.params,
                      r->ring.slot[grad_ring_due_slot(&r->ring, s->step)],
                      grad_clip_factor(s->norm, c->grad_clip), r->model.info, r->model.n_info,
                      s->lr, c->beta1, c->beta2, 1e-8, c->weight_decay,
                      fused ? update_and_pack : NULL, NULL);
    /* copies not packed for the path that runs are packed anew; out of memory there
     * leaves the products packing B themselves (reported once) */
    if (r->packed_weights && !fused && gemm_bf16_weights_refresh() != 0) r->packed_weights = 0;
}

/* target_val_loss: whether the evaluation just taken reached it (the loss is the
 * all-ranks mean, so every rank answers the same). The step is then the run's last:
 * phase_boundary saves nothing, finish() saves the checkpoint and model once. */
static int reached_target(const run *r, const step_result *s)
{
    const double target = r->c->target_val_loss;
    if (target <= 0 || !(r->last_val <= target) || train_is_last_step(r, s->step)) return 0;
    par_printf("target_val_loss %.4f reached at step %lld (val_loss %.4f): stopping here\n",
               target, (long long)s->step + 1, r->last_val);
    return 1;
}

/* Phase 4: the step line, the evaluation when due, the log record. */
static int phase_report(run *r, step_result *s)
{
    train_report_step(r, s);
    s->do_eval = train_is_eval_step(r, s->step);
    if (s->do_eval) {
        const double t_eval = gt_now();
        if (train_evaluate(r, &r->last_val) != 0) return LOCAL_FAILURE;
        train_report_eval(r, s, gt_now() - t_eval);
        s->reached_target = reached_target(r, s);
    }
    if (train_log_step(r, s) != 0) return LOCAL_FAILURE;
    fflush(stdout);
    return 0;
}

/* Phase 5, the step boundary: stop on a signal any rank got, checkpoint when due (rank
 * 0's clock decides ckpt_minutes, so every rank agrees). Returns 0 to go on,
 * TRAIN_STOPPED, or -1. */
static int phase_boundary(run *r, const step_result *s)
{
    const gt_config *c = r->c;
    const int64_t done_steps = s->step + 1;
    const int last = train_is_last_step(r, s->step) || s->reached_target;
    const int stop = !par_all_ok(!signals_stop_requested()) && !last;
    int save = 0;
    if (r->can_ckpt && !last) {
        if (c->ckpt_every > 0 && done_steps % c->ckpt_every == 0) save = 1;
        if (c->ckpt_minutes > 0 &&
            par_bcast_double(gt_now() - r->last_save >= c->ckpt_minutes * 60.0) != 0.0)
            save = 1;
        save |= stop;
    }
    if (stop && !r->can_ckpt) {
        if (par_is_root())
            gt_error("stopped by signal at step %lld without a checkpoint (out = none)",
                     (long long)done_steps);
        return -1;
    }
    if (save && train_save_checkpoint(r, done_steps) != 0) return -1;
    if (!stop) return 0;
    par_printf("stopped by signal at step %lld; checkpoint %s; exit %d (requeue)\n",
               (long long)done_steps, r->ckpt_file, GT_EXIT_REQUEUE);
    return TRAIN_STOPPED;
}

/* Test hook, for tests/test_resume.sh and tests/test_slurm.sh only: GENTRAIN_TEST_STEP_MS=N
 * sleeps N ms after each step, so a run that a test kills or signals once a checkpoint
 * appears is still running then, however fast the build. A step's time and results do
 * not see it; a signal cuts the sleep short. */
static void test_step_pause(void)
{
    static long ms = -1;
    if (ms < 0) {
        const char *e = getenv("GENTRAIN_TEST_STEP_MS");
        ms = e ? strtol(e, NULL, 10) : 0;
        if (ms < 0 || ms > 10000) ms = 0;
    }
    if (ms == 0) return;
    const struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The steps; the step index is global: the lr schedule, evaluations and the data
 * continue where a checkpoint left them. */
static int train_loop(run *r)
{
    r->t_start = r->last_save = gt_now();
    r->samples = r->first_sample;
    int64_t step = r->first_step;
    for (; !train_done(r, step); step++) {
        step_result s;
        memset(&s, 0, sizeof s);
        s.step = step;
        s.threads = team_size(r->team);
        train_batch_plan_step(r, &s); /* this step's micro-steps (auto: they change) */
        /* only the emulated AMX path counts: the other paths skip the slots' walk */
        const int count_tiles = r->c->precision == PRECISION_BF16 &&
                                gemm_bf16_path() == GEMM_BF16_AMX_EMULATED;
        if (count_tiles) amx_emul_counts_reset();
        const int count_dots = r->c->precision == PRECISION_BF16 &&
                               gemm_bf16_path() == GEMM_BF16_AVX512;
        if (count_dots) dot_counts_reset();
        const double t0 = gt_now();
        if (phase_gradients(r, &s) != 0) return LOCAL_FAILURE;
        if (phase_reduce(r, &s) != 0) return -1;
        phase_update(r, &s);
        s.dt = gt_now() - t0;
        if (count_tiles) /* before any evaluation adds its products */
            s.tiles_n = amx_emul_counts_read(s.tiles, STEP_TILE_THREADS);
        if (count_dots) s.dots_n = dot_counts_read(s.dots, STEP_TILE_THREADS);
        r->t_compute += s.dt;
        /* the next step's threads: fewer while another process shares a core */
        team_after_step(r->team, step + 1);
        train_batch_costs(r, &s);
        int rc = phase_report(r, &s);
        if (rc == 0) train_batch_after_step(r, &s); /* the cursor; auto: the next batch */
        if (rc == 0) rc = phase_boundary(r, &s);
        if (rc != 0) return rc;
        if (s.reached_target) {
            step++;
            break;
        }
        test_step_pause();
    }
    r->end_step = step;
    return 0;
}

/* ------------------------------------------------------------------ the end */

/* After the last step: the summary, the check that every replica holds the same
 * parameters (a difference is a bug, or a machine that computes differently: one hash
 * per rank, once), the final checkpoint when checkpoints are periodic (none when this
 * run only re-read the last one), and the model file. */
static int finish(run *r)
{
    const gt_config *c = r->c;
    /* The gradients of the last `lag` async steps are never applied (a final checkpoint
     * keeps them: a run resumed with more steps applies them). */
    par_reducer_drain(r->red);
    loader_stop(r->ld);
    r->ld = NULL;
    train_report_done(r);
    const size_t bytes = r->model.n_params * sizeof(float);
    if (r->world > 1 && r->tp == 1 && r->pp == 1) {
        if (par_check_same("model after training", r->model.params, bytes) != 0) return -1;
        par_printf("check: the parameters are identical on all %d ranks\n", r->world);
    } else if (r->world > 1) {
        if (grid_check_same_replicas("model after training", r->model.params, bytes) != 0)
            return -1;
        par_printf("check: each of the %d parts (pp x tp) is identical in all %d replicas\n",
                   r->tp * r->pp, r->dp);
    }
    const int64_t ran = r->end_step - r->first_step;
    if (r->can_ckpt && (c->ckpt_every > 0 || c->ckpt_minutes > 0) && ran > 0 &&
        train_save_checkpoint(r, r->end_step) != 0)
        return -1;
    return train_save_model(r);
}

static void cleanup(run *r)
{
    fflush(stdout);
    if (r->ld) loader_stop(r->ld);
    par_reducer_drain(r->red); /* MPI must not write into freed buffers */
    par_reducer_free(r->red);
    engine_destroy(r->engine);
    grad_ring_free(&r->ring);
    if (r->have_model) gpt_free(&r->model);
    adamw_free(&r->opt);
    free(r->eval_tokens);
    free(r->eval_in);
    free(r->eval_tg);
    h5set_close(r->train);
    h5set_close(r->val);
    windows_free(&r->train_w);
    windows_free(&r->val_w);
    ckpt_meta_free(&r->meta);
    ckpt_async_free(&r->inflight);
    free(r->saved_text);
    free(r->tokenizer);
    free(r->noise_wte);
    free(r->noise_prev);
    team_free(r->team);
    if (r->log && fclose(r->log) != 0) gt_error("writing the log file failed");
    train_unlock_out(r);
    gemm_bf16_weights_clear();
    gemm_bf16_free();
    grid_free();
    signals_uninstall();
}

/* A run, or with dry_run its set-up and the report of what it would do (the log of an
 * earlier run then stays as it is: only a run that starts empties it). */
static int run_training(const gt_config *c, int dry_run)
{
    run r;
    memset(&r, 0, sizeof r);
    r.c = c;
    r.out_lock = -1;
    int rc = setup(&r);
    if (rc == 0 && dry_run) train_report_dry_run(&r);
    if (rc == 0 && !dry_run && !par_all_ok(train_start_log(&r) == 0)) rc = -1;
    if (rc == 0 && !dry_run) rc = train_loop(&r);
    if (rc == 0 && !dry_run) rc = finish(&r);
    /* Only this rank failed (already reported) and the others may be waiting for it in
     * a collective: end the whole job. */
    if (rc == LOCAL_FAILURE && par_world() > 1) par_abort_reported();
    cleanup(&r);
    return rc == LOCAL_FAILURE ? -1 : rc;
}

int train_run(const gt_config *c) { return run_training(c, 0); }

int train_dry_run(const gt_config *c) { return run_training(c, 1); }
