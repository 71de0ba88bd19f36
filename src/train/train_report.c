/* train_report — what a run tells its user: the set-up lines about the model and the
 * gradients, one line per step and per evaluation on stdout (rank 0), one JSON Lines
 * record per step in the log, and the summary at the end. */
#define GT_TRAIN_MODULE /* may include train_run.h */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "train_run.h"
#include "util.h"

static int64_t train_log_every(const gt_config *c);

void train_report_setup(const run *r)
{
    const gt_config *c = r->c;
    par_printf("model: %.2fM parameters, %.2f GFLOP per %s of %d x %d tokens%s\n",
               r->model.n_params / 1e6, r->flops / 1e9, r->accum > 1 ? "micro-step" : "step",
               c->batch_size, c->block_size, r->world > 1 ? " on each rank" : "");
    if (r->red)
        par_printf("gradients: %zu bucket%s of up to %g MiB, %s on the wire (%.1f MB per "
                   "step), reduced while backward runs%s\n", par_reducer_buckets(r->red),
                   par_reducer_buckets(r->red) == 1 ? "" : "s", c->bucket_mb,
                   config_enum_word("grad_comm", c->grad_comm),
                   par_reducer_bytes(r->red) / 1e6,
                   c->sync == SYNC_ASYNC ? " and during the next step(s)" : "");
    if (c->sync == SYNC_ASYNC)
        par_printf("async: each step applies the gradient of %d step%s before (the first "
                   "%d apply nothing), taken at %s weights (async_predict = %s)\n",
                   r->ring.lag, r->ring.lag == 1 ? "" : "s", r->ring.lag,
                   r->ring.predicted ? "predicted" : "current",
                   config_enum_word("async_predict", c->async_predict));
    if (train_log_every(c) > 1)
        par_printf("progress: a step line every %lld steps (log_every%s)%s\n",
                   (long long)train_log_every(c), c->log_every > 0 ? "" : " = 0: about 100 a run",
                   r->log ? "; the log has every step" : "");
    fflush(stdout);
}

/* Tokens one optimizer step trains on, over all replicas. */
static double tokens_per_step(const run *r)
{
    return (double)r->c->batch_size * r->c->block_size * r->dp * r->accum;
}

/* Tokens trained on when step s ends, from step 0 (a resumed run counts its
 * checkpoint's): under auto the data cursor's, else step x the global batch. */
static double train_tokens_done(const run *r, const step_result *s)
{
    if (r->auto_batch) return (double)r->step_samples_end * r->c->block_size;
    return (double)(s->step + 1) * tokens_per_step(r);
}

/* "step    12/2000" or, under auto (the steps are not known ahead), "step    12 (3.4%)"
 * with the share of the budget of samples trained. */
static void step_label(const run *r, const step_result *s)
{
    if (r->auto_batch)
        par_printf("step %5lld (%4.1f%%)", (long long)s->step + 1,
                   100.0 * (double)r->step_samples_end / (double)r->budget);
    else
        par_printf("step %5lld/%lld", (long long)s->step + 1, (long long)r->c->steps);
}

/* log_every, with 0 settled: about 100 lines a run. */
static int64_t train_log_every(const gt_config *c)
{
    if (c->log_every > 0) return c->log_every;
    return c->steps >= 200 ? c->steps / 100 : 1;
}

/* Whether step s gets a line on stdout: every log_every steps, and the steps a person
 * watching wants to see whatever the interval (this process's first, the last, an
 * evaluation, an FP16 overflow). */
static int line_due(const run *r, const step_result *s)
{
    const int64_t done = s->step + 1;
    return done % train_log_every(r->c) == 0 || s->step == r->first_step ||
           train_is_last_step(r, s->step) || s->skipped || train_is_eval_step(r, s->step);
}

/* Seconds as H:MM:SS: the same width all run long, so columns line up. */
static void hms(double seconds, char *buf, size_t cap)
{
    if (!(seconds >= 0) || seconds > 1e9) {
        snprintf(buf, cap, "-:--:--");
        return;
    }
    const long long t = (long long)(seconds + 0.5);
    snprintf(buf, cap, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
}

/* A count with a unit a person reads at a glance: 950, 12.3k, 4.56M, 7.89G. */
static void human_count(double n, char *buf, size_t cap)
{
    if (n < 1e3)
        snprintf(buf, cap, "%.0f", n);
    else if (n < 1e6)
        snprintf(buf, cap, "%.1fk", n / 1e3);
    else if (n < 1e9)
        snprintf(buf, cap, "%.2fM", n / 1e6);
    else
        snprintf(buf, cap, "%.2fG", n / 1e9);
}

/* " | 4.56M tokens | elapsed 0:01:23 | ETA 0:10:02": the tokens trained on since step
 * 0 (a resumed run counts its checkpoint's), this process's time, and the rest at its
 * pace so far. Plain text, no carriage return or colour, so a batch job's output stays
 * grep-able. */
static void report_progress(const run *r, const step_result *s)
{
    const double elapsed = gt_now() - r->t_start;
    /* under auto the steps differ in size: progress counts samples */
    const double ran = r->auto_batch ? (double)(r->step_samples_end - r->first_sample)
                                     : (double)(s->step + 1 - r->first_step),
                 left = r->auto_batch ? (double)(r->budget - r->step_samples_end)
                                      : (double)(r->c->steps - (s->step + 1));
    char tok[32], el[32], eta[32];
    human_count(train_tokens_done(r, s), tok, sizeof tok);
    hms(elapsed, el, sizeof el);
    hms(ran > 0 ? elapsed / ran * left : -1.0, eta, sizeof eta);
    par_printf(" | %s tokens | elapsed %s | ETA %s", tok, el, eta);
}

void train_report_step(const run *r, const step_result *s)
{
    if (!line_due(r, s)) return;
    const double tok_s = tokens_per_step(r) / s->dt,
                 gflops = r->flops * r->dp * r->accum / s->dt * 1e-9;
    step_label(r, s);
    par_printf(" | loss %.4f | lr %.2e | ", s->loss, s->lr);
    if (r->auto_batch) par_printf("batch %lld | ", (long long)s->global_batch);
    if (s->apply)
        par_printf("norm %.3f", s->norm);
    else if (s->skipped && r->ring.lag == 0)
        par_printf("FP16 overflow: step skipped");
    else if (s->skipped)
        par_printf("FP16 overflow in the gradient of step %lld: update skipped",
                   (long long)(s->step + 1 - r->ring.lag));
    else
        par_printf("no update (async warm-up)");
    report_progress(r, s);
    par_printf(" | %7.1f ms | %7.0f tok/s | %6.1f GFLOP/s", s->dt * 1e3, tok_s, gflops);
    if (r->peak_gflops > 0)
        par_printf(" | MFU %4.1f%%", 100.0 * gflops / (r->peak_gflops * r->world));
    par_printf(" | wait %.2f ms", s->wait_s * 1e3);
    if (s->threads < r->threads) par_printf(" | threads %d of %d", s->threads, r->threads);
    if (s->tiles_n > 0) {
        double dp = 0.0, span = 0.0;
        for (int i = 0; i < s->tiles_n && i < STEP_TILE_THREADS; i++) {
            dp += (double)s->tiles[i].dpbf16ps;
            if (s->tiles[i].span_s > span) span = s->tiles[i].span_s;
        }
        par_printf(" | emulated tiles %.2fM TDPBF16PS, %.1f ms", dp * 1e-6, span * 1e3);
    }
    if (r->world > 1) par_printf(" | comm %.2f ms", s->comm_s * 1e3);
    if (r->engine->scaler) {
        par_printf(" | scale %.0f", (double)s->scale_before);
        if (s->scale_event != LOSS_SCALE_KEPT)
            par_printf(" -> %.0f", (double)r->engine->scaler->scale);
    }
    par_printf("\n");
}

/* The evaluation's line, with the gradient noise scale where this run estimates it
 * (train_noise.c). */
void train_report_eval(const run *r, const step_result *s, double seconds)
{
    const gt_config *c = r->c;
    step_label(r, s);
    par_printf(" | val_loss %.4f | %d batches in %.2f s", r->last_val, c->eval_batches,
               seconds);
    if (r->noise_mode != NOISE_NONE && s->apply) {
        if (isfinite(s->noise_tokens))
            par_printf(" | noise scale %.0f tokens (%.1f sequences)", s->noise_tokens,
                       s->noise_tokens / c->block_size);
        else
            par_printf(" | noise scale n/a (no gradient signal yet)");
    }
    par_printf("\n");
}

/* The emulated AMX path's counts as JSON members, one array element a thread (in no
 * particular order; the same order in every array): what scripts/bench.sh's
 * prediction of the real tile path reads. */
static void log_tiles(FILE *f, const step_result *s)
{
    static const struct {
        const char *name;
        size_t offset; /* in amx_emul_counts */
        int seconds;   /* a double in seconds, logged in ms; else a uint64_t count */
    } fields[] = {
        {"tdpbf16ps", offsetof(amx_emul_counts, dpbf16ps), 0},
        {"tileloadd", offsetof(amx_emul_counts, loadd), 0},
        {"tilestored", offsetof(amx_emul_counts, stored), 0},
        {"tilezero", offsetof(amx_emul_counts, zero), 0},
        {"tile_emul_ms", offsetof(amx_emul_counts, span_s), 1},
        {"amx_product_ms", offsetof(amx_emul_counts, product_s), 1},
        {"amx_product_tile_ms", offsetof(amx_emul_counts, product_span_s), 1},
        {"tdpbf16ps_attention", offsetof(amx_emul_counts, att_dpbf16ps), 0},
        {"tileloadd_attention", offsetof(amx_emul_counts, att_loadd), 0},
        {"tilestored_attention", offsetof(amx_emul_counts, att_stored), 0},
        {"tilezero_attention", offsetof(amx_emul_counts, att_zero), 0},
        {"amx_attention_ms", offsetof(amx_emul_counts, att_product_s), 1},
        {"amx_attention_tile_ms", offsetof(amx_emul_counts, att_product_span_s), 1}};
    const int n = s->tiles_n < STEP_TILE_THREADS ? s->tiles_n : STEP_TILE_THREADS;
    fprintf(f, ",\"tile_threads\":%d", s->tiles_n);
    for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++) {
        fprintf(f, ",\"%s\":[", fields[k].name);
        for (int i = 0; i < n; i++) {
            const char *at = (const char *)&s->tiles[i] + fields[k].offset;
            if (fields[k].seconds) {
                double v;
                memcpy(&v, at, sizeof v);
                fprintf(f, "%s%.3f", i ? "," : "", v * 1e3);
            } else {
                uint64_t v;
                memcpy(&v, at, sizeof v);
                fprintf(f, "%s%llu", i ? "," : "", (unsigned long long)v);
            }
        }
        fprintf(f, "]");
    }
}

/* One JSON Lines record (rank 0's log). 0, or -1 when the write failed (reported). */
int train_log_step(const run *r, const step_result *s)
{
    const gt_config *c = r->c;
    if (!r->log) return 0;
    const double tok_s = (double)c->batch_size * c->block_size * r->dp * r->accum / s->dt,
                 gflops = r->flops * r->dp * r->accum / s->dt * 1e-9;
    fprintf(r->log, "{\"step\":%lld,\"loss\":%.6f,\"lr\":%.6e,\"global_batch_size\":%lld,",
            (long long)s->step + 1, s->loss, s->lr, (long long)s->global_batch);
    if (s->apply)
        fprintf(r->log, "\"grad_norm\":%.6f,", s->norm);
    else
        fprintf(r->log, "\"grad_norm\":null,");
    if (r->engine->scaler)
        fprintf(r->log, "\"loss_scale\":%.1f,\"skipped\":%s,", (double)s->scale_before,
                s->skipped ? "true" : "false");
    fprintf(r->log, "\"ms\":%.3f,\"tokens_per_s\":%.1f,\"gflops\":%.3f,"
            "\"load_wait_ms\":%.4f,\"comm_ms\":%.4f,\"comm_bytes\":%.0f,"
            "\"tokens\":%.0f,\"elapsed_s\":%.3f",
            s->dt * 1e3, tok_s, gflops, s->wait_s * 1e3, s->comm_s * 1e3,
            r->world > 1 && s->reduced ? (double)par_reducer_bytes(r->red) : 0.0,
            train_tokens_done(r, s), gt_now() - r->t_start);
    fprintf(r->log, ",\"threads\":%d", s->threads);
    if (s->do_eval) fprintf(r->log, ",\"val_loss\":%.6f", r->last_val);
    if (isfinite(s->noise_tokens)) fprintf(r->log, ",\"noise_scale\":%.1f", s->noise_tokens);
    if (isfinite(s->step_overhead))
        fprintf(r->log, ",\"step_overhead\":%.9g", s->step_overhead);
    if (s->tiles_n > 0) log_tiles(r->log, s);
    if (s->dots_n > 0) { /* the avx512-bf16 path's, one element a thread */
        const int n = s->dots_n < STEP_TILE_THREADS ? s->dots_n : STEP_TILE_THREADS;
        fprintf(r->log, ",\"dot_threads\":%d,\"vdpbf16ps\":[", s->dots_n);
        for (int i = 0; i < n; i++)
            fprintf(r->log, "%s%llu", i ? "," : "", (unsigned long long)s->dots[i].vdpbf16ps);
        fprintf(r->log, "],\"dot_kernel_ms\":[");
        for (int i = 0; i < n; i++)
            fprintf(r->log, "%s%.3f", i ? "," : "", s->dots[i].kernel_s * 1e3);
        fprintf(r->log, "]");
    }
    fprintf(r->log, "}\n");
    if (fflush(r->log) != 0) {
        gt_error("writing the log file %s failed", c->log);
        return -1;
    }
    return 0;
}

void train_report_done(const run *r)
{
    const gt_config *c = r->c;
    const double wall = gt_now() - r->t_start;
    const int64_t ran = r->end_step - r->first_step;
    const double tokens = r->auto_batch
                              ? (double)(r->samples - r->first_sample) * c->block_size
                              : (double)ran * c->batch_size * c->block_size * r->dp * r->accum;
    par_printf("done: %lld steps in %.1f s (%.0f tok/s in steps)", (long long)ran, wall,
               ran > 0 ? tokens / r->t_compute : 0.0);
    if (r->world > 1)
        par_printf(", %.1f MB of gradients reduced per rank", r->total_bytes / 1e6);
    if (!isnan(r->last_val)) par_printf(", final val_loss %.4f", r->last_val);
    par_printf("\n");
    /* what the estimate costs, for noise_every: rank 0's time in its sums */
    if (r->noise_estimates > 0 && r->t_compute > 0)
        par_printf("noise scale: %lld estimates, %.2f ms of sums each (%.2f%% of the time "
                   "in steps)\n", (long long)r->noise_estimates,
                   r->noise_seconds * 1e3 / (double)r->noise_estimates,
                   100.0 * r->noise_seconds / r->t_compute);
}

void train_report_dry_run(const run *r)
{
    const gt_config *c = r->c;
    par_printf("dry run: set up without a step: the config, the data, the run folder%s, "
               "the grid (%d rank%s: dp %d x tp %d x pp %d) and the model and its "
               "buffers on %s\n", r->from ? ", the checkpoint" : "", r->world,
               r->world == 1 ? "" : "s", r->dp, r->tp, r->pp,
               r->device == DEVICE_CPU ? "the CPU" : "the GPU");
    const char *start = r->from ? "on from its checkpoint"
                        : c->init_from[0] ? "from init_from's weights"
                                          : "from scratch";
    if (r->auto_batch)
        par_printf("dry run: it would train %lld more sequences of %d tokens %s, in global "
                   "batches of %lld to %lld sequences (global_batch_size = auto)\n",
                   (long long)(r->budget - r->samples), c->block_size, start,
                   (long long)r->batch_unit, (long long)r->batch_hi);
    else if (r->first_step >= c->steps)
        par_printf("dry run: it would train no step: the checkpoint is at step %lld of "
                   "%lld\n", (long long)r->first_step, (long long)c->steps);
    else
        par_printf("dry run: it would train steps %lld to %lld %s, %lld sequences of %d "
                   "tokens a step\n", (long long)r->first_step + 1, (long long)c->steps,
                   start, (long long)r->global_batch, c->block_size);
    par_printf("dry run: nothing trained; no checkpoint, model file or log line written\n");
}
