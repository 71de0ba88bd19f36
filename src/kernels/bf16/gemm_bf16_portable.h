/* gemm_bf16_portable — the portable path of gemm_bf16.h, for the dispatcher
 * (gemm_bf16.c): op(A) and op(B) rounded to bfloat16 values (ties to even, as simd's
 * bf16_round) in FP32 panels, or widened where an operand is in BF16 storage, and
 * multiplied by OpenBLAS sgemm, one call per depth block of GEMM_BF16_PORTABLE_KC and
 * column block of GEMM_BF16_PORTABLE_NC, over up to pm rows. The same function on every
 * CPU, and the automatic choice where the CPU has no BF16 instructions or slow ones.
 *
 * Threads: called outside a parallel region, the rounding, the bias and the epilogue
 * run on the OpenMP team and sgemm on OpenBLAS's threads; inside one, all on the
 * calling thread. As deterministic as OpenBLAS, which may take another kernel on one
 * thread.
 *
 * Internal to the BF16 products. */
#ifndef GT_GEMM_BF16_PORTABLE_H
#define GT_GEMM_BF16_PORTABLE_H

#include "gemm_bf16.h" /* defines: gemm_bf16_epilogue */

/* Depth and columns of a B panel (PK x PN floats, the caller's pb) */
#define GEMM_BF16_PORTABLE_KC 256
#define GEMM_BF16_PORTABLE_NC 2048

/* C = alpha op(A) op(B) + beta C with epilogue ep (or NULL), as gemm_bf16_fused, in the
 * caller's panels: pa of pm x GEMM_BF16_PORTABLE_KC floats, pb of GEMM_BF16_PORTABLE_KC
 * x GEMM_BF16_PORTABLE_NC floats; bpre: op(B) packed once per update by the portable
 * packer (gemm_bf16_packer.h), or NULL to round B here. K > 0. */
void gemm_bf16_portable(float *pa, int pm, float *pb, int transa, int transb, int M, int N,
                        int K, float alpha, const float *A, int lda, const float *B, int ldb,
                        float beta, float *C, int ldc, const void *bpre,
                        const gemm_bf16_epilogue *ep);

#endif
