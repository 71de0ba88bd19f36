/* gemm_bf16_epilogue — the fused epilogue of gemm_bf16.h, on one stored piece of C.
 * Run after a path stores the piece (a block, or a row block's columns), with the SIMD
 * path's elementwise kernels: acc (x += y) is one rounded add per element, as the
 * unfused bias-then-beta = 1 product and residual_forward make it, and gelu_fwd /
 * gelu_bwd compute each element the same way wherever the element falls in a vector, so
 * the fused product's bits are the unfused sequence's. The MLP's two epilogues as a step
 * runs them take one pass a row where the SIMD path has it (simd.h's simd_gelu_bf16,
 * the same bits): on a Zen 4 the step ran 2.3% faster than with their three to five
 * passes, which each sent the row through memory again. */
#include "gemm_bf16.h"

#include <string.h>

#include "bf16_store.h"
#include "simd.h" /* simd_kernels_get: acc, gelu_fwd, gelu_bwd */

void gemm_bf16_row_sums(float *sums, int transa, const float *A, int lda, int m0, int mc,
                        int k0, int kc)
{
    if (transa == GEMM_BF16_STORED_T) { /* the same from BF16 storage, widened (exact) */
        const uint16_t *h = (const uint16_t *)(const void *)A;
        const simd_kernels *k = simd_kernels_get();
        float row[256];
        for (int d = 0; d < kc; d++)
            for (int i = 0; i < mc; i += 256) {
                const int n = mc - i < 256 ? mc - i : 256;
                bf16_widen(row, h + (size_t)(k0 + d) * lda + m0 + i, (size_t)n);
                k->acc(sums + m0 + i, row, (size_t)n);
            }
        return;
    }
    if (transa) { /* A stored [k][m]: a row of memory adds into mc sums at once, one
                   * rounded add per element (simd's acc), as the scalar loop */
        const simd_kernels *k = simd_kernels_get();
        for (int d = 0; d < kc; d++) k->acc(sums + m0, A + (size_t)(k0 + d) * lda + m0, (size_t)mc);
        return;
    }
    for (int i = 0; i < mc; i++) {
        const float *r = A + (size_t)(m0 + i) * lda + k0;
        float s = sums[m0 + i];
        for (int k = 0; k < kc; k++) s += r[k];
        sums[m0 + i] = s;
    }
}

int gemm_bf16_epilogue_acts(const gemm_bf16_epilogue *ep, int first, int last)
{
    if (!ep) return 0;
    if (first && ep->bias) return 1;
    return last && (ep->residual || ep->out_bf16 || ep->gelu_out || ep->gelu_out16 ||
                    ep->dgelu_out || ep->dgelu_out16);
}

/* GELU's backward of one row piece of C (nr values; the element offset `at` into the
 * dgelu arrays): gelu_bwd accumulates, into zeros, as the unfused pass. Into
 * dgelu_out, or through the stack into dgelu_out16; from dgelu_x, or dgelu_x16
 * widened a piece at a time on the stack (then with dgelu_gelu16, GELU itself from
 * the same sigmoid). */
static void dgelu_row(const gemm_bf16_epilogue *ep, const simd_kernels *k, const float *c,
                      size_t at, int nr)
{
    enum { PIECE = 256 };
    float x[PIECE], g[PIECE], d[PIECE];
    for (int j = 0; j < nr; j += PIECE) {
        const int n = nr - j < PIECE ? nr - j : PIECE;
        float *const out = ep->dgelu_out ? ep->dgelu_out + at + j : d;
        memset(out, 0, (size_t)n * sizeof *out);
        const float *xs = ep->dgelu_x ? ep->dgelu_x + at + j : x;
        if (!ep->dgelu_x) bf16_widen(x, ep->dgelu_x16 + at + j, (size_t)n);
        if (ep->dgelu_gelu16) {
            k->gelu_bwd_fwd(out, g, xs, c + j, (size_t)n);
            bf16_store(ep->dgelu_gelu16 + at + j, g, (size_t)n);
        } else {
            k->gelu_bwd(out, xs, c + j, (size_t)n);
        }
        if (!ep->dgelu_out) bf16_store(ep->dgelu_out16 + at + j, d, (size_t)n);
    }
}

void gemm_bf16_epilogue_block(const gemm_bf16_epilogue *ep, float *C, int ldc, int i0,
                              int j0, int mr, int nr, int first, int last)
{
    gemm_bf16_epilogue_piece(ep, C + (size_t)i0 * ldc + j0, ldc, i0, j0, mr, nr, first, last);
}

/* The MLP's two epilogues as a step runs them, in one pass a row (simd.h's
 * simd_gelu_bf16) where the SIMD path has it: 1 when done. The forward: the bias (on
 * the first depth block), the pre-activation into BF16 storage with C rounded to it but
 * unused, GELU of it into BF16 storage. The backward: GELU's backward from a BF16
 * pre-activation into BF16 storage, with GELU of it. */
static int mlp_piece_one_pass(const gemm_bf16_epilogue *ep, const float *piece, int ldc,
                              int i0, int j0, int mr, int nr, int first)
{
    const simd_gelu_bf16 *g = simd_gelu_bf16_get();
    if (!g || ep->residual || ep->gelu_out || ep->dgelu_out || ep->dgelu_x) return 0;
    if (ep->gelu_out16 && ep->out_bf16 && ep->round_c && ep->c_unused && !ep->dgelu_out16) {
        const float *bias = first && ep->bias ? ep->bias + j0 : NULL;
        for (int r = 0; r < mr; r++)
            g->fwd(ep->out_bf16 + (size_t)(i0 + r) * ep->ld_out_bf16 + j0,
                   ep->gelu_out16 + (size_t)(i0 + r) * ep->ld_gelu + j0,
                   piece + (size_t)r * ldc, bias, (size_t)nr);
        return 1;
    }
    if (ep->dgelu_out16 && ep->dgelu_x16 && ep->dgelu_gelu16 && !ep->bias && !ep->out_bf16 &&
        !ep->gelu_out16) {
        for (int r = 0; r < mr; r++) {
            const size_t at = (size_t)(i0 + r) * ep->ld_dgelu + j0;
            g->bwd(ep->dgelu_out16 + at, ep->dgelu_gelu16 + at, ep->dgelu_x16 + at,
                   piece + (size_t)r * ldc, (size_t)nr);
        }
        return 1;
    }
    return 0;
}

void gemm_bf16_epilogue_piece(const gemm_bf16_epilogue *ep, float *piece, int ldc, int i0,
                              int j0, int mr, int nr, int first, int last)
{
    if (last && mlp_piece_one_pass(ep, piece, ldc, i0, j0, mr, nr, first)) return;
    const simd_kernels *k = simd_kernels_get();
    for (int r = 0; r < mr; r++) {
        float *c = piece + (size_t)r * ldc;
        if (first && ep->bias) k->acc(c, ep->bias + j0, (size_t)nr);
        if (!last) continue;
        if (ep->residual) k->acc(c, ep->residual + (size_t)(i0 + r) * ep->ld_residual + j0, (size_t)nr);
        if (ep->out_bf16) {
            uint16_t *h = ep->out_bf16 + (size_t)(i0 + r) * ep->ld_out_bf16 + j0;
            bf16_store(h, c, (size_t)nr);
            if (ep->round_c) bf16_widen(c, h, (size_t)nr);
        }
        if (ep->gelu_out) k->gelu_fwd(ep->gelu_out + (size_t)(i0 + r) * ep->ld_gelu + j0, c, (size_t)nr);
        if (ep->gelu_out16) { /* through the stack a piece at a time, as dgelu_row */
            float g[256];
            uint16_t *h = ep->gelu_out16 + (size_t)(i0 + r) * ep->ld_gelu + j0;
            for (int j = 0; j < nr; j += 256) {
                const int n = nr - j < 256 ? nr - j : 256;
                k->gelu_fwd(g, c + j, (size_t)n);
                bf16_store(h + j, g, (size_t)n);
            }
        }
        if (ep->dgelu_out || ep->dgelu_out16)
            dgelu_row(ep, k, c, (size_t)(i0 + r) * ep->ld_dgelu + j0, nr);
    }
}
