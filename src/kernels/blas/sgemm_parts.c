/* sgemm_parts — see sgemm_parts.h for the contract. */
#include "sgemm_parts.h"

#include <cblas.h> /* defines: cblas_sgemm */
#ifdef _OPENMP
#include <omp.h>
#endif

#include "util.h" /* defines: gt_product_parts */

/* Floats that an r x c grid packs, in units of K: each of the r x c pieces packs its
 * M / r rows of op(A) and its N / c columns of op(B). */
static double packed(int M, int N, int r, int c) { return (double)c * M + (double)r * N; }

void sgemm_parts_grid(int M, int N, int K, int parts, int *prow, int *pcol)
{
    *prow = *pcol = 1;
    if (parts <= 1 || M < 1 || N < 1 || (double)M * N * K < SGEMM_PARTS_MIN_WORK) return;
    const int max_r = M / SGEMM_PARTS_ROW_ALIGN > 0 ? M / SGEMM_PARTS_ROW_ALIGN : 1;
    const int max_c = N / SGEMM_PARTS_COL_ALIGN > 0 ? N / SGEMM_PARTS_COL_ALIGN : 1;
    /* the most pieces (at most `parts`) that some grid allows; among its grids the one
     * that packs the fewest floats, or rows alone where those pack at most twice that */
    for (int p = parts; p > 1; p--) {
        int best_r = 0, best_c = 0;
        for (int r = 1; r <= p; r++) {
            const int c = p / r;
            if (r * c != p || r > max_r || c > max_c) continue;
            if (!best_r || packed(M, N, r, c) < packed(M, N, best_r, best_c)) {
                best_r = r;
                best_c = c;
            }
        }
        if (!best_r) continue;
        if (p <= max_r && packed(M, N, p, 1) <= 2.0 * packed(M, N, best_r, best_c)) {
            best_r = p;
            best_c = 1;
        }
        *prow = best_r;
        *pcol = best_c;
        return;
    }
}

/* Start of part i of `parts` of 0 .. total, cut at a multiple of align (the last part
 * ends at total) */
static int cut(int i, int parts, int total, int align)
{
    if (i >= parts) return total;
    return (int)((long long)total * i / parts / align * align);
}

void sgemm_parts(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc)
{
    int pr, pc;
    sgemm_parts_grid(M, N, K, gt_product_parts(), &pr, &pc);
    const int pieces = pr * pc;
    const enum CBLAS_TRANSPOSE opa = ta ? CblasTrans : CblasNoTrans;
    const enum CBLAS_TRANSPOSE opb = tb ? CblasTrans : CblasNoTrans;
#ifdef _OPENMP
    /* OpenBLAS's OpenMP build threads a call made outside a parallel region over
     * OpenMP's count, in a cut of its own: a product of one piece runs with the count
     * at 1. (Inside a parallel region, the pieces' below included, it takes one
     * thread.) */
    if (pieces == 1 && !omp_in_parallel() && omp_get_max_threads() > 1) {
        const int team = omp_get_max_threads();
        omp_set_num_threads(1);
        cblas_sgemm(CblasRowMajor, opa, opb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        omp_set_num_threads(team);
        return;
    }
#endif
    /* inside a parallel region this one has one thread: the same pieces, in order */
#pragma omp parallel for schedule(static) if (pieces > 1)
    for (int piece = 0; piece < pieces; piece++) {
        const int r = piece / pc, c = piece % pc;
        const int i0 = cut(r, pr, M, SGEMM_PARTS_ROW_ALIGN);
        const int i1 = cut(r + 1, pr, M, SGEMM_PARTS_ROW_ALIGN);
        const int j0 = cut(c, pc, N, SGEMM_PARTS_COL_ALIGN);
        const int j1 = cut(c + 1, pc, N, SGEMM_PARTS_COL_ALIGN);
        if (i0 >= i1 || j0 >= j1) continue;
        /* rows i0.. of op(A): A's rows (as stored) or its columns when transposed */
        const float *a = ta ? A + i0 : A + (size_t)i0 * lda;
        /* columns j0.. of op(B): B's columns, or its rows when transposed */
        const float *b = tb ? B + (size_t)j0 * ldb : B + j0;
        cblas_sgemm(CblasRowMajor, opa, opb, i1 - i0, j1 - j0, K, alpha, a, lda, b, ldb, beta,
                    C + (size_t)i0 * ldc + j0, ldc);
    }
}
