/* test_simd — every SIMD path this CPU can run (simd.h) against the portable one, entry
 * by entry, at lengths that leave every kind of tail (1 .. 2 vectors + a few):
 *   (a) the elementwise entries give the same bits: add, acc, AdamW, unscale (and its
 *       inf/NaN flag wherever the bad value sits), FP16 conversion of all 65536 halves
 *       and of floats around every rounding boundary, BF16 conversion (ties, NaN
 *       payloads, infinities, subnormals);
 *   (b) the entries that sum in another order or use their own exp agree within a
 *       few float ulps of the row's scale: LayerNorm rows and columns, column sums, softmax and its
 *       backward, GELU and its gradient, cross-entropy, the squared norm; GELU's
 *       backward and forward in one pass give the bits of the two on each path;
 *   (c) the BF16 conversion is checked against its definition too (nearest even of
 *       the top 16 bits), not only against the portable loop;
 *   (d) attention's pieces (small products, transpose, softmax's log-sum-exp) against
 *       plain definitions on every path, the portable one included;
 *   (e) the one-pass epilogues of the BF16 products (simd_epilogues_bf16), where the
 *       CPU has them, give the bits of the passes they replace, special values and
 *       tails included.
 * Paths the CPU cannot run are named and skipped: their code is still compiled. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bf16_store.h"
#include "half.h"
#include "simd.h"
#include "testutil.h"

static uint64_t rs = 0x2545F4914F6CDD1Dull;
static uint32_t rnd32(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (uint32_t)(rs >> 16);
}
static float runif(float lo, float hi) { return lo + (hi - lo) * (float)(rnd32() >> 8) * 0x1p-24f; }

static float *frand(size_t n, float lo, float hi)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) exit(99);
    for (size_t i = 0; i < n; i++) p[i] = runif(lo, hi);
    return p;
}

static float *fdup(const float *a, size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) exit(99);
    memcpy(p, a, n * sizeof *p);
    return p;
}

/* largest |a-b| over the largest |a| (or floor): the error relative to the row's scale,
 * as another summation order perturbs every element by ulps of the sums it came from */
static double relerr(const float *a, const float *b, size_t n, double floor_)
{
    double e = 0.0, scale = floor_;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > e || d != d) e = d;
        if (fabs(a[i]) > scale) scale = fabs(a[i]);
    }
    return e / scale;
}

static const size_t lens[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 77, 100, 256, 1000};
#define NLENS (sizeof lens / sizeof lens[0])

static void test_elementwise(const simd_kernels *k)
{
    const simd_kernels *p = &simd_kernels_portable;
    int bad_add = 0, bad_acc = 0, bad_adamw = 0, bad_unscale = 0, bad_flag = 0;
    for (size_t li = 0; li < NLENS; li++) {
        const size_t n = lens[li];
        float *a = frand(n, -3, 3), *b = frand(n, -3, 3);
        float *o1 = frand(n, 0, 1), *o2 = fdup(o1, n);
        p->add(o1, a, b, n);
        k->add(o2, a, b, n);
        bad_add += memcmp(o1, o2, n * sizeof *o1) != 0;
        p->acc(o1, a, n);
        k->acc(o2, a, n);
        bad_acc += memcmp(o1, o2, n * sizeof *o1) != 0;

        simd_adamw_consts c = {.b1 = 0.9f, .b2 = 0.99f, .omb1 = 0.1f, .omb2 = 1.0f - 0.99f,
                               .step_size = 1e-3f, .inv_sqrt_c2 = 3.7f, .eps = 1e-8f,
                               .decay = 1e-4f, .grad_scale = 0.75f};
        float *p1 = frand(n, -1, 1), *m1 = frand(n, -0.1f, 0.1f), *v1 = frand(n, 0, 0.01f);
        float *p2 = fdup(p1, n), *m2 = fdup(m1, n), *v2 = fdup(v1, n);
        for (int step = 0; step < 3; step++) {
            p->adamw(p1, m1, v1, a, n, &c);
            k->adamw(p2, m2, v2, a, n, &c);
        }
        bad_adamw += memcmp(p1, p2, n * sizeof *p1) || memcmp(m1, m2, n * sizeof *m1) ||
                     memcmp(v1, v2, n * sizeof *v1);

        for (int acc = 0; acc < 2; acc++) {
            int f1 = p->unscale(o1, a, n, 1.0f / 1024, acc);
            int f2 = k->unscale(o2, a, n, 1.0f / 1024, acc);
            bad_unscale += f1 != 0 || f2 != 0 || memcmp(o1, o2, n * sizeof *o1) != 0;
        }
        /* an inf or a NaN at each position is found */
        const float bads[2] = {INFINITY, NAN};
        for (size_t at = 0; at < n; at++) {
            float keep = a[at];
            a[at] = bads[at & 1];
            bad_flag += k->unscale(o2, a, n, 0.5f, 0) != 1;
            a[at] = keep;
        }
        free(a), free(b), free(o1), free(o2), free(p1), free(m1), free(v1), free(p2);
        free(m2), free(v2);
    }
    TU_CHECK(bad_add == 0, "%s: add gives the portable bits (%d lengths differ)", k->name,
             bad_add);
    TU_CHECK(bad_acc == 0, "%s: acc gives the portable bits (%d lengths differ)", k->name,
             bad_acc);
    TU_CHECK(bad_adamw == 0, "%s: 3 AdamW steps give the portable bits (%d lengths differ)",
             k->name, bad_adamw);
    TU_CHECK(bad_unscale == 0, "%s: unscale (overwrite, accumulate) gives the portable bits "
             "(%d differ)", k->name, bad_unscale);
    TU_CHECK(bad_flag == 0, "%s: an inf or NaN anywhere is flagged (%d missed)", k->name,
             bad_flag);
}

static uint16_t bf16_reference(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    uint32_t lo = u & 0xffffu, hi = u >> 16;
    if (lo > 0x8000u || (lo == 0x8000u && (hi & 1u))) hi++;
    return (uint16_t)hi;
}

static void test_conversions(const simd_kernels *k)
{
    const simd_kernels *p = &simd_kernels_portable;
    enum { NH = 65536 };
    static uint16_t h[NH], h1[NH], h2[NH];
    static float f1[NH], f2[NH], xs[NH];
    for (int i = 0; i < NH; i++) h[i] = (uint16_t)i;
    p->half_to_float(f1, h, NH);
    k->half_to_float(f2, h, NH);
    int diff = 0;
    for (int i = 0; i < NH; i++) diff += memcmp(&f1[i], &f2[i], sizeof f1[i]) != 0;
    TU_CHECK(diff == 0, "%s: all 65536 halves to float give the portable bits (%d differ)",
             k->name, diff);

    /* floats at and around every half's rounding boundaries, plus random ones */
    for (int i = 0; i < NH; i++) {
        uint32_t u;
        memcpy(&u, &f1[i & 0xffff], sizeof u);
        u += (uint32_t)(i % 3) * 0x1000u - 0x1000u; /* below, at, above */
        memcpy(&xs[i], &u, sizeof u);
        if (i % 5 == 0) xs[i] = runif(-70000.f, 70000.f) * (float)(1 + (i % 7));
    }
    p->half_from_float(h1, xs, NH);
    k->half_from_float(h2, xs, NH);
    diff = 0;
    for (int i = 0; i < NH; i++) diff += h1[i] != h2[i];
    TU_CHECK(diff == 0, "%s: 65536 floats to half give the portable bits (%d differ)",
             k->name, diff);

    /* bfloat16: ties (low half 0x8000 on odd and even), NaN with low payload only,
     * infinities, subnormals, and random bits */
    for (int i = 0; i < NH; i++) {
        uint32_t u = rnd32() ^ ((uint32_t)rnd32() << 16);
        switch (i % 8) {
        case 0: u = (u & 0xffff0000u) | 0x8000u; break;
        case 1: u = 0x7f800001u | (u & 0x80000000u); break;
        case 2: u = (u & 0x80000000u) | 0x7f800000u; break;
        case 3: u &= 0x807fffffu; break;
        case 4: u = (u & 0xffff0000u) | 0x7fffu; break;
        default: break;
        }
        memcpy(&xs[i], &u, sizeof u);
    }
    p->bf16_from_float(h1, xs, NH);
    k->bf16_from_float(h2, xs, NH);
    int diff_p = 0, diff_ref = 0;
    for (int i = 0; i < NH; i++) {
        diff_p += h1[i] != h2[i];
        diff_ref += h2[i] != bf16_reference(xs[i]);
    }
    TU_CHECK(diff_p == 0, "%s: 65536 floats to bf16 give the portable bits (%d differ)",
             k->name, diff_p);
    TU_CHECK(diff_ref == 0, "%s: bf16 is the nearest even of the top 16 bits, NaN quiet "
             "(%d differ)", k->name, diff_ref);
    p->bf16_to_float(f1, h, NH);
    k->bf16_to_float(f2, h, NH);
    diff = 0;
    for (int i = 0; i < NH; i++) {
        uint32_t want = (uint32_t)h[i] << 16, got;
        memcpy(&got, &f2[i], sizeof got);
        diff += got != want || memcmp(&f1[i], &f2[i], sizeof got) != 0;
    }
    TU_CHECK(diff == 0, "%s: all 65536 bf16 to float are exact (%d differ)", k->name, diff);

    /* rounding in place: the two conversions in one, at every length's tail */
    memcpy(f1, xs, sizeof f1);
    k->bf16_round(f1, NH - 3);
    diff = 0;
    for (int i = 0; i < NH; i++) {
        uint32_t want, got;
        memcpy(&got, &f1[i], sizeof got);
        memcpy(&want, &xs[i], sizeof want);
        if (i < NH - 3) want = (uint32_t)bf16_reference(xs[i]) << 16;
        diff += got != want;
    }
    TU_CHECK(diff == 0, "%s: bf16_round in place is bf16_from_float then bf16_to_float, "
             "and stops at n (%d differ)", k->name, diff);

    /* from one array into another: the same bits, the source untouched, dst past n too */
    static float src[NH];
    memcpy(src, xs, sizeof src);
    memset(f2, 0x5a, sizeof f2);
    k->bf16_round_to(f2, src, NH - 3);
    diff = memcmp(src, xs, sizeof src) != 0;
    for (int i = 0; i < NH; i++) {
        uint32_t want = 0x5a5a5a5au, got;
        memcpy(&got, &f2[i], sizeof got);
        if (i < NH - 3) memcpy(&want, &f1[i], sizeof want);
        diff += got != want;
    }
    TU_CHECK(diff == 0, "%s: bf16_round_to gives bf16_round's bits in another array and "
             "stops at n (%d differ)", k->name, diff);
}

/* Row kernels: within a few ulps of the portable path at every tail length. */
static void test_rows(const simd_kernels *k)
{
    const simd_kernels *p = &simd_kernels_portable;
    double e_ln = 0, e_lnb = 0, e_sm = 0, e_smb = 0, e_gelu = 0, e_xent = 0, e_sq = 0;
    int gelu_both_same = 1;
    for (size_t li = 0; li < NLENS; li++) {
        const int n = (int)lens[li];
        float *x = frand((size_t)n, -2, 2), *w = frand((size_t)n, 0.5f, 1.5f);
        float *b = frand((size_t)n, -0.5f, 0.5f), *d = frand((size_t)n, -1, 1);
        float *o1 = frand((size_t)n, 0, 0), *o2 = fdup(o1, (size_t)n);
        float m1, r1, m2, r2;
        p->ln_fwd_row(o1, &m1, &r1, x, w, b, n);
        k->ln_fwd_row(o2, &m2, &r2, x, w, b, n);
        double e = relerr(o1, o2, (size_t)n, 1e-3);
        /* the mean of values in [-2, 2] can be near 0: its error is measured against
         * the values' scale (2), as the sums it comes from are */
        e = fmax(e, fmax(tu_relerr(m1, m2, 2.0), tu_relerr(r1, r2, 1e-3)));
        e_ln = fmax(e_ln, e);
        memset(o1, 0, (size_t)n * sizeof *o1);
        memset(o2, 0, (size_t)n * sizeof *o2);
        p->ln_bwd_row(o1, d, x, w, m1, r1, n);
        k->ln_bwd_row(o2, d, x, w, m1, r1, n);
        e_lnb = fmax(e_lnb, relerr(o1, o2, (size_t)n, 1e-3));

        /* softmax over the first len = n - n/3 entries of a row of width n */
        const int len = n - n / 3;
        float *s1 = fdup(x, (size_t)n), *s2 = fdup(x, (size_t)n);
        p->softmax_row(s1, len, n);
        k->softmax_row(s2, len, n);
        e_sm = fmax(e_sm, relerr(s1, s2, (size_t)n, 1e-6));
        float *g1 = fdup(d, (size_t)n), *g2 = fdup(d, (size_t)n);
        p->softmax_bwd_row(g1, s1, len, n);
        k->softmax_bwd_row(g2, s1, len, n);
        e_smb = fmax(e_smb, relerr(g1, g2, (size_t)n, 1e-6));

        /* GELU over [-10, 10] (both sides of the cut at -7.35) */
        float *gx = frand((size_t)n, -10, 10);
        p->gelu_fwd(o1, gx, (size_t)n);
        k->gelu_fwd(o2, gx, (size_t)n);
        e_gelu = fmax(e_gelu, relerr(o1, o2, (size_t)n, 1e-6));
        /* from zero: accumulated onto the forward output, the sums would cancel and the
         * check would measure that cancellation rather than the kernels */
        memset(o1, 0, (size_t)n * sizeof *o1);
        memset(o2, 0, (size_t)n * sizeof *o2);
        p->gelu_bwd(o1, gx, d, (size_t)n);
        k->gelu_bwd(o2, gx, d, (size_t)n);
        e_gelu = fmax(e_gelu, relerr(o1, o2, (size_t)n, 1e-6));
        /* both at once: the bits of the two calls, on this path and the portable one
         * (accumulated onto x, so the add's rounding is seen) */
        for (int pi = 0; pi < 2; pi++) {
            const simd_kernels *q = pi ? p : k;
            float *b1 = fdup(x, (size_t)n), *b2 = fdup(x, (size_t)n), *f1 = fdup(x, (size_t)n),
                  *f2 = fdup(x, (size_t)n);
            q->gelu_bwd(b1, gx, d, (size_t)n);
            q->gelu_fwd(f1, gx, (size_t)n);
            q->gelu_bwd_fwd(b2, f2, gx, d, (size_t)n);
            gelu_both_same &= memcmp(b1, b2, (size_t)n * sizeof *b1) == 0 &&
                              memcmp(f1, f2, (size_t)n * sizeof *f1) == 0;
            free(b1), free(b2), free(f1), free(f2);
        }

        /* cross-entropy: loss and gradient */
        float *l1 = fdup(x, (size_t)n), *l2 = fdup(x, (size_t)n);
        const int target = n / 2;
        float a1 = p->xent_row(l1, l1, target, n, 0.25f);
        float a2 = k->xent_row(l2, l2, target, n, 0.25f);
        float a3 = k->xent_row(NULL, x, target, n, 0.f);
        e_xent = fmax(e_xent, fmax(tu_relerr(a1, a2, 1e-6), tu_relerr(a1, a3, 1e-6)));
        e_xent = fmax(e_xent, relerr(l1, l2, (size_t)n, 1e-6));

        e_sq = fmax(e_sq, tu_relerr(p->sumsq(x, (size_t)n), k->sumsq(x, (size_t)n), 1e-30));
        free(x), free(w), free(b), free(d), free(o1), free(o2), free(s1), free(s2);
        free(g1), free(g2), free(gx), free(l1), free(l2);
    }
    TU_CHECK(e_ln < 2e-6, "%s: LayerNorm row forward vs portable %.2e", k->name, e_ln);
    TU_CHECK(e_lnb < 1e-5, "%s: LayerNorm row backward vs portable %.2e", k->name, e_lnb);
    TU_CHECK(e_sm < 2e-6, "%s: softmax row vs portable %.2e", k->name, e_sm);
    TU_CHECK(e_smb < 1e-5, "%s: softmax backward row vs portable %.2e", k->name, e_smb);
    TU_CHECK(e_gelu < 2e-6, "%s: GELU and its gradient vs portable %.2e", k->name, e_gelu);
    TU_CHECK(gelu_both_same, "%s and portable: gelu_bwd_fwd gives the bits of gelu_bwd and "
             "gelu_fwd", k->name);
    TU_CHECK(e_xent < 2e-6, "%s: cross-entropy loss and gradient vs portable %.2e", k->name,
             e_xent);
    TU_CHECK(e_sq < 1e-12, "%s: sum of squares (double) vs portable %.2e", k->name, e_sq);

    /* column blocks: a full block of 64 and a narrow last one, over 37 rows */
    const size_t N = 37;
    const int C = 64 + 13;
    float *x = frand(N * C, -2, 2), *d = frand(N * C, -1, 1), *mean = frand(N, -0.1f, 0.1f);
    float *rstd = frand(N, 0.5f, 2);
    float dw1[64 + 13] = {0}, db1[64 + 13] = {0}, dw2[64 + 13] = {0}, db2[64 + 13] = {0};
    float cs1[64 + 13] = {0}, cs2[64 + 13] = {0};
    for (int c0 = 0; c0 < C; c0 += SIMD_COL_BLOCK) {
        int wd = C - c0 < SIMD_COL_BLOCK ? C - c0 : SIMD_COL_BLOCK;
        p->ln_wb_cols(dw1, db1, d, x, mean, rstd, N, C, c0, wd);
        k->ln_wb_cols(dw2, db2, d, x, mean, rstd, N, C, c0, wd);
        p->colsum(cs1, x, N, (size_t)C, c0, wd);
        k->colsum(cs2, x, N, (size_t)C, c0, wd);
    }
    double ec = fmax(relerr(dw1, dw2, (size_t)C, 1e-3), relerr(db1, db2, (size_t)C, 1e-3));
    ec = fmax(ec, relerr(cs1, cs2, (size_t)C, 1e-3));
    TU_CHECK(ec < 1e-5, "%s: LayerNorm weight/bias and bias column sums vs portable %.2e",
             k->name, ec);
    free(x), free(d), free(mean), free(rstd);
}

/* (d) attention's pieces (attention_cpu.c) against plain definitions, every path the
 * portable one included: gemm_tile over every edge of rows (1 .. 2 tiles + 1) and
 * columns (1 .. 2 chunks + 1), A either way round, alpha, accumulate, with C's
 * neighbours untouched; the transpose (exact); softmax's log-sum-exp, and the row
 * rebuilt from it. */
static void test_attention_pieces(const simd_kernels *k)
{
    static const int ns[] = {1, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 127, 130};
    static const int ks[] = {1, 5, 64};
    double e_tile = 0.0;
    int outside = 0, cases = 0;
    for (int m = 1; m <= 2 * k->tile_rows + 1; m++)
        for (size_t in = 0; in < sizeof ns / sizeof ns[0]; in++)
            for (size_t ik = 0; ik < sizeof ks / sizeof ks[0]; ik++) {
                const int n = ns[in], kk = ks[ik], acc = (m + (int)in) & 1,
                          trans = (m + (int)ik) & 1;
                const size_t lda = (size_t)(trans ? m : kk) + 3, ldb = (size_t)n + 5,
                             ldc = (size_t)n + 9;
                float *a = frand(lda * (size_t)(trans ? kk : m), -1, 1);
                float *b = frand(ldb * (size_t)kk, -1, 1);
                float *c = frand(ldc * (size_t)(m + 1), -1, 1), *c0 = fdup(c, ldc * (m + 1));
                const ptrdiff_t rs_ = trans ? 1 : (ptrdiff_t)lda, cs_ = trans ? (ptrdiff_t)lda : 1;
                const float alpha = acc ? 0.75f : 1.0f;
                k->gemm_tile(m, n, kk, alpha, a, rs_, cs_, b, ldb, c, ldc, acc);
                for (int i = 0; i <= m; i++)
                    for (size_t j = 0; j < ldc; j++) {
                        const size_t at = (size_t)i * ldc + j;
                        if (i == m || j >= (size_t)n) {
                            outside += memcmp(&c[at], &c0[at], sizeof *c) != 0;
                            continue;
                        }
                        double want = 0.0, mag = 0.0;
                        for (int q = 0; q < kk; q++) {
                            const double t = (double)a[i * rs_ + q * cs_] * b[(size_t)q * ldb + j];
                            want += t;
                            mag += fabs(t);
                        }
                        want = alpha * want + (acc ? c0[at] : 0.0);
                        mag = alpha * mag + (acc ? fabs(c0[at]) : 0.0) + 1e-30;
                        e_tile = fmax(e_tile, fabs(c[at] - want) / mag);
                    }
                cases++;
                free(a), free(b), free(c), free(c0);
            }
    /* k + 2 roundings of at most 2^-24 each (the sum, alpha, the add) */
    TU_CHECK(e_tile < 67 * 0x1p-24, "%s: gemm_tile, %d products within %.2e of the summed "
             "terms' scale", k->name, cases, e_tile);
    TU_CHECK(outside == 0, "%s: gemm_tile writes nothing outside C's block (%d)", k->name,
             outside);

    int same = 1;
    static const int shapes[][2] = {{1, 1}, {7, 9}, {8, 8}, {16, 64}, {33, 17}, {256, 64}};
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        const int rows = shapes[t][0], cols = shapes[t][1];
        const size_t lds = (size_t)cols + 7, ldd = (size_t)rows + 3;
        float *src = frand(lds * rows, -1, 1), *dst = frand(ldd * (size_t)(cols + 1), -1, 1);
        float *dst0 = fdup(dst, ldd * (size_t)(cols + 1));
        k->transpose(dst, ldd, src, lds, rows, cols);
        for (int c = 0; c <= cols; c++)
            for (size_t r = 0; r < ldd; r++) {
                const float want = c < cols && r < (size_t)rows ? src[r * lds + (size_t)c]
                                                                : dst0[(size_t)c * ldd + r];
                same &= memcmp(&want, &dst[(size_t)c * ldd + r], sizeof want) == 0;
            }
        free(src), free(dst), free(dst0);
    }
    TU_CHECK(same, "%s: transpose moves every value and nothing else (6 shapes, 1 x 1 to "
             "256 x 64)", k->name);

    double e_lse = 0.0, e_back = 0.0;
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        const int n = (int)lens[i], len = n - n / 3 > 0 ? n - n / 3 : 1;
        float *x = frand((size_t)n, -8, 8), *s1 = fdup(x, (size_t)n), *s2 = fdup(x, (size_t)n);
        double mx = -1e300, sum = 0.0;
        for (int j = 0; j < len; j++) mx = fmax(mx, x[j]);
        for (int j = 0; j < len; j++) sum += exp(x[j] - mx);
        const float lse = k->softmax_row(s1, len, n);
        e_lse = fmax(e_lse, fabs(lse - (mx + log(sum))) / (fabs(mx) + 1.0));
        if (n > len) s2[len] = 99.0f; /* past len: must become 0 */
        k->softmax_row_lse(s2, len, n, lse);
        e_back = fmax(e_back, relerr(s1, s2, (size_t)n, 1e-6));
        free(x), free(s1), free(s2);
    }
    TU_CHECK(e_lse < 1e-6, "%s: softmax row's log-sum-exp vs double %.2e", k->name, e_lse);
    TU_CHECK(e_back < 1e-5, "%s: the row rebuilt from its log-sum-exp vs the softmax %.2e",
             k->name, e_back);
}

/* a value for (e): mostly ordinary, one in eight special (zeros, infinities, NaN, a
 * denormal, GELU's cut near -7.35, a huge one), either sign */
static float gelu_input(void)
{
    static const float special[] = {0.0f, INFINITY, NAN, 1e-40f, 7.3f, 7.4f, 3e38f, 1e-3f};
    const float sign = (rnd32() & 1) ? -1.0f : 1.0f;
    if (rnd32() % 8) return runif(-9.0f, 9.0f);
    return sign * special[rnd32() % (sizeof special / sizeof special[0])];
}

/* (e) against the passes of gemm_bf16_epilogue.c on this path: acc of the bias,
 * gelu_bwd_fwd on dout = 1 into zeros (or gelu_fwd alone) and bf16_store of both; the
 * widened slope times dout and bf16_store */
static void test_epilogues_bf16(void)
{
    const simd_epilogues_bf16 *g = simd_epilogues_bf16_get();
    if (!g) {
        printf("     one-pass BF16 epilogues: not on this CPU or path (compiled only)\n");
        return;
    }
    const simd_kernels *k = simd_kernels_get();
    int fwd_same = 1, bwd_same = 1, plain_same = 1;
    for (int n = 1; n <= 3 * 16 + 5; n++) {
        const size_t un = (size_t)n;
        float *c = malloc(un * sizeof *c), *bias = malloc(un * sizeof *bias),
              *ref = malloc(un * sizeof *ref), *gx = malloc(un * sizeof *gx),
              *d = calloc(un, sizeof *d), *dout = malloc(un * sizeof *dout),
              *ones = malloc(un * sizeof *ones);
        uint16_t *pre = malloc(un * 2), *gel = malloc(un * 2), *pre_r = malloc(un * 2),
                 *gel_r = malloc(un * 2), *x16 = malloc(un * 2);
        if (!c || !bias || !ref || !gx || !d || !dout || !ones || !pre || !gel || !pre_r ||
            !gel_r || !x16)
            exit(99);
        for (int i = 0; i < n; i++) {
            c[i] = gelu_input(), bias[i] = gelu_input(), dout[i] = gelu_input();
            x16[i] = bf16_store_one(gelu_input());
        }
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            memcpy(ref, c, un * sizeof *ref);
            if (with_bias) k->acc(ref, bias, un);
            for (int i = 0; i < n; i++) d[i] = 0.0f, ones[i] = 1.0f;
            k->gelu_bwd_fwd(d, gx, ref, ones, un);
            bf16_store(pre_r, d, un);
            bf16_store(gel_r, gx, un);
            g->gelu_fwd(gel, pre, c, with_bias ? bias : NULL, un);
            fwd_same &= memcmp(pre, pre_r, un * 2) == 0 && memcmp(gel, gel_r, un * 2) == 0;
            k->gelu_fwd(gx, ref, un); /* without the slope: GELU alone */
            bf16_store(gel_r, gx, un);
            memset(gel, 0xff, un * 2);
            g->gelu_fwd(gel, NULL, c, with_bias ? bias : NULL, un);
            fwd_same &= memcmp(gel, gel_r, un * 2) == 0;
        }
        for (int with_bias = 0; with_bias < 2; with_bias++) { /* the plain ones */
            memcpy(ref, c, un * sizeof *ref);
            if (with_bias) k->acc(ref, bias, un);
            bf16_store(pre_r, ref, un);
            g->bias_store(pre, c, with_bias ? bias : NULL, un);
            plain_same &= memcmp(pre, pre_r, un * 2) == 0;
            k->acc(ref, dout, un); /* dout stands in for the residual */
            memcpy(gx, c, un * sizeof *gx);
            g->bias_residual(gx, with_bias ? bias : NULL, dout, un);
            plain_same &= memcmp(gx, ref, un * sizeof *gx) == 0;
        }
        bf16_widen(ref, x16, un); /* x16: the slope */
        for (int i = 0; i < n; i++) d[i] = ref[i] * dout[i];
        bf16_store(pre_r, d, un);
        g->gelu_bwd(pre, x16, dout, un);
        bwd_same &= memcmp(pre, pre_r, un * 2) == 0;
        free(c), free(bias), free(ref), free(gx), free(d), free(dout), free(ones);
        free(pre), free(gel), free(pre_r), free(gel_r), free(x16);
    }
    TU_CHECK(fwd_same, "%s: the one-pass BF16 GELU forward gives the bits of the bias add, "
             "gelu_bwd_fwd on dout = 1 and bf16_store of GELU and its slope, or of gelu_fwd "
             "alone without the slope (lengths 1 .. 53, special values)", k->name);
    TU_CHECK(bwd_same, "%s: the one-pass BF16 GELU backward gives the bits of the widened "
             "slope times dout and bf16_store (lengths 1 .. 53, special values)", k->name);
    TU_CHECK(plain_same, "%s: the one-pass bias add into BF16 storage and bias-and-residual "
             "add give the bits of acc and bf16_store, and of two accs (lengths 1 .. 53, "
             "special values)", k->name);
}

int main(void)
{
    const enum simd_path best = simd_best_path();
    const char *const names[] = {"", "portable", "avx2", "avx512"};
    printf("     widest path on this CPU: %s\n", names[best]);
    for (int path = SIMD_AVX2; path <= SIMD_AVX512; path++) {
        if (path > (int)best) {
            printf("     %s: not run (this CPU lacks it); compiled only\n", names[path]);
            continue;
        }
        const simd_kernels *k = simd_kernels_of((enum simd_path)path);
        test_elementwise(k);
        test_conversions(k);
        test_rows(k);
        test_attention_pieces(k);
    }
    test_epilogues_bf16();
    TU_CHECK(simd_set_path(SIMD_PORTABLE) == SIMD_PORTABLE && !simd_epilogues_bf16_get(),
             "no one-pass BF16 epilogues on the portable path");
    simd_set_path(SIMD_AUTO);
    test_attention_pieces(&simd_kernels_portable);
    /* the portable path itself: bf16 against its definition */
    test_conversions(&simd_kernels_portable);
    TU_CHECK(simd_set_path(SIMD_PORTABLE) == SIMD_PORTABLE &&
                 simd_kernels_get() == &simd_kernels_portable,
             "the portable path can be forced");
    TU_CHECK(simd_set_path(SIMD_AUTO) == best, "auto gives the widest path (%s)",
             simd_kernels_get()->name);
    printf("%d checks, %d failed\n", tu_checks, tu_failures);
    return tu_failures ? 1 : 0;
}
