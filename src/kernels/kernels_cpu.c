/* kernels_cpu — see kernels_cpu.h for the contract.
 *
 * Layout of this file: each layer's public kernel, which splits the work over OpenMP
 * threads and runs the per-row / per-chunk inner loops of the SIMD path in use
 * (simd.h: portable, AVX2 or AVX-512, chosen once for the CPU), and OpenBLAS sgemm for
 * the matrix products.
 *
 * Determinism. Work is split with schedule(static) and every output element is
 * written by exactly one thread. Reductions across rows (matmul dbias, encoder
 * dwte/dwpe) are split over COLUMNS, each column summed over the rows in ascending
 * order, so they do not even depend on the thread count; LayerNorm's dweight/dbias sum
 * fixed chunks of rows that way, then the chunks in order (the same on any team). Matrix
 * products are OpenBLAS sgemm on one thread per piece, cut by sgemm_parts.h for the
 * thread count the run was given: the same bits on a team of any size.
 *
 * Attention is attention_cpu.c (both precisions), which uses no BLAS. */
#include "kernels_cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "attention_cpu.h" /* both backends' attention */
#include "backend.h"
#include "bf16_store.h" /* defines: bf16_store */
#include "gemm_bf16.h" /* defines: gemm_bf16 */
#include "sgemm_parts.h" /* defines: sgemm_parts */
#include "simd.h" /* defines: simd_kernels_get and the inner loops of every path */
#include "util.h" /* gt_error */

/* Below this many floats of work a kernel stays on one thread (fork/join costs more). */
#define PAR_MIN_WORK 16384
/* Elementwise kernels hand out chunks of this many floats (a multiple of 8). */
#define ELEM_CHUNK 8192
/* Column reductions work on blocks of this many columns. */
#define COL_BLOCK SIMD_COL_BLOCK

/* ------------------------------------------------------------------------------------ */
/* SIMD path (the header's wrappers over simd.h) */

enum kernels_simd kernels_set_simd(enum kernels_simd want)
{
    return (enum kernels_simd)simd_set_path((enum simd_path)want);
}

const char *kernels_simd_name(void) { return simd_kernels_get()->name; }

/* ------------------------------------------------------------------------------------ */
/* Work splitting helpers */

static inline int par_ok(size_t work) { return work >= PAR_MIN_WORK; }

/* ------------------------------------------------------------------------------------ */
/* Encoder */

void encoder_forward(float *out, const int32_t *inp, const float *wte, const float *wpe,
                     int B, int T, int C)
{
    const simd_kernels *k = simd_kernels_get();
    const long rows = (long)B * T;
#pragma omp parallel for schedule(static) if (par_ok((size_t)rows * (size_t)C))
    for (long r = 0; r < rows; r++) {
        int t = (int)(r % T);
        k->add(out + (size_t)r * C, wte + (size_t)inp[r] * C, wpe + (size_t)t * C,
               (size_t)C);
    }
}

void encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *inp,
                      int B, int T, int C)
{
    /* Split over column blocks: each thread owns columns [c0, c1) of dwte and dwpe
     * and walks every (b, t) in order, so the sums have one fixed order. */
    const simd_kernels *k = simd_kernels_get();
    const int nblk = (C + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(static) if (par_ok((size_t)B * T * C))
    for (int blk = 0; blk < nblk; blk++) {
        int c0 = blk * COL_BLOCK, w = C - c0 < COL_BLOCK ? C - c0 : COL_BLOCK;
        for (int t = 0; t < T; t++) {
            float *dp = dwpe + (size_t)t * C + c0;
            for (int b = 0; b < B; b++) {
                size_t r = (size_t)b * T + t;
                const float *d = dout + r * C + c0;
                k->acc(dwte + (size_t)inp[r] * C + c0, d, (size_t)w);
                k->acc(dp, d, (size_t)w);
            }
        }
    }
}

/* ------------------------------------------------------------------------------------ */
/* LayerNorm */

void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                       const float *w, const float *b, size_t N, int C)
{
    const simd_kernels *k = simd_kernels_get();
#pragma omp parallel for schedule(static) if (par_ok(N * (size_t)C))
    for (size_t n = 0; n < N; n++)
        k->ln_fwd_row(out + n * C, mean + n, rstd + n, inp + n * C, w, b, C);
}

/* Rows in a chunk of the LayerNorm backward's weight and bias gradients: a constant, so
 * the order of every sum, and the bits, do not depend on the thread count */
enum { LN_SUM_ROWS = 32 };

size_t layernorm_backward_scratch_floats(size_t N, int C)
{
    return (N + LN_SUM_ROWS - 1) / LN_SUM_ROWS * 2 * (size_t)(C > 0 ? C : 0);
}

/* layernorm_backward, and dinp16 (NULL: none) its BF16 copy, each row stored as it is
 * summed (while in cache). dw and db: the thread that has just made a chunk of
 * LN_SUM_ROWS rows' dinp sums the chunk's columns (each in row order, ln_wb_cols) into
 * the chunk's own partial sums (in the caller's scratch) while its rows are in that
 * thread's cache; then each column adds its chunks' sums in chunk order (colsum). The
 * sums used to be a pass of their own over all rows, each thread on its columns, which
 * read half the rows back from the other core's cache or L3: 60% of the backward's time
 * at the bench shape (a Zen 4, 2 threads). */
static void layernorm_backward_to(float *dinp, uint16_t *dinp16, float *dw, float *db,
                                  const float *dout, const float *inp, const float *w,
                                  const float *mean, const float *rstd, float *part, size_t N,
                                  int C)
{
    const simd_kernels *k = simd_kernels_get();
    const int nblk = (C + COL_BLOCK - 1) / COL_BLOCK;
    const size_t chunks = (N + LN_SUM_ROWS - 1) / LN_SUM_ROWS, width = 2 * (size_t)C;
#pragma omp parallel if (par_ok(N * (size_t)C))
    {
        /* rows: dinp, then the chunk's column sums (its barrier: every chunk summed) */
#pragma omp for schedule(static)
        for (size_t ch = 0; ch < chunks; ch++) {
            const size_t n0 = ch * LN_SUM_ROWS, rows = N - n0 < LN_SUM_ROWS ? N - n0 : LN_SUM_ROWS;
            for (size_t n = n0; n < n0 + rows; n++) {
                k->ln_bwd_row(dinp + n * C, dout + n * C, inp + n * C, w, mean[n], rstd[n], C);
                if (dinp16) bf16_store(dinp16 + n * C, dinp + n * C, (size_t)C);
            }
            float *const pw = part + ch * width, *const pb = pw + C;
            memset(pw, 0, width * sizeof *pw);
            for (int blk = 0; blk < nblk; blk++) {
                const int c0 = blk * COL_BLOCK, wd = C - c0 < COL_BLOCK ? C - c0 : COL_BLOCK;
                k->ln_wb_cols(pw, pb, dout + n0 * C, inp + n0 * C, mean + n0, rstd + n0, rows, C,
                              c0, wd);
            }
        }
        /* columns: dw, db += the chunks' sums, in chunk order */
#pragma omp for schedule(static)
        for (int blk = 0; blk < nblk; blk++) {
            const int c0 = blk * COL_BLOCK, wd = C - c0 < COL_BLOCK ? C - c0 : COL_BLOCK;
            k->colsum(dw, part, chunks, width, c0, wd);
            k->colsum(db, part + C, chunks, width, c0, wd);
        }
    }
}

void layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                        const float *inp, const float *w, const float *mean,
                        const float *rstd, float *scratch, size_t N, int C)
{
    layernorm_backward_to(dinp, NULL, dw, db, dout, inp, w, mean, rstd, scratch, N, C);
}

/* ------------------------------------------------------------------------------------ */
/* Matrix products: FP32 (sgemm_parts, row-major arguments, ta / tb: 1 = transposed)
 * here; the BF16 twins (gemm_bf16.h) below */

void matmul_forward(float *out, const float *inp, const float *w, const float *bias,
                    size_t N, int C, int OC)
{
    /* out = bias (broadcast), then out += inp @ w^T in one sgemm with beta = 1: one
     * pass over out fewer than adding the bias afterwards. */
    float beta = 0.0f;
    if (bias) {
#pragma omp parallel for schedule(static) if (par_ok(N * (size_t)OC))
        for (size_t n = 0; n < N; n++) memcpy(out + n * OC, bias, (size_t)OC * sizeof *out);
        beta = 1.0f;
    }
    sgemm_parts(0, 1, (int)N, OC, C, 1.0f, inp, C, w, C, beta, out, OC);
}

/* dbias[OC] += the column sums of dout[N,OC], each column summed in row order */
static void bias_grad(float *dbias, const float *dout, size_t N, int OC)
{
    const simd_kernels *k = simd_kernels_get();
    const int nblk = (OC + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(static) if (par_ok(N * (size_t)OC))
    for (int blk = 0; blk < nblk; blk++) {
        int c0 = blk * COL_BLOCK, wd = OC - c0 < COL_BLOCK ? OC - c0 : COL_BLOCK;
        k->colsum(dbias, dout, N, (size_t)OC, c0, wd);
    }
}

/* dw[OC,C] += dout^T @ inp[N,C]; dbias += dout's column sums */
static void weight_grad(float *dw, float *dbias, const float *dout, const float *inp, size_t N,
                        int C, int OC)
{
    sgemm_parts(1, 0, OC, C, (int)N, 1.0f, dout, OC, inp, C, 1.0f, dw, C);
    if (dbias) bias_grad(dbias, dout, N, OC);
}

void matmul_backward(float *dinp, float *dw, float *dbias, const float *dout,
                     const float *inp, const float *w, size_t N, int C, int OC)
{
    /* dinp[N,C] = dout[N,OC] @ w[OC,C]: beta = 0, so neither a zeroing pass before nor
     * a read of dinp in the product */
    if (dinp) sgemm_parts(0, 0, (int)N, C, OC, 1.0f, dout, OC, w, C, 0.0f, dinp, C);
    weight_grad(dw, dbias, dout, inp, N, C, OC);
}

void matmul_backward_gelu(float *dpre, float *dinp, float *dw, float *dbias,
                          const float *dout, float *inp, const float *w, const float *pre,
                          size_t N, int C, int OC)
{
    sgemm_parts(0, 0, (int)N, C, OC, 1.0f, dout, OC, w, C, 0.0f, dinp, C);
    /* dpre = gelu'(pre) dinp a chunk at a time: zeroed and accumulated into while the
     * chunk is in L1, the bits of a zeroing pass and gelu_backward over the whole; and
     * inp = gelu(pre), the weight gradient's operand, from the same sigmoid (the bits
     * of gelu_forward): a pass of its own over pre took 2-3% of an fp32 step */
    const simd_kernels *k = simd_kernels_get();
    const size_t n = N * (size_t)C, nch = (n + ELEM_CHUNK - 1) / ELEM_CHUNK;
#pragma omp parallel for schedule(static) if (par_ok(n))
    for (size_t c = 0; c < nch; c++) {
        const size_t i0 = c * ELEM_CHUNK, len = n - i0 < ELEM_CHUNK ? n - i0 : ELEM_CHUNK;
        memset(dpre + i0, 0, len * sizeof *dpre);
        k->gelu_bwd_fwd(dpre + i0, inp + i0, pre + i0, dinp + i0, len);
    }
    weight_grad(dw, dbias, dout, inp, N, C, OC);
}

/* BF16 forward products with the bias (and GELU, or the residual add) in the product's
 * write-back: no pass over out before or after (gemm_bf16_fused) */
/* out[N,OC] = inp[N,C] @ w^T with epilogue ep, one product */
static void forward_fused(float *out, const float *inp, const float *w, size_t N, int C,
                          int OC, const gemm_bf16_epilogue *ep)
{
    gemm_bf16_fused(0, 1, (int)N, OC, C, 1.0f, inp, C, w, C, 0.0f, out, OC, ep);
}

static void matmul_forward_bf16(float *out, const float *inp, const float *w,
                                const float *bias, size_t N, int C, int OC)
{
    forward_fused(out, inp, w, N, C, OC, &(gemm_bf16_epilogue){.bias = bias});
}

static void matmul_forward_gelu_bf16(float *out, float *out_gelu, const float *inp,
                                     const float *w, const float *bias, size_t N, int C,
                                     int OC)
{
    forward_fused(out, inp, w, N, C, OC,
                  &(gemm_bf16_epilogue){.bias = bias, .gelu_out = out_gelu,
                                        .ld_gelu = (size_t)OC});
}

static void matmul_forward_residual_bf16(float *out, const float *res, const float *inp,
                                         const float *w, const float *bias, size_t N, int C,
                                         int OC)
{
    forward_fused(out, inp, w, N, C, OC,
                  &(gemm_bf16_epilogue){.bias = bias, .residual = res,
                                        .ld_residual = (size_t)OC});
}

/* The weight gradient dw[OC,C] += dout^T @ inp with dbias += dout's column sums taken
 * as dout^T is packed (gemm_bf16's row sums, the bits of bias_grad) */
static void weight_grad_bf16(float *dw, float *dbias, const float *dout, const float *inp,
                             size_t N, int C, int OC)
{
    const gemm_bf16_epilogue ep = {.row_sums = dbias};
    gemm_bf16_fused(1, 0, OC, C, (int)N, 1.0f, dout, OC, inp, C, 1.0f, dw, C, &ep);
}

static void matmul_backward_bf16(float *dinp, float *dw, float *dbias, const float *dout,
                                 const float *inp, const float *w, size_t N, int C, int OC)
{
    if (dinp) gemm_bf16(0, 0, (int)N, C, OC, 1.0f, dout, OC, w, C, 0.0f, dinp, C);
    weight_grad_bf16(dw, dbias, dout, inp, N, C, OC);
}

/* The backward of c_proj with GELU's backward in the input gradient's write-back:
 * dinp = dout @ w, then dpre = gelu'(pre) dinp (both overwritten), no pass between or
 * before (0 + x is x but for a zero's sign, which gelu' x 0 does not keep apart) */
static void backward_gelu(float *dinp, float *dw, float *dbias, const float *dout,
                          const float *inp, const float *w, size_t N, int C, int OC,
                          const gemm_bf16_epilogue *ep)
{
    gemm_bf16_fused(0, 0, (int)N, C, OC, 1.0f, dout, OC, w, C, 0.0f, dinp, C, ep);
    weight_grad_bf16(dw, dbias, dout, inp, N, C, OC);
}

static void matmul_backward_gelu_bf16(float *dpre, float *dinp, float *dw, float *dbias,
                                      const float *dout, float *inp, const float *w,
                                      const float *pre, size_t N, int C, int OC)
{
    gelu_forward(inp, pre, N * (size_t)C); /* the weight gradient's operand */
    const gemm_bf16_epilogue ep = {.dgelu_x = pre, .dgelu_out = dpre, .ld_dgelu = (size_t)C};
    backward_gelu(dinp, dw, dbias, dout, inp, w, N, C, OC, &ep);
}

/* The products and LayerNorm on activations in BF16 storage (backend.h's gt_bf16_acts):
 * the same products reading the stored operand (GEMM_BF16_STORED) */

static const float *stored(const uint16_t *x) { return (const float *)(const void *)x; }

static void layernorm_forward_stored(uint16_t *out16, float *out, float *mean, float *rstd,
                                     const float *inp, const float *w, const float *b,
                                     size_t N, int C)
{
    /* Each row passes through a row of scratch of the thread's own (row t of out for
     * thread t, where out has a row for every thread), stored while in L1: FP32 rows
     * written at their own places went out to memory, 4 bytes a value no one reads
     * (backend.h) */
    const simd_kernels *k = simd_kernels_get();
#pragma omp parallel if (par_ok(N * (size_t)C))
    {
        size_t t = 0, team = 1;
#ifdef _OPENMP
        t = (size_t)omp_get_thread_num();
        team = (size_t)omp_get_num_threads();
#endif
        float *const own = team <= N ? out + t * C : NULL; /* else each row its own place */
#pragma omp for schedule(static)
        for (size_t n = 0; n < N; n++) {
            float *const row = own ? own : out + n * C;
            k->ln_fwd_row(row, mean + n, rstd + n, inp + n * C, w, b, C);
            bf16_store(out16 + n * C, row, (size_t)C);
        }
    }
}

static void matmul_forward_stored(float *out, uint16_t *out16, const uint16_t *inp16,
                                  const float *w, const float *bias, size_t N, int C, int OC)
{
    /* with out16, out is scratch (backend.h): the FP32 values need not reach it */
    const gemm_bf16_epilogue ep = {.bias = bias, .out_bf16 = out16, .ld_out_bf16 = (size_t)OC,
                                   .c_unused = out16 != NULL};
    gemm_bf16_fused(GEMM_BF16_STORED, 1, (int)N, OC, C, 1.0f, stored(inp16), C, w, C, 0.0f,
                    out, OC, &ep);
}

static void matmul_forward_gelu_stored(float *out, uint16_t *slope16, uint16_t *gelu16,
                                       const uint16_t *inp16, const float *w,
                                       const float *bias, size_t N, int C, int OC)
{
    const gemm_bf16_epilogue ep = {.bias = bias, .gelu_out16 = gelu16, .ld_gelu = (size_t)OC,
                                   .gelu_slope16 = slope16, .c_unused = slope16 != NULL};
    gemm_bf16_fused(GEMM_BF16_STORED, 1, (int)N, OC, C, 1.0f, stored(inp16), C, w, C, 0.0f,
                    out, OC, &ep);
}

static void matmul_forward_residual_stored(float *out, const float *res, const uint16_t *inp16,
                                           const float *w, const float *bias, size_t N, int C,
                                           int OC)
{
    const gemm_bf16_epilogue ep = {.bias = bias, .residual = res, .ld_residual = (size_t)OC};
    gemm_bf16_fused(GEMM_BF16_STORED, 1, (int)N, OC, C, 1.0f, stored(inp16), C, w, C, 0.0f,
                    out, OC, &ep);
}

/* weight_grad_bf16 with inp in BF16 storage */
static void weight_grad_stored(float *dw, float *dbias, const float *dout,
                               const uint16_t *inp16, size_t N, int C, int OC)
{
    const gemm_bf16_epilogue ep = {.row_sums = dbias};
    gemm_bf16_fused(1, GEMM_BF16_STORED, OC, C, (int)N, 1.0f, dout, OC, stored(inp16), C, 1.0f,
                    dw, C, &ep);
}

static void matmul_backward_stored(float *dinp, float *dw, float *dbias, const float *dout,
                                   const uint16_t *inp16, const float *w, size_t N, int C,
                                   int OC)
{
    /* dw[OC,C] += dout^T @ inp (stored), dbias summed as dout^T is packed; then dinp[N,C]
     * = dout @ w. The weight gradient first (here and below: independent products, the
     * same bits), so that the input gradient, which the next pass reads, is the last
     * thing written: Zen 4, L6 C384, 0.3-1.9 ms a step in alternated steps of one run */
    weight_grad_stored(dw, dbias, dout, inp16, N, C, OC);
    if (dinp) gemm_bf16(0, 0, (int)N, C, OC, 1.0f, dout, OC, w, C, 0.0f, dinp, C);
}

/* dw[OC,C] += dout^T @ inp and dbias += dout's column sums, both operands in BF16
 * storage: A = dout^T as stored (GEMM_BF16_STORED_T) */
static void weight_grad_both_stored(float *dw, float *dbias, const uint16_t *dout16,
                                    size_t ld_dout16, const uint16_t *inp16, size_t N, int C,
                                    int OC)
{
    const gemm_bf16_epilogue ep = {.row_sums = dbias};
    gemm_bf16_fused(GEMM_BF16_STORED_T, GEMM_BF16_STORED, OC, C, (int)N, 1.0f, stored(dout16),
                    (int)ld_dout16, stored(inp16), C, 1.0f, dw, C, &ep);
}

/* A backward from dout in BF16 storage (the MLP's c_fc from the dpre c_proj's backward
 * stored; the head from the loss's dlogits): both products read it as stored (half the
 * bytes of FP32, and no rounding in the packing; the input gradient's A in place where
 * the AMX path can) */
static void matmul_backward_dout16(float *dinp, float *dw, float *dbias, const uint16_t *dout16,
                                   size_t ld_dout16, const uint16_t *inp16, const float *w,
                                   size_t N, int C, int OC)
{
    weight_grad_both_stored(dw, dbias, dout16, ld_dout16, inp16, N, C, OC);
    if (dinp)
        gemm_bf16(GEMM_BF16_STORED, 0, (int)N, C, OC, 1.0f, stored(dout16), (int)ld_dout16, w,
                  C, 0.0f, dinp, C);
}

/* Each row's softmax gradient into the thread's scratch row, then stored as BF16 at
 * the row's start: the FP32 row is only read, so its cache lines go back clean */
static void crossentropy_forward_backward16(float *losses, float *logits, float *scratch,
                                            int nscratch, const int32_t *targets, size_t N,
                                            int V, float dloss_scale)
{
    const simd_kernels *k = simd_kernels_get();
    int team = 1;
#ifdef _OPENMP
    team = omp_get_max_threads(); /* the team as it is now (it shrinks under load) */
#endif
    if (team > nscratch) team = nscratch; /* never more threads than scratch rows */
#pragma omp parallel for schedule(static) num_threads(team) if (par_ok(N * (size_t)V))
    for (size_t n = 0; n < N; n++) {
#ifdef _OPENMP
        float *g = scratch + (size_t)omp_get_thread_num() * V;
#else
        float *g = scratch;
#endif
        float *x = logits + n * V;
        losses[n] = k->xent_row(g, x, targets[n], V, dloss_scale);
        bf16_store((uint16_t *)(void *)x, g, (size_t)V);
    }
}

/* dpre16 = slope dinp in dinp's epilogue (one multiply: the forward took GELU's
 * sigmoid), then the weight gradient on the forward's gelu16; with dout16 both products
 * read dout from it, as matmul_backward_dout16 */
static void matmul_backward_gelu_stored(uint16_t *dpre16, float *dinp, float *dw, float *dbias,
                                        const float *dout, const uint16_t *dout16,
                                        const uint16_t *inp16, const float *w,
                                        const uint16_t *slope16, size_t N, int C, int OC)
{
    const gemm_bf16_epilogue ep = {.dgelu_slope16 = slope16, .dgelu_out16 = dpre16,
                                   .ld_dgelu = (size_t)C, .c_unused = 1};
    if (dout16) {
        weight_grad_both_stored(dw, dbias, dout16, (size_t)OC, inp16, N, C, OC);
        gemm_bf16_fused(GEMM_BF16_STORED, 0, (int)N, C, OC, 1.0f, stored(dout16), OC, w, C,
                        0.0f, dinp, C, &ep);
        return;
    }
    weight_grad_stored(dw, dbias, dout, inp16, N, C, OC);
    gemm_bf16_fused(0, 0, (int)N, C, OC, 1.0f, dout, OC, w, C, 0.0f, dinp, C, &ep);
}

static const gt_bf16_acts cpu_bf16_acts = {
    .layernorm_forward = layernorm_forward_stored,
    .layernorm_backward = layernorm_backward_to,
    .matmul_forward = matmul_forward_stored,
    .matmul_forward_gelu = matmul_forward_gelu_stored,
    .matmul_backward_gelu = matmul_backward_gelu_stored,
    .matmul_forward_residual = matmul_forward_residual_stored,
    .matmul_backward = matmul_backward_stored,
    .matmul_backward_dout16 = matmul_backward_dout16,
    .crossentropy_forward_backward16 = crossentropy_forward_backward16,
    .attention_forward = attention_forward_stored,
    .attention_backward = attention_backward_stored,
};

/* ------------------------------------------------------------------------------------ */
/* Elementwise: GELU (tanh form) and the residual adds, in chunks over the threads */

void gelu_forward(float *out, const float *inp, size_t N)
{
    const simd_kernels *k = simd_kernels_get();
    const size_t nch = (N + ELEM_CHUNK - 1) / ELEM_CHUNK;
#pragma omp parallel for schedule(static) if (par_ok(N))
    for (size_t c = 0; c < nch; c++) {
        size_t i0 = c * ELEM_CHUNK, n = N - i0 < ELEM_CHUNK ? N - i0 : ELEM_CHUNK;
        k->gelu_fwd(out + i0, inp + i0, n);
    }
}

void gelu_backward(float *dinp, const float *inp, const float *dout, size_t N)
{
    const simd_kernels *k = simd_kernels_get();
    const size_t nch = (N + ELEM_CHUNK - 1) / ELEM_CHUNK;
#pragma omp parallel for schedule(static) if (par_ok(N))
    for (size_t c = 0; c < nch; c++) {
        size_t i0 = c * ELEM_CHUNK, n = N - i0 < ELEM_CHUNK ? N - i0 : ELEM_CHUNK;
        k->gelu_bwd(dinp + i0, inp + i0, dout + i0, n);
    }
}

void residual_forward(float *out, const float *a, const float *b, size_t N)
{
    const simd_kernels *k = simd_kernels_get();
    const size_t nch = (N + ELEM_CHUNK - 1) / ELEM_CHUNK;
#pragma omp parallel for schedule(static) if (par_ok(N))
    for (size_t c = 0; c < nch; c++) {
        size_t i0 = c * ELEM_CHUNK, n = N - i0 < ELEM_CHUNK ? N - i0 : ELEM_CHUNK;
        k->add(out + i0, a + i0, b + i0, n);
    }
}

void residual_backward(float *da, float *db, const float *dout, size_t N)
{
    const simd_kernels *k = simd_kernels_get();
    const size_t nch = (N + ELEM_CHUNK - 1) / ELEM_CHUNK;
#pragma omp parallel for schedule(static) if (par_ok(N))
    for (size_t c = 0; c < nch; c++) {
        size_t i0 = c * ELEM_CHUNK, n = N - i0 < ELEM_CHUNK ? N - i0 : ELEM_CHUNK;
        k->acc(da + i0, dout + i0, n);
        k->acc(db + i0, dout + i0, n);
    }
}

/* ------------------------------------------------------------------------------------ */
/* Cross-entropy */

static void xent(float *losses, float *g, const float *logits, const int32_t *targets,
                 size_t N, int V, float scale)
{
    const simd_kernels *k = simd_kernels_get();
#pragma omp parallel for schedule(static) if (par_ok(N * (size_t)V))
    for (size_t n = 0; n < N; n++)
        losses[n] = k->xent_row(g ? g + n * V : NULL, logits + n * V, targets[n], V, scale);
}

void crossentropy_forward(float *losses, const float *logits, const int32_t *targets,
                          size_t N, int V)
{
    xent(losses, NULL, logits, targets, N, V, 0.0f);
}

void crossentropy_forward_backward(float *losses, float *logits, const int32_t *targets,
                                   size_t N, int V, float dloss_scale)
{
    xent(losses, logits, logits, targets, N, V, dloss_scale);
}

/* ------------------------------------------------------------------------------------ */

/* What both CPU backends share: everything but the matrix products. */
#define CPU_BACKEND_SHARED                                                              \
    .encoder_forward = encoder_forward, .encoder_backward = encoder_backward,           \
    .layernorm_forward = layernorm_forward, .layernorm_backward = layernorm_backward,   \
    .layernorm_scratch_floats = layernorm_backward_scratch_floats,                      \
    .gelu_forward = gelu_forward, .gelu_backward = gelu_backward,                       \
    .residual_forward = residual_forward,                                               \
    .residual_backward = residual_backward, .crossentropy_forward = crossentropy_forward, \
    .crossentropy_forward_backward = crossentropy_forward_backward,                     \
    .encoder_forward_shard = encoder_forward_shard,                                     \
    .encoder_backward_shard = encoder_backward_shard, .xent_shard_max = xent_shard_max, \
    .xent_shard_sums = xent_shard_sums, .xent_shard_finish = xent_shard_finish

const gt_backend backend_cpu = {
    .name = "cpu",
    CPU_BACKEND_SHARED,
    .matmul_forward = matmul_forward,
    .matmul_backward = matmul_backward,
    .matmul_backward_gelu = matmul_backward_gelu,
    .attention_forward = attention_forward,
    .attention_backward = attention_backward,
    .attention_saved_floats = attention_saved_floats,
    .attention_scratch_floats = attention_scratch_floats,
};

/* The same kernels with every matrix product (attention's too) in BF16, for
 * precision = bf16; gemm_bf16_init must have reserved the buffers. */
const gt_backend backend_cpu_bf16 = {
    .name = "cpu-bf16",
    CPU_BACKEND_SHARED,
    .matmul_forward = matmul_forward_bf16,
    .matmul_backward = matmul_backward_bf16,
    .matmul_forward_gelu = matmul_forward_gelu_bf16,
    .matmul_forward_residual = matmul_forward_residual_bf16,
    .matmul_backward_gelu = matmul_backward_gelu_bf16,
    .attention_forward = attention_forward_bf16,
    .attention_backward = attention_backward_bf16,
    .attention_saved_floats = attention_saved_floats,
    .attention_scratch_floats = attention_scratch_floats,
    .bf16_acts = &cpu_bf16_acts,
};
