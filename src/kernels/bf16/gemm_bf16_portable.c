/* gemm_bf16_portable — see gemm_bf16_portable.h: op(A) and op(B) rounded to bfloat16
 * values in FP32 panels (or widened from BF16 storage), multiplied by OpenBLAS sgemm,
 * the rounding, the bias and the fused epilogue on the OpenMP team. */
#define GT_BF16_MODULE /* gemm_bf16_packer.h */
#include "gemm_bf16_portable.h"

#include <string.h>

#include "bf16_store.h" /* defines: bf16_widen */
#include "gemm_bf16_packer.h"
#include "sgemm_parts.h" /* defines: sgemm_parts */
#include "simd.h" /* defines: simd_kernels_get (bf16_round(_to), bf16_from/to_float, transpose) */

#ifdef _OPENMP
#include <omp.h>
#else
static int omp_get_max_threads(void) { return 1; }
static int omp_in_parallel(void) { return 0; }
#endif

enum { PK = GEMM_BF16_PORTABLE_KC, PN = GEMM_BF16_PORTABLE_NC };
/* The rounding of A, the bias and the epilogue run on the OpenMP team, CHUNK rows a
 * piece, where a product is out of a parallel region and has PAR_WORK elements of A
 * and C or more: done by the calling thread alone, that work kept the other threads
 * waiting for a sixth of a BF16 step. */
enum { CHUNK = 32, PAR_WORK = 32768 };

/* op(X)[r0 + i, c0 + j] for i < rows, j < cols into out (row-major, cols wide), rounded
 * to bfloat16 values by the SIMD path's bf16_round (trans = GEMM_BF16_STORED: X holds
 * BF16 values, widened): rounded as copied, or transposed first and then rounded in
 * place; vector loops, where a scalar loop with a strided read cost a tenth of a BF16
 * step. */
static void round_panel(float *out, int trans, const float *X, int ld, int r0, int rows,
                        int c0, int cols)
{
    if (trans == GEMM_BF16_STORED) {
        const uint16_t *h = (const uint16_t *)(const void *)X;
        for (int i = 0; i < rows; i++)
            bf16_widen(out + (size_t)i * cols, h + (size_t)(r0 + i) * ld + c0, (size_t)cols);
        return;
    }
    const simd_kernels *k = simd_kernels_get();
    if (!trans) {
        for (int i = 0; i < rows; i++)
            k->bf16_round_to(out + (size_t)i * cols, X + (size_t)(r0 + i) * ld + c0,
                             (size_t)cols);
        return;
    }
    k->transpose(out, (size_t)cols, X + (size_t)c0 * ld + r0, (size_t)ld, cols, rows);
    k->bf16_round(out, (size_t)rows * cols);
}

/* The portable packer (gemm_bf16_packer.h): a block's panel is round_panel's B panel,
 * kc rows of nc values, kept as BF16 (two to a word: half the memory of the FP32 panel,
 * which left a bf16 run above fp32's peak memory at the GPT-2 124M shape) and widened
 * into the FP32 panel where a product reads it; a strip is 64 of its columns. */
enum { PSTRIP = 64, PDEPTH = 16 };

static size_t portable_panel_words(int nc, int kc)
{
    return ((size_t)nc * (size_t)kc + 1) / 2;
}

/* simd's bf16_from_float is the rounding of its bf16_round, which round_panel uses: a
 * product on the packed copy gets the bits of one that rounds B itself */
static void portable_pack_strip(uint32_t *panel, int s, int nc, int transb, const float *B,
                                int ldb, int jc, int pc, int kc)
{
    uint16_t *out = (uint16_t *)panel;
    const simd_kernels *k = simd_kernels_get();
    const int j0 = s * PSTRIP, w = nc - j0 < PSTRIP ? nc - j0 : PSTRIP;
    if (!transb) {
        for (int i = 0; i < kc; i++)
            k->bf16_from_float(out + (size_t)i * nc + j0, B + (size_t)(pc + i) * ldb + jc + j0,
                               (size_t)w);
        return;
    }
    float rows[PDEPTH * PSTRIP]; /* PDEPTH depths of the strip, transposed */
    for (int i0 = 0; i0 < kc; i0 += PDEPTH) {
        const int d = kc - i0 < PDEPTH ? kc - i0 : PDEPTH;
        k->transpose(rows, (size_t)w, B + (size_t)(jc + j0) * ldb + pc + i0, (size_t)ldb, w, d);
        for (int i = 0; i < d; i++)
            k->bf16_from_float(out + (size_t)(i0 + i) * nc + j0, rows + (size_t)i * w,
                               (size_t)w);
    }
}

/* Depth d0 .. d0+dn of the block: rows d0 .. of its BF16 panel, all nc columns */
static void portable_pack_depth(uint32_t *panel, int nc, const float *B, int ldb, int jc,
                                int pc, int kc, int d0, int dn)
{
    (void)kc;
    uint16_t *out = (uint16_t *)panel;
    const simd_kernels *k = simd_kernels_get();
    for (int i = d0; i < d0 + dn; i++)
        k->bf16_from_float(out + (size_t)i * nc, B + (size_t)(pc + i) * ldb + jc, (size_t)nc);
}

const gemm_bf16_packer gemm_bf16_portable_packer = {.kc = PK,
                                                    .nc = PN,
                                                    .strip = PSTRIP,
                                                    .panel_words = portable_panel_words,
                                                    .pack_strip = portable_pack_strip,
                                                    .pack_depth = portable_pack_depth};

/* Columns per thread for m columns over the team: a multiple of 16, at least CHUNK */
static int team_piece(int m)
{
    const int t = omp_get_max_threads();
    int w = (m + t - 1) / t;
    w = (w + 15) / 16 * 16;
    return w < CHUNK ? CHUNK : w;
}

/* B's block at depth pc (kc deep), columns jc (nc wide) into the FP32 panel pb: widened
 * from the packed copy bpre, or rounded from B. Shared out over the team of the region
 * it is called in (no barrier after it: the caller's next loop has one) */
static void portable_b_panel(float *pb, const void *bpre, int transb, const float *B, int ldb,
                             int K, int N, int jc, int pc, int kc, int nc)
{
    const uint16_t *h = NULL;
    if (bpre)
        h = (const uint16_t *)((const uint32_t *)bpre +
                               gemm_bf16_block_offset(&gemm_bf16_portable_packer, K, N, jc, pc));
    const simd_kernels *k = simd_kernels_get();
    const int chunks = (kc + CHUNK - 1) / CHUNK;
#pragma omp for schedule(static) nowait
    for (int ch = 0; ch < chunks; ch++) {
        const int i0 = ch * CHUNK, n = kc - i0 < CHUNK ? kc - i0 : CHUNK;
        if (h)
            k->bf16_to_float(pb + (size_t)i0 * nc, h + (size_t)i0 * nc, (size_t)n * nc);
        else
            round_panel(pb + (size_t)i0 * nc, transb, B, ldb, pc + i0, n, jc, nc);
    }
}

/* A bias over beta = 0 is put into C before the first depth block's
 * sgemm, which then runs with beta = 1: the unfused sequence's very calls. Added after
 * that block instead, it gave other bits where the BLAS splits a depth block of PK
 * further (OpenBLAS's generic Prescott core).
 * Parallel regions, each a fork and a barrier: per depth block one for B's panel and
 * A's rounding together, sgemm's own, and one for the epilogue where it has work (the
 * last depth block; the first's bias went into C before); from 4 a block, which at
 * the bench's shape made 1,506 regions a step. */
void gemm_bf16_portable(float *pa, int pm, float *pb, int transa, int transb, int M, int N,
                        int K, float alpha, const float *A, int lda, const float *B, int ldb,
                        float beta, float *C, int ldc, const void *bpre,
                        const gemm_bf16_epilogue *ep)
{
    const int bias_first = ep && ep->bias && beta == 0.0f;
    const float *const bias = bias_first ? ep->bias : NULL;
    gemm_bf16_epilogue rest; /* the epilogue less the bias, when the bias goes first */
    if (bias_first) {
        rest = *ep;
        rest.bias = NULL;
        ep = &rest;
    }
    const int nested = omp_in_parallel();
    const simd_kernels *k = simd_kernels_get();
    for (int pc = 0; pc < K; pc += PK) {
        const int kc = K - pc < PK ? K - pc : PK;
        const float bet = pc == 0 && !bias_first ? beta : 1.0f;
        for (int jc = 0; jc < N; jc += PN) {
            const int nc = N - jc < PN ? N - jc : PN;
            const int par_b = !nested && (size_t)kc * nc >= PAR_WORK;
            for (int ic = 0; ic < M; ic += pm) {
                const int mc = M - ic < pm ? M - ic : pm;
                const int par = !nested && (size_t)mc * (kc + nc) >= PAR_WORK;
                /* A^T is rounded along its stored rows, in pieces of columns: one
                 * piece per thread (pieces of CHUNK columns, one call per row each,
                 * cost a twentieth of a small model's step in calls) */
                const int as_stored = transa == 1 || transa == GEMM_BF16_STORED_T;
                const int cw = as_stored && par ? team_piece(mc) : CHUNK;
                const int pieces = (mc + cw - 1) / cw;
#pragma omp parallel if ((ic == 0 && par_b) || par)
                {
                    if (ic == 0) /* the B panel, with the first row block's A */
                        portable_b_panel(pb, bpre, transb, B, ldb, K, N, jc, pc, kc, nc);
#pragma omp for schedule(static) nowait /* the region's end is the barrier */
                    for (int ch = 0; ch < pieces; ch++) {
                        const int i0 = ch * cw, n = mc - i0 < cw ? mc - i0 : cw;
                        if (transa == 1) /* columns i0.. of A's rows pc.., as stored */
                            for (int d = 0; d < kc; d++)
                                k->bf16_round_to(pa + (size_t)d * mc + i0,
                                                 A + (size_t)(pc + d) * lda + ic + i0,
                                                 (size_t)n);
                        else if (transa == GEMM_BF16_STORED_T) /* the same, widened */
                            for (int d = 0; d < kc; d++)
                                bf16_widen(pa + (size_t)d * mc + i0,
                                           (const uint16_t *)(const void *)A +
                                               (size_t)(pc + d) * lda + ic + i0,
                                           (size_t)n);
                        else
                            round_panel(pa + (size_t)i0 * kc, transa, A, lda, ic + i0, n, pc,
                                        kc);
                        if (bias_first && pc == 0)
                            for (int i = i0; i < i0 + n; i++)
                                memcpy(C + (size_t)(ic + i) * ldc + jc, bias + jc,
                                       (size_t)nc * sizeof *C);
                        if (ep && ep->row_sums && jc == 0)
                            gemm_bf16_row_sums(ep->row_sums, transa, A, lda, ic + i0, n, pc,
                                               kc);
                    }
                }
                /* op(A) = A^T stays as stored, for sgemm to transpose as it packs:
                 * transposing it here cost a twentieth of a small model's step */
                sgemm_parts(as_stored, 0, mc, nc, kc, alpha, pa, as_stored ? mc : kc, pb, nc,
                            bet, C + (size_t)ic * ldc + jc, ldc);
                if (!gemm_bf16_epilogue_acts(ep, pc == 0, pc + kc >= K)) continue;
                const int chunks = (mc + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) if (par)
                for (int ch = 0; ch < chunks; ch++) {
                    const int i0 = ch * CHUNK, n = mc - i0 < CHUNK ? mc - i0 : CHUNK;
                    gemm_bf16_epilogue_block(ep, C, ldc, ic + i0, jc, n, nc, pc == 0,
                                             pc + kc >= K);
                }
            }
        }
    }
}
