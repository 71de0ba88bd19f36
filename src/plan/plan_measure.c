/* plan_measure — see plan_measure.h. */
#include "plan_measure.h"

#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels_cpu.h"
#include "optim.h"
#include "parallel.h"
#include "rng.h"
#include "util.h"

enum { MAX_MEMO = 256 };

typedef struct memo {
    int kind, threads, tp, Bm; /* kind 0: block, 1: embed + head, 2: AdamW */
    double seconds;
} memo;

struct plan_calibration {
    gpt_shape shape;
    int T, reps;
    int cores;     /* of this node: ranks timed at once must fit them */
    memo m[MAX_MEMO];
    int n;
    int failed;      /* a timing could not be set up: no more are tried */
    char why[160];   /* which one */
};

plan_calibration *plan_calibration_create(const gpt_shape *s, int T, int reps, int cores)
{
    plan_calibration *c = gt_calloc(sizeof *c, "planner calibration");
    if (!c) return NULL;
    c->shape = *s;
    c->T = T;
    c->reps = reps < 1 ? 1 : reps;
    c->cores = cores;
    return c;
}

void plan_calibration_free(plan_calibration *c) { free(c); }

int plan_calibration_failed(const plan_calibration *c, char *why, size_t cap)
{
    if (c->failed && why && cap) snprintf(why, cap, "%s", c->why);
    return c->failed;
}

static int by_value(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void no_allreduce(void *ctx, float *buf, size_t n)
{
    (void)ctx;
    (void)buf;
    (void)n;
}

static void fill(float *x, size_t n, uint64_t seed, float scale)
{
    rng r;
    rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = scale * rng_normal(&r);
}

/* Median seconds of forward + backward of one stage model on a Bm x T micro-batch:
 * `whole` 0 = the middle stage of 3 (one block, no embedding or head), 1 = a whole
 * one-block model (tokens to loss). -1 when it cannot be set up (reported). */
static double time_model(const plan_calibration *c, int whole, int threads, int tp, int Bm)
{
    gpt_shape s = c->shape;
    s.n_layer = whole ? 1 : 3;
    const int T = c->T;
    gpt_model m;
    const int ok_create = whole ? gpt_create_stage(&m, s, &backend_cpu, threads, 1, 0, 0, 1)
                                : gpt_create_stage(&m, s, &backend_cpu, threads, tp, 0, 1, 3);
    if (ok_create != 0) return -1.0;
    const size_t BTC = (size_t)Bm * T * (size_t)s.n_embd;
    float *x = gt_malloc(BTC * sizeof(float), "planner inputs");
    float *d = gt_malloc(BTC * sizeof(float), "planner gradients");
    int32_t *tok = gt_malloc((size_t)Bm * T * sizeof(int32_t), "planner tokens");
    double *t = gt_malloc((size_t)c->reps * sizeof(double), "planner timings");
    double result = -1.0;
    if (x && d && tok && t && gpt_alloc_grads(&m) == 0 && gpt_alloc_acts(&m, Bm, T) == 0 &&
        gpt_init_weights(&m, 1) == 0) {
        m.tp_allreduce = no_allreduce; /* communication is costed on its own */
        fill(x, BTC, 2, 1.0f);
        fill(d, BTC, 3, 1e-3f);
        for (size_t i = 0; i < (size_t)Bm * T; i++) tok[i] = (int32_t)(i * 7 % s.vocab_size);
        const int saved = omp_get_max_threads();
        gt_set_threads(threads);
        for (int r = -1; r < c->reps; r++) { /* one warm-up */
            const double t0 = gt_now();
            float loss;
            gpt_zero_grad(&m);
            if (whole) {
                gpt_stage_forward(&m, tok, NULL, tok, Bm, T, 1, &loss);
                gpt_stage_backward(&m, NULL);
            } else {
                gpt_stage_forward(&m, NULL, x, NULL, Bm, T, 1, &loss);
                gpt_stage_backward(&m, d);
            }
            if (r >= 0) t[r] = gt_now() - t0;
        }
        gt_set_threads(saved);
        qsort(t, (size_t)c->reps, sizeof *t, by_value);
        result = t[c->reps / 2];
    }
    free(x);
    free(d);
    free(tok);
    free(t);
    gpt_free(&m);
    return result;
}

/* Seconds per parameter of an AdamW step with its clip (the norm pass, then the update
 * with the clip factor folded in, as src/train/train.c does it) on `threads`. */
static double time_adam(const plan_calibration *c, int threads)
{
    const size_t n = (size_t)1 << 22;
    adamw_state st;
    float *p = gt_malloc(n * sizeof(float), "planner parameters");
    float *g = gt_malloc(n * sizeof(float), "planner gradients");
    double best = -1.0;
    if (p && g && adamw_init(&st, n) == 0) {
        fill(p, n, 4, 0.02f);
        fill(g, n, 5, 1e-3f);
        gpt_param_info info = {.name = "x", .ndim = 2, .numel = n, .decay = 1};
        const int saved = omp_get_max_threads();
        gt_set_threads(threads);
        for (int r = -1; r < c->reps; r++) {
            const double t0 = gt_now();
            double norm = grad_global_norm(g, n);
            adamw_step(&st, p, g, grad_clip_factor(norm, 1.0), &info, 1, 1e-4, 0.9, 0.99,
                       1e-8, 0.1);
            const double dt = (gt_now() - t0) / (double)n;
            if (r >= 0 && (best < 0 || dt < best)) best = dt;
        }
        gt_set_threads(saved);
        adamw_free(&st);
    }
    free(p);
    free(g);
    return best;
}

enum { TAG_CMD = 77 };

/* Runs one timing (kind as in memo; kind 1 here is the whole one-block model), its
 * allocation errors muted (a model too large for this machine fails every timing: the
 * planner says so in one line, plan_calibration_failed). */
static double run_timing(const plan_calibration *c, int kind, int threads, int tp, int Bm)
{
    gt_mute_reports(1);
    const double s = kind == 2 ? time_adam(c, threads) : time_model(c, kind, threads, tp, Bm);
    gt_mute_reports(0);
    return s;
}

/* Rank 0 asks the others to run the same timing now, when as many ranks as there are
 * fit the node's cores at `threads` each: then the rank timed has busy neighbours, as
 * in training. Returns whether they were asked. */
static void ask_others(const plan_calibration *c, int kind, int threads, int tp, int Bm)
{
    const int world = par_world();
    if (world < 2 || threads * world > c->cores) return;
    int cmd[4] = {kind, threads, tp, Bm};
    for (int r = 1; r < world; r++)
        par_check_mpi(MPI_Send(cmd, 4, MPI_INT, r, TAG_CMD, MPI_COMM_WORLD),
                      "MPI_Send (planner)");
}

static double timed(plan_calibration *c, int kind, int threads, int tp, int Bm)
{
    ask_others(c, kind, threads, tp, Bm);
    return run_timing(c, kind, threads, tp, Bm);
}

void plan_measure_serve(const gpt_shape *s, int T, int reps, int cores)
{
    plan_calibration *c = plan_calibration_create(s, T, reps, cores);
    for (;;) {
        /* Wait without spinning: the rank being timed needs the cores. */
        int cmd[4], done = 0;
        MPI_Request req;
        par_check_mpi(MPI_Irecv(cmd, 4, MPI_INT, 0, TAG_CMD, MPI_COMM_WORLD, &req),
                      "MPI_Irecv (planner)");
        while (!done) {
            par_check_mpi(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test (planner)");
            if (!done) {
                struct timespec ts = {0, 2000000};
                nanosleep(&ts, NULL);
            }
        }
        if (cmd[0] < 0) break;
        if (c) run_timing(c, cmd[0], cmd[1], cmd[2], cmd[3]);
    }
    plan_calibration_free(c);
}

void plan_measure_stop_serving(void)
{
    int cmd[4] = {-1, 0, 0, 0};
    for (int r = 1; r < par_world(); r++)
        par_check_mpi(MPI_Send(cmd, 4, MPI_INT, r, TAG_CMD, MPI_COMM_WORLD),
                      "MPI_Send (planner)");
}

static double lookup(plan_calibration *c, int kind, int threads, int tp, int Bm)
{
    for (int i = 0; i < c->n; i++)
        if (c->m[i].kind == kind && c->m[i].threads == threads && c->m[i].tp == tp &&
            c->m[i].Bm == Bm)
            return c->m[i].seconds;
    if (c->failed) return -1.0; /* one failure makes the whole calibration void */
    double s;
    if (kind == 0) {
        s = timed(c, 0, threads, tp, Bm);
    } else if (kind == 1) {
        /* The whole one-block model less its block. */
        const double whole = timed(c, 1, threads, 1, Bm);
        const double block = whole < 0 ? -1.0 : lookup(c, 0, threads, 1, Bm);
        s = whole < 0 || block < 0 ? -1.0 : whole - block > 0 ? whole - block : 0.0;
    } else {
        s = timed(c, 2, threads, 1, 0);
    }
    if (s < 0 && !c->failed) {
        c->failed = 1;
        if (kind == 2)
            snprintf(c->why, sizeof c->why, "AdamW on %d thread%s", threads,
                     threads == 1 ? "" : "s");
        else
            snprintf(c->why, sizeof c->why, "%s with a micro-batch of %d x %d tokens%s on "
                     "%d thread%s", kind == 0 ? "a transformer block" : "the embedding and head",
                     Bm, c->T, tp > 1 ? " (a tensor-parallel shard)" : "", threads,
                     threads == 1 ? "" : "s");
    }
    if (s < 0) return -1.0;
    if (c->n < MAX_MEMO) c->m[c->n++] = (memo){kind, threads, tp, Bm, s};
    return s;
}

static double cb_block(void *ctx, int threads, int tp, int Bm)
{
    return lookup(ctx, 0, threads, tp, Bm);
}
static double cb_embed_head(void *ctx, int threads, int Bm)
{
    return lookup(ctx, 1, threads, 1, Bm);
}
static double cb_adam(void *ctx, int threads) { return lookup(ctx, 2, threads, 1, 0); }

void plan_calibration_attach(plan_calibration *c, plan_machine *mc)
{
    mc->t_block = cb_block;
    mc->t_embed_head = cb_embed_head;
    mc->t_adam = cb_adam;
    mc->ctx = c;
}

/* Median seconds of `reps` MPI_Allreduce of n floats over the world, each timed as the
 * mean over the ranks: the ranks leave the barrier before it up to one message latency
 * apart, and the one that leaves last finds the others' data already there (on a link
 * of 2 ms one way, rank 0 alone timed a small all-reduce at 16 us; the mean over the
 * ranks cancels the skew). */
static double time_allreduce(size_t n, int reps)
{
    float *buf = gt_calloc(n * sizeof(float), "planner buffer");
    double *t = gt_malloc((size_t)reps * sizeof(double), "planner timings");
    int ok = buf && t;
    if (!par_all_ok(ok)) {
        free(buf);
        free(t);
        return -1.0;
    }
    for (int r = -1; r < reps; r++) {
        par_check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier (planner)");
        const double t0 = gt_now();
        par_check_mpi(MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM,
                                    MPI_COMM_WORLD),
                      "MPI_Allreduce (planner measurement)");
        const double dt = par_mean_double(gt_now() - t0);
        if (r >= 0) t[r] = dt;
    }
    qsort(t, (size_t)reps, sizeof *t, by_value);
    const double med = par_bcast_double(t[reps / 2]);
    free(buf);
    free(t);
    return med;
}

/* Median one-way seconds of n floats between ranks 0 and 1 (ping-pong / 2). */
static double time_p2p(size_t n, int reps)
{
    float *buf = gt_calloc(n * sizeof(float), "planner buffer");
    double *t = gt_malloc((size_t)reps * sizeof(double), "planner timings");
    if (!par_all_ok(buf && t)) {
        free(buf);
        free(t);
        return -1.0;
    }
    const int me = par_rank();
    for (int r = -1; r < reps; r++) {
        par_check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier (planner)");
        const double t0 = gt_now();
        int rc = MPI_SUCCESS;
        if (me == 0) {
            rc = MPI_Send(buf, (int)n, MPI_FLOAT, 1, 78, MPI_COMM_WORLD);
            if (rc == MPI_SUCCESS)
                rc = MPI_Recv(buf, (int)n, MPI_FLOAT, 1, 78, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (me == 1) {
            rc = MPI_Recv(buf, (int)n, MPI_FLOAT, 0, 78, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS) rc = MPI_Send(buf, (int)n, MPI_FLOAT, 0, 78, MPI_COMM_WORLD);
        }
        par_check_mpi(rc, "MPI point-to-point (planner measurement)");
        if (r >= 0) t[r] = (gt_now() - t0) / 2.0;
    }
    qsort(t, (size_t)reps, sizeof *t, by_value);
    const double med = par_bcast_double(t[reps / 2]);
    free(buf);
    free(t);
    return med;
}

int plan_measure_links(plan_machine *mc)
{
    const int p = par_world();
    if (p < 2) return -1;
    /* Fit the ring model 2 (p-1)/p bytes / bw + 2 (p-1) lat to a small and a large
     * message. */
    const double small = time_allreduce(256, 50), large = time_allreduce(1 << 23, 10);
    const double lat = small / (2.0 * (p - 1));
    const double bytes = 4.0 * (1 << 23), move = 2.0 * (p - 1) / p * bytes;
    const double bw = move / (large - 2.0 * (p - 1) * lat > 1e-9 ? large - 2.0 * (p - 1) * lat
                                                                  : large);
    mc->intra_lat = mc->inter_lat = lat;
    mc->intra_bw = mc->inter_bw = bw;
    /* Point to point: the same two-size fit, one way. */
    const double p_small = time_p2p(256, 50), p_large = time_p2p(1 << 22, 10);
    mc->p2p_lat = p_small;
    mc->p2p_bw = 4.0 * (1 << 22) / (p_large - p_small > 1e-9 ? p_large - p_small : p_large);
    return 0;
}
