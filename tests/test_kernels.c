/* test_kernels — every CPU kernel against an independent double-precision reference
 * written here:
 *   (a) forward outputs vs the reference;
 *   (b) backward vs central finite differences of the reference loss
 *       L = sum(out * R) (R random, passed as dout), and that backward accumulates
 *       (but a matrix product's dinp and attention's dqkv, which are written; with
 *       GELU's backward fused, the bits of the two);
 *   (c) the AVX2 path vs the portable path (when the CPU has AVX2);
 *   (d) two runs with the same thread count give identical bits;
 *   (e) cross-entropy: losses, gradient by finite differences, zero row sums;
 *   (f) attention with q|k|v and out in BF16 storage: the bits of the BF16 twin on the
 *       stored values, on the BF16 pairs, the AMX tiles (emulated) and the portable twin;
 *   (g) attention on the AMX tiles (emulated) against the BF16-operand references.
 * Shapes are small and odd (T and C not multiples of 8, NH > 1); a second, larger
 * shape per kernel goes through the multi-threaded and blocked code paths, where the
 * finite differences are taken on a random sample of elements. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend.h"
#include "attention_cpu.h"
#include "attention_pairs.h"
#include "attention_tiles.h"
#include "bf16_store.h"
#include "cpu_features.h"
#include "gemm_bf16.h"
#include "kernels_cpu.h"
#include "testutil.h"

/* ------------------------------------------------------------------------------------ */
/* helpers */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rnext(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in [lo, hi) */
static float runif(float lo, float hi)
{
    return lo + (hi - lo) * (float)((double)(rnext() >> 11) * 0x1.0p-53);
}

/* calloc that ends the test on failure (n may be 0). */
static void *xnew(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        printf("FAIL out of memory\n");
        exit(1);
    }
    return p;
}
#define fnew(n) ((float *)xnew((n), sizeof(float)))
#define dnew(n) ((double *)xnew((n), sizeof(double)))
#define inew(n) ((int32_t *)xnew((n), sizeof(int32_t)))

static float *frand(size_t n, float lo, float hi)
{
    float *p = fnew(n);
    for (size_t i = 0; i < n; i++) p[i] = runif(lo, hi);
    return p;
}

static double *todouble(const float *f, size_t n)
{
    double *d = dnew(n);
    for (size_t i = 0; i < n; i++) d[i] = f[i];
    return d;
}

static double maxabs_d(const double *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}

/* Largest elementwise relative error of a against ref, with a floor of
 * floor_frac * max|ref| so that entries near zero are judged on the tensor's scale. */
static double relerr_vs(const float *a, const double *ref, size_t n, double floor_frac)
{
    double fl = floor_frac * maxabs_d(ref, n) + 1e-30, e = 0;
    for (size_t i = 0; i < n; i++) e = fmax(e, tu_relerr(a[i], ref[i], fl));
    return e;
}

static double relerr_ff(const float *a, const float *b, size_t n, double floor_frac)
{
    double m = 0, e = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(b[i]));
    double fl = floor_frac * m + 1e-30;
    for (size_t i = 0; i < n; i++) e = fmax(e, tu_relerr(a[i], b[i], fl));
    return e;
}

/* Tolerances (float kernels against double references). */
/* Errors are elementwise relative with a floor of FLOOR * max|tensor|: a float sum
 * of K terms is off by about K * 6e-8 of its largest term, so an entry that nearly
 * cancels can only be judged on the scale of the tensor. */
#define TOL_FWD 1e-5   /* forward */
#define TOL_FD 1e-3    /* gradient vs finite differences */
#define TOL_ACC 1e-5   /* second backward doubles the first */
#define TOL_PATH 1e-5  /* AVX2 vs portable */
#define FLOOR 5e-2
#define FD_H 1e-5

/* ------------------------------------------------------------------------------------ */
/* Finite differences. A case keeps double copies of the inputs; loss_fn evaluates the
 * double reference L = sum(out * R). fd_check perturbs entries of x (all, or `samples`
 * random ones) and compares with the kernel's gradient g. */

typedef double (*loss_fn)(void *ctx);

static double fd_check(loss_fn f, void *ctx, double *x, size_t n, const float *g,
                       size_t samples)
{
    size_t count = (samples == 0 || samples > n) ? n : samples;
    double *fd = dnew(count);
    float *gs = fnew(count);
    for (size_t s = 0; s < count; s++) {
        size_t i = (count == n) ? s : (size_t)(rnext() % n);
        double x0 = x[i];
        x[i] = x0 + FD_H;
        double lp = f(ctx);
        x[i] = x0 - FD_H;
        double lm = f(ctx);
        x[i] = x0;
        fd[s] = (lp - lm) / (2 * FD_H);
        gs[s] = g[i];
    }
    /* floor: FLOOR times the largest gradient entry of the whole tensor */
    double gmax = 0;
    for (size_t i = 0; i < n; i++) gmax = fmax(gmax, fabs(g[i]));
    double e = 0;
    for (size_t s = 0; s < count; s++)
        e = fmax(e, tu_relerr(gs[s], fd[s], FLOOR * gmax + 1e-12));
    free(fd);
    free(gs);
    return e;
}

/* ------------------------------------------------------------------------------------ */
/* Path and determinism checks: `run` computes every output of a kernel (forward and
 * backward from zeroed gradients) into res[nres]. */

typedef void (*run_fn)(void *ctx, float *res);

/* the widest path this CPU runs: every path up to it is compared with the portable one */
static enum kernels_simd best_path = KERNELS_SIMD_PORTABLE;

/* tol: how far a path may be from the portable one, relative to the result's scale */
static void check_paths_within(const char *name, run_fn run, void *ctx, size_t nres,
                               double tol)
{
    float *r1 = fnew(nres), *r2 = fnew(nres), *rp = fnew(nres);
    for (int p = KERNELS_SIMD_PORTABLE; p <= (int)best_path; p++) {
        kernels_set_simd((enum kernels_simd)p);
        run(ctx, r1);
        run(ctx, r2);
        TU_CHECK(memcmp(r1, r2, nres * sizeof *r1) == 0, "%s %s: two runs bitwise equal",
                 name, kernels_simd_name());
        if (p == KERNELS_SIMD_PORTABLE) {
            memcpy(rp, r1, nres * sizeof *r1);
        } else {
            double e = relerr_ff(r1, rp, nres, FLOOR);
            TU_CHECK(e < tol, "%s: %s vs portable rel err %.2e", name, kernels_simd_name(),
                     e);
        }
    }
    kernels_set_simd(KERNELS_SIMD_AUTO);
    free(r1);
    free(r2);
    free(rp);
}

static void check_paths(const char *name, run_fn run, void *ctx, size_t nres)
{
    check_paths_within(name, run, ctx, nres, TOL_PATH);
}

/* Checks that d2 (two backward calls) is twice d1 (one call). */
static void check_doubled(const char *what, const float *d1, const float *d2, size_t n)
{
    double m = 0, e = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(d1[i]));
    for (size_t i = 0; i < n; i++)
        e = fmax(e, tu_relerr(d2[i], 2.0 * d1[i], FLOOR * 2 * m + 1e-30));
    TU_CHECK(e < TOL_ACC && m > 0, "%s: backward accumulates (2 calls = 2x, err %.2e)",
             what, e);
}

/* ------------------------------------------------------------------------------------ */
/* Encoder */

typedef struct {
    int B, T, C, V;
    int32_t *tok;
    float *wte, *wpe, *R;
    double *dwte_, *dwpe_, *dR;
} enc_case;

static double enc_ref_loss(void *p)
{
    enc_case *c = p;
    double L = 0;
    for (int b = 0; b < c->B; b++)
        for (int t = 0; t < c->T; t++) {
            size_t r = (size_t)b * c->T + t;
            for (int i = 0; i < c->C; i++)
                L += (c->dwte_[(size_t)c->tok[r] * c->C + i] + c->dwpe_[(size_t)t * c->C + i]) *
                     c->dR[r * c->C + i];
        }
    return L;
}

static void enc_run(void *p, float *res)
{
    enc_case *c = p;
    size_t no = (size_t)c->B * c->T * c->C, nte = (size_t)c->V * c->C,
           npe = (size_t)c->T * c->C;
    memset(res, 0, (no + nte + npe) * sizeof *res);
    encoder_forward(res, c->tok, c->wte, c->wpe, c->B, c->T, c->C);
    encoder_backward(res + no, res + no + nte, c->R, c->tok, c->B, c->T, c->C);
}

static void test_encoder(int B, int T, int C, int V, size_t samples)
{
    enc_case c = {B, T, C, V, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    size_t N = (size_t)B * T, no = N * C, nte = (size_t)V * C, npe = (size_t)T * C;
    c.tok = inew(N);
    for (size_t i = 0; i < N; i++) c.tok[i] = (int32_t)(rnext() % (uint64_t)V);
    c.tok[N - 1] = c.tok[0]; /* a repeated token */
    c.wte = frand(nte, -1, 1);
    c.wpe = frand(npe, -1, 1);
    c.R = frand(no, -1, 1);
    c.dwte_ = todouble(c.wte, nte);
    c.dwpe_ = todouble(c.wpe, npe);
    c.dR = todouble(c.R, no);
    char name[96];
    snprintf(name, sizeof name, "encoder B=%d T=%d C=%d V=%d", B, T, C, V);

    float *out = fnew(no), *dwte = fnew(nte), *dwpe = fnew(npe);
    double *ref = dnew(no);
    encoder_forward(out, c.tok, c.wte, c.wpe, B, T, C);
    for (size_t r = 0; r < N; r++)
        for (int i = 0; i < C; i++)
            ref[r * C + i] = c.dwte_[(size_t)c.tok[r] * C + i] + c.dwpe_[(r % T) * C + i];
    double e = relerr_vs(out, ref, no, FLOOR);
    TU_CHECK(e < TOL_FWD, "%s: forward rel err %.2e", name, e);

    encoder_backward(dwte, dwpe, c.R, c.tok, B, T, C);
    e = fd_check(enc_ref_loss, &c, c.dwte_, nte, dwte, samples);
    TU_CHECK(e < TOL_FD, "%s: dwte vs finite differences %.2e", name, e);
    e = fd_check(enc_ref_loss, &c, c.dwpe_, npe, dwpe, samples);
    TU_CHECK(e < TOL_FD, "%s: dwpe vs finite differences %.2e", name, e);

    float *dwte2 = fnew(nte), *dwpe2 = fnew(npe);
    encoder_backward(dwte2, dwpe2, c.R, c.tok, B, T, C);
    encoder_backward(dwte2, dwpe2, c.R, c.tok, B, T, C);
    check_doubled(name, dwte, dwte2, nte);

    check_paths(name, enc_run, &c, no + nte + npe);

    free(out), free(dwte), free(dwpe), free(dwte2), free(dwpe2), free(ref);
    free(c.tok), free(c.wte), free(c.wpe), free(c.R);
    free(c.dwte_), free(c.dwpe_), free(c.dR);
}

/* ------------------------------------------------------------------------------------ */
/* LayerNorm */

typedef struct {
    size_t N;
    int C;
    float *x, *w, *b, *R;
    double *dx, *dw, *db, *dR;
} ln_case;

static void ln_ref(const ln_case *c, double *out, double *mean, double *rstd)
{
    for (size_t n = 0; n < c->N; n++) {
        const double *x = c->dx + n * c->C;
        double m = 0, v = 0;
        for (int i = 0; i < c->C; i++) m += x[i];
        m /= c->C;
        for (int i = 0; i < c->C; i++) v += (x[i] - m) * (x[i] - m);
        v /= c->C;
        double rs = 1.0 / sqrt(v + 1e-5);
        for (int i = 0; i < c->C; i++)
            out[n * c->C + i] = (x[i] - m) * rs * c->dw[i] + c->db[i];
        if (mean) mean[n] = m;
        if (rstd) rstd[n] = rs;
    }
}

static double ln_ref_loss(void *p)
{
    ln_case *c = p;
    size_t n = c->N * c->C;
    double *out = dnew(n), L = 0;
    ln_ref(c, out, NULL, NULL);
    for (size_t i = 0; i < n; i++) L += out[i] * c->dR[i];
    free(out);
    return L;
}

static void ln_run(void *p, float *res)
{
    ln_case *c = p;
    size_t n = c->N * c->C;
    float *out = res, *mean = res + n, *rstd = mean + c->N, *dx = rstd + c->N,
          *dw = dx + n, *db = dw + c->C;
    memset(dx, 0, (n + 2 * (size_t)c->C) * sizeof *res);
    float *scratch = fnew(layernorm_backward_scratch_floats(c->N, c->C));
    layernorm_forward(out, mean, rstd, c->x, c->w, c->b, c->N, c->C);
    layernorm_backward(dx, dw, db, c->R, c->x, c->w, mean, rstd, scratch, c->N, c->C);
    free(scratch);
}

static void test_layernorm(size_t N, int C, size_t samples)
{
    ln_case c = {N, C, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    size_t n = N * C;
    c.x = frand(n, -2, 2);
    for (size_t r = 0; r < N; r++) /* rows with an offset and different spreads */
        for (int i = 0; i < C; i++) c.x[r * C + i] = c.x[r * C + i] * (0.5f + r % 3) + 0.3f;
    c.w = frand(C, 0.5f, 1.5f);
    c.b = frand(C, -0.5f, 0.5f);
    c.R = frand(n, -1, 1);
    c.dx = todouble(c.x, n);
    c.dw = todouble(c.w, C);
    c.db = todouble(c.b, C);
    c.dR = todouble(c.R, n);
    char name[96];
    snprintf(name, sizeof name, "layernorm N=%zu C=%d", N, C);

    size_t nres = 2 * n + 2 * N + 2 * (size_t)C;
    float *res = fnew(nres);
    ln_run(&c, res);
    float *out = res, *mean = res + n, *rstd = mean + N, *dx = rstd + N, *dw = dx + n,
          *db = dw + C;
    double *rout = dnew(n), *rmean = dnew(N), *rrstd = dnew(N);
    ln_ref(&c, rout, rmean, rrstd);
    double e = relerr_vs(out, rout, n, FLOOR);
    TU_CHECK(e < TOL_FWD, "%s: forward rel err %.2e", name, e);
    e = fmax(relerr_vs(mean, rmean, N, FLOOR), relerr_vs(rstd, rrstd, N, FLOOR));
    TU_CHECK(e < TOL_FWD, "%s: mean/rstd rel err %.2e", name, e);

    e = fd_check(ln_ref_loss, &c, c.dx, n, dx, samples);
    TU_CHECK(e < TOL_FD, "%s: dinp vs finite differences %.2e", name, e);
    e = fd_check(ln_ref_loss, &c, c.dw, C, dw, 0);
    TU_CHECK(e < TOL_FD, "%s: dweight vs finite differences %.2e", name, e);
    e = fd_check(ln_ref_loss, &c, c.db, C, db, 0);
    TU_CHECK(e < TOL_FD, "%s: dbias vs finite differences %.2e", name, e);

    float *dx2 = fnew(n), *dw2 = fnew(C), *db2 = fnew(C),
          *sc = fnew(layernorm_backward_scratch_floats(N, C));
    for (int k = 0; k < 2; k++)
        layernorm_backward(dx2, dw2, db2, c.R, c.x, c.w, mean, rstd, sc, N, C);
    check_doubled(name, dx, dx2, n);
    check_doubled(name, dw, dw2, C);
    check_doubled(name, db, db2, C);
#ifdef _OPENMP
    /* the same bits on 1 and 3 threads (dw, db: fixed chunks of rows, then the chunks in
     * order, whatever the team) */
    {
        const int team = omp_get_max_threads();
        int same = 1;
        for (int t = 1; t <= 3; t += 2) {
            float *dx5 = fnew(n), *dw5 = fnew(C), *db5 = fnew(C);
            omp_set_num_threads(t);
            layernorm_backward(dx5, dw5, db5, c.R, c.x, c.w, mean, rstd, sc, N, C);
            omp_set_num_threads(team);
            same &= memcmp(dx5, dx, n * sizeof *dx) == 0 && memcmp(dw5, dw, C * sizeof *dw) == 0 &&
                    memcmp(db5, db, C * sizeof *db) == 0;
            free(dx5), free(dw5), free(db5);
        }
        TU_CHECK(same, "%s: the backward on 1, %d and 3 threads gives the same bits", name, team);
    }
#endif

    /* the BF16 backend's twin with dinp's BF16 copy: the same sums, and the copy is
     * the summed dinp rounded (dinp starting from R, as the residual stream's does) */
    {
        float *dx3 = fnew(n), *dw3 = fnew(C), *db3 = fnew(C), *dx4 = fnew(n), *dw4 = fnew(C),
              *db4 = fnew(C);
        uint16_t *d16 = malloc(n * sizeof *d16), *want16 = malloc(n * sizeof *want16);
        if (!d16 || !want16) exit(99);
        memcpy(dx3, c.R, n * sizeof *dx3);
        memcpy(dx4, c.R, n * sizeof *dx4);
        memset(d16, 0xff, n * sizeof *d16);
        layernorm_backward(dx3, dw3, db3, c.R, c.x, c.w, mean, rstd, sc, N, C);
        backend_cpu_bf16.bf16_acts->layernorm_backward(dx4, d16, dw4, db4, c.R, c.x, c.w, mean,
                                                       rstd, sc, N, C);
        bf16_store(want16, dx3, n);
        TU_CHECK(memcmp(dx3, dx4, n * sizeof *dx3) == 0 &&
                     memcmp(dw3, dw4, C * sizeof *dw3) == 0 &&
                     memcmp(db3, db4, C * sizeof *db3) == 0 &&
                     memcmp(d16, want16, n * sizeof *d16) == 0,
                 "%s: the BF16 backend's backward with dinp's BF16 copy: the same dinp, dw, db "
                 "bits, and the copy is dinp rounded", name);
        free(dx3), free(dw3), free(db3), free(dx4), free(dw4), free(db4), free(d16);
        free(want16);
    }

    check_paths(name, ln_run, &c, nres);

    free(res), free(rout), free(rmean), free(rrstd), free(dx2), free(dw2), free(db2), free(sc);
    free(c.x), free(c.w), free(c.b), free(c.R), free(c.dx), free(c.dw), free(c.db);
    free(c.dR);
}

/* ------------------------------------------------------------------------------------ */
/* Matmul */

typedef struct {
    size_t N;
    int C, OC, with_bias;
    float *x, *w, *bias, *R;
    double *dx, *dw, *dbias, *dR;
} mm_case;

static void mm_ref(const mm_case *c, double *out)
{
    for (size_t n = 0; n < c->N; n++)
        for (int o = 0; o < c->OC; o++) {
            double s = c->with_bias ? c->dbias[o] : 0.0;
            for (int i = 0; i < c->C; i++) s += c->dx[n * c->C + i] * c->dw[(size_t)o * c->C + i];
            out[n * c->OC + o] = s;
        }
}

static double mm_ref_loss(void *p)
{
    mm_case *c = p;
    size_t n = c->N * c->OC;
    double *out = dnew(n), L = 0;
    mm_ref(c, out);
    for (size_t i = 0; i < n; i++) L += out[i] * c->dR[i];
    free(out);
    return L;
}

static void mm_run(void *p, float *res)
{
    mm_case *c = p;
    size_t no = c->N * c->OC, ni = c->N * c->C, nw = (size_t)c->OC * c->C;
    float *out = res, *dx = res + no, *dw = dx + ni, *db = dw + nw;
    for (size_t i = 0; i < ni; i++) dx[i] = 1e30f; /* written, not added to */
    memset(dw, 0, (nw + c->OC) * sizeof *res);
    matmul_forward(out, c->x, c->w, c->with_bias ? c->bias : NULL, c->N, c->C, c->OC);
    matmul_backward(dx, dw, c->with_bias ? db : NULL, c->R, c->x, c->w, c->N, c->C, c->OC);
}

static void test_matmul(size_t N, int C, int OC, int with_bias, size_t samples)
{
    mm_case c = {N, C, OC, with_bias, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    size_t no = N * OC, ni = N * C, nw = (size_t)OC * C;
    c.x = frand(ni, -1, 1);
    c.w = frand(nw, -1, 1);
    c.bias = frand(OC, -1, 1);
    c.R = frand(no, -1, 1);
    c.dx = todouble(c.x, ni);
    c.dw = todouble(c.w, nw);
    c.dbias = todouble(c.bias, OC);
    c.dR = todouble(c.R, no);
    char name[96];
    snprintf(name, sizeof name, "matmul N=%zu C=%d OC=%d%s", N, C, OC,
             with_bias ? "" : " (no bias)");

    size_t nres = no + ni + nw + OC;
    float *res = fnew(nres);
    mm_run(&c, res);
    float *out = res, *dx = res + no, *dw = dx + ni, *db = dw + nw;
    double *rout = dnew(no);
    mm_ref(&c, rout);
    double e = relerr_vs(out, rout, no, FLOOR);
    TU_CHECK(e < TOL_FWD, "%s: forward rel err %.2e", name, e);

    e = fd_check(mm_ref_loss, &c, c.dx, ni, dx, samples);
    TU_CHECK(e < TOL_FD, "%s: dinp vs finite differences %.2e", name, e);
    e = fd_check(mm_ref_loss, &c, c.dw, nw, dw, samples);
    TU_CHECK(e < TOL_FD, "%s: dweight vs finite differences %.2e", name, e);
    if (with_bias) {
        e = fd_check(mm_ref_loss, &c, c.dbias, OC, db, samples);
        TU_CHECK(e < TOL_FD, "%s: dbias vs finite differences %.2e", name, e);
    }

    float *dx2 = fnew(ni), *dw2 = fnew(nw), *db2 = fnew(OC);
    for (int k = 0; k < 2; k++)
        matmul_backward(dx2, dw2, with_bias ? db2 : NULL, c.R, c.x, c.w, N, C, OC);
    TU_CHECK(memcmp(dx2, dx, ni * sizeof *dx) == 0, "%s: dinp is written, not added to "
             "(2 calls = 1)", name);
    check_doubled(name, dw, dw2, nw);
    if (with_bias) check_doubled(name, db, db2, OC);

    /* dinp and dbias may be NULL: dweight alone is unchanged */
    float *dw3 = fnew(nw);
    matmul_backward(NULL, dw3, NULL, c.R, c.x, c.w, N, C, OC);
    TU_CHECK(memcmp(dw3, dw, nw * sizeof *dw) == 0, "%s: dinp=NULL dbias=NULL gives the "
             "same dweight", name);

    check_paths(name, mm_run, &c, nres);

    /* with GELU's backward after it (c_proj's): the bits of the unfused sequence, the
     * product's input gelu(pre) written first (over what was there), dinp as
     * matmul_backward's, dweight as matmul_backward's on that input */
    float *pre = frand(ni, -4, 4), *dpre = fnew(ni), *want = fnew(ni), *dw4 = fnew(nw),
          *g = fnew(ni), *gwant = fnew(ni), *dw5 = fnew(nw);
    for (size_t i = 0; i < ni; i++) dpre[i] = g[i] = 1e30f;
    matmul_backward_gelu(dpre, dx2, dw4, NULL, c.R, g, c.w, pre, N, C, OC);
    gelu_backward(want, pre, dx, ni); /* fnew: zeroed */
    gelu_forward(gwant, pre, ni);
    matmul_backward(NULL, dw5, NULL, c.R, gwant, c.w, N, C, OC);
    TU_CHECK(memcmp(dpre, want, ni * sizeof *want) == 0 &&
                 memcmp(g, gwant, ni * sizeof *g) == 0 &&
                 memcmp(dx2, dx, ni * sizeof *dx) == 0 && memcmp(dw4, dw5, nw * sizeof *dw) == 0,
             "%s: matmul_backward_gelu gives the bits of gelu_forward into its input, "
             "matmul_backward, then gelu_backward into zeros", name);
    free(pre), free(dpre), free(want), free(dw4), free(g), free(gwant), free(dw5);

    free(res), free(rout), free(dx2), free(dw2), free(db2), free(dw3);
    free(c.x), free(c.w), free(c.bias), free(c.R), free(c.dx), free(c.dw), free(c.dbias);
    free(c.dR);
}

/* ------------------------------------------------------------------------------------ */
/* Attention */

typedef struct {
    int B, T, C, NH;
    const gt_backend *be; /* backend_cpu (attention_cpu.c) or backend_cpu_bf16 */
    int threads;          /* the scratch's threads */
    float *qkv, *R, *scratch;
    double *dqkv_, *dR;
} att_case;

/* x rounded to the nearest bfloat16 (ties to even), as gemm_bf16 rounds its operands */
static double bf16_round(double x)
{
    float f = (float)x;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* out[B,T,C], and lse[B,NH,T] (the log-sum-exp of each row of scaled scores; may be
 * NULL), in double. With bf16, as the BF16 backend's products see their operands: q, k,
 * v and the probabilities rounded to bfloat16 (the softmax itself exact). */
static void att_ref_as(const att_case *c, double *out, double *lse, int bf16)
{
    int B = c->B, T = c->T, C = c->C, NH = c->NH, hs = C / NH;
#define OPND(x) (bf16 ? bf16_round(x) : (x))
    double *p = dnew((size_t)T);
    double scale = 1.0 / sqrt((double)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                const double *q = c->dqkv_ + ((size_t)b * T + i) * 3 * C + h * hs;
                double mx = -1e300, sum = 0;
                for (int j = 0; j <= i; j++) {
                    const double *k = c->dqkv_ + ((size_t)b * T + j) * 3 * C + C + h * hs;
                    double s = 0;
                    for (int d = 0; d < hs; d++) s += OPND(q[d]) * OPND(k[d]);
                    p[j] = s * scale;
                    mx = fmax(mx, p[j]);
                }
                for (int j = 0; j <= i; j++) {
                    p[j] = exp(p[j] - mx);
                    sum += p[j];
                }
                for (int j = 0; j <= i; j++) p[j] = OPND(p[j] / sum);
                if (lse) lse[((size_t)b * NH + h) * T + i] = mx + log(sum);
                double *o = out + ((size_t)b * T + i) * C + h * hs;
                for (int d = 0; d < hs; d++) {
                    double s = 0;
                    for (int j = 0; j <= i; j++)
                        s += p[j] * OPND(c->dqkv_[((size_t)b * T + j) * 3 * C + 2 * C + h * hs + d]);
                    o[d] = s;
                }
            }
#undef OPND
    free(p);
}

static void att_ref(const att_case *c, double *out, double *lse)
{
    att_ref_as(c, out, lse, 0);
}

/* dqkv (+)= the BF16 backend's backward, in double with its rounding points: with
 * q~ = bf16(q) and so on, P~ = bf16(P), dP = dout~ v~^T, dS = P (dP - rowsum(P dP)) on
 * the unrounded P, then dq = scale bf16(dS) k~, dk = scale bf16(dS)^T q~,
 * dv = P~^T dout~ */
static void att_ref_bwd_bf16(const att_case *c, double *dqkv)
{
    const int B = c->B, T = c->T, C = c->C, NH = c->NH, hs = C / NH;
    const double scale = 1.0 / sqrt((double)hs);
    double *P = dnew((size_t)T * T), *dS = dnew((size_t)T * T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
#define QKV(t, part, d) bf16_round(c->dqkv_[((size_t)b * T + (t)) * 3 * C + (part) * C + h * hs + (d)])
#define DO(t, d) bf16_round(c->dR[((size_t)b * T + (t)) * C + h * hs + (d)])
#define G(t, part, d) dqkv[((size_t)b * T + (t)) * 3 * C + (part) * C + h * hs + (d)]
            for (int i = 0; i < T; i++) {
                double mx = -1e300, sum = 0.0, dot = 0.0;
                for (int j = 0; j <= i; j++) {
                    double s = 0.0;
                    for (int d = 0; d < hs; d++) s += QKV(i, 0, d) * QKV(j, 1, d);
                    P[(size_t)i * T + j] = s * scale;
                    mx = fmax(mx, s * scale);
                }
                for (int j = 0; j <= i; j++) sum += exp(P[(size_t)i * T + j] - mx);
                for (int j = 0; j <= i; j++) {
                    P[(size_t)i * T + j] = exp(P[(size_t)i * T + j] - mx) / sum;
                    double dp = 0.0;
                    for (int d = 0; d < hs; d++) dp += DO(i, d) * QKV(j, 2, d);
                    dS[(size_t)i * T + j] = dp;
                    dot += P[(size_t)i * T + j] * dp;
                }
                for (int j = 0; j <= i; j++)
                    dS[(size_t)i * T + j] =
                        bf16_round(P[(size_t)i * T + j] * (dS[(size_t)i * T + j] - dot));
            }
            for (int i = 0; i < T; i++)
                for (int j = 0; j <= i; j++) {
                    const double ds = dS[(size_t)i * T + j], pr = bf16_round(P[(size_t)i * T + j]);
                    for (int d = 0; d < hs; d++) {
                        G(i, 0, d) += scale * ds * QKV(j, 1, d);
                        G(j, 1, d) += scale * ds * QKV(i, 0, d);
                        G(j, 2, d) += pr * DO(i, d);
                    }
                }
#undef QKV
#undef DO
#undef G
        }
    free(P), free(dS);
}

static double att_ref_loss(void *p)
{
    att_case *c = p;
    size_t n = (size_t)c->B * c->T * c->C;
    double *out = dnew(n), L = 0;
    att_ref(c, out, NULL);
    for (size_t i = 0; i < n; i++) L += out[i] * c->dR[i];
    free(out);
    return L;
}

static size_t att_saved(const att_case *c)
{
    return c->be->attention_saved_floats(c->B, c->NH, c->T);
}

static int max_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* res = out | saved | dqkv */
static void att_run(void *p, float *res)
{
    att_case *c = p;
    size_t no = (size_t)c->B * c->T * c->C;
    float *out = res, *saved = res + no, *dqkv = saved + att_saved(c);
    for (size_t i = 0; i < 3 * no; i++) dqkv[i] = NAN; /* the backward writes every value */
    c->be->attention_forward(out, saved, c->qkv, c->scratch, c->threads, c->B, c->T, c->C,
                             c->NH);
    c->be->attention_backward(dqkv, c->R, c->qkv, saved, c->scratch, c->threads, c->B, c->T,
                              c->C, c->NH);
}

static att_case att_make(const gt_backend *be, int B, int T, int C, int NH)
{
    att_case c = {B, T, C, NH, be, max_threads(), NULL, NULL, NULL, NULL, NULL};
    size_t no = (size_t)B * T * C, nq = 3 * no;
    c.qkv = frand(nq, -1.5f, 1.5f);
    c.R = frand(no, -1, 1);
    c.scratch = fnew(be->attention_scratch_floats(T, C / NH, max_threads()));
    c.dqkv_ = todouble(c.qkv, nq);
    c.dR = todouble(c.R, no);
    return c;
}

static void att_drop(att_case *c)
{
    free(c->qkv), free(c->R), free(c->scratch), free(c->dqkv_), free(c->dR);
}

/* The FP32 backend's attention (attention_cpu.c): out and the saved log-sum-exp
 * against the reference, dqkv against finite differences, accumulation, every SIMD
 * path against the portable one, and the same bits on one thread as on several. */
static void test_attention(int B, int T, int C, int NH, size_t samples)
{
    att_case c = att_make(&backend_cpu, B, T, C, NH);
    size_t no = (size_t)B * T * C, nq = 3 * no, ns = att_saved(&c);
    char name[96];
    snprintf(name, sizeof name, "attention B=%d T=%d C=%d NH=%d", B, T, C, NH);
    TU_CHECK(ns == (size_t)B * NH * T, "%s: saves one float per row (%zu), no T x T matrix",
             name, ns);

    size_t nres = no + ns + nq;
    float *res = fnew(nres);
    att_run(&c, res);
    float *out = res, *lse = res + no, *dqkv = lse + ns;
    double *rout = dnew(no), *rlse = dnew(ns);
    att_ref(&c, rout, rlse);
    double e = relerr_vs(out, rout, no, FLOOR);
    TU_CHECK(e < TOL_FWD, "%s: forward out rel err %.2e", name, e);
    e = relerr_vs(lse, rlse, ns, FLOOR);
    TU_CHECK(e < TOL_FWD, "%s: forward log-sum-exp rel err %.2e", name, e);

    e = fd_check(att_ref_loss, &c, c.dqkv_, nq, dqkv, samples);
    TU_CHECK(e < TOL_FD, "%s: dqkv vs finite differences %.2e", name, e);

    /* the backward writes dqkv: what was there before (NaNs here, the run before's
     * gradient in a step) leaves no trace, and a second call gives the same bits */
    float *d2 = fnew(nq);
    for (size_t i = 0; i < nq; i++) d2[i] = NAN;
    for (int k = 0; k < 2; k++)
        attention_backward(d2, c.R, c.qkv, lse, c.scratch, max_threads(), B, T, C, NH);
    size_t finite = 0;
    for (size_t i = 0; i < nq; i++) finite += isfinite(d2[i]) != 0;
    TU_CHECK(finite == nq && memcmp(d2, dqkv, nq * sizeof *d2) == 0,
             "%s: backward writes dqkv (NaNs there before, 2 calls: the bits of 1)", name);

    check_paths(name, att_run, &c, nres);

    /* scratch for one thread while the runtime has more: the passes keep to one thread
     * (the sanitizer build would see a write past it), and each (batch, head) is summed
     * the same way whoever runs it */
    float *one = fnew(nres), *wide = c.scratch;
    c.scratch = fnew(attention_scratch_floats(T, C / NH, 1));
    c.threads = 1;
    att_run(&c, one);
    free(c.scratch);
    c.scratch = wide;
    c.threads = max_threads();
    att_run(&c, res);
    TU_CHECK(memcmp(one, res, nres * sizeof *res) == 0, "%s: scratch for 1 thread and for %d "
             "give the same bits", name, c.threads);
    free(one);

    free(res), free(rout), free(rlse), free(d2);
    att_drop(&c);
}

/* out or dqkv of the BF16 backend's attention against the forward or backward on BF16
 * operands in double. A probability or score gradient one FP32 ulp from a BF16 rounding boundary
 * may round the other way here than in double, moving the few rows it feeds by up to
 * 2^-8 of a term; a rounding left out moves every element. So: the largest error
 * within 4e-3, and 99% of the elements within 1e-5. */
static void check_bf16_result(const char *name, const char *what, const float *got,
                              const double *ref, size_t n)
{
    const double e = relerr_vs(got, ref, n, FLOOR);
    const double fl = FLOOR * maxabs_d(ref, n) + 1e-30;
    size_t off = 0;
    for (size_t i = 0; i < n; i++) off += tu_relerr(got[i], ref[i], fl) > 1e-5;
    TU_CHECK(e < 4e-3 && off * 100 <= n, "%s: %s on BF16 operands in double (largest rel "
             "err %.2e; %zu of %zu above 1e-5)", name, what, e, off, n);
}

/* The BF16-storage attention (attention_cpu.h's _stored twins) against the _bf16 ones
 * on the stored values: out's BF16 copy, the log-sum-exp and dqkv with the same bits, on
 * the SIMD path in use (the BF16 pairs where the CPU has AVX512_BF16); given dqkv16, the
 * backward writes dqkv rounded there, every value of it, and leaves dqkv as it was */
static void check_attention_stored(att_case *c, const char *name, const char *path)
{
    const size_t no = (size_t)c->B * c->T * c->C, nq = 3 * no, ns = att_saved(c);
    uint16_t *q16 = malloc(nq * sizeof *q16), *o16 = malloc(no * sizeof *o16),
             *want16 = malloc(no * sizeof *want16), *d16 = malloc(nq * sizeof *d16),
             *dwant16 = malloc(nq * sizeof *dwant16);
    float *q = fnew(nq), *out = fnew(no), *lse = fnew(ns), *lse2 = fnew(ns), *d = fnew(nq),
          *d2 = fnew(nq);
    if (!q16 || !o16 || !want16 || !d16 || !dwant16) exit(99);
    memset(d16, 0xff, nq * sizeof *d16); /* NaNs: a value left unwritten shows */
    bf16_store(q16, c->qkv, nq);
    bf16_widen(q, q16, nq);
    attention_forward_bf16(out, lse, q, c->scratch, c->threads, c->B, c->T, c->C, c->NH);
    bf16_store(want16, out, no);
    attention_forward_stored(o16, lse2, q16, c->scratch, c->threads, c->B, c->T, c->C, c->NH);
    for (size_t i = 0; i < nq; i++) d[i] = d2[i] = NAN; /* the backward writes every value */
    attention_backward_bf16(d, c->R, q, lse, c->scratch, c->threads, c->B, c->T, c->C, c->NH);
    attention_backward_stored(d2, NULL, c->R, q16, lse, c->scratch, c->threads, c->B, c->T,
                              c->C, c->NH);
    TU_CHECK(memcmp(o16, want16, no * sizeof *o16) == 0 &&
                 memcmp(lse, lse2, ns * sizeof *lse) == 0 && memcmp(d, d2, nq * sizeof *d) == 0,
             "%s, %s: q|k|v and out in BF16 storage give the bits of the FP32 twin on the "
             "stored values (out, log-sum-exp, dqkv)", name, path);
    for (size_t i = 0; i < nq; i++) d2[i] = NAN;
    attention_backward_stored(d2, d16, c->R, q16, lse, c->scratch, c->threads, c->B, c->T,
                              c->C, c->NH);
    bf16_store(dwant16, d, nq);
    size_t written = 0;
    for (size_t i = 0; i < nq; i++) written += !isnan(d2[i]);
    TU_CHECK(memcmp(d16, dwant16, nq * sizeof *d16) == 0 && written == 0,
             "%s, %s: given dqkv16, the backward writes dqkv rounded there and leaves dqkv "
             "(%zu of %zu values written)", name, path, written, nq);
    free(q16), free(o16), free(want16), free(q), free(out), free(lse), free(lse2), free(d);
    free(d2), free(d16), free(dwant16);
}

/* The BF16 backend's attention (attention_cpu.c's _bf16 twins): the same saved state,
 * out against the reference computed on BF16-rounded operands (which the FP32 reference
 * is far from: the products are in BF16), dqkv against finite differences of the FP32
 * loss to BF16's precision, every SIMD path against the portable one. */
static void test_attention_bf16(int B, int T, int C, int NH)
{
    att_case c = att_make(&backend_cpu_bf16, B, T, C, NH);
    size_t no = (size_t)B * T * C, nq = 3 * no, ns = att_saved(&c);
    char name[96];
    snprintf(name, sizeof name, "bf16 attention B=%d T=%d C=%d NH=%d", B, T, C, NH);
    TU_CHECK(ns == (size_t)B * NH * T, "%s: saves one float per row, no T x T matrix", name);
    const size_t nres = no + ns + nq;
    float *res = fnew(nres);
    att_run(&c, res);
    float *out = res, *dqkv = res + no + ns;
    double *rout = dnew(no);
    att_ref_as(&c, rout, NULL, 1);
    check_bf16_result(name, "out vs the forward", out, rout, no);
    double e = relerr_vs(out, rout, no, FLOOR);
    att_ref(&c, rout, NULL);
    const double e32 = relerr_vs(out, rout, no, FLOOR);
    TU_CHECK(e32 > 10 * e, "%s: ... which the FP32 reference is not (%.2e): the products "
             "are in BF16", name, e32);
    e = fd_check(att_ref_loss, &c, c.dqkv_, nq, dqkv, 200);
    TU_CHECK(e < 5e-2, "%s: dqkv vs finite differences within BF16 precision (%.2e)", name,
             e);
    double *rd = dnew(nq);
    att_ref_bwd_bf16(&c, rd);
    att_ref_as(&c, rout, NULL, 1);
    check_bf16_result(name, "dqkv vs the backward", dqkv, rd, nq);
    /* where the CPU has AVX512_BF16: the products on BF16 pairs (attention_pairs.h),
     * against the same references; forced, since a CPU whose dot products are slow
     * (the Xeons with AMX) picks the portable path on its own */
    kernels_set_simd(KERNELS_SIMD_AVX512);
    if (cpu_isa_level() >= CPU_ISA_AVX512_BF16) gemm_bf16_force_path(GEMM_BF16_AVX512);
    if (strcmp(kernels_simd_name(), "avx512") == 0 && attention_pairs_ready()) {
        char pname[128];
        snprintf(pname, sizeof pname, "%s on BF16 pairs (VDPBF16PS)", name);
        att_run(&c, res);
        check_bf16_result(pname, "out vs the forward", out, rout, no);
        check_bf16_result(pname, "dqkv vs the backward", dqkv, rd, nq);
        check_attention_stored(&c, name, "BF16 pairs");
    } else {
        printf("     %s: BF16 pairs not run (this CPU lacks AVX512_BF16)\n", name);
    }
    gemm_bf16_force_path(GEMM_BF16_AUTO);
    kernels_set_simd(KERNELS_SIMD_PORTABLE);
    check_attention_stored(&c, name, "portable twin");
    kernels_set_simd(KERNELS_SIMD_AUTO);
    /* the products on the AMX tiles, as the amx-emulated path runs them (the AMX path
     * runs the same code on the real tiles) */
    gemm_bf16_force_path(GEMM_BF16_AMX_EMULATED);
    {
        char tname[128];
        snprintf(tname, sizeof tname, "%s on the AMX tiles (emulated)", name);
        TU_CHECK(attention_tiles_ready(C / NH), "%s: the amx-emulated path runs them", tname);
        att_run(&c, res);
        check_bf16_result(tname, "out vs the forward", out, rout, no);
        check_bf16_result(tname, "dqkv vs the backward", dqkv, rd, nq);
        check_attention_stored(&c, name, "AMX tiles (emulated)");
    }
    gemm_bf16_force_path(GEMM_BF16_AUTO);
    TU_CHECK(!attention_tiles_ready(C / NH) || cpu_has_amx_bf16(),
             "%s: the tiles run only where gemm_bf16 runs AMX", name);
    free(rd);
    /* An FP32 value one ulp from a BF16 rounding boundary on one path can round the
     * other way on another: a BF16 operand's difference (2^-8) in some terms */
    check_paths_within(name, att_run, &c, nres, 4e-3);
    free(res), free(rout);
    att_drop(&c);
}

/* ------------------------------------------------------------------------------------ */
/* GELU and residual (elementwise) */

typedef struct {
    size_t N;
    float *x, *y, *R;
    double *dx, *dy, *dR;
} ew_case;

static double gelu_ref1(double x)
{
    const double pi = 3.14159265358979323846;
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
}

static double gelu_ref_loss(void *p)
{
    ew_case *c = p;
    double L = 0;
    for (size_t i = 0; i < c->N; i++) L += gelu_ref1(c->dx[i]) * c->dR[i];
    return L;
}

static void gelu_run(void *p, float *res)
{
    ew_case *c = p;
    memset(res + c->N, 0, c->N * sizeof *res);
    gelu_forward(res, c->x, c->N);
    gelu_backward(res + c->N, c->x, c->R, c->N);
}

static void test_gelu(size_t N, size_t samples)
{
    ew_case c = {N, NULL, NULL, NULL, NULL, NULL, NULL};
    c.x = frand(N, -5, 5);
    if (N > 8) { /* the saturated tails */
        c.x[0] = -20.0f, c.x[1] = 20.0f, c.x[2] = 0.0f, c.x[3] = -9.0f, c.x[4] = 1e-4f;
    }
    c.R = frand(N, -1, 1);
    c.dx = todouble(c.x, N);
    c.dR = todouble(c.R, N);
    char name[64];
    snprintf(name, sizeof name, "gelu N=%zu", N);

    float *res = fnew(2 * N);
    gelu_run(&c, res);
    double *ref = dnew(N);
    for (size_t i = 0; i < N; i++) ref[i] = gelu_ref1(c.dx[i]);
    /* elementwise relative error with a tiny floor: gelu must be accurate near 0 and
     * in the negative tail too */
    double e = 0;
    for (size_t i = 0; i < N; i++) e = fmax(e, tu_relerr(res[i], ref[i], 1e-6));
    TU_CHECK(e < TOL_FWD, "%s: forward rel err %.2e", name, e);
    e = fd_check(gelu_ref_loss, &c, c.dx, N, res + N, samples);
    TU_CHECK(e < TOL_FD, "%s: dinp vs finite differences %.2e", name, e);
    float *d2 = fnew(N);
    for (int k = 0; k < 2; k++) gelu_backward(d2, c.x, c.R, N);
    check_doubled(name, res + N, d2, N);
    check_paths(name, gelu_run, &c, 2 * N);
    free(res), free(ref), free(d2), free(c.x), free(c.R), free(c.dx), free(c.dR);
}

static double res_ref_loss(void *p)
{
    ew_case *c = p;
    double L = 0;
    for (size_t i = 0; i < c->N; i++) L += (c->dx[i] + c->dy[i]) * c->dR[i];
    return L;
}

static void res_run(void *p, float *res)
{
    ew_case *c = p;
    memset(res + c->N, 0, 2 * c->N * sizeof *res);
    residual_forward(res, c->x, c->y, c->N);
    residual_backward(res + c->N, res + 2 * c->N, c->R, c->N);
}

static void test_residual(size_t N, size_t samples)
{
    ew_case c = {N, NULL, NULL, NULL, NULL, NULL, NULL};
    c.x = frand(N, -1, 1);
    c.y = frand(N, -1, 1);
    c.R = frand(N, -1, 1);
    c.dx = todouble(c.x, N);
    c.dy = todouble(c.y, N);
    c.dR = todouble(c.R, N);
    char name[64];
    snprintf(name, sizeof name, "residual N=%zu", N);
    float *res = fnew(3 * N);
    res_run(&c, res);
    double *ref = dnew(N);
    for (size_t i = 0; i < N; i++) ref[i] = c.dx[i] + c.dy[i];
    double e = relerr_vs(res, ref, N, FLOOR);
    TU_CHECK(e < TOL_FWD, "%s: forward rel err %.2e", name, e);
    e = fmax(fd_check(res_ref_loss, &c, c.dx, N, res + N, samples),
             fd_check(res_ref_loss, &c, c.dy, N, res + 2 * N, samples));
    TU_CHECK(e < TOL_FD, "%s: da, db vs finite differences %.2e", name, e);
    float *d2 = fnew(2 * N);
    for (int k = 0; k < 2; k++) residual_backward(d2, d2 + N, c.R, N);
    check_doubled(name, res + N, d2, 2 * N);
    check_paths(name, res_run, &c, 3 * N);
    free(res), free(ref), free(d2), free(c.x), free(c.y), free(c.R), free(c.dx), free(c.dy);
    free(c.dR);
}

/* ------------------------------------------------------------------------------------ */
/* Cross-entropy */

typedef struct {
    size_t N;
    int V;
    float scale;
    float *logits;
    int32_t *tg;
    double *dl;
} ce_case;

static double ce_ref_row(const double *x, int t, int V)
{
    double mx = x[0], s = 0;
    for (int j = 1; j < V; j++) mx = fmax(mx, x[j]);
    for (int j = 0; j < V; j++) s += exp(x[j] - mx);
    return log(s) + mx - x[t];
}

static double ce_ref_loss(void *p)
{
    ce_case *c = p;
    double L = 0;
    for (size_t n = 0; n < c->N; n++) L += ce_ref_row(c->dl + n * c->V, c->tg[n], c->V);
    return c->scale * L;
}

static void ce_run(void *p, float *res)
{
    ce_case *c = p;
    size_t n = c->N * c->V;
    float *l1 = res, *l2 = res + c->N, *g = l2 + c->N;
    crossentropy_forward(l1, c->logits, c->tg, c->N, c->V);
    memcpy(g, c->logits, n * sizeof *g);
    crossentropy_forward_backward(l2, g, c->tg, c->N, c->V, c->scale);
}

static void test_crossentropy(size_t N, int V, float scale, size_t samples)
{
    ce_case c = {N, V, scale, NULL, NULL, NULL};
    size_t n = N * V;
    c.logits = frand(n, -4, 4);
    c.logits[0] = 30.0f; /* a confident row: exp must not overflow */
    c.tg = inew(N);
    for (size_t i = 0; i < N; i++) c.tg[i] = (int32_t)(rnext() % (uint64_t)V);
    c.tg[N - 1] = V - 1; /* the last column (vector tail) */
    c.dl = todouble(c.logits, n);
    char name[96];
    snprintf(name, sizeof name, "crossentropy N=%zu V=%d", N, V);

    size_t nres = 2 * N + n;
    float *res = fnew(nres);
    ce_run(&c, res);
    float *l1 = res, *l2 = res + N, *g = l2 + N;
    double *ref = dnew(N);
    for (size_t r = 0; r < N; r++) ref[r] = ce_ref_row(c.dl + r * V, c.tg[r], V);
    double e = relerr_vs(l1, ref, N, FLOOR);
    TU_CHECK(e < TOL_FWD, "%s: losses rel err %.2e", name, e);
    TU_CHECK(memcmp(l1, l2, N * sizeof *l1) == 0,
             "%s: forward and forward_backward give the same losses", name);
    e = fd_check(ce_ref_loss, &c, c.dl, n, g, samples);
    TU_CHECK(e < TOL_FD, "%s: dlogits vs finite differences %.2e", name, e);
    double rs = 0;
    for (size_t r = 0; r < N; r++) {
        double s = 0;
        for (int j = 0; j < V; j++) s += g[r * V + j];
        rs = fmax(rs, fabs(s));
    }
    TU_CHECK(rs < 1e-6 * fabs(scale) * V, "%s: gradient rows sum to 0 (max %.2e)", name, rs);
    check_paths(name, ce_run, &c, nres);
    free(res), free(ref), free(c.logits), free(c.tg), free(c.dl);
}

/* ------------------------------------------------------------------------------------ */

static void test_simd_selection(void)
{
    /* GENTRAIN_SIMD sets the initial choice (read at the first kernel call) */
    TU_CHECK(strcmp(kernels_simd_name(), "portable") == 0,
             "GENTRAIN_SIMD=portable selects the portable path (%s)", kernels_simd_name());
    best_path = kernels_set_simd(KERNELS_SIMD_AUTO);
    static const char *const names[] = {"", "portable", "avx2", "avx512"};
    TU_CHECK(strcmp(kernels_simd_name(), names[best_path]) == 0,
             "auto selects the widest path this CPU has (%s)", kernels_simd_name());
    TU_CHECK(kernels_set_simd(KERNELS_SIMD_AVX512) <= best_path,
             "asking for a path beyond the CPU gives one it has (%s)", kernels_simd_name());
    TU_CHECK(kernels_set_simd(KERNELS_SIMD_PORTABLE) == KERNELS_SIMD_PORTABLE,
             "portable can be forced");
    kernels_set_simd(KERNELS_SIMD_AUTO);
    TU_CHECK(backend_cpu.layernorm_forward == layernorm_forward &&
                 backend_cpu.crossentropy_forward_backward == crossentropy_forward_backward &&
                 backend_cpu.attention_scratch_floats == attention_scratch_floats &&
                 backend_cpu.attention_forward == attention_forward,
             "backend_cpu points at the kernels (%s)", backend_cpu.name);
    if (best_path < KERNELS_SIMD_AVX512)
        printf("# this CPU runs the %s path at most: wider paths not compared here\n",
               names[best_path]);
}

/* The vocabulary-parallel ops (kernels_vocab.c) over S shards, combined as the model
 * combines them (max of the row maxima, sum of the sums), give what the whole-vocabulary
 * ops give: the embedding, its gradients, the losses and the logits' gradient. */
static void test_vocab_shards(int S, size_t N, int V, int C, int T)
{
    char name[64];
    snprintf(name, sizeof name, "vocabulary in %d shards (N=%zu V=%d)", S, N, V);
    const int Vl = V / S, B = (int)(N / (size_t)T);
    float *logits = frand(N * V, -4, 4), *wte = frand((size_t)V * C, -1, 1);
    float *wpe = frand((size_t)T * C, -1, 1), *dout = frand(N * C, -1, 1);
    int32_t *tg = inew(N);
    for (size_t i = 0; i < N; i++) tg[i] = (int32_t)(rnext() % (uint64_t)V);
    /* Whole: losses and gradient; embedding and its gradients. */
    float *loss = fnew(N), *g = fnew(N * V), *enc = fnew(N * C);
    float *dwte = fnew((size_t)V * C), *dwpe = fnew((size_t)T * C);
    memcpy(g, logits, N * V * sizeof *g);
    crossentropy_forward_backward(loss, g, tg, N, V, 0.5f);
    encoder_forward(enc, tg, wte, wpe, B, T, C);
    encoder_backward(dwte, dwpe, dout, tg, B, T, C);
    /* Shards: each its columns of the logits and rows of wte. */
    float *mx = fnew(N), *part = fnew(N), *sums = fnew(2 * N), *part2 = fnew(2 * N);
    float *sl = fnew(N * Vl), *sloss = fnew(N), *senc = fnew(N * C), *sum_enc = fnew(N * C);
    float *sdwte = fnew((size_t)V * C), *sdwpe = fnew((size_t)T * C);
    for (size_t n = 0; n < N; n++) mx[n] = -INFINITY;
    for (int s = 0; s < S; s++) {
        for (size_t n = 0; n < N; n++) memcpy(sl + n * Vl, logits + n * V + s * Vl, Vl * 4);
        xent_shard_max(part, sl, N, Vl);
        for (size_t n = 0; n < N; n++) mx[n] = fmaxf(mx[n], part[n]);
    }
    for (int s = 0; s < S; s++) {
        for (size_t n = 0; n < N; n++) memcpy(sl + n * Vl, logits + n * V + s * Vl, Vl * 4);
        xent_shard_sums(part2, sl, tg, mx, N, Vl, s * Vl);
        for (size_t i = 0; i < 2 * N; i++) sums[i] += part2[i];
        encoder_forward_shard(senc, tg, wte + (size_t)s * Vl * C, s == 0 ? wpe : NULL, B, T, C,
                              s * Vl, Vl);
        for (size_t i = 0; i < N * (size_t)C; i++) sum_enc[i] += senc[i];
        memset(sdwpe, 0, (size_t)T * C * sizeof *sdwpe);
        encoder_backward_shard(sdwte + (size_t)s * Vl * C, sdwpe, dout, tg, B, T, C, s * Vl, Vl);
    }
    double eg = 0.0, el = 0.0;
    for (int s = 0; s < S; s++) {
        for (size_t n = 0; n < N; n++) memcpy(sl + n * Vl, logits + n * V + s * Vl, Vl * 4);
        xent_shard_finish(sloss, sl, tg, mx, sums, N, Vl, s * Vl, 0.5f, 1);
        for (size_t n = 0; n < N; n++) {
            el = fmax(el, fabs((double)sloss[n] - loss[n]));
            for (int j = 0; j < Vl; j++)
                eg = fmax(eg, fabs((double)sl[n * Vl + j] - g[n * V + s * Vl + j]));
        }
    }
    TU_CHECK(el < 1e-5 && eg < 1e-6, "%s: losses (max diff %.1e) and dlogits (%.1e) = whole",
             name, el, eg);
    double ee = 0.0, ew = 0.0, ep = 0.0;
    for (size_t i = 0; i < N * (size_t)C; i++) ee = fmax(ee, fabs((double)sum_enc[i] - enc[i]));
    for (size_t i = 0; i < (size_t)V * C; i++) ew = fmax(ew, fabs((double)sdwte[i] - dwte[i]));
    for (size_t i = 0; i < (size_t)T * C; i++) ep = fmax(ep, fabs((double)sdwpe[i] - dwpe[i]));
    TU_CHECK(ee < 1e-6 && ew < 1e-5 && ep < 1e-5,
             "%s: embedding (%.1e), dwte (%.1e), dwpe (%.1e) = whole", name, ee, ew, ep);
    free(logits), free(wte), free(wpe), free(dout), free(tg), free(loss), free(g), free(enc);
    free(dwte), free(dwpe), free(mx), free(part), free(sums), free(part2), free(sl);
    free(sloss), free(senc), free(sum_enc), free(sdwte), free(sdwpe);
}

int main(void)
{
    setenv("GENTRAIN_SIMD", "portable", 1);
#ifdef _OPENMP
    if (!getenv("OMP_NUM_THREADS") && omp_get_max_threads() < 2) omp_set_num_threads(2);
#endif
    printf("# %d OpenMP threads\n", max_threads());
    test_simd_selection();

    /* small odd shapes: every gradient entry by finite differences */
    test_encoder(2, 5, 13, 7, 0);
    test_layernorm(7, 13, 0);
    test_layernorm(5, 77, 0);
    test_matmul(7, 13, 11, 1, 0);
    test_matmul(6, 9, 70, 0, 0);
    test_attention(2, 11, 12, 3, 0);
    test_attention(1, 9, 5, 1, 0); /* fewer heads than threads: the serial path */
    test_gelu(37, 0);
    test_residual(29, 0);
    test_crossentropy(7, 19, 1.0f, 0);
    test_crossentropy(5, 256, 0.25f, 0);

    /* larger shapes: the threaded, blocked and full-vector paths; sampled differences */
    test_encoder(4, 67, 136, 50, 200);
    test_layernorm(301, 136, 300);
    test_matmul(131, 72, 136, 1, 100);
    test_attention(2, 141, 48, 3, 100); /* T > the 48-row backward block */
    test_attention(1, 100, 260, 2, 40);  /* hs = 130: more than a 64-wide tile of C */
    test_attention_bf16(2, 11, 12, 3);
    test_attention_bf16(2, 141, 48, 3);
    test_attention_bf16(2, 37, 15, 3);  /* hs = 5: an odd depth, paired with zero */
    test_attention_bf16(1, 100, 260, 2); /* hs = 130: three column chunks */
    test_attention_bf16(1, 70, 128, 2);  /* hs = 64 (a power-of-two scale, as at hs = 4
                                          * and 16 above: dS takes it on the AMX tiles) */
    test_gelu(50003, 60);
    test_residual(40009, 60);
    test_crossentropy(131, 256, 1.0f / 131, 100);
    test_vocab_shards(2, 24, 64, 16, 8);
    test_vocab_shards(4, 40, 256, 24, 10);

    return tu_finish();
}
