/* bench_host_optimizer — the host's share of one mixed-precision training step (the GPU
 * runs forward and backward in FP16; the FP32 master weights and AdamW live here), timed
 * phase by phase at the GPT-2 124M size (124,475,904 parameters: V = 50304, T = 1024,
 * L = 12, C = 768), three ways:
 *
 *   old:     unscale FP16 -> FP32 | norm pass | clip pass g *= f | AdamW      | FP16
 *   train.c: unscale FP16 -> FP32 | norm pass |                  | AdamW(g f) | FP16
 *   new:     unscale FP16 -> FP32 + sum of squares               | AdamW(g f) | FP16
 *
 * "old" is the step before the clip was folded into AdamW; "train.c" is src/train/train.c's
 * host step now (it keeps its norm pass: the norm is taken after the MPI allreduce);
 * "new" is offload/tests/host_trainer.h's (the norm summed by the unscale). "FP16" is
 * the master weights converted for the upload. The gradients are drawn so that the clip
 * is active (norm ~11 > 1), the common case early in training; without a clip the old
 * path skips its clip pass.
 *
 *   scripts/bench_host_optimizer [--threads N] [--reps N]
 *
 * First, untimed, each of the three takes 3 steps on its own copy of the weights and
 * moments from the same FP16 gradients (the bit-identity check below). Then every
 * repetition times the three, rotating which goes first, all on the same buffers; after
 * one untimed warm-up, each phase's figures are the median and the best over the
 * repetitions. Needs about 5.5 GB of memory.
 * Prints a table, one JSON line, and whether the weights stayed bit-identical: train.c
 * vs old always must (exit 1 otherwise); new vs old must whenever the two norms gave
 * the same float clip factor (they are summed in different orders, so the factor can
 * differ in its last bit). */
#include <math.h>   /* defines: sqrt, fabs */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "half.h"      /* defines: half_from_float */
#include "lossscale.h" /* defines: unscale_half_grads(_sumsq) */
#include "optim.h"     /* defines: adamw_step, grad_global_norm, grad_clip_factor */
#include "rng.h"       /* defines: rng_seed, rng_normal */
#include "util.h"      /* defines: gt_malloc, gt_now */

enum { V = 50304, MAXT = 1024, L = 12, C = 768, NT = 2 + 12 * L + 2 };
enum { CONVERT_CHUNK = 1 << 16, FILL_CHUNK = 4096, MAXREPS = 101, VERIFY = 3 };
enum { P_UNSCALE, P_NORM, P_CLIP, P_ADAMW, P_HALF, NPHASE };
static const char *phase_name[NPHASE] = {"unscale FP16->FP32", "global norm", "clip (g *= f)",
                                         "AdamW", "FP16 for the upload"};

/* The flat layout of src/model/model.h at the GPT-2 124M shape; returns the parameter count. */
static size_t make_layout(gpt_param_info *info)
{
    size_t off = 0;
    int k = 0;
    const size_t cc = (size_t)C * C;
#define ADD(nm, numel_, decay_)                                                          \
    do {                                                                                 \
        snprintf(info[k].name, sizeof info[k].name, "%s", nm);                            \
        info[k].ndim = (decay_) ? 2 : 1;                                                 \
        info[k].offset = off;                                                            \
        info[k].numel = (numel_);                                                        \
        info[k].decay = (decay_);                                                        \
        off += (numel_);                                                                 \
        k++;                                                                             \
    } while (0)
    ADD("wte", (size_t)V * C, 1);
    ADD("wpe", (size_t)MAXT * C, 1);
    for (int l = 0; l < L; l++) {
        ADD("ln_1.weight", C, 0);
        ADD("ln_1.bias", C, 0);
        ADD("attn.c_attn.weight", 3 * cc, 1);
        ADD("attn.c_attn.bias", 3 * C, 0);
        ADD("attn.c_proj.weight", cc, 1);
        ADD("attn.c_proj.bias", C, 0);
        ADD("ln_2.weight", C, 0);
        ADD("ln_2.bias", C, 0);
        ADD("mlp.c_fc.weight", 4 * cc, 1);
        ADD("mlp.c_fc.bias", 4 * C, 0);
        ADD("mlp.c_proj.weight", 4 * cc, 1);
        ADD("mlp.c_proj.bias", C, 0);
    }
    ADD("ln_f.weight", C, 0);
    ADD("ln_f.bias", C, 0);
#undef ADD
    return off;
}

/* The clip as a pass of its own, as optim.c's grad_clip_by_norm did it before the
 * factor moved into adamw_step: the "old" path. */
static void clip_pass(float *g, size_t n, float f)
{
    if (f == 1.0f) return;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) g[i] *= f;
}

/* The weights to FP16 for the upload, in parallel chunks (src/engine/device_step.c's way). */
static void to_half(uint16_t *dst, const float *src, size_t n, int threads)
{
    const size_t chunks = (n + CONVERT_CHUNK - 1) / CONVERT_CHUNK;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t k = 0; k < chunks; k++) {
        const size_t at = k * CONVERT_CHUNK, left = n - at;
        half_from_float(dst + at, src + at, left < CONVERT_CHUNK ? left : CONVERT_CHUNK);
    }
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* The three ways to run the host step, each on its own weights and moments. */
enum { OLD, TRAIN, NEW, NPATH };
static const char *path_name[NPATH] = {"old", "train.c", "new"};
typedef struct path {
    float *p;
    adamw_state opt;
} path;

static const double LR = 6e-4, B1 = 0.9, B2 = 0.95, EPS = 1e-8, WD = 0.1, CLIP = 1.0;
static const float SCALE = 65536.0f; /* the loss scale the FP16 gradients carry */

/* One host step the way `kind` does it; ms[] gets each phase's milliseconds (0 for a
 * phase it does not have), *norm and *factor the norm and the clip factor. Returns the
 * unscale's overflow flag. */
static int host_step(int kind, path *x, float *g, const uint16_t *gh, uint16_t *staging,
                     const gpt_param_info *info, size_t n, int threads, double *ms,
                     double *norm, float *factor)
{
    double t = gt_now(), u, sumsq = 0.0;
    const int bad = kind == NEW
                        ? unscale_half_grads_sumsq(g, gh, n, 1.0f / SCALE, 0, threads, &sumsq)
                        : unscale_half_grads(g, gh, n, 1.0f / SCALE, 0, threads);
    u = gt_now(), ms[P_UNSCALE] = (u - t) * 1e3, t = u;
    *norm = kind == NEW ? sqrt(sumsq) : grad_global_norm(g, n);
    *factor = grad_clip_factor(*norm, CLIP);
    u = gt_now(), ms[P_NORM] = kind == NEW ? 0.0 : (u - t) * 1e3, t = u;
    if (kind == OLD) clip_pass(g, n, *factor);
    u = gt_now(), ms[P_CLIP] = kind == OLD ? (u - t) * 1e3 : 0.0, t = u;
    adamw_step(&x->opt, x->p, g, kind == OLD ? 1.0f : *factor, info, NT, LR, B1, B2, EPS, WD);
    u = gt_now(), ms[P_ADAMW] = (u - t) * 1e3, t = u;
    to_half(staging, x->p, n, threads);
    ms[P_HALF] = (gt_now() - t) * 1e3;
    return bad;
}

static int same_state(const path *a, const path *b, size_t n)
{
    return memcmp(a->p, b->p, n * sizeof(float)) == 0 &&
           memcmp(a->opt.m, b->opt.m, n * sizeof(float)) == 0 &&
           memcmp(a->opt.v, b->opt.v, n * sizeof(float)) == 0;
}

int main(int argc, char **argv)
{
    int threads = 2, reps = 5;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_host_optimizer [--threads N] [--reps N]\n");
            return 1;
        }
    }
    if (threads < 1 || reps < 1 || reps > MAXREPS) {
        fprintf(stderr, "bench_host_optimizer: --threads >= 1, --reps 1..%d\n", MAXREPS);
        return 1;
    }
    omp_set_num_threads(threads);
    gpt_param_info info[NT];
    memset(info, 0, sizeof info);
    const size_t n = make_layout(info);

    int rc = 1;
    path x[NPATH];
    memset(x, 0, sizeof x);
    float *g = gt_malloc(n * sizeof(float), "gradients");
    uint16_t *gh = gt_malloc(n * sizeof(uint16_t), "FP16 gradients");
    uint16_t *staging = gt_malloc(n * sizeof(uint16_t), "FP16 weights");
    if (!g || !gh || !staging) goto done;
    for (int k = 0; k < NPATH; k++) {
        x[k].p = gt_malloc(n * sizeof(float), "weights");
        if (!x[k].p || adamw_init(&x[k].opt, n) != 0) goto done; /* they said what */
    }

    /* Weights N(0, 0.02); scaled gradients N(0, 1e-3) x 65536 in FP16 (norm ~11: the clip
     * is active). Filled in parallel chunks, each with its own stream. */
    const double t_fill = gt_now();
    const size_t chunks = (n + FILL_CHUNK - 1) / FILL_CHUNK;
#pragma omp parallel for schedule(static)
    for (size_t k = 0; k < chunks; k++) {
        rng r;
        rng_seed(&r, 1000 + k);
        const size_t lo = k * FILL_CHUNK, hi = lo + FILL_CHUNK < n ? lo + FILL_CHUNK : n;
        float tmp[FILL_CHUNK];
        for (size_t i = lo; i < hi; i++) {
            x[OLD].p[i] = x[TRAIN].p[i] = x[NEW].p[i] = 0.02f * rng_normal(&r);
            tmp[i - lo] = 1e-3f * SCALE * rng_normal(&r);
            g[i] = 0.0f;
        }
        half_from_float(gh + lo, tmp, hi - lo);
        memset(staging + lo, 0, (hi - lo) * sizeof(uint16_t));
    }
    printf("bench_host_optimizer: %zu parameters (GPT-2 124M, V=%d), %d threads, %d timed "
           "repetitions (+1 warm-up), %.1f GB of buffers, filled in %.1f s; FP16 conversion: "
           "%s\n", n, V, threads, reps,
           (double)n * ((3 * NPATH + 1) * sizeof(float) + 2 * sizeof(uint16_t)) / 1e9,
           gt_now() - t_fill, half_path_name());
    fflush(stdout);

    /* First the check, untimed: VERIFY steps of each path on its own weights and moments,
     * which must stay bit-identical (see the top of the file). */
    int factors_equal = 1, overflow = 0;
    double worst_norm = 0.0, norm[NPATH] = {0};
    for (int r = 0; r < VERIFY; r++) {
        float f[NPATH];
        for (int k = 0; k < NPATH; k++) {
            double ms[NPHASE];
            overflow |= host_step(k, &x[k], g, gh, staging, info, n, threads, ms, &norm[k],
                                  &f[k]);
        }
        factors_equal &= f[OLD] == f[NEW];
        worst_norm = fmax(worst_norm, fabs(norm[NEW] - norm[OLD]) / norm[OLD]);
    }
    const int train_same = same_state(&x[OLD], &x[TRAIN], n);
    const int new_same = same_state(&x[OLD], &x[NEW], n);

    /* Then the timing: every path on the same buffers (x[OLD]'s), so that no path's
     * figures depend on where its own buffers happen to lie in memory. */
    static double t[NPATH][NPHASE][MAXREPS], tot[NPATH][MAXREPS];
    for (int r = -1; r < reps; r++) {
        for (int j = 0; j < NPATH; j++) {
            /* Rotate which path goes first, so none always follows the same one. */
            const int k = (j + r + 1) % NPATH;
            double ms[NPHASE], nm;
            float fk;
            overflow |= host_step(k, &x[OLD], g, gh, staging, info, n, threads, ms, &nm, &fk);
            if (r < 0) continue;
            tot[k][r] = 0.0;
            for (int ph = 0; ph < NPHASE; ph++) {
                t[k][ph][r] = ms[ph];
                tot[k][r] += ms[ph];
            }
        }
    }
    if (overflow) {
        fprintf(stderr, "bench_host_optimizer: the FP16 gradients overflowed (a bug here)\n");
        goto done;
    }
    /* Medians and bests (median sorts: [0] is then the best). On a shared machine the
     * bests are the steadier figure for passes bound by memory bandwidth. */
    double med[NPATH][NPHASE], best[NPATH][NPHASE], med_tot[NPATH], best_tot[NPATH];
    for (int k = 0; k < NPATH; k++) {
        for (int ph = 0; ph < NPHASE; ph++) {
            med[k][ph] = median(t[k][ph], reps);
            best[k][ph] = t[k][ph][0];
        }
        med_tot[k] = median(tot[k], reps);
        best_tot[k] = tot[k][0];
    }
    printf("\n%-28s %10s %10s %10s   %10s %10s %10s\n", "ms: median | best", path_name[OLD],
           path_name[TRAIN], path_name[NEW], path_name[OLD], path_name[TRAIN], path_name[NEW]);
    for (int ph = 0; ph < NPHASE; ph++)
        printf("%-28s %10.1f %10.1f %10.1f   %10.1f %10.1f %10.1f\n", phase_name[ph],
               med[OLD][ph], med[TRAIN][ph], med[NEW][ph], best[OLD][ph], best[TRAIN][ph],
               best[NEW][ph]);
    printf("%-28s %10.1f %10.1f %10.1f   %10.1f %10.1f %10.1f\n", "host step (total)",
           med_tot[OLD], med_tot[TRAIN], med_tot[NEW], best_tot[OLD], best_tot[TRAIN],
           best_tot[NEW]);
    printf("%-28s %10s %10.3f %10.3f   %10s %10.3f %10.3f\n", "total vs old", "1",
           med_tot[TRAIN] / med_tot[OLD], med_tot[NEW] / med_tot[OLD], "1",
           best_tot[TRAIN] / best_tot[OLD], best_tot[NEW] / best_tot[OLD]);
    printf("(old: unscale, norm pass, clip pass, AdamW; train.c: the norm pass kept (src/train/train.c "
           "takes it after the allreduce), the clip in AdamW; new: the norm summed by the "
           "unscale, the clip in AdamW: host_trainer.h)\n");
    printf("norm: old %.9g, new %.9g (relative %.1e at most); clip factors old/new %s; after "
           "%d steps, train.c vs old: %s, new vs old: %s\n", norm[OLD], norm[NEW], worst_norm,
           factors_equal ? "bitwise equal every step" : "differ in some step", VERIFY,
           train_same ? "bit-identical" : "DIFFERENT", new_same ? "bit-identical" : "different");
    printf("{\"bench\":\"host_optimizer\",\"params\":%zu,\"threads\":%d,\"reps\":%d", n,
           threads, reps);
    static const char *key[NPHASE] = {"unscale", "norm", "clip", "adamw", "half"};
    static const char *pkey[NPATH] = {"old", "train", "new"};
    for (int k = 0; k < NPATH; k++) {
        for (int ph = 0; ph < NPHASE; ph++)
            printf(",\"%s_%s_ms\":%.2f,\"%s_%s_best_ms\":%.2f", pkey[k], key[ph], med[k][ph],
                   pkey[k], key[ph], best[k][ph]);
        printf(",\"%s_total_ms\":%.2f,\"%s_best_ms\":%.2f", pkey[k], med_tot[k], pkey[k],
               best_tot[k]);
    }
    printf(",\"train_identical\":%s,\"new_identical\":%s}\n", train_same ? "true" : "false",
           new_same ? "true" : "false");
    /* The folded clip must be the clip: bit-identical given the same factor. */
    rc = !train_same || (factors_equal && !new_same);
    if (rc) fprintf(stderr, "bench_host_optimizer: the folded clip changed the weights\n");
done:
    for (int k = 0; k < NPATH; k++) {
        adamw_free(&x[k].opt); /* safe on a state adamw_init never filled (zeroed above) */
        free(x[k].p);
    }
    free(g);
    free(gh);
    free(staging);
    return rc;
}
