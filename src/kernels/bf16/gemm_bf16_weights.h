/* gemm_bf16_weights — weight matrices packed once per update for the BF16 products.
 *
 * A product of gemm_bf16 packs its B operand into BF16 on every call. For a weight
 * matrix that is wasted work between two optimizer updates: every micro-batch's
 * forward reads w^T and its backward w, both unchanged. A registered matrix is packed
 * by gemm_bf16_weights_refresh into each orientation's layout (gemm_bf16_packer.h) for
 * the path that runs, and gemm_bf16 then reads that copy whenever its B argument is the
 * registered matrix in either orientation, skipping B's packing and the barriers around
 * it. The results are the same bits either way.
 *
 * Contract: the caller that changes a registered matrix's values (the optimizer's
 * update, a load) calls gemm_bf16_weights_refresh before the next product that reads
 * it, or changes them through gemm_bf16_weights_update; a product whose B is not a
 * registered matrix (another pointer, another shape, or a copy packed for another path)
 * packs as always. Call these outside parallel regions.
 * Memory: 4 bytes per weight (two BF16 orientations), gemm_bf16_weights_bytes. */
#ifndef GT_GEMM_BF16_WEIGHTS_H
#define GT_GEMM_BF16_WEIGHTS_H

#include <stddef.h>

#include "gemm_bf16.h" /* enum gemm_bf16_path */

/* Registers the rows x cols row-major matrix at w (a product's B as w^T, transb = 1,
 * and as w, transb = 0). Not packed until the next refresh. -1 when out of memory. */
int gemm_bf16_weights_add(const float *w, int rows, int cols);
/* Packs every registered matrix for the path that runs now (gemm_bf16_path), on the
 * OpenMP threads. -1 (reported) when out of memory: the registry is then empty and
 * products pack as always. */
int gemm_bf16_weights_refresh(void);
/* The optimizer's pass writing the copies (no pass of their own after it): whether
 * every registered matrix is packed for the path that runs now, so that
 * gemm_bf16_weights_update can keep them current. */
int gemm_bf16_weights_current(void);
/* Calls update(ctx, first, count) to change elements [first, first + count) of the
 * registered matrix w (row-major, rows x cols; the optimizer's update of it), in bands
 * of whole rows split over the OpenMP threads, each element once, and packs each band
 * into both copies right after its update, while it is in the core's cache (a band is
 * a strip of w^T and a depth slice of w). Returns 1 when done, 0 (nothing called)
 * when w is not registered or not packed for the path that runs now. Call it outside
 * parallel regions; update runs inside one. */
int gemm_bf16_weights_update(const float *w,
                             void (*update)(const void *ctx, size_t first, size_t count),
                             const void *ctx);
/* Forgets every matrix and frees the copies. */
void gemm_bf16_weights_clear(void);
/* Bytes of the packed copies */
size_t gemm_bf16_weights_bytes(void);

#ifdef GT_BF16_MODULE
/* The dispatcher's lookup: the copy packed for `path` of op(B) = B (transb 0) or B^T
 * (transb 1), K x N with leading dimension ldb, or NULL. */
const void *gemm_bf16_weights_find(const float *B, int transb, int ldb, int K, int N,
                                   enum gemm_bf16_path path);
#endif

#endif
