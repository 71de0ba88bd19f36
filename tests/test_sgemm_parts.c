/* test_sgemm_parts — the matrix products cut into pieces by gentrain (sgemm_parts.h):
 *  (a) the grid: one piece below the work floor and on one thread; rows alone for the
 *      GPT-2 124M shape's products on 2 threads; columns when the rows are too few; a
 *      square grid where rows alone would pack all of op(B) again many times;
 *  (b) every product (each transpose, beta 0 and 1, padded leading dimensions, cuts of
 *      rows, of columns and of both) against a double-precision reference;
 *  (c) the same bits on a team of 1, 2 and 3 threads (and from inside a parallel
 *      region) while the pieces are cut for 3: a thread team that shrinks never changes
 *      a result (tests/test_team.sh checks the same on a whole training run);
 *  (d) on OpenBLAS's AVX2 cores (Haswell, Zen), rows cut at multiples of 48 give the
 *      bits of one call over all of C, so a product has the same bits for any count of
 *      pieces (the header's claim; OpenBLAS's own threads did not). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <cblas.h>

#include "blas_core.h"
#include "sgemm_parts.h"
#include "testutil.h"
#include "util.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float frand(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) & 0xFFFFFF) / 16777216.0f - 0.5f;
}

static float *xalloc(size_t n)
{
    float *p = malloc(n * sizeof *p);
    if (!p) {
        perror("malloc");
        exit(99);
    }
    for (size_t i = 0; i < n; i++) p[i] = frand();
    return p;
}

typedef struct {
    int ta, tb, M, N, K, pad;
    float beta;
} prod;

/* C = op(A) op(B) + beta C0 with the pieces cut for `parts` and a team of `team` */
static float *run(const prod *p, const float *A, const float *B, const float *C0, int parts,
                  int team, int nested)
{
    const int lda = (p->ta ? p->M : p->K) + p->pad, ldb = (p->tb ? p->K : p->N) + p->pad;
    const int ldc = p->N + p->pad;
    float *C = malloc((size_t)p->M * ldc * sizeof *C);
    if (!C) exit(99);
    memcpy(C, C0, (size_t)p->M * ldc * sizeof *C);
    gt_set_threads(parts);
    gt_set_team_threads(team);
#ifdef _OPENMP
    if (omp_get_max_threads() != team || gt_product_parts() != parts) {
        printf("FAIL: the team has %d threads (want %d), the products %d pieces (want %d)\n",
               omp_get_max_threads(), team, gt_product_parts(), parts);
        exit(1);
    }
#endif
    if (nested) {
#pragma omp parallel num_threads(2)
        {
#pragma omp single
            sgemm_parts(p->ta, p->tb, p->M, p->N, p->K, 1.0f, A, lda, B, ldb, p->beta, C, ldc);
        }
    } else {
        sgemm_parts(p->ta, p->tb, p->M, p->N, p->K, 1.0f, A, lda, B, ldb, p->beta, C, ldc);
    }
    return C;
}

static void check_product(const prod *p)
{
    const int lda = (p->ta ? p->M : p->K) + p->pad, ldb = (p->tb ? p->K : p->N) + p->pad;
    const int ldc = p->N + p->pad;
    float *A = xalloc((size_t)(p->ta ? p->K : p->M) * lda);
    float *B = xalloc((size_t)(p->tb ? p->N : p->K) * ldb);
    float *C0 = xalloc((size_t)p->M * ldc);
    int pr, pc;
    sgemm_parts_grid(p->M, p->N, p->K, 3, &pr, &pc);
    char name[120];
    snprintf(name, sizeof name, "%s%s %dx%dx%d beta %g pad %d (grid %dx%d for 3)",
             p->ta ? "A^T" : "A", p->tb ? "B^T" : "B", p->M, p->N, p->K, (double)p->beta,
             p->pad, pr, pc);

    float *c3 = run(p, A, B, C0, 3, 3, 0);
    double worst = 0;
    for (int i = 0; i < p->M; i++)
        for (int j = 0; j < p->N; j++) {
            double s = p->beta * (double)C0[(size_t)i * ldc + j];
            for (int l = 0; l < p->K; l++)
                s += (double)(p->ta ? A[(size_t)l * lda + i] : A[(size_t)i * lda + l]) *
                     (p->tb ? B[(size_t)j * ldb + l] : B[(size_t)l * ldb + j]);
            const double e = tu_relerr(c3[(size_t)i * ldc + j], s, 1.0);
            if (e > worst) worst = e;
        }
    int padding_kept = 1;
    for (int i = 0; i < p->M; i++)
        for (int j = p->N; j < ldc; j++)
            padding_kept &= c3[(size_t)i * ldc + j] == C0[(size_t)i * ldc + j];
    TU_CHECK(worst < 2e-5 && padding_kept, "%s: the double reference within %.1e, padding "
             "kept", name, worst);

    float *c1 = run(p, A, B, C0, 3, 1, 0), *c2 = run(p, A, B, C0, 3, 2, 0);
    float *cn = run(p, A, B, C0, 3, 3, 1);
    const size_t bytes = (size_t)p->M * ldc * sizeof *c1;
    TU_CHECK(!memcmp(c1, c3, bytes) && !memcmp(c2, c3, bytes) && !memcmp(cn, c3, bytes),
             "%s: teams of 1, 2 and 3 and a nested call give the same bits", name);

    const char *core = blas_core_name();
    if (pc == 1 && (!strcmp(core, "Haswell") || !strcmp(core, "Zen"))) {
        float *one = run(p, A, B, C0, 1, 1, 0);
        float *two = run(p, A, B, C0, 2, 2, 0);
        TU_CHECK(!memcmp(one, c3, bytes) && !memcmp(two, c3, bytes),
                 "%s: rows cut for 1, 2 and 3 give the same bits (OpenBLAS core %s)", name,
                 core);
        free(one), free(two);
    }
    free(A), free(B), free(C0), free(c1), free(c2), free(c3), free(cn);
}

static void check_grid(int M, int N, int K, int parts, int want_r, int want_c)
{
    int r, c;
    sgemm_parts_grid(M, N, K, parts, &r, &c);
    TU_CHECK(r == want_r && c == want_c, "%dx%dx%d for %d: grid %dx%d (want %dx%d)", M, N, K,
             parts, r, c, want_r, want_c);
}

int main(void)
{
    /* (a) */
    check_grid(4096, 2304, 768, 1, 1, 1);    /* one thread: one call */
    check_grid(60, 60, 60, 2, 1, 1);         /* under the work floor */
    check_grid(4096, 2304, 768, 2, 2, 1);    /* q|k|v forward */
    check_grid(768, 768, 4096, 2, 2, 1);     /* a weight gradient */
    check_grid(4096, 768, 3072, 2, 2, 1);    /* an input gradient */
    check_grid(50304, 768, 4096, 2, 2, 1);   /* the logits' weight gradient */
    check_grid(1, 50304, 768, 2, 1, 2);      /* one row (sampling): columns */
    check_grid(64, 4096, 128, 4, 1, 4);      /* too few rows for 2 pieces */
    check_grid(768, 768, 4096, 16, 4, 4);    /* 16 row pieces would pack op(B) 16 times */
    check_grid(4096, 768, 768, 16, 16, 1);   /* rows pack at most twice the best */
    check_grid(100, 100, 100, 7, 2, 1);      /* the most pieces that fit: 2 of rows */
    check_grid(4096, 2304, 768, 3, 3, 1);    /* a count that is not a power of two */

    /* (b) - (d) */
    const prod cases[] = {
        {0, 1, 300, 200, 70, 0, 0.0f},  /* forward: rows */
        {0, 0, 300, 130, 90, 3, 1.0f},  /* input gradient, padded, accumulated */
        {1, 0, 250, 96, 120, 0, 1.0f},  /* weight gradient (op(A) = A^T) */
        {1, 1, 150, 70, 80, 5, 0.0f},   /* both transposed */
        {0, 1, 40, 900, 60, 0, 0.0f},   /* too few rows: columns */
        {1, 0, 30, 700, 64, 2, 1.0f},   /* columns, A^T */
        {0, 0, 7, 9, 5, 0, 0.0f},       /* one piece */
        {1, 0, 64, 90, 3000, 0, 0.0f},  /* one piece, which OpenBLAS would thread */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_product(&cases[i]);
    return tu_finish();
}
