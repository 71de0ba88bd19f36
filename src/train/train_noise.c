/* train_noise — the gradient noise scale of a training run (noise_scale.h has the
 * estimator), every noise_every steps and at every evaluation. Where the small-batch
 * gradients come from, by mode:
 *  - NOISE_MICRO (CPU engine, tp = pp = 1; sync on one rank or many, async on one):
 *    each micro-batch's own gradient, |g_k|^2 from the accumulator's norm before and
 *    after it (one copy of
 *    the accumulator and a dot product per micro-batch; the last one's sums are taken
 *    range by range as backward hands them to the reduction, before they are reduced).
 *    Small batch: batch_size x block_size tokens, whatever the split into replicas and
 *    micro-steps: a global batch read as 4 micro-steps on one rank or 2 x 2 on two
 *    ranks gives the same estimate. Needs replicas x micro-steps >= 2.
 *  - NOISE_REPLICA (replicas > 1 otherwise: the GPU engines, tp or pp > 1, async):
 *    each replica's accumulated gradient, as the reduction (or, with tp or pp > 1, the
 *    parts of the replica, noise_account) gives it.
 *  - NOISE_NONE: a GPU run on one replica, or one rank with one micro-step.
 * Cost: one pass over the gradient per micro-batch (and a copy of it) on a noise step,
 * nothing on other steps (docs/adaptive-batch.md has the measurement). */
#define GT_TRAIN_MODULE /* may include train_run.h */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grid.h"
#include "noise_scale.h" /* defines: gns_update, gns_micro_sq, gns_sums */
#include "train_run.h"
#include "util.h"

int train_is_noise_step(const run *r, int64_t step)
{
    if (r->noise_mode == NOISE_NONE) return 0;
    const int64_t k = r->c->noise_every;
    return (k > 0 && (step + 1) % k == 0) || train_is_eval_step(r, step);
}

/* The noise scale with tp or pp > 1: while backward hands the ranges of this rank's
 * gradient to the reduction, adds up the squares of its share of the replica's own
 * gradient (the tensors every tp peer holds whole counted on tp rank 0 only) and keeps
 * the tied wte's gradient aside (pp > 1: its two stages' parts add up first). */
static void noise_account(run *r, const float *g, size_t off, size_t n)
{
    const gpt_model *m = &r->model;
    for (int i = 0; i < m->n_info; i++) {
        const gpt_param_info *p = &m->info[i];
        const size_t lo = off > p->offset ? off : p->offset;
        const size_t hi = off + n < p->offset + p->numel ? off + n : p->offset + p->numel;
        if (lo >= hi) continue;
        if (i == m->i_wte && r->noise_wte) {
            memcpy(r->noise_wte + (lo - p->offset), g + lo, (hi - lo) * sizeof(float));
            continue;
        }
        if (p->split == GPT_SPLIT_NONE && grid_tp_rank() != 0) continue;
        double sq = 0.0;
        for (size_t k = lo; k < hi; k++) sq += (double)g[k] * g[k];
        r->noise_part += sq;
    }
}

/* The engine's gradient-ready hook on a noise step: this range of the last
 * micro-batch's accumulator is final and about to be reduced in place, so its sums
 * are taken now. Ranges come in any order; the sums of a range are the same bits
 * whichever thread, and the ranges of one model come in the same order every step. */
static void noise_ready(void *ctx, size_t offset, size_t count)
{
    run *r = ctx;
    const float *g = r->noise_grads;
    const double t0 = r->noise_on ? gt_now() : 0.0;
    if (r->noise_on && r->noise_mode == NOISE_MICRO) {
        double sq, dot = 0.0;
        gns_sums(g + offset, r->accum > 1 ? r->noise_prev + offset : NULL, count, &sq,
                 &dot);
        r->noise_last_sq += sq;
        r->noise_last_dot += dot;
    } else if (r->noise_on) {
        noise_account(r, g, offset, count);
    }
    if (r->noise_on) r->noise_seconds += gt_now() - t0;
    par_reducer_ready(r->red, offset, count);
}

train_noise_mode train_noise_mode_of(const run *r)
{
    const int sync = r->c->sync == SYNC_SYNC;
    const int max_accum = r->auto_batch ? r->accum_max : r->accum;
    /* async on one rank too: the step's own |G|^2 is the accumulator's at its end */
    if ((sync || r->world == 1) && r->device == DEVICE_CPU && r->tp * r->pp == 1 &&
        r->dp * max_accum >= 2)
        return NOISE_MICRO;
    if (r->dp > 1 && (r->tp * r->pp == 1 || sync)) return NOISE_REPLICA;
    return NOISE_NONE;
}

int train_noise_setup(run *r)
{
    const int max_accum = r->auto_batch ? r->accum_max : r->accum;
    r->noise_mode = train_noise_mode_of(r);
    if (r->noise_mode == NOISE_MICRO && max_accum > 1 &&
        !(r->noise_prev = gt_malloc(r->model.n_params * sizeof(float), "noise scale buffer")))
        return -1;
    if (!r->red) return 0;
    if (r->noise_mode == NOISE_REPLICA && r->tp * r->pp > 1) {
        /* the replica's norm from its parts; pp > 1: the tied wte's two halves */
        if (r->pp > 1 && r->model.i_wte >= 0 &&
            !(r->noise_wte = gt_malloc(r->model.info[r->model.i_wte].numel * sizeof(float),
                                       "noise scale buffer")))
            return -1;
        engine_set_grads_ready(r->engine, noise_ready, r);
    } else if (r->noise_mode == NOISE_MICRO) {
        engine_set_grads_ready(r->engine, noise_ready, r);
    } else {
        engine_set_grads_ready(r->engine, par_reducer_ready, r->red);
    }
    return 0;
}

/* Whether the reduction of the gradient of `step` must return each rank's own squared
 * norm (NOISE_REPLICA with tp = pp = 1: the reducer measures it before reducing). */
int train_noise_wants_sumsq(const run *r, int64_t step)
{
    return r->noise_mode == NOISE_REPLICA && r->tp * r->pp == 1 &&
           train_is_noise_step(r, step);
}

void train_noise_begin(run *r, const step_result *s, float *grads)
{
    r->noise_on = train_is_noise_step(r, s->step) &&
                  (r->noise_mode == NOISE_MICRO || (r->tp * r->pp > 1 && r->ring.lag == 0));
    r->noise_grads = grads;
    r->noise_part = r->noise_small = r->noise_prev_sq = 0.0;
    r->noise_last_sq = r->noise_last_dot = 0.0;
}

void train_noise_after_micro(run *r, int micro, const float *grads)
{
    if (!r->noise_on || r->noise_mode != NOISE_MICRO) return;
    const double t0 = gt_now();
    const int last = micro == r->accum - 1;
    double sq, dot = 0.0;
    if (last && r->red) {
        /* taken by noise_ready before the reduction */
        sq = r->noise_last_sq;
        dot = r->noise_last_dot;
    } else {
        gns_sums(grads, micro > 0 ? r->noise_prev : NULL, r->model.n_params, &sq, &dot);
    }
    r->noise_small += gns_micro_sq(sq, dot, r->noise_prev_sq, r->accum);
    r->noise_prev_sq = sq;
    if (!last) memcpy(r->noise_prev, grads, r->model.n_params * sizeof(float));
    r->noise_seconds += gt_now() - t0;
}

/* The replica's own squared gradient norm (a collective over the replica). */
static double replica_sq(run *r)
{
    double part = r->noise_part;
    const gpt_model *m = &r->model;
    if (r->noise_wte) {
        const size_t n = m->info[m->i_wte].numel;
        grid_tie_allreduce_sum(r->noise_wte, n);
        if (m->has_embed)
            for (size_t k = 0; k < n; k++) part += (double)r->noise_wte[k] * r->noise_wte[k];
    }
    return grid_mp_sum_double(part);
}

/* With tp or pp > 1 each replica's own norm must be put together before the norm of
 * the reduced gradient replaces the parts: phase_reduce calls this first. */
void train_noise_replica_parts(run *r, step_result *s)
{
    if (r->noise_on && r->noise_mode == NOISE_REPLICA && s->apply)
        s->local_sq = replica_sq(r);
}

void train_noise_estimate(run *r, step_result *s)
{
    const gt_config *c = r->c;
    s->noise_tokens = NAN;
    if (!train_is_noise_step(r, s->step)) return;
    const double tokens_micro = (double)c->batch_size * c->block_size;
    double small, b_small, big = s->norm * s->norm;
    if (r->noise_mode == NOISE_MICRO) {
        if (!r->noise_on || r->dp * r->accum < 2) return;
        /* async (one rank): this step's gradient is applied later; its |G|^2 is the
         * accumulator's at the end of the step */
        if (r->ring.lag > 0) big = r->noise_prev_sq;
        else if (!s->apply) return;
        small = par_mean_double(r->noise_small / r->accum);
        b_small = tokens_micro;
    } else if (!s->apply) {
        return;
    } else if (r->noise_mode == NOISE_REPLICA && (r->tp * r->pp == 1 || r->noise_on)) {
        small = par_mean_double(s->local_sq);
        b_small = tokens_micro * r->accum;
    } else {
        return;
    }
    s->noise_tokens = gns_update(&r->gns, small, big, b_small, tokens_micro * r->accum * r->dp,
                                 GNS_BETA);
    r->noise_estimates++;
}
