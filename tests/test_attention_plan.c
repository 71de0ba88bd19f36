/* The causal attention plans of offload/attention_plan.h, executed on the CPU: every
 * product of a plan through a plain column-major strided-batched product (the meaning
 * of the cuBLAS call ops.cu makes of it), the softmax and its backward as the plan's
 * contract states them (up to each row's block end), against attention computed
 * directly in double. The [T,T] buffers start as NaN, so a product that read a column
 * at or beyond a row's block end would spread NaN into the results, and one that wrote
 * there is caught by the NaN still being there afterwards. Forward (Y) and backward
 * (dQ, dK, dV) for several T, head sizes and row-block counts; and att_row_blocks'
 * choice. Runs without a GPU. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../offload/attention_plan.h"
#include "testutil.h"

enum { N_ROLES = ATT_DV + 1 };

/* Every role's buffer for BH heads (float, as FP32 stand-ins of the FP16 buffers). */
typedef struct buffers {
    float *r[N_ROLES];
    long long per_head[N_ROLES];
} buffers;

static double madds; /* multiply-adds the plans ran */

/* Uniform in [-1, 1) from a 64-bit LCG's top bits (test data only). */
static float uniform_pm1(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* C = alpha op(A) op(B), column-major, for each head: what cublasGemmStridedBatchedEx
 * computes with beta = 0. */
static void run_gemm(const att_gemm *g, buffers *b, int heads)
{
    for (int h = 0; h < heads; h++) {
        const float *A = b->r[g->a.role] + g->a.off + (long long)h * g->a.stride;
        const float *B = b->r[g->b.role] + g->b.off + (long long)h * g->b.stride;
        float *C = b->r[g->c.role] + g->c.off + (long long)h * g->c.stride;
        for (int j = 0; j < g->n; j++)
            for (int i = 0; i < g->m; i++) {
                double s = 0.0;
                for (int p = 0; p < g->k; p++) {
                    const double a = g->trans_a ? A[p + (long long)i * g->a.ld]
                                                : A[i + (long long)p * g->a.ld];
                    const double bb = g->trans_b ? B[j + (long long)p * g->b.ld]
                                                 : B[p + (long long)j * g->b.ld];
                    s += a * bb;
                }
                C[i + (long long)j * g->c.ld] = (float)(g->alpha * s);
            }
        madds += (double)g->m * g->n * g->k;
    }
}

static int run_plan(att_product what, buffers *b, int heads, int T, int hs, int nb)
{
    att_gemm g[ATT_MAX_ROW_BLOCKS];
    const int n = att_plan(g, what, T, hs, nb);
    if (n != nb) return -1;
    for (int i = 0; i < n; i++) run_gemm(&g[i], b, heads);
    return 0;
}

/* The softmax of the plan's contract, in place on P: row t's scores at t2 <= t become
 * probabilities, t < t2 < row end become 0, the rest is not touched. */
static void softmax_rows(float *P, int heads, int T, int nb)
{
    for (long long r = 0; r < (long long)heads * T; r++) {
        const int t = (int)(r % T), end = att_row_end(t, T, nb);
        float *p = P + r * T;
        double mx = -INFINITY, sum = 0.0;
        for (int c = 0; c <= t; c++) mx = fmax(mx, p[c]);
        for (int c = 0; c <= t; c++) sum += exp(p[c] - mx);
        for (int c = 0; c <= t; c++) p[c] = (float)(exp(p[c] - mx) / sum);
        for (int c = t + 1; c < end; c++) p[c] = 0.0f;
    }
}

/* dP becomes d(scores) = P (dP - sum P dP) up to the row end (0 past the diagonal). */
static void softmax_rows_backward(float *dP, const float *P, int heads, int T, int nb)
{
    for (long long r = 0; r < (long long)heads * T; r++) {
        const int t = (int)(r % T), end = att_row_end(t, T, nb);
        const float *p = P + r * T;
        float *d = dP + r * T;
        double dot = 0.0;
        for (int c = 0; c <= t; c++) dot += (double)p[c] * d[c];
        for (int c = 0; c <= t; c++) d[c] = (float)(p[c] * (d[c] - dot));
        for (int c = t + 1; c < end; c++) d[c] = 0.0f;
    }
}

static float *alloc_nan(size_t n)
{
    float *p = malloc(n * sizeof *p);
    if (!p) {
        fprintf(stderr, "test_attention_plan: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) p[i] = NAN;
    return p;
}

static double max_rel(const float *got, const double *want, size_t n)
{
    double scale = 1e-3, err = 0.0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        const double e = fabs((double)got[i] - want[i]);
        if (!(e <= err)) err = isnan(e) ? INFINITY : e;
    }
    return err / scale;
}

/* Direct causal attention per head in double: y, and dq, dk, dv for dy. */
static void reference(const float *q, const float *k, const float *v, const float *dy,
                      double *y, double *dq, double *dk, double *dv, int heads, int T, int hs)
{
    const double sc = 1.0 / sqrt((double)hs);
    double *p = malloc((size_t)T * sizeof *p), *dp = malloc((size_t)T * sizeof *dp);
    if (!p || !dp) exit(1);
    const size_t nh = (size_t)heads * T * hs;
    memset(dq, 0, nh * sizeof *dq);
    memset(dk, 0, nh * sizeof *dk);
    memset(dv, 0, nh * sizeof *dv);
    for (int h = 0; h < heads; h++) {
        const size_t o = (size_t)h * T * hs;
        for (int t = 0; t < T; t++) {
            double mx = -INFINITY, sum = 0.0, dot = 0.0;
            for (int c = 0; c <= t; c++) {
                double s = 0.0;
                for (int d = 0; d < hs; d++) s += (double)q[o + t * hs + d] * k[o + c * hs + d];
                p[c] = s * sc;
                mx = fmax(mx, p[c]);
            }
            for (int c = 0; c <= t; c++) sum += p[c] = exp(p[c] - mx);
            for (int c = 0; c <= t; c++) p[c] /= sum;
            for (int d = 0; d < hs; d++) {
                double s = 0.0;
                for (int c = 0; c <= t; c++) s += p[c] * v[o + c * hs + d];
                y[o + t * hs + d] = s;
            }
            for (int c = 0; c <= t; c++) {
                double s = 0.0;
                for (int d = 0; d < hs; d++) s += (double)dy[o + t * hs + d] * v[o + c * hs + d];
                dp[c] = s;
                dot += p[c] * s;
            }
            for (int c = 0; c <= t; c++) {
                const double ds = p[c] * (dp[c] - dot) * sc;
                for (int d = 0; d < hs; d++) {
                    dq[o + t * hs + d] += ds * k[o + c * hs + d];
                    dk[o + c * hs + d] += ds * q[o + t * hs + d];
                    dv[o + c * hs + d] += p[c] * dy[o + t * hs + d];
                }
            }
        }
    }
    free(p);
    free(dp);
}

static void check_plan(int heads, int T, int hs, int nb)
{
    char name[96];
    snprintf(name, sizeof name, "heads=%d T=%d hs=%d nb=%d", heads, T, hs, nb);
    const size_t nh = (size_t)heads * T * hs, ns = (size_t)heads * T * T;
    buffers b;
    for (int r = 0; r < N_ROLES; r++) {
        const int square = r == ATT_P || r == ATT_DP;
        b.per_head[r] = square ? (long long)T * T : (long long)T * hs;
        b.r[r] = alloc_nan(square ? ns : nh);
    }
    uint64_t seed = 0x5eed0000u + (uint64_t)T * 131u + (uint64_t)hs * 7u + (uint64_t)nb;
    const att_role inputs[] = {ATT_Q, ATT_K, ATT_V, ATT_DY};
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++)
        for (size_t e = 0; e < nh; e++) b.r[inputs[i]][e] = uniform_pm1(&seed);

    madds = 0.0;
    int bad = run_plan(ATT_SCORES, &b, heads, T, hs, nb);
    softmax_rows(b.r[ATT_P], heads, T, nb);
    bad |= run_plan(ATT_CONTEXT, &b, heads, T, hs, nb);
    bad |= run_plan(ATT_DPROBS, &b, heads, T, hs, nb);
    bad |= run_plan(ATT_DVALUES, &b, heads, T, hs, nb); /* reads P, so before dP changes */
    softmax_rows_backward(b.r[ATT_DP], b.r[ATT_P], heads, T, nb);
    bad |= run_plan(ATT_DQUERIES, &b, heads, T, hs, nb);
    bad |= run_plan(ATT_DKEYS, &b, heads, T, hs, nb);
    TU_CHECK(!bad, "%s: att_plan made nb products for each of the six", name);

    /* Nothing at or past a row's block end was written (it is still NaN). */
    size_t written_past = 0;
    for (long long r = 0; r < (long long)heads * T; r++)
        for (int c = att_row_end((int)(r % T), T, nb); c < T; c++)
            written_past += !isnan(b.r[ATT_P][r * T + c]) + !isnan(b.r[ATT_DP][r * T + c]);
    TU_CHECK(written_past == 0, "%s: nothing written past the row blocks' ends (%zu)", name,
             written_past);

    double *y = malloc(nh * sizeof *y), *dq = malloc(nh * sizeof *dq),
           *dk = malloc(nh * sizeof *dk), *dv = malloc(nh * sizeof *dv);
    if (!y || !dq || !dk || !dv) exit(1);
    reference(b.r[ATT_Q], b.r[ATT_K], b.r[ATT_V], b.r[ATT_DY], y, dq, dk, dv, heads, T, hs);
    const double ey = max_rel(b.r[ATT_Y], y, nh), eq = max_rel(b.r[ATT_DQ], dq, nh),
                 ek = max_rel(b.r[ATT_DK], dk, nh), ev = max_rel(b.r[ATT_DV], dv, nh);
    TU_CHECK(ey < 1e-5, "%s: Y matches direct attention (rel %.2e)", name, ey);
    TU_CHECK(eq < 1e-5, "%s: dQ matches (rel %.2e)", name, eq);
    TU_CHECK(ek < 1e-5, "%s: dK matches (rel %.2e)", name, ek);
    TU_CHECK(ev < 1e-5, "%s: dV matches (rel %.2e)", name, ev);

    /* The work: (nb+1)/(2nb) of the whole squares, 6 products of T*T*hs per head. */
    const double full = 6.0 * heads * (double)T * T * hs;
    const double want = (double)(nb + 1) / (2.0 * nb);
    TU_CHECK(fabs(madds / full - want) < 1e-12, "%s: the products did %.4f of the full "
             "squares' work (%.4f expected)", name, madds / full, want);

    free(y), free(dq), free(dk), free(dv);
    for (int r = 0; r < N_ROLES; r++) free(b.r[r]);
}

int main(void)
{
    /* The default row blocks. */
    const int Ts[] = {1024, 2048, 512, 256, 128, 64, 100, 520, 45, 1};
    const int want[] = {8, 8, 8, 4, 2, 1, 1, 1, 1, 1};
    for (size_t i = 0; i < sizeof Ts / sizeof Ts[0]; i++)
        TU_CHECK(att_row_blocks(Ts[i]) == want[i], "att_row_blocks(%d) = %d (want %d)", Ts[i],
                 att_row_blocks(Ts[i]), want[i]);
    att_gemm g[ATT_MAX_ROW_BLOCKS];
    TU_CHECK(att_plan(g, ATT_SCORES, 100, 8, 3) == 0, "a row-block count that does not "
             "divide T makes no plan");
    TU_CHECK(att_plan(g, ATT_SCORES, 128, 8, 16) == 0, "more than ATT_MAX_ROW_BLOCKS makes "
             "no plan");

    check_plan(3, 16, 4, 1);    /* one block: the whole square, as before row blocks */
    check_plan(2, 64, 8, 2);
    check_plan(2, 96, 12, 3);   /* a block count that is not a power of two */
    check_plan(2, 128, 16, 4);
    check_plan(1, 256, 8, 8);
    check_plan(2, 256, 64, att_row_blocks(256)); /* the default, GPT-2's head size */
    return tu_finish();
}
