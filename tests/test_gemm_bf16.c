/* test_gemm_bf16 — the BF16 matrix product (src/gemm_bf16.h) against a reference in
 * double precision computed here from the operands rounded to bfloat16:
 *   (a) every path the CPU runs (AVX512_BF16 where it has it, the portable path
 *       always), all four transposition cases, shapes that leave every kind of edge
 *       (1 x 1 x 1, one element past a micro-tile, odd K, K past one depth block,
 *       N past one column block), padded leading dimensions, alpha and beta;
 *   (b) beta = 0 never reads C (C filled with NaN), and the elements around C's block
 *       are never written;
 *   (c) a product called from inside a parallel region (as attention calls it, one
 *       head per thread) gives the bits of the same product called outside it (the
 *       portable path: within FP32 rounding, as OpenBLAS may take another kernel);
 *   (d) the two paths agree within FP32 summation order;
 *   (e) rounding really is to bfloat16: an operand that bfloat16 cannot hold changes
 *       the product as the reference says (the FP32 product would differ).
 * Errors are measured against the reference scaled by sum_k |a_k b_k| per element, so
 * they are in units of FP32 rounding of the sums. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "../src/cpu_features.h"
#include "../src/gemm_bf16.h"
#include "testutil.h"

static uint64_t rs = 88172645463325252ull;
static float runif(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (float)((rs >> 40) * 0x1p-24) - 0.5f;
}

static double bf16_value(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

typedef struct {
    int M, N, K, ta, tb, lda, ldb, ldc;
    float alpha, beta;
    float *A, *B, *C0;
} prob;

static prob make(int M, int N, int K, int ta, int tb, float alpha, float beta)
{
    prob p = {M, N, K, ta, tb, (ta ? M : K) + 3, (tb ? K : N) + 5, N + 7, alpha, beta,
              NULL, NULL, NULL};
    size_t na = (size_t)(ta ? K : M) * p.lda, nb = (size_t)(tb ? N : K) * p.ldb,
           nc = (size_t)M * p.ldc;
    p.A = malloc((na ? na : 1) * sizeof(float));
    p.B = malloc((nb ? nb : 1) * sizeof(float));
    p.C0 = malloc(nc * sizeof(float));
    if (!p.A || !p.B || !p.C0) exit(99);
    for (size_t i = 0; i < na; i++) p.A[i] = runif();
    for (size_t i = 0; i < nb; i++) p.B[i] = runif();
    for (size_t i = 0; i < nc; i++) p.C0[i] = beta == 0.0f ? NAN : runif();
    return p;
}

static void drop(prob *p)
{
    free(p->A);
    free(p->B);
    free(p->C0);
}

static float *run(const prob *p)
{
    size_t nc = (size_t)p->M * p->ldc;
    float *C = malloc(nc * sizeof *C);
    if (!C) exit(99);
    memcpy(C, p->C0, nc * sizeof *C);
    gemm_bf16(p->ta, p->tb, p->M, p->N, p->K, p->alpha, p->A, p->lda, p->B, p->ldb, p->beta,
              C, p->ldc);
    return C;
}

/* largest error in units of the element's sum of |terms|; untouched padding checked */
static double error_of(const prob *p, const float *C, int *padding_bad)
{
    double worst = 0.0;
    *padding_bad = 0;
    for (int i = 0; i < p->M; i++) {
        for (int j = 0; j < p->N; j++) {
            double r = 0.0, mag = 0.0;
            for (int k = 0; k < p->K; k++) {
                double a = bf16_value(p->ta ? p->A[(size_t)k * p->lda + i]
                                            : p->A[(size_t)i * p->lda + k]);
                double b = bf16_value(p->tb ? p->B[(size_t)j * p->ldb + k]
                                            : p->B[(size_t)k * p->ldb + j]);
                r += a * b;
                mag += fabs(a * b);
            }
            double c0 = p->beta == 0.0f ? 0.0 : (double)p->C0[(size_t)i * p->ldc + j];
            double want = p->alpha * r + p->beta * c0;
            double scale = fabs(p->alpha) * mag + fabs(p->beta * c0) + 1e-30;
            double e = fabs(want - C[(size_t)i * p->ldc + j]) / scale;
            if (e > worst || e != e) worst = e;
        }
        for (int j = p->N; j < p->ldc; j++) {
            float a = C[(size_t)i * p->ldc + j], b = p->C0[(size_t)i * p->ldc + j];
            *padding_bad += memcmp(&a, &b, sizeof a) != 0;
        }
    }
    return worst;
}

static void check_path(const char *path)
{
    static const int shapes[][3] = {{1, 1, 1},     {14, 32, 2},  {15, 33, 3},   {29, 70, 31},
                                    {100, 37, 333}, {57, 129, 65}, {64, 256, 64}, {3, 2100, 17},
                                    {130, 16, 513}};
    const int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
    double worst = 0.0;
    int pad = 0, cases = 0;
    for (int s = 0; s < nshapes; s++)
        for (int t = 0; t < 4; t++) {
            float beta = (s + t) % 3 == 0 ? 0.0f : 0.5f;
            prob p = make(shapes[s][0], shapes[s][1], shapes[s][2], t & 1, t >> 1, 1.5f, beta);
            float *C = run(&p);
            int bad;
            double e = error_of(&p, C, &bad);
            if (e > 1e-5)
                printf("     %s: M=%d N=%d K=%d ta=%d tb=%d beta=%g: error %.2e\n", path,
                       p.M, p.N, p.K, p.ta, p.tb, (double)beta, e);
            worst = fmax(worst, e);
            pad += bad;
            cases++;
            free(C);
            drop(&p);
        }
    TU_CHECK(worst < 1e-5, "%s: %d products within %.1e of the bf16 reference (units of "
             "the summed terms)", path, cases, worst);
    TU_CHECK(pad == 0, "%s: nothing outside C's block written (%d elements)", path, pad);
}

/* (c) inside a parallel region, each thread its own product, against the same outside */
static void check_nested(const char *path)
{
    enum { P = 4 };
    prob p[P];
    float *outside[P], *inside[P];
    for (int i = 0; i < P; i++) {
        p[i] = make(64 + i, 96 - 7 * i, 64, i & 1, (i >> 1) & 1, 1.0f, i == 0 ? 0.0f : 1.0f);
        outside[i] = run(&p[i]);
    }
#pragma omp parallel for schedule(static)
    for (int i = 0; i < P; i++) inside[i] = run(&p[i]);
    int same = 1;
    double e = 0.0;
    for (int i = 0; i < P; i++) {
        const size_t n = (size_t)p[i].M * p[i].ldc;
        same &= memcmp(outside[i], inside[i], n * sizeof(float)) == 0;
        double d = 0.0, mx = 1e-30; /* normwise: the largest difference / largest value */
        for (size_t j = 0; j < n; j++)
            if (j % (size_t)p[i].ldc < (size_t)p[i].N) {
                d = fmax(d, fabs((double)outside[i][j] - inside[i][j]));
                mx = fmax(mx, fabs((double)outside[i][j]));
            }
        e = fmax(e, d / mx);
        free(outside[i]);
        free(inside[i]);
        drop(&p[i]);
    }
    if (strcmp(path, "portable") == 0) /* OpenBLAS may take another kernel on one thread */
        TU_CHECK(e < 1e-5, "%s: products inside a parallel region within %.1e of the same "
                 "products outside it", path, e);
    else
        TU_CHECK(same, "%s: products inside a parallel region give the bits of the same "
                 "products outside it", path);
}

int main(void)
{
#ifdef _OPENMP
    omp_set_num_threads(2);
#endif
    TU_CHECK(gemm_bf16_init(2) == 0, "buffers reserved for 2 threads");
    const int fast = cpu_isa_level() >= CPU_ISA_AVX512_BF16;
    printf("     this CPU: %s; path chosen: %s\n", cpu_isa_name(cpu_isa_level()),
           gemm_bf16_path_name());
    TU_CHECK(strcmp(gemm_bf16_path_name(), fast ? "avx512-bf16" : "portable") == 0,
             "the path follows the CPU (%s)", gemm_bf16_path_name());
    if (fast) {
        check_path("avx512-bf16");
        check_nested("avx512-bf16");
    } else {
        printf("     avx512-bf16: not run (this CPU lacks AVX512_BF16); compiled only\n");
    }
    gemm_bf16_force_portable(1);
    TU_CHECK(strcmp(gemm_bf16_path_name(), "portable") == 0, "the portable path can be "
             "forced");
    check_path("portable");
    check_nested("portable");

    /* (d) the two paths on a model shape */
    if (fast) {
        prob p = make(256, 384, 384, 0, 1, 1.0f, 0.0f);
        gemm_bf16_force_portable(0);
        float *a = run(&p);
        gemm_bf16_force_portable(1);
        float *b = run(&p);
        double e = 0, mx = 0;
        for (size_t i = 0; i < (size_t)p.M * p.ldc; i++)
            if ((size_t)(i % p.ldc) < (size_t)p.N) {
                e = fmax(e, fabs((double)a[i] - b[i]));
                mx = fmax(mx, fabs((double)b[i]));
            }
        TU_CHECK(e / mx < 1e-5, "avx512-bf16 vs portable on 256x384x384: %.2e of the largest",
                 e / mx);
        free(a);
        free(b);
        drop(&p);
    }

    /* (e) 1 + 2^-10 is not a bfloat16 (8 bits of mantissa): the product sees 1 */
    for (int f = 0; f <= fast; f++) {
        gemm_bf16_force_portable(!f);
        float a = 1.0f + 0x1p-10f, b = 3.0f, c = 0.0f;
        gemm_bf16(0, 0, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1);
        TU_CHECK(c == 3.0f, "%s: (1 + 2^-10) x 3 = %.9g, the product of bf16 operands",
                 gemm_bf16_path_name(), (double)c);
    }
    gemm_bf16_free();
    printf("%d checks, %d failed\n", tu_checks, tu_failures);
    return tu_failures ? 1 : 0;
}
