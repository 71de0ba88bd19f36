/* gemm_bf16 — matrix products in BF16 with FP32 accumulation, for `precision = bf16`.
 *
 *   C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C
 *
 * with the arguments of cblas_sgemm in row-major order (transa / transb: 0 = as
 * stored, 1 = transposed). A, B and C are FP32 arrays: every element of A and B is
 * rounded to bfloat16 (nearest even) as it is packed, each product of two bfloat16 is
 * exact in FP32, and the sums are FP32. The master weights and every activation stay
 * FP32; only the products see BF16. beta = 0 never reads C.
 *
 * Paths, picked once for the CPU in gemm_bf16_init (gemm_bf16_path_name says which runs):
 *  - "amx-bf16": packed tiles and TDPBF16PS tile products (AMX-TILE + AMX-BF16 with the
 *    tile state granted by Linux: Intel Sapphire Rapids and later), first choice;
 *  - "avx512-bf16": packed panels and a micro-kernel of VDPBF16PS dot products
 *    (AVX512_BF16: Intel Cooper Lake and Sapphire Rapids on, AMD Zen 4 on), chosen
 *    where the dot products measure at 1x the FP32 multiply-add rate or more
 *    (gemm_bf16_dot_products_pay: AMD Zen 4 and 5 at about 2x, not the Intel Xeons
 *    whose VDPBF16PS runs at under half their FMA rate);
 *  - "portable": the operands rounded to bfloat16 values in FP32 panels, multiplied
 *    by OpenBLAS sgemm. The same function on every CPU (a reference, the path where
 *    the CPU has no BF16 instructions or slow ones), near FP32 speed;
 *  - "amx-emulated": the AMX path's kernel over a software model of the tiles
 *    (gemm_bf16_amx.h), on any CPU, slowly. For tests; never picked automatically.
 * They differ only in the order of the FP32 sums and in inputs below 2^-126, which
 * VDPBF16PS and TDPBF16PS treat as zero.
 * GENTRAIN_BF16=portable|avx512|amx|amx-emulated|auto, read by gemm_bf16_init, asks
 * for a path; one the CPU lacks falls back to the best it has, with one warning.
 *
 * Threads: called outside a parallel region, a product uses the OpenMP threads
 * (blocks of rows in parallel); called inside one (attention, one head per thread), it
 * runs on the calling thread. On the AVX512_BF16 and AMX paths the results do not
 * depend on either (each block of C is summed in one fixed order); the portable path
 * is as deterministic as OpenBLAS, which may take another kernel on one thread.
 *
 * Memory: gemm_bf16_init reserves every buffer the products use (a few MB per
 * thread), so a product never allocates and cannot fail.
 *
 * Operands stored as BF16: transa / transb = GEMM_BF16_STORED (2) reads that operand as
 * stored (not transposed) from an array of uint16_t BF16 values (bf16_store.h), passed
 * as the float pointer; lda / ldb count its elements. The product is the one of the
 * FP32 operand they were rounded from, bit for bit, on every path (the portable one
 * apart from denormals, which bf16_store makes zero as VCVTNEPS2BF16 does).
 *
 * Weights: a B operand registered with gemm_bf16_weights.h is packed once per update
 * and read from there (the same bits); gemm_bf16_fused does the forward's bias, GELU
 * and residual add, and GELU's backward, in the write-back of each block of C. */
#ifndef GT_GEMM_BF16_H
#define GT_GEMM_BF16_H

#include <stddef.h>
#include <stdint.h>

/* op(X) = X read from BF16 storage (see above) */
#define GEMM_BF16_STORED 2
/* op(X) = X^T from BF16 storage: A on every path (a weight gradient's dout^T), with row
 * sums; B on the AMX packing only (gemm_bf16_amx.h) */
#define GEMM_BF16_STORED_T 3

/* Reserves the buffers for up to `threads` OpenMP threads (and no fewer than the
 * OpenMP runtime's current maximum). Reports and returns -1 when out of memory.
 * Calling it again with as many threads or fewer does nothing. */
int gemm_bf16_init(int threads);
void gemm_bf16_free(void);

void gemm_bf16(int transa, int transb, int M, int N, int K, float alpha, const float *A,
               int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* What a fused product does to C while each block of it is stored, instead of passes
 * over memory afterwards (every member optional, NULL: not done):
 *   C = alpha op(A) op(B) + beta C + bias + residual     (forward)
 *   gelu_out = gelu(C)                                   (GELU, tanh form; or into
 *                                                         BF16 storage, gelu_out16,
 *                                                         with its slope gelu'(C))
 *   dgelu_out = gelu'(dgelu_x) C                         (GELU's backward; or into
 *                                                         BF16 storage, dgelu_out16;
 *                                                         or from a stored slope)
 *   out_bf16 = C rounded to BF16 (bf16_store.h)          (a stored copy)
 *   row_sums += sum over k of op(A)[i, k]                 (a bias gradient)
 * with bias[N] added to the first depth block's sums and the rest done after the last,
 * so every output has the very bits of the unfused sequence: C = bias broadcast,
 * gemm_bf16 with beta = 1, then residual_forward, gelu_forward or (dgelu_out zeroed)
 * gelu_backward. */
typedef struct gemm_bf16_epilogue {
    const float *bias;     /* [N], added to every row */
    const float *residual; /* M rows, ld_residual apart */
    size_t ld_residual;
    float *gelu_out;       /* M rows, ld_gelu apart */
    size_t ld_gelu;
    uint16_t *gelu_out16;  /* instead of gelu_out: gelu(C) in BF16 storage (bf16_store.h),
                            * ld_gelu apart: for a product that reads it, the values its
                            * packing would have made */
    uint16_t *gelu_slope16; /* with gelu_out16 (or NULL): gelu'(C) in BF16 storage, ld_gelu
                             * apart, from the same sigmoid (simd's gelu_bwd_fwd on dout
                             * = 1 into zeros): all GELU's backward needs of C, so the
                             * MLP keeps it instead of the pre-activation */
    const float *dgelu_x;  /* M rows, ld_dgelu apart, as dgelu_out */
    float *dgelu_out;
    size_t ld_dgelu;
    uint16_t *dgelu_out16; /* instead of dgelu_out: the same in BF16 storage, ld_dgelu
                            * apart (the next products' operand, the bits their packing
                            * would make of dgelu_out) */
    uint16_t *out_bf16;    /* M rows, ld_out_bf16 apart: C's final values in BF16 */
    size_t ld_out_bf16;
    const uint16_t *dgelu_slope16; /* instead of dgelu_x: GELU's slope there in BF16
                                    * storage (gelu_slope16's), ld_dgelu apart: dgelu =
                                    * slope C, one rounded multiply */
    /* [M] += the FP32 sums over the depth of op(A)'s rows (transa 0, 1 or
     * GEMM_BF16_STORED_T, whose BF16 values are summed widened): a bias
     * gradient while its dout is packed as A^T, each row summed from zero in depth
     * order and then added, the bits of the column-sum pass it replaces */
    float *row_sums;
    /* 1: C's own values are not wanted after the product, only the epilogue's outputs
     * (out_bf16, gelu_out16, dgelu_out16, ...): a path may then keep each piece of C in
     * a buffer of its own, in cache, and never write C (the AMX and AVX512_BF16 paths
     * do, where B is a copy packed once per update), or write C as usual; C must still
     * be there. */
    int c_unused;
} gemm_bf16_epilogue;

/* C = alpha op(A) op(B) + beta C with epilogue ep; the threads as gemm_bf16 */
void gemm_bf16_fused(int transa, int transb, int M, int N, int K, float alpha, const float *A,
                     int lda, const float *B, int ldb, float beta, float *C, int ldc,
                     const gemm_bf16_epilogue *ep);

enum gemm_bf16_path {
    GEMM_BF16_AUTO = 0, /* the best the CPU has (or, to gemm_bf16_force_path, the
                           choice gemm_bf16_init made from GENTRAIN_BF16) */
    GEMM_BF16_PORTABLE,
    GEMM_BF16_AVX512,
    GEMM_BF16_AMX,
    GEMM_BF16_AMX_EMULATED
};

/* 1 when this CPU has AVX512_BF16 dot products that multiply fast enough to be the
 * automatic choice below AMX (cpu_bf16_dot_over_fma >= 1; measured at the first
 * call, about 40 ms: gemm_bf16_init makes it, or train_report_compute sets it) */
int gemm_bf16_dot_products_pay(void);

/* Forces a path for the products that follow (tests, benchmarks); one the CPU lacks
 * gives the best it has, with a warning. Call it outside parallel regions. Returns the
 * path that runs. */
enum gemm_bf16_path gemm_bf16_force_path(enum gemm_bf16_path want);
/* The path that runs; its name: "amx-bf16", "avx512-bf16", "portable" or
 * "amx-emulated". */
enum gemm_bf16_path gemm_bf16_path(void);
const char *gemm_bf16_path_name(void);
/* Path p's name (as above); whether this build has its code (the compiler knew its
 * instructions); whether this CPU can run it too (AUTO: 0 for both). */
const char *gemm_bf16_name_of(enum gemm_bf16_path p);
int gemm_bf16_path_built(enum gemm_bf16_path p);
int gemm_bf16_cpu_runs(enum gemm_bf16_path p);

/* The AVX512_BF16 path (gemm_bf16_avx512.c), for the dispatcher: packs into the
 * caller's buffers apack (GEMM_BF16_APACK bytes: an A panel, then a piece of C for an
 * epilogue that leaves C unused) and bpack (GEMM_BF16_BPACKS bytes: two
 * B panels of GEMM_BF16_BPACK, the AMX paths' too, filled in turn, so that packing the
 * next depth block's panel waits for the team only once: until the last is packed, not
 * also until every thread is done with it);
 * `parallel` = use the OpenMP threads (with ws = the per-thread A buffers); bpre: B's
 * copy packed once per update (gemm_bf16_weights.h), or NULL to pack B here; ep: the
 * epilogue, or NULL. */
#define GEMM_BF16_APACK_PANEL ((size_t)64 * 256 * 4)
#define GEMM_BF16_APACK (GEMM_BF16_APACK_PANEL + (size_t)56 * 2048 * 4)
#define GEMM_BF16_BPACK ((size_t)256 * 2048 * 4)
#define GEMM_BF16_BPACKS (2 * GEMM_BF16_BPACK)
void gemm_bf16_avx512(int transa, int transb, int M, int N, int K, float alpha,
                      const float *A, int lda, const float *B, int ldb, float beta, float *C,
                      int ldc, void *bpack, void *const *apacks, int parallel,
                      const void *bpre, const gemm_bf16_epilogue *ep);

/* The epilogue on the stored block of C at rows i0.., columns j0.. (mr x nr): bias when
 * `first` (the first depth block's sums), residual and GELU when `last` (every path
 * calls it after storing a piece of C, a row block's columns at once where it can:
 * gemm_bf16_epilogue.c) */
void gemm_bf16_epilogue_block(const gemm_bf16_epilogue *ep, float *C, int ldc, int i0,
                              int j0, int mr, int nr, int first, int last);
/* The same on a piece of C held elsewhere: c is element (i0, j0) of C, its rows ldc
 * apart (the epilogue's other arrays are still indexed by i0, j0) */
void gemm_bf16_epilogue_piece(const gemm_bf16_epilogue *ep, float *c, int ldc, int i0, int j0,
                              int mr, int nr, int first, int last);
/* 1 when gemm_bf16_epilogue_block has something to do for that depth block (a path may
 * skip the call, and a pass over C for it, otherwise) */
int gemm_bf16_epilogue_acts(const gemm_bf16_epilogue *ep, int first, int last);
/* For the paths, right after packing op(A)'s rows m0 .. m0+mc at depth k0 .. k0+kc (the
 * first column block and column group only, so once): sums[m0 + i] += those values in
 * depth order (the dispatcher hands the paths zeroed sums, then adds them) */
void gemm_bf16_row_sums(float *sums, int transa, const float *A, int lda, int m0, int mc,
                        int k0, int kc);

#endif
