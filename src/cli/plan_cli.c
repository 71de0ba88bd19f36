/* plan_cli — the `gentrain plan` verb: reads the config and a machine (measured here,
 * or described), runs the cost model (plan.h) over every grid and prints the table
 * and a recommendation. */
#include "plan_cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5set.h"
#include "cli_names.h" /* cli_canonical */
#include "config.h"
#include "cpu_features.h" /* defines: cpu_available_count */
#include "parallel.h"
#include "plan.h"
#include "plan_log.h" /* defines: plan_log_read_noise */
#include "plan_measure.h"
#include "util.h"

enum { MAX_ROWS = 4096 };

/* The most ranks (nodes x cores or GPUs a node) a plan enumerates. */
#define PLAN_MAX_SLOTS (1 << 20)

typedef struct plan_opts {
    int measure, json, nodes, cores, gpus, reps, tp_host;
    double core_gflops, gpu_tflops, efficiency, intra_gbs, inter_gbs, latency_us, noise,
        pcie_gbs;
    const char *from_log; /* --from-log: a run's log.jsonl gives the noise scale */
} plan_opts;

/* Described compute: flops at a sustained rate (GFLOP/s per thread or per GPU). */
typedef struct described {
    gpt_shape s;
    int T;
    double rate; /* flop/s per thread (CPU) or per GPU */
} described;

static double d_block(void *ctx, int threads, int tp, int Bm)
{
    const described *d = ctx;
    return plan_block_flops(&d->s, tp, Bm, d->T) / (d->rate * threads);
}
static double d_head(void *ctx, int threads, int Bm)
{
    const described *d = ctx;
    return plan_head_flops(&d->s, Bm, d->T) / (d->rate * threads);
}
static double d_adam(void *ctx, int threads)
{
    (void)ctx;
    return 16.0 / (20e9 * threads); /* ~16 bytes touched per parameter at 20 GB/s */
}

/* A finite number in [lo, hi] (a whole one when whole): the values feed products of
 * ints and the table, so an infinity, a NaN or a count past hi is refused here. */
static int parse_num(const char *key, const char *v, double lo, double hi, int whole,
                     double *out)
{
    char *end = NULL, shown[72];
    double x = v ? gt_strtod_decimal(v, &end) : 0.0;
    if (!v || end == v || *end != '\0' || !(x >= lo && x <= hi) || (whole && x != floor(x))) {
        gt_error("plan: %s needs a number from %.10g to %.10g%s, got '%s'", key, lo, hi,
                 whole ? " (a whole one)" : "", v ? gt_printable(v, shown) : "");
        return -1;
    }
    *out = x;
    return 0;
}

/* Takes the plan options out of argv (the rest stays for the config). */
static int parse_opts(int *argc, char **argv, int first, plan_opts *o)
{
    enum { FLAG, INT, DBL, STR };
    /* Bounds a real machine stays within; nodes x slots per node is bounded too,
     * in plan_command. */
    static const struct {
        const char *name;
        int kind;
        size_t off;
        double lo, hi;
    } opt[] = {
        {"--measure", FLAG, offsetof(plan_opts, measure), 0, 0},
        {"--json", FLAG, offsetof(plan_opts, json), 0, 0},
        {"--tp-host", FLAG, offsetof(plan_opts, tp_host), 0, 0},
        {"--nodes", INT, offsetof(plan_opts, nodes), 1, PLAN_MAX_SLOTS},
        {"--cores-per-node", INT, offsetof(plan_opts, cores), 1, 65536},
        {"--gpus-per-node", INT, offsetof(plan_opts, gpus), 1, 1024},
        {"--reps", INT, offsetof(plan_opts, reps), 1, 1000},
        {"--core-gflops", DBL, offsetof(plan_opts, core_gflops), 1e-9, 1e9},
        {"--gpu-tflops", DBL, offsetof(plan_opts, gpu_tflops), 1e-9, 1e9},
        {"--efficiency", DBL, offsetof(plan_opts, efficiency), 1e-6, 1},
        {"--intra-gbs", DBL, offsetof(plan_opts, intra_gbs), 1e-9, 1e9},
        {"--inter-gbs", DBL, offsetof(plan_opts, inter_gbs), 1e-9, 1e9},
        {"--latency-us", DBL, offsetof(plan_opts, latency_us), 0, 1e9},
        {"--pcie-gbs", DBL, offsetof(plan_opts, pcie_gbs), 1e-9, 1e9},
        {"--noise-scale", DBL, offsetof(plan_opts, noise), 0, PLAN_NOISE_MAX},
        {"--from-log", STR, offsetof(plan_opts, from_log), 0, 0},
    };
    int out = first;
    for (int i = first; i < *argc; i++) {
        /* as in every verb: '-' and '_' alike, --name=VALUE (cli_names.h) */
        char name[64];
        cli_canonical("plan", argv[i], name, sizeof name);
        const char *eq = strncmp(argv[i], "--", 2) == 0 ? strchr(argv[i], '=') : NULL;
        size_t k = 0;
        for (; k < sizeof opt / sizeof opt[0]; k++)
            if (strcmp(name, opt[k].name) == 0 && !(eq && opt[k].kind == FLAG)) break;
        if (k == sizeof opt / sizeof opt[0]) {
            argv[out++] = argv[i]; /* a config key (config.c reads it) */
            continue;
        }
        char *field = (char *)o + opt[k].off;
        if (opt[k].kind == FLAG) {
            *(int *)field = 1;
            continue;
        }
        double x;
        const char *v = eq ? eq + 1 : i + 1 < *argc ? argv[i + 1] : NULL;
        if (opt[k].kind == STR) {
            if (!v || !*v) {
                gt_error("plan: %s needs a file", opt[k].name);
                return -1;
            }
            *(const char **)field = v;
            if (!eq) i++;
            continue;
        }
        if (parse_num(opt[k].name, v, opt[k].lo, opt[k].hi, opt[k].kind == INT, &x) != 0)
            return -1;
        if (!eq) i++;
        if (opt[k].kind == INT)
            *(int *)field = (int)x;
        else
            *(double *)field = x;
    }
    *argc = out;
    return 0;
}

static int by_total(const void *a, const void *b)
{
    const plan_estimate *x = a, *y = b;
    return x->total_s < y->total_s ? -1 : x->total_s > y->total_s;
}

static void print_row(const plan_estimate *e, int json)
{
    const plan_grid g = e->g;
    if (json) {
        printf("{\"dp\":%d,\"pp\":%d,\"tp\":%d,\"micro\":%d,\"ranks\":%d,\"threads\":%d,"
               "\"step_ms\":%.3f,\"compute_ms\":%.3f,\"bubble_ms\":%.3f,\"tp_comm_ms\":%.3f,"
               "\"pp_comm_ms\":%.3f,\"dp_exposed_ms\":%.3f,\"optimizer_ms\":%.3f,"
               "\"mem_mb\":%.1f,\"global_batch\":%.0f,\"steps\":%.0f,\"total_s\":%.1f}\n",
               g.dp, g.pp, g.tp, g.micro, g.dp * g.pp * g.tp, e->threads, e->step_s * 1e3,
               e->compute_s * 1e3, e->bubble_s * 1e3, e->tp_comm_s * 1e3,
               e->pp_comm_s * 1e3, e->dp_exposed_s * 1e3, e->optimizer_s * 1e3,
               e->mem_bytes / 1048576.0, e->global_batch, e->steps, e->total_s);
        return;
    }
    printf("%6d %4d %5d %3d %3d %5d %10.1f %9.1f %8.1f %8.1f %8.1f %9.1f %7.1f %9.1f %7.0f "
           "%8.0f %10.1f\n",
           g.dp * g.pp * g.tp, e->threads, g.dp, g.pp, g.tp, g.micro, e->step_s * 1e3,
           e->compute_s * 1e3, e->bubble_s * 1e3, e->tp_comm_s * 1e3, e->pp_comm_s * 1e3,
           e->dp_exposed_s * 1e3, e->optimizer_s * 1e3, e->mem_bytes / 1048576.0,
           e->global_batch, e->steps, e->total_s / 60.0);
}

/* Settles the vocabulary when the config leaves it to the data. */
static int plan_vocab(const gt_config *c, int *vocab)
{
    *vocab = c->vocab_size;
    if (*vocab > 0) return 0;
    if (!c->data[0]) {
        gt_error("plan: set vocab_size (or data, whose vocab_size attribute is used)");
        return -1;
    }
    /* the first file of the data (io/h5/h5set.h: a file, folder, glob or list) */
    h5set *s = h5set_create(c->data, c->train_dataset, 0, 1);
    if (!s || h5set_probe(s, 0) != 0) {
        h5set_close(s);
        return -1;
    }
    const int64_t v = h5set_vocab_attr(s);
    h5set_close(s);
    if (v <= 0 || v > INT32_MAX) {
        gt_error("plan: %s has no usable vocab_size attribute; set vocab_size", c->data);
        return -1;
    }
    *vocab = (int)v;
    return 0;
}

/* The grids a plan enumerates grow with nodes x slots a node: bounded (and kept in
 * int). Returns 0, or -1 (reported). */
static int check_machine_size(const plan_machine *mc)
{
    if ((double)mc->nodes * mc->slots_per_node <= PLAN_MAX_SLOTS) return 0;
    gt_error("plan: %d nodes x %d %s a node is more than %d ranks; plan a smaller machine",
             mc->nodes, mc->slots_per_node, mc->gpu ? "GPUs" : "cores", PLAN_MAX_SLOTS);
    return -1;
}

/* A failed measurement or a degenerate description shows as a time that is not a
 * positive number: no table is better than a wrong one. Returns 0, or -1 (reported). */
static int check_rows(const plan_estimate *rows, int n, const char *how, int measured)
{
    for (int i = 0; i < n; i++) {
        const plan_estimate *e = &rows[i];
        /* every part too: a negative one (a failed timing's -1 s) can hide inside a
         * positive sum */
        const double parts[6] = {e->compute_s, e->bubble_s, e->tp_comm_s, e->pp_comm_s,
                                 e->dp_exposed_s, e->optimizer_s};
        int parts_ok = e->compute_s > 0;
        for (int k = 0; k < 6; k++) parts_ok &= isfinite(parts[k]) && parts[k] >= 0;
        if (!(parts_ok && isfinite(e->step_s) && e->step_s > 0 && isfinite(e->total_s) &&
              e->total_s > 0 && isfinite(e->steps) && e->steps > 0)) {
            gt_error("plan: the %s costs give dp %d x pp %d x tp %d a step of %g s and %g "
                     "steps; no plan from them (%s)", how, e->g.dp, e->g.pp, e->g.tp,
                     e->step_s, e->steps,
                     measured ? "a measurement failed or was disturbed: run it again"
                              : "check the described machine");
            return -1;
        }
    }
    return 0;
}

/* The end of a plan on rank 0: with a calibration, the other ranks are serving it
 * (plan_measure_serve) until told to stop. */
static int finish(plan_calibration *cal, int rc)
{
    if (cal) {
        plan_measure_stop_serving();
        plan_calibration_free(cal);
    }
    return rc;
}

/* plan_machine_setup's status when this rank served rank 0's measurements and is done. */
enum { PLAN_SERVED = -100 };

/* The machine a plan is for: described GPUs or cores (rates from the options), or the
 * cores here measured (*cal: rank 0's calibration; the other ranks serve it and get
 * PLAN_SERVED). *how names which. Returns 0, PLAN_SERVED, or the command's exit
 * status (reported). */
static int plan_machine_setup(const plan_opts *o, const gpt_shape *s, int T, plan_machine *mc,
                              described *desc, plan_calibration **cal, const char **how)
{
    mc->nodes = o->nodes;
    desc->s = *s;
    desc->T = T;
    if (o->gpus > 0) {
        if (o->gpu_tflops <= 0) {
            gt_error("plan: --gpus-per-node needs --gpu-tflops (peak FP16 TFLOP/s of one GPU)");
            return 2;
        }
        mc->gpu = 1;
        mc->slots_per_node = o->gpus;
        desc->rate = o->gpu_tflops * 1e12 * o->efficiency;
        mc->pcie_bw = o->pcie_gbs * 1e9;
        mc->tp_host = o->tp_host;
        *how = "described GPUs";
    } else {
        mc->slots_per_node = o->cores > 0 ? o->cores : cpu_available_count();
        if (!o->measure && o->core_gflops <= 0) {
            gt_error("plan: say --measure (time the parts here) or describe the machine "
                     "(--core-gflops, or --gpus-per-node and --gpu-tflops)");
            return 2;
        }
        desc->rate = o->core_gflops * 1e9 * o->efficiency;
        *how = o->measure ? "measured here" : "described cores";
    }
    mc->intra_bw = (o->intra_gbs > 0 ? o->intra_gbs : 10.0) * 1e9;
    mc->inter_bw = (o->inter_gbs > 0 ? o->inter_gbs : 1.0) * 1e9;
    mc->intra_lat = mc->inter_lat = o->latency_us * 1e-6;
    if (!o->measure) {
        mc->t_block = d_block;
        mc->t_embed_head = d_head;
        mc->t_adam = d_adam;
        mc->ctx = desc;
        return 0;
    }
    /* a rank times no more threads than OpenMP lets it start */
    const int startable = gt_set_threads(mc->slots_per_node);
    if (startable < mc->slots_per_node && par_is_root())
        printf("plan: OMP_THREAD_LIMIT lets a rank start %d thread%s: the timings of more "
               "threads are those of %d\n", startable, startable == 1 ? "" : "s", startable);
    if (plan_measure_links(mc) != 0 && par_is_root())
        printf("plan: one rank: links not measured (start with mpirun -np 2 for that); "
               "assuming %.1f GB/s, %.0f us\n", mc->intra_bw / 1e9, o->latency_us);
    if (!par_is_root()) {
        plan_measure_serve(s, T, o->reps, mc->slots_per_node);
        return PLAN_SERVED;
    }
    *cal = plan_calibration_create(s, T, o->reps, mc->slots_per_node);
    if (!*cal) {
        plan_measure_stop_serving();
        return 1;
    }
    plan_calibration_attach(*cal, mc);
    return 0;
}

/* Every grid dp x pp x tp of every rank count that divides the machine (on GPUs: all
 * of them), each with its best number of micro-batches, into rows (MAX_ROWS). Returns
 * how many. */
static int plan_grids(const plan_machine *mc, const gpt_shape *s, int B, int T, double steps,
                      double noise, plan_estimate *rows)
{
    const int slots = mc->nodes * mc->slots_per_node;
    int n = 0;
    char why[120];
    for (int ranks = 1; ranks <= slots; ranks++) {
        if (slots % ranks != 0 || (mc->gpu && ranks != slots)) continue;
        for (int tp = 1; tp <= ranks; tp++)
            for (int pp = 1; pp <= ranks / tp; pp++) {
                if (ranks % (tp * pp) != 0) continue;
                const int dp = ranks / (tp * pp);
                plan_estimate best;
                int have = 0;
                for (int micro = pp == 1 ? 1 : pp; micro <= (pp == 1 ? 1 : 8 * pp); micro *= 2) {
                    plan_estimate e;
                    if (plan_estimate_grid(mc, s, B, T, (plan_grid){dp, pp, tp, micro}, steps,
                                           noise, &e, why, sizeof why) != 0)
                        continue;
                    if (!have || e.step_s < best.step_s) best = e;
                    have = 1;
                }
                if (have && n < MAX_ROWS) rows[n++] = best;
            }
    }
    return n;
}

/* The lines above the table: the model, the target, the machine. */
static void print_plan_header(const gpt_shape *s, int B, const gt_config *c,
                              const plan_opts *o, const plan_machine *mc, const char *how)
{
    printf("plan: n_layer %d n_head %d n_embd %d block_size %d vocab %d; batch_size %d per "
           "replica; steps %lld at one replica's batch%s\n",
           s->n_layer, s->n_head, s->n_embd, s->block_size, s->vocab_size, B,
           (long long)c->steps,
           o->noise > 0 ? "" : " (no noise scale given: steps do not depend on the batch)");
    if (o->noise > 0)
        printf("plan: gradient noise scale %.0f tokens%s\n", o->noise,
               o->from_log ? " (the run's mean, --from-log)" : "");
    printf("plan: %d node%s x %d %s, compute %s; links %.3g GB/s inside a node, %.3g GB/s "
           "between, %.1f us",
           mc->nodes, mc->nodes == 1 ? "" : "s", mc->slots_per_node, mc->gpu ? "GPUs" : "cores",
           how, mc->intra_bw / 1e9, mc->inter_bw / 1e9, mc->intra_lat * 1e6);
    if (mc->p2p_bw > 0)
        printf("; point to point %.3g GB/s, %.1f us", mc->p2p_bw / 1e9, mc->p2p_lat * 1e6);
    printf("\n");
    if (mc->gpu)
        printf("plan: on the GPUs a stage or a shard (pp > 1 or tp > 1) trains every layer "
               "of its part on its GPU, a shard its share of the blocks and of the "
               "vocabulary; the residual stream between stages over %.2f GB/s each way; the "
               "shards' per-block all-reduces %s\n",
               mc->pcie_bw / 1e9, mc->tp_host ? "through host memory (FP32 down and up, MPI)"
                                              : "over NCCL on the GPUs' link (FP16)");
    if (!o->json)
        printf("%6s %4s %5s %3s %3s %5s %10s %9s %8s %8s %8s %9s %7s %9s %7s %8s %10s\n",
               "ranks", "thr", "dp", "pp", "tp", "micro", "step ms", "compute", "bubble",
               "tp comm", "pp comm", "dp expos", "optim", "mem MB", "batch", "steps",
               "total min");
}

/* The recommendation under the table (rows sorted, best first), and why it beats pure
 * data parallelism. */
static void print_plan_verdict(const plan_estimate *rows, int n, double noise)
{
    const plan_estimate *best = &rows[0], *dp_only = NULL;
    for (int i = 0; i < n && !dp_only; i++)
        if (rows[i].g.tp == 1 && rows[i].g.pp == 1) dp_only = &rows[i];
    printf("recommended: dp %d x pp %d x tp %d (%d micro-batch%s, %d thread%s a rank): "
           "%.1f ms a step, %.0f steps, %.1f min to the target\n",
           best->g.dp, best->g.pp, best->g.tp, best->g.micro, best->g.micro == 1 ? "" : "es",
           best->threads, best->threads == 1 ? "" : "s", best->step_s * 1e3, best->steps,
           best->total_s / 60.0);
    if (dp_only && dp_only != best)
        printf("why: %.1f%% faster end to end than %s (dp %d): "
               "a step of %.1f ms against %.1f ms (%s), and %.0f steps against %.0f (a global "
               "batch of %.0f against %.0f sequences%s)\n",
               100.0 * (dp_only->total_s - best->total_s) / dp_only->total_s,
               dp_only->g.dp == 1 ? "one rank using every core"
                                  : "the best pure data-parallel grid",
               dp_only->g.dp,
               best->step_s * 1e3, dp_only->step_s * 1e3,
               best->step_s < dp_only->step_s ? "less work and all-reduce per rank"
                                              : "more per step, but",
               best->steps, dp_only->steps, best->global_batch, dp_only->global_batch,
               noise > 0 ? ": past the noise scale a larger batch buys fewer steps than it "
                             "costs"
                           : "");
    else if (dp_only && dp_only->g.dp == 1)
        printf("why: one rank using every core is fastest here: its step (%.1f ms) has no "
               "communication and no pipeline bubble\n", dp_only->step_s * 1e3);
    else if (dp_only)
        printf("why: pure data parallelism is fastest here: its step (%.1f ms) has the "
               "least communication and no pipeline bubble\n", dp_only->step_s * 1e3);
}

/* --from-log: the noise scale a past run measured (plan_log.h), what it says, and the
 * batch it points to. 0, or the exit status (reported). */
static int noise_from_log(plan_opts *o)
{
    if (o->noise > 0) {
        gt_error("plan: --from-log and --noise-scale both give the noise scale; use one");
        return 2;
    }
    plan_log_noise n;
    if (plan_log_read_noise(o->from_log, &n) != 0) return 1;
    o->noise = n.mean;
    if (!par_is_root()) return 0;
    printf("plan: from %s: %lld noise scale estimates over %.4g %s, from %.0f to %.0f tokens "
           "(least %.0f, most %.0f); the planner takes their mean over the run, %.0f tokens\n",
           o->from_log, (long long)n.estimates, n.span, n.by_steps ? "steps" : "tokens",
           n.first, n.last, n.min, n.max, n.mean);
    if (n.last > 2.0 * n.first)
        printf("plan: the noise scale grew %.1fx over the run: no fixed batch fits all of it; "
               "global_batch_size = auto follows it (docs/adaptive-batch.md)\n",
               n.last / n.first);
    return 0;
}

static const char plan_help[] =
    "usage: gentrain plan [--config FILE] [--KEY VALUE]... (--measure | MACHINE)\n"
    "                     [--noise-scale TOKENS | --from-log LOG.jsonl] [--json]\n"
    "\n"
    "Projects, for the model and batch of a training config, every grid of dp replicas\n"
    "x pp pipeline stages x tp tensor-parallel shards that fits the machine: step time\n"
    "(compute, pipeline bubble, tensor- and pipeline-parallel communication, exposed\n"
    "data-parallel all-reduce, optimizer), memory per rank, and, with the gradient\n"
    "noise scale, the steps and time to reach what the config's `steps` reach with one\n"
    "replica's batch: S(B) = S_min (1 + B_noise / B). Prints them fastest first and\n"
    "recommends one.\n"
    "\n"
    "options:\n"
    "  --measure             time the parts on this machine with gentrain's kernels;\n"
    "                        under mpirun -np 2+ also the MPI links\n"
    "  --nodes N             nodes (default 1)\n"
    "  --cores-per-node C    CPU cores a node gives (default: this machine's)\n"
    "  --core-gflops F       a described CPU core's peak GFLOP/s (instead of --measure)\n"
    "  --gpus-per-node G     a GPU cluster instead: one rank per GPU\n"
    "  --gpu-tflops F        a GPU's peak TFLOP/s (FP16 dense)\n"
    "  --efficiency E        share of the peak kernels reach (default 0.5)\n"
    "  --intra-gbs X         link GB/s inside a node (default 10; measured with --measure)\n"
    "  --inter-gbs X         link GB/s between nodes (default 1)\n"
    "  --latency-us L        per-message latency (default 5)\n"
    "  --pcie-gbs X          GPUs: GB/s between a GPU and its host (default 25)\n"
    "  --tp-host             GPUs: the shards' all-reduces through host memory (a build\n"
    "                        without NCCL, GENTRAIN_NCCL=0) instead of over NCCL\n"
    "  --noise-scale TOKENS  gradient noise scale (the trainer logs it); default: none\n"
    "  --from-log LOG.jsonl  the noise scale a past run logged: the mean of its\n"
    "                        estimates over the run's tokens (docs/adaptive-batch.md)\n"
    "  --reps N              timing repetitions with --measure (default 5)\n"
    "  --json                one JSON object per grid instead of the table\n"
    "\n"
    "examples:\n"
    "  mpirun -np 2 gentrain plan --config my.cfg --measure --noise-scale 5000\n"
    "  gentrain plan --config my.cfg --measure --from-log runs/my/log.jsonl\n"
    "  gentrain plan --n_layer 12 --n_head 12 --n_embd 768 --block_size 1024 \\\n"
    "      --vocab_size 50304 --batch_size 8 --nodes 64 --gpus-per-node 4 \\\n"
    "      --gpu-tflops 312 --intra-gbs 300 --inter-gbs 25 --noise-scale 2e6\n";

void plan_print_help(FILE *f) { fputs(plan_help, f); }

int plan_command(int argc, char **argv, int first)
{
    plan_opts o = {.nodes = 1, .reps = 5, .efficiency = 0.5, .latency_us = 5.0,
                   .pcie_gbs = 25.0};
    if (parse_opts(&argc, argv, first, &o) != 0) return 2;
    if (o.from_log) {
        const int rc = noise_from_log(&o);
        if (rc != 0) return rc;
    }
    gt_config c;
    config_defaults(&c);
    if (config_parse_args(&c, argc, argv, first) != 0) return 2;
    /* A plan needs no data when vocab_size is given: validate the rest without it. */
    const int no_data = c.data[0] == '\0';
    if (no_data) snprintf(c.data, sizeof c.data, "(none)");
    if (config_validate(&c) != 0) return 2;
    if (no_data) c.data[0] = '\0';
    int vocab;
    if (plan_vocab(&c, &vocab) != 0) return 1;
    const gpt_shape s = {vocab, c.block_size, c.n_layer, c.n_head, c.n_embd};
    const int B = c.batch_size, T = c.block_size;

    plan_machine mc = {0};
    described desc;
    plan_calibration *cal = NULL;
    const char *how = "";
    const int rc = plan_machine_setup(&o, &s, T, &mc, &desc, &cal, &how);
    if (rc != 0) return rc == PLAN_SERVED ? 0 : rc;
    if (check_machine_size(&mc) != 0) return finish(cal, 2);
    plan_estimate *rows = gt_malloc(sizeof *rows * MAX_ROWS, "plan table");
    if (!rows) return finish(cal, 1);
    const int n = plan_grids(&mc, &s, B, T, (double)c.steps, o.noise, rows);
    char why[160];
    if (cal && plan_calibration_failed(cal, why, sizeof why)) {
        gt_error("plan: --measure cannot time this model here: %s could not be allocated "
                 "(out of memory); no plan from a failed measurement (describe the machine "
                 "with --core-gflops instead, or plan a smaller model or batch_size)", why);
        free(rows);
        return finish(cal, 1);
    }
    if (n == 0 || check_rows(rows, n, how, o.measure) != 0) {
        if (n == 0) gt_error("plan: no grid fits this model on this machine");
        free(rows);
        return finish(cal, 1);
    }
    qsort(rows, (size_t)n, sizeof *rows, by_total);
    print_plan_header(&s, B, &c, &o, &mc, how);
    for (int i = 0; i < n; i++) print_row(&rows[i], o.json);
    print_plan_verdict(rows, n, o.noise);
    free(rows);
    return finish(cal, 0);
}
