/* sgemm_parts — OpenBLAS sgemm, cut by gentrain into pieces that its threads share.
 *
 * Why: the sgemm of OpenBLAS's AVX2 cores (Haswell, Zen) gives an element of C other
 * bits when it falls in the edge block of a call (the last rows, when a call's rows are
 * not a multiple of its 12-row block) than in a full block, and OpenBLAS's own threads
 * cut C where the thread count says. So the same product on 1 and on 2 threads differed
 * in the last bit of thousands of elements, and a thread team that shrank while another
 * process took a core (team.h) changed the model. Here the cut is gentrain's: the
 * number of pieces is gt_product_parts() (the thread count the run was given, not the
 * team's size now), each piece is one single-threaded sgemm, and the threads of the
 * team share the pieces. A piece is the same call whichever thread runs it and however
 * many run, so C has the same bits on any team.
 *
 * Rows are cut at multiples of SGEMM_PARTS_ROW_ALIGN, a multiple of the row blocks of
 * every x86 sgemm kernel OpenBLAS has (4, 8, 12, 16, 24): on the AVX2 cores each row
 * then sits in the same kind of block as in one call over all of C, so where only rows
 * are cut C has the bits of that one call, whatever the count of pieces. Columns are
 * cut too (at multiples of SGEMM_PARTS_COL_ALIGN) when the rows are too few for the
 * pieces, or when cutting rows alone would pack more than twice the floats of the best
 * grid (every piece packs its rows of op(A) and its columns of op(B): many pieces of
 * rows each pack all of op(B) again). OpenBLAS itself runs on one thread
 * (gt_set_threads sets it so).
 *
 * Cost on 2 cores (AMD Zen 3, the GPT-2 124M shape's products): the same time as
 * OpenBLAS's own 2 threads, within 3% either way (docs/cpu-speed.md). */
#ifndef GT_SGEMM_PARTS_H
#define GT_SGEMM_PARTS_H

#define SGEMM_PARTS_ROW_ALIGN 48
#define SGEMM_PARTS_COL_ALIGN 64
/* Below this many multiply-adds (M x N x K) a product is one piece: the cost of
 * forking the team is more than the product's. */
#define SGEMM_PARTS_MIN_WORK 262144

/* C[M,N] = alpha op(A) op(B) + beta C, all row-major, the arguments of cblas_sgemm in
 * CblasRowMajor order (ta / tb: 1 = transposed). Called inside a parallel region, the
 * pieces run one after the other on the calling thread (the same pieces, the same
 * bits). */
void sgemm_parts(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc);

/* The grid sgemm_parts cuts an M x N x K product into for `parts` pieces: *prow row
 * groups by *pcol column groups, *prow x *pcol <= parts. */
void sgemm_parts_grid(int M, int N, int K, int parts, int *prow, int *pcol);

#endif
