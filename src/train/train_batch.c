/* train_batch — the global batch of each step and its lr under global_batch_size =
 * auto (the rules: batch_rule.h; the page: docs/adaptive-batch.md), and the data
 * cursor of every run.
 *
 * Under auto a run trains a budget of steps x global_batch_min sequences. It starts at
 * global_batch_min; at each step that estimates the noise scale (train_noise.c) it
 * picks the batch of the next steps from the smoothed B_noise and the step's costs
 * (time outside the micro-steps, time per micro-step: EMAs of this run's first
 * COST_STEPS steps, or batch_overhead), in whole multiples of global_batch_min up to global_batch_max, by
 * changing the micro-steps of a step and nothing else. The lr of a step is the
 * schedule at the samples trained before it (warmup and decay in tokens, so a larger
 * batch does not bend them) times the lr rule's factor. The last step is cut to end on
 * the budget. The decision is rank 0's costs, broadcast, so every rank agrees; it is a
 * function of the saved state (train_files.c checkpoints it), so a resumed run
 * continues the same sequence. */
#define GT_TRAIN_MODULE /* may include train_run.h */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "batch_rule.h" /* defines: batch_rule_choose, batch_rule_lr_factor, _lr_at */
#include "optim.h"      /* defines: lr_at_step */
#include "train_run.h"
#include "util.h"

/* Smoothing of the step costs (per step; the first step of a process is left out: it
 * pays for warm caches and first-touch pages), and the step from which they are kept as
 * measured: the checkpoint holds them, so a run resumed from there decides as the
 * unbroken run did, instead of on the times of another process. */
#define COST_BETA 0.9
#define COST_STEPS 50

/* global_batch_min and global_batch_max as this grid can run them. 0, or -1 (rank 0
 * said why). */
static int settle_limits(run *r)
{
    const gt_config *c = r->c;
    const int64_t per_micro = (int64_t)c->batch_size * r->dp;
    int64_t lo = c->global_batch_min;
    if (lo == 0) /* two micro-batches at least: the noise scale needs them */
        lo = ((2 * (int64_t)c->batch_size + per_micro - 1) / per_micro) * per_micro;
    const int64_t hi = c->global_batch_max > 0 ? c->global_batch_max : 16 * lo;
    if (lo % per_micro != 0) {
        if (par_is_root())
            gt_error("global_batch_size = auto: global_batch_min %lld is not a multiple of "
                     "batch_size x replicas = %lld (each step is whole micro-steps on every "
                     "replica)", (long long)lo, (long long)per_micro);
        return -1;
    }
    if (lo / c->batch_size < 2 && r->dp * r->tp * r->pp == 1) {
        /* one micro-batch a step at the smallest batch: no noise scale to leave it by */
        if (par_is_root())
            gt_error("global_batch_size = auto: global_batch_min %lld is one micro-batch "
                     "of batch_size %d; the noise scale needs two a step (at least %lld)",
                     (long long)lo, c->batch_size, 2 * (long long)c->batch_size);
        return -1;
    }
    if (hi < lo || hi % lo != 0) {
        if (par_is_root())
            gt_error("global_batch_size = auto: global_batch_max %lld is not a multiple of "
                     "global_batch_min %lld (the batch changes by global_batch_min)",
                     (long long)hi, (long long)lo);
        return -1;
    }
    if (hi > INT_MAX || c->steps > INT64_MAX / lo) {
        if (par_is_root())
            gt_error("global_batch_size = auto: steps %lld x global_batch_min %lld (or "
                     "global_batch_max %lld) is too large", (long long)c->steps,
                     (long long)lo, (long long)hi);
        return -1;
    }
    r->batch_unit = lo;
    r->batch_hi = hi;
    r->accum_max = (int)(hi / per_micro);
    r->budget = c->steps * lo;
    return 0;
}

int train_settle_auto_batch(run *r)
{
    const gt_config *c = r->c;
    if (settle_limits(r) != 0) return -1;
    const int64_t per_micro = (int64_t)c->batch_size * r->dp;
    r->global_batch = r->from ? r->resume_batch : r->batch_unit;
    if (r->global_batch % r->batch_unit != 0 || r->global_batch > r->batch_hi) {
        if (par_is_root())
            gt_error("resume: the checkpoint's global batch of %lld sequences is not a "
                     "multiple of global_batch_min %lld up to global_batch_max %lld",
                     (long long)r->global_batch, (long long)r->batch_unit,
                     (long long)r->batch_hi);
        return -1;
    }
    r->accum = (int)(r->global_batch / per_micro);
    r->eval_accum = (int)(r->batch_unit / per_micro);
    /* the batch steers by the noise scale: a run that cannot estimate it must not
     * pretend to adapt */
    if (train_noise_mode_of(r) == NOISE_NONE) {
        if (par_is_root())
            gt_error("global_batch_size = auto needs the gradient noise scale, which this "
                     "run cannot estimate (%s); set a global_batch_size",
                     r->device != DEVICE_CPU ? "a GPU run on one replica"
                                             : "tp or pp > 1 on one replica");
        return -1;
    }
    if (r->from && r->first_sample > r->budget) {
        if (par_is_root())
            gt_error("resume: the checkpoint has trained %lld sequences, past this run's "
                     "%lld (steps x global_batch_min): raise steps",
                     (long long)r->first_sample, (long long)r->budget);
        return -1;
    }
    if (r->from)
        par_printf("resume: from %s: sample %lld, global batch %lld sequences (auto; the "
                   "checkpoint's run had %d replica%s), with its noise scale and step "
                   "costs\n", r->from, (long long)r->first_sample, (long long)r->global_batch,
                   r->resume_replicas, r->resume_replicas == 1 ? "" : "s");
    char overhead_how[64];
    snprintf(overhead_how, sizeof overhead_how, "measured over the first %d steps, then kept",
             COST_STEPS);
    par_printf("global batch: auto, %lld to %lld sequences in steps of %lld (batch_size %d "
               "x %d %s x %d to %d micro-steps), now %lld; lr rule %s; %lld sequences "
               "to train (steps x global_batch_min); step overhead %s\n",
               (long long)r->batch_unit, (long long)r->batch_hi, (long long)r->batch_unit,
               c->batch_size, r->dp, r->dp == 1 ? "replica" : "replicas",
               (int)(r->batch_unit / per_micro), r->accum_max, (long long)r->global_batch,
               config_enum_word("lr_rule", c->lr_rule), (long long)r->budget,
               c->batch_overhead > 0 ? "given (batch_overhead)" : overhead_how);
    return 0;
}

int train_is_last_step(const run *r, int64_t step)
{
    if (!r->auto_batch) return step + 1 == r->c->steps;
    return step == r->step_now && r->step_samples_end >= r->budget;
}

int train_done(const run *r, int64_t step)
{
    return r->auto_batch ? r->samples >= r->budget : step >= r->c->steps;
}

void train_batch_plan_step(run *r, step_result *s)
{
    const int64_t per_micro = (int64_t)r->c->batch_size * r->dp;
    r->step_now = s->step;
    if (r->auto_batch) {
        /* the last step ends on the budget (both are multiples of global_batch_min) */
        const int64_t left = r->budget - r->samples;
        r->step_batch = r->global_batch < left ? r->global_batch : left;
        r->accum = (int)(r->step_batch / per_micro);
    } else {
        r->step_batch = r->global_batch;
    }
    r->step_samples_end = r->samples + r->step_batch;
    s->global_batch = r->step_batch;
}

double train_batch_lr(const run *r, const step_result *s)
{
    const gt_config *c = r->c;
    if (!r->auto_batch) return lr_at_step(s->step, c->warmup_steps, c->steps, c->lr, c->min_lr);
    const double unit = (double)r->batch_unit;
    const double base = batch_rule_lr_at((double)r->samples / unit, (double)c->warmup_steps,
                                         (double)c->steps, c->lr, c->min_lr);
    const double noise_seq = gns_value(&r->gns) / c->block_size;
    return base * batch_rule_lr_factor(c->lr_rule, (double)r->step_batch, unit, noise_seq);
}

/* The step costs into their EMAs: the time outside the micro-steps (optimizer, norm,
 * the communication not hidden) and the time per micro-step. */
static void measure_costs(run *r, const step_result *s)
{
    if (s->step == r->first_step || s->step >= COST_STEPS || !(s->compute_s > 0)) return;
    const double fixed = s->dt - s->compute_s - s->wait_s;
    r->cost_fixed = COST_BETA * r->cost_fixed + (1.0 - COST_BETA) * (fixed > 0 ? fixed : 0);
    r->cost_micro = COST_BETA * r->cost_micro + (1.0 - COST_BETA) * s->compute_s / r->accum;
    r->cost_w = COST_BETA * r->cost_w + (1.0 - COST_BETA);
}

/* t_fixed / t_seq in sequences: given, or rank 0's measurement (every rank the same). */
static double overhead_seq(const run *r)
{
    const gt_config *c = r->c;
    if (c->batch_overhead > 0) return c->batch_overhead;
    double ratio = 0.0;
    if (r->cost_w > 0 && r->cost_micro > 0)
        ratio = r->cost_fixed / (r->cost_micro / ((double)c->batch_size * r->dp));
    return par_bcast_double(ratio);
}

void train_batch_costs(run *r, step_result *s)
{
    s->step_overhead = NAN;
    if (!r->auto_batch) return;
    measure_costs(r, s);
    /* decisions at noise steps only, and none after the last step */
    if (isfinite(s->noise_tokens) && !train_is_last_step(r, s->step))
        s->step_overhead = overhead_seq(r);
}

void train_batch_after_step(run *r, const step_result *s)
{
    r->samples = r->step_samples_end;
    if (!r->auto_batch || !isfinite(s->step_overhead)) return;
    const double noise_seq = s->noise_tokens / r->c->block_size, overhead = s->step_overhead;
    const int64_t next = batch_rule_choose(noise_seq, overhead, r->batch_unit, r->batch_unit,
                                           r->batch_hi, r->global_batch);
    if (next != r->global_batch)
        par_printf("step %5lld | global batch %lld -> %lld sequences (noise scale %.1f "
                   "sequences, step overhead %.1f sequences)\n", (long long)s->step + 1,
                   (long long)r->global_batch, (long long)next, noise_seq, overhead);
    r->global_batch = next;
    r->accum = (int)(next / ((int64_t)r->c->batch_size * r->dp));
}
