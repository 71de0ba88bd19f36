/* bench_sgemm — what the BLAS delivers on the matrix products of one training step.
 *
 * For a GPT config it times cblas_sgemm (or, with --precision bf16, gentrain's BF16
 * products: src/kernels/bf16/gemm_bf16.h) on every Linear-layer product of a step, with
 * N = B*T rows and the weights stored as (out, in), as gentrain and PyTorch store them:
 *   forward   out  (N,out) = inp (N,in) @ W^T          M=N   N=out K=in
 *   backward  dinp (N,in)  = dout (N,out) @ W          M=N   N=in  K=out
 *             dW  (out,in) += dout^T (out,N) @ inp     M=out N=in  K=N
 * for qkv (C -> 3C), attn proj (C -> C), fc (C -> 4C), fc proj (4C -> C) and the logits
 * (C -> V, weight tied to the token embedding), plus one square 2048^3 product as the
 * library's best case. Each product runs once untimed, then --reps times; the table
 * shows the median and best time and GFLOP/s from the median. The step average is
 * flop-weighted over one step's products (each layer product n_layer times, the logits
 * once): total flops / total median time. The same numbers go out as one JSON line.
 *
 * Threads: --threads N sets the OpenMP thread count (and OpenBLAS's own, when the
 * library is OpenBLAS); without it the current OpenMP default is used.
 *
 * --operands step (with --precision bf16) gives each product its operands as a training
 * step does: the weights packed once (gemm_bf16_weights.h, outside the timing, as the
 * optimizer's update does it), the activations and the output gradients in BF16 storage
 * (the step keeps a BF16 copy of each gradient a product reads: the residual stream's,
 * d q|k|v, the GELU backward's, the loss's). Without it every operand is FP32 and is
 * converted and packed in every call, as for a caller that hands gemm_bf16 plain
 * floats. --epilogues step (with --operands step) also gives each product the fused
 * epilogue the step gives it (kernels_cpu.c): the q|k|v and MLP forwards add their bias
 * and write only BF16 outputs (the MLP's GELU too), the projections add their bias and
 * the residual, the MLP projection's input gradient runs GELU's backward into BF16,
 * and the weight gradients sum their bias gradients; the logits take none. The products
 * then cost what they cost inside a step, epilogues included. Build against
 * the OpenMP build of OpenBLAS so the library and the OpenMP runtime share one pool.
 * The BLAS core is corrected as the trainer corrects it (blas_core.h), so the FP32
 * figures are those of the kernels a training run gets, not of a generic core that an
 * OpenBLAS older than the CPU falls back to.
 *
 * --only NAME times only the products whose names contain NAME ("fc bwd", "logits",
 * "dW"), the step average over those: one product alone, to profile it or to compare
 * two builds on it without the other products' minutes. */
#define _XOPEN_SOURCE 700 /* posix_memalign, getrusage, sysconf */
#include <cblas.h>   /* defines: cblas_sgemm (+ openblas_* when OPENBLAS_VERSION) */
#include "blas_core.h" /* defines: blas_core_fixup, blas_core_summary */
#include "bf16_store.h"       /* bf16_store: --operands step's BF16 copies */
#include "gemm_bf16.h"        /* defines: gemm_bf16 (--precision bf16) */
#include "gemm_bf16_weights.h" /* --operands step: the weights packed once */
#include "util.h"                /* gt_malloc */
#include <errno.h>
#include <omp.h>     /* defines: omp_get_max_threads, omp_set_num_threads, omp_get_wtime */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h> /* defines: getrusage */
#include <unistd.h>       /* defines: sysconf */

typedef struct {
    const char *name;
    int ta, tb;            /* transpose A / B, row-major */
    int64_t m, n, k;
    int64_t count;         /* times per training step (0 = not part of a step) */
    double med_ms, best_ms;
    int epi;               /* --epilogues step: the step's epilogue (epilogue_kind) */
} shape;

static void usage(FILE *f) {
    fprintf(f,
            "usage: bench_sgemm [--n_embd C] [--block_size T] [--batch_size B] [--vocab V]\n"
            "                   [--n_layer L] [--threads N] [--reps R] [--square S]\n"
            "                   [--precision fp32|bf16] [--operands plain|step]\n"
            "                   [--epilogues none|step] [--only NAME]\n"
            "defaults: C=384 T=256 B=8 V=256 L=6, N=current OpenMP threads, R=10, S=2048\n");
}

static int parse_int(const char *key, const char *val, int64_t lo, int64_t *out) {
    char *end;
    errno = 0;
    long long v = val ? strtoll(val, &end, 10) : 0;
    if (!val || errno || end == val || *end || v < lo) {
        fprintf(stderr, "bench_sgemm: --%s needs an integer >= %lld, got '%s'\n", key,
                (long long)lo, val ? val : "(nothing)");
        return -1;
    }
    *out = v;
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double flops_of(const shape *s) { return 2.0 * (double)s->m * s->n * s->k; }

static int use_bf16; /* --precision bf16: gentrain's BF16 products instead of sgemm */
static int step_operands; /* --operands step: the operands as a training step has them */
static int step_epilogues; /* --epilogues step: and the epilogues a step fuses into them */

/* The epilogues a step fuses into its products (kernels_cpu.c) */
enum epilogue_kind {
    EPI_NONE,      /* the logits' three products, the other input gradients */
    EPI_BIAS_BF16, /* q|k|v forward: bias, BF16 output only (c_unused) */
    EPI_BIAS_RES,  /* attention and MLP projections' forwards: bias and residual */
    EPI_BIAS_GELU, /* MLP forward: bias, GELU and its slope into BF16 (c_unused) */
    EPI_DGELU,     /* MLP projection's input gradient: GELU's backward into BF16 */
    EPI_DBIAS      /* weight gradients: the bias gradient as dout^T is packed */
};

/* The epilogues' operands and outputs, sized for the largest product that has one */
typedef struct {
    float *bias, *residual, *row_sums;
    uint16_t *slope16, *out16, *gelu16;
} epilogue_buffers;

static gemm_bf16_epilogue epilogue_of(const shape *s, const epilogue_buffers *e) {
    const size_t n = (size_t)s->n;
    gemm_bf16_epilogue ep = {0};
    switch (step_epilogues ? s->epi : EPI_NONE) {
    case EPI_BIAS_BF16:
        ep = (gemm_bf16_epilogue){.bias = e->bias, .out_bf16 = e->out16, .ld_out_bf16 = n,
                                  .c_unused = 1};
        break;
    case EPI_BIAS_RES:
        ep = (gemm_bf16_epilogue){.bias = e->bias, .residual = e->residual, .ld_residual = n};
        break;
    case EPI_BIAS_GELU:
        ep = (gemm_bf16_epilogue){.bias = e->bias, .gelu_out16 = e->gelu16, .ld_gelu = n,
                                  .gelu_slope16 = e->out16, .c_unused = 1};
        break;
    case EPI_DGELU:
        ep = (gemm_bf16_epilogue){.dgelu_slope16 = e->slope16, .dgelu_out16 = e->out16,
                                  .ld_dgelu = n, .c_unused = 1};
        break;
    case EPI_DBIAS: ep = (gemm_bf16_epilogue){.row_sums = e->row_sums}; break;
    default: break;
    }
    return ep;
}

static const float *as_floats(const uint16_t *h) { return (const float *)(const void *)h; }

/* One BF16 product with the operands a step gives it (see --operands above): A16, the
 * BF16 copy of A (an activation or an output gradient), B (FP32) and B16, its BF16 copy;
 * a forward's B (transposed) and an input gradient's B (as stored) are the registered
 * weight. */
static void gemm_step_operands(const shape *s, const uint16_t *A16, const float *B,
                               const uint16_t *B16, float *C, float beta,
                               const epilogue_buffers *e) {
    const int m = (int)s->m, n = (int)s->n, k = (int)s->k;
    const gemm_bf16_epilogue ep = epilogue_of(s, e);
    if (!s->ta && s->tb)        /* forward: inp (BF16) @ w^T */
        gemm_bf16_fused(GEMM_BF16_STORED, 1, m, n, k, 1.0f, as_floats(A16), k, B, k, beta, C,
                        n, &ep);
    else if (!s->ta)            /* input gradient: dout @ w */
        gemm_bf16_fused(GEMM_BF16_STORED, 0, m, n, k, 1.0f, as_floats(A16), k, B, n, beta, C,
                        n, &ep);
    else                        /* weight gradient: dout^T @ inp (BF16) */
        gemm_bf16_fused(GEMM_BF16_STORED_T, GEMM_BF16_STORED, m, n, k, 1.0f, as_floats(A16), m,
                        as_floats(B16), n, beta, C, n, &ep);
}

/* --operands step: registers the shape's weight (B of a forward or an input gradient)
 * and packs it, as a step's update has done before its products. 0, or -1 (said). */
static int register_weight(const shape *s, const float *B) {
    gemm_bf16_weights_clear();
    if (s->ta || !step_operands) return 0;
    const int rows = (int)(s->tb ? s->n : s->k), cols = (int)(s->tb ? s->k : s->n);
    if (gemm_bf16_weights_add(B, rows, cols) != 0 || gemm_bf16_weights_refresh() != 0) {
        fprintf(stderr, "bench_sgemm: out of memory for the packed weight of %s\n", s->name);
        return -1;
    }
    return 0;
}

/* Times C (m,n) = op(A) op(B) (+ C when accumulating) reps times after one warm-up. */
static void time_shape(shape *s, const float *A, const uint16_t *A16, const float *B,
                       const uint16_t *B16, float *C, int reps, double *t,
                       const epilogue_buffers *e) {
    const int64_t lda = s->ta ? s->m : s->k;   /* A is (m,k), or (k,m) transposed */
    const int64_t ldb = s->tb ? s->k : s->n;   /* B is (k,n), or (n,k) transposed */
    const float beta = s->ta ? 1.0f : 0.0f;    /* weight gradients accumulate */
    for (int r = -1; r < reps; r++) {
        double t0 = omp_get_wtime();
        if (use_bf16 && step_operands)
            gemm_step_operands(s, A16, B, B16, C, beta, e);
        else if (use_bf16)
            gemm_bf16(s->ta, s->tb, (int)s->m, (int)s->n, (int)s->k, 1.0f, A, (int)lda, B,
                      (int)ldb, beta, C, (int)s->n);
        else
            cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans,
                        s->tb ? CblasTrans : CblasNoTrans, (int)s->m, (int)s->n,
                        (int)s->k, 1.0f, A, (int)lda, B, (int)ldb, beta, C, (int)s->n);
        double t1 = omp_get_wtime();
        if (r >= 0) t[r] = t1 - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    s->best_ms = t[0] * 1e3;
    s->med_ms = (reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2])) * 1e3;
}

/* Seconds all CPUs were busy (from /proc/stat; -1 where unreadable) and seconds this
 * process ran. Their difference over the run is what other processes took: on a shared
 * machine that decides whether the numbers are clean. */
static void cpu_busy(double *all_s, double *own_s) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *own_s = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
             (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
    *all_s = -1;
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return;
    unsigned long long v[8] = {0};   /* user nice system idle iowait irq softirq steal */
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
               &v[3], &v[4], &v[5], &v[6], &v[7]) == 8) {
        unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
        *all_s = (double)busy / (double)sysconf(_SC_CLK_TCK);
    }
    fclose(f);
}

/* gt_malloc, as the trainer allocates its arrays (huge pages for the big ones) */
static float *alloc_filled(size_t n, uint64_t seed) {
    float *p = gt_malloc(n * sizeof(float) + 64, "bench operands");
    if (!p) return NULL;
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {   /* xorshift, values in [-1, 1) */
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        p[i] = (float)((double)(x >> 40) / (double)(1ull << 23) - 1.0);
    }
    return p;
}

/* argv[*i] as --NAME WORD or --NAME=WORD, WORD one of a and b: 1 when it is that
 * option (*is_b = WORD is b; *i past a separate WORD), 0 when it is another, -1 (said)
 * when WORD is neither */
static int choice_option(int argc, char **argv, int *i, const char *name, const char *a,
                         const char *b, int *is_b) {
    const char *arg = argv[*i];
    const size_t n = strlen(name);
    if (strncmp(arg, "--", 2) || strncmp(arg + 2, name, n) || (arg[2 + n] && arg[2 + n] != '='))
        return 0;
    const char *v = arg[2 + n] == '=' ? arg + 3 + n : (*i + 1 < argc ? argv[++*i] : "");
    if (strcmp(v, a) && strcmp(v, b)) {
        fprintf(stderr, "bench_sgemm: --%s needs %s or %s, got '%s'\n", name, a, b, v);
        return -1;
    }
    *is_b = !strcmp(v, b);
    return 1;
}

int main(int argc, char **argv) {
    blas_core_fixup(argv); /* returns only when no restart was needed */
    int64_t C = 384, T = 256, B = 8, V = 256, L = 6, threads = 0, reps = 10, S = 2048;
    const char *only = NULL; /* --only: the products whose names contain it */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        char key[64];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        if (strncmp(a, "--", 2)) { usage(stderr); return 2; }
        const int prec = choice_option(argc, argv, &i, "precision", "fp32", "bf16", &use_bf16);
        const int ops = prec ? 0 : choice_option(argc, argv, &i, "operands", "plain", "step",
                                                 &step_operands);
        const int epis = prec || ops ? 0 : choice_option(argc, argv, &i, "epilogues", "none",
                                                         "step", &step_epilogues);
        if (prec < 0 || ops < 0 || epis < 0) return 2;
        if (prec || ops || epis) continue;
        const char *eq = strchr(a, '=');
        size_t kl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (kl >= sizeof key) kl = sizeof key - 1;
        memcpy(key, a + 2, kl);
        key[kl] = 0;
        val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!strcmp(key, "only")) {
            if (!val || !*val) {
                fprintf(stderr, "bench_sgemm: --only needs part of a product's name\n");
                return 2;
            }
            only = val;
            continue;
        }
        int64_t *dst = !strcmp(key, "n_embd") ? &C : !strcmp(key, "block_size") ? &T
                     : !strcmp(key, "batch_size") ? &B : !strcmp(key, "vocab") ? &V
                     : !strcmp(key, "vocab_size") ? &V : !strcmp(key, "n_layer") ? &L
                     : !strcmp(key, "threads") ? &threads : !strcmp(key, "reps") ? &reps
                     : !strcmp(key, "square") ? &S : NULL;
        if (!dst) {
            fprintf(stderr, "bench_sgemm: unknown option --%s\n", key);
            usage(stderr);
            return 2;
        }
        if (parse_int(key, val, dst == &S ? 0 : 1, dst)) return 2;
    }
    if (threads > 0) {
        omp_set_num_threads((int)threads);
#ifdef OPENBLAS_VERSION
        openblas_set_num_threads((int)threads);
#endif
    }
    if (step_operands && !use_bf16) {
        fprintf(stderr, "bench_sgemm: --operands step needs --precision bf16\n");
        return 2;
    }
    if (step_epilogues && !step_operands) {
        fprintf(stderr, "bench_sgemm: --epilogues step needs --operands step\n");
        return 2;
    }
    const int nthr = omp_get_max_threads();
    if (use_bf16 && gemm_bf16_init(nthr) != 0) return 1;
    const char *blas = "unknown CBLAS";
    const char *par = "unknown";
    int blas_thr = nthr;
#ifdef OPENBLAS_VERSION
    blas = openblas_get_config();
    blas_thr = openblas_get_num_threads();
    switch (openblas_get_parallel()) {
    case 0: par = "sequential"; break;
    case 1: par = "pthread"; break;
    case 2: par = "openmp"; break;
    }
#endif

    const int64_t N = B * T;
    shape sh[] = {
        /* name             ta tb  m      n      k      count    (ms)  epilogue */
        {"qkv fwd",          0, 1, N,     3 * C, C,     L, 0, 0, EPI_BIAS_BF16},
        {"qkv bwd dinp",     0, 0, N,     C,     3 * C, L, 0, 0, EPI_NONE},
        {"qkv bwd dW",       1, 0, 3 * C, C,     N,     L, 0, 0, EPI_DBIAS},
        {"attn proj fwd",    0, 1, N,     C,     C,     L, 0, 0, EPI_BIAS_RES},
        {"attn proj dinp",   0, 0, N,     C,     C,     L, 0, 0, EPI_NONE},
        {"attn proj dW",     1, 0, C,     C,     N,     L, 0, 0, EPI_DBIAS},
        {"fc fwd",           0, 1, N,     4 * C, C,     L, 0, 0, EPI_BIAS_GELU},
        {"fc bwd dinp",      0, 0, N,     C,     4 * C, L, 0, 0, EPI_NONE},
        {"fc bwd dW",        1, 0, 4 * C, C,     N,     L, 0, 0, EPI_DBIAS},
        {"fc proj fwd",      0, 1, N,     C,     4 * C, L, 0, 0, EPI_BIAS_RES},
        {"fc proj dinp",     0, 0, N,     4 * C, C,     L, 0, 0, EPI_DGELU},
        {"fc proj dW",       1, 0, C,     4 * C, N,     L, 0, 0, EPI_DBIAS},
        {"logits fwd",       0, 1, N,     V,     C,     1, 0, 0, EPI_NONE},
        {"logits dinp",      0, 0, N,     C,     V,     1, 0, 0, EPI_NONE},
        {"logits dW",        1, 0, V,     C,     N,     1, 0, 0, EPI_NONE},
        {"square",           0, 0, S,     S,     S,     0, 0, 0, EPI_NONE},
    };
    int nsh = (int)(sizeof sh / sizeof sh[0]) - (S > 0 ? 0 : 1);
    if (only) { /* keep the products named, in their order */
        int kept = 0;
        for (int i = 0; i < nsh; i++)
            if (strstr(sh[i].name, only)) sh[kept++] = sh[i];
        if (!kept) {
            fprintf(stderr, "bench_sgemm: --only '%s' names no product (names: qkv fwd, "
                            "fc bwd dW, logits dinp, square, ...)\n", only);
            return 2;
        }
        nsh = kept;
    }
    const int have_square = !strcmp(sh[nsh - 1].name, "square");

    size_t na = 0, nb = 0, nc = 0;
    for (int i = 0; i < nsh; i++) {
        size_t a = (size_t)(sh[i].m * sh[i].k), b = (size_t)(sh[i].k * sh[i].n),
               c = (size_t)(sh[i].m * sh[i].n);
        if (a > na) na = a;
        if (b > nb) nb = b;
        if (c > nc) nc = c;
    }
    size_t ne = 0, nrow = 0; /* the epilogues' M x N outputs and M or N vectors */
    for (int i = 0; i < nsh && step_epilogues; i++)
        if (sh[i].epi != EPI_NONE) {
            const size_t mn = (size_t)(sh[i].m * sh[i].n);
            if (mn > ne) ne = mn;
            if ((size_t)sh[i].m > nrow) nrow = (size_t)sh[i].m;
            if ((size_t)sh[i].n > nrow) nrow = (size_t)sh[i].n;
        }
    epilogue_buffers eb = {0};
    if (ne) {
        eb.bias = alloc_filled(nrow, 4);
        eb.row_sums = alloc_filled(nrow, 5);
        eb.residual = alloc_filled(ne, 6);
        float *slope = alloc_filled(ne, 7);
        eb.slope16 = gt_malloc(ne * sizeof *eb.slope16, "bench epilogues");
        eb.out16 = gt_malloc(ne * sizeof *eb.out16, "bench epilogues");
        eb.gelu16 = gt_malloc(ne * sizeof *eb.gelu16, "bench epilogues");
        if (!eb.bias || !eb.row_sums || !eb.residual || !slope || !eb.slope16 || !eb.out16 ||
            !eb.gelu16) {
            fprintf(stderr, "bench_sgemm: out of memory for the epilogues' %zu values\n", ne);
            return 1;
        }
        bf16_store(eb.slope16, slope, ne);
        free(slope);
    }
    float *A = alloc_filled(na, 1), *Bm = alloc_filled(nb, 2), *Cm = alloc_filled(nc, 3);
    double *t = malloc((size_t)reps * sizeof *t);
    uint16_t *A16 = step_operands ? gt_malloc(na * sizeof *A16, "bench operands") : NULL;
    uint16_t *B16 = step_operands ? gt_malloc(nb * sizeof *B16, "bench operands") : NULL;
    if (!A || !Bm || !Cm || !t || (step_operands && (!A16 || !B16))) {
        fprintf(stderr, "bench_sgemm: out of memory for %zu+%zu+%zu floats\n", na, nb, nc);
        return 1;
    }
    if (step_operands) {
        bf16_store(A16, A, na);
        bf16_store(B16, Bm, nb);
    }

    printf("bench_sgemm: C=%lld T=%lld B=%lld V=%lld L=%lld (N=B*T=%lld rows), "
           "%d threads, %lld reps\n", (long long)C, (long long)T, (long long)B,
           (long long)V, (long long)L, (long long)N, nthr, (long long)reps);
    if (use_bf16)
        printf("BF16 products: gentrain's gemm_bf16, %s path (BF16 operands, FP32 sums)\n%s%s\n",
               gemm_bf16_path_name(),
               step_operands ? "operands as a step has them: weights packed once, "
                               "activations and douts in BF16"
                             : "",
               step_operands ? (step_epilogues ? "; with the step's fused epilogues\n" : "\n")
                             : "");
    else
        printf("BLAS: %s (%s, %d threads)\n%s\n\n", blas, par, blas_thr, blas_core_summary());
    printf("%-16s %2s %6s %6s %6s %5s %9s %9s %9s\n", "product", "op", "M", "N", "K",
           "x/step", "med ms", "best ms", "GFLOP/s");
    double step_flops = 0, step_s = 0, all0, own0, all1, own1;
    cpu_busy(&all0, &own0);
    const double w0 = omp_get_wtime();
    for (int i = 0; i < nsh; i++) {
        shape *s = &sh[i];
        if (use_bf16 && register_weight(s, Bm) != 0) return 1;
        time_shape(s, A, A16, Bm, B16, Cm, (int)reps, t, &eb);
        printf("%-16s %c%c %6lld %6lld %6lld %5lld %9.3f %9.3f %9.1f\n", s->name,
               s->ta ? 'T' : 'N', s->tb ? 'T' : 'N', (long long)s->m, (long long)s->n,
               (long long)s->k, (long long)s->count, s->med_ms, s->best_ms,
               flops_of(s) / (s->med_ms * 1e6));
        step_flops += (double)s->count * flops_of(s);
        step_s += (double)s->count * s->med_ms * 1e-3;
    }
    cpu_busy(&all1, &own1);
    const double wall = omp_get_wtime() - w0;
    double other = -1;   /* cores' worth of CPU other processes used meanwhile */
    if (all0 >= 0 && all1 >= 0) {
        other = ((all1 - all0) - (own1 - own0)) / wall;
        if (other < 0) other = 0;
    }
    const double avg = step_s > 0 ? step_flops / step_s / 1e9 : 0.0; /* 0: no step product */
    if (step_s > 0)
        printf("\nstep GEMMs%s: %.2f GFLOP in %.1f ms -> %.1f GFLOP/s (flop-weighted "
               "average)\n", only ? " (--only these)" : "", step_flops / 1e9, step_s * 1e3, avg);
    if (other >= 0.2)
        printf("warning: other processes used %.1f cores meanwhile; not a clean figure\n",
               other);

    printf("{\"impl\":\"%s\",\"blas\":\"%s\",\"blas_parallel\":\"%s\","
           "\"blas_threads\":%d,\"threads\":%d,\"reps\":%lld,\"n_embd\":%lld,"
           "\"block_size\":%lld,\"batch_size\":%lld,\"vocab\":%lld,\"n_layer\":%lld,"
           "\"operands\":\"%s\",\"epilogues\":\"%s\",\"shapes\":[",
           use_bf16 ? "gemm_bf16" : "sgemm", use_bf16 ? gemm_bf16_path_name() : blas, par,
           blas_thr, nthr, (long long)reps, (long long)C, (long long)T,
           (long long)B, (long long)V, (long long)L, step_operands ? "step" : "plain",
           step_epilogues ? "step" : "none");
    for (int i = 0; i < nsh; i++) {
        const shape *s = &sh[i];
        printf("%s{\"name\":\"%s\",\"op\":\"%c%c\",\"m\":%lld,\"n\":%lld,\"k\":%lld,"
               "\"count\":%lld,\"ms\":%.4f,\"best_ms\":%.4f,\"gflops\":%.2f}",
               i ? "," : "", s->name, s->ta ? 'T' : 'N', s->tb ? 'T' : 'N',
               (long long)s->m, (long long)s->n, (long long)s->k, (long long)s->count,
               s->med_ms, s->best_ms, flops_of(s) / (s->med_ms * 1e6));
    }
    printf("],\"step_gflop\":%.4f,\"step_gemm_ms\":%.3f,\"step_avg_gflops\":%.2f",
           step_flops / 1e9, step_s * 1e3, avg);
    if (other >= 0) printf(",\"other_load_cores\":%.2f", other);
    if (only) printf(",\"only\":\"%s\"", only);
    if (have_square)
        printf(",\"square_gflops\":%.2f", flops_of(&sh[nsh - 1]) / (sh[nsh - 1].med_ms * 1e6));
    printf("}\n");

    if (use_bf16) gemm_bf16_weights_clear();
    free(A16);
    free(B16);
    free(eb.bias), free(eb.row_sums), free(eb.residual);
    free(eb.slope16), free(eb.out16), free(eb.gelu16);
    free(A);
    free(Bm);
    free(Cm);
    free(t);
    return 0;
}
