/* gemm_bf16_epilogue — the fused epilogue of gemm_bf16.h, on one stored piece of C.
 * Run after a path stores the piece (a block, or a row block's columns), with the SIMD
 * path's elementwise kernels: acc (x += y) is one rounded add per element, as the
 * unfused bias-then-beta = 1 product and residual_forward make it, and gelu_fwd /
 * gelu_bwd compute each element the same way wherever the element falls in a vector, so
 * the fused product's bits are the unfused sequence's. The epilogues as a step runs them
 * take one pass a row where the SIMD path has it (simd.h's simd_epilogues_bf16, the
 * same bits): on a Zen 4 the MLP's two alone made the step 2.3% faster than with their
 * three to five passes, which each sent the row through memory again. */
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
 * dgelu arrays): gelu_bwd accumulates, into zeros, as the unfused pass, from dgelu_x;
 * from a stored slope, one rounded multiply (the slope widened, exact). Into
 * dgelu_out, or through the stack into dgelu_out16. */
static void dgelu_row(const gemm_bf16_epilogue *ep, const simd_kernels *k, const float *c,
                      size_t at, int nr)
{
    enum { PIECE = 256 };
    float s[PIECE], d[PIECE];
    for (int j = 0; j < nr; j += PIECE) {
        const int n = nr - j < PIECE ? nr - j : PIECE;
        float *const out = ep->dgelu_out ? ep->dgelu_out + at + j : d;
        if (ep->dgelu_slope16) {
            bf16_widen(s, ep->dgelu_slope16 + at + j, (size_t)n);
            for (int i = 0; i < n; i++) out[i] = s[i] * c[j + i];
        } else {
            memset(out, 0, (size_t)n * sizeof *out);
            k->gelu_bwd(out, ep->dgelu_x + at + j, c + j, (size_t)n);
        }
        if (!ep->dgelu_out) bf16_store(ep->dgelu_out16 + at + j, d, (size_t)n);
    }
}

/* GELU of one row piece of C into BF16 storage (gelu_out16 at `at`), and its slope
 * (gelu_slope16) from the same sigmoid: gelu_bwd_fwd on dout = 1 into zeros */
static void gelu16_row(const gemm_bf16_epilogue *ep, const simd_kernels *k, const float *c,
                       size_t at, int nr)
{
    enum { PIECE = 256 };
    float g[PIECE], d[PIECE], ones[PIECE];
    if (ep->gelu_slope16)
        for (int i = 0; i < PIECE; i++) ones[i] = 1.0f;
    for (int j = 0; j < nr; j += PIECE) {
        const int n = nr - j < PIECE ? nr - j : PIECE;
        if (ep->gelu_slope16) {
            memset(d, 0, (size_t)n * sizeof *d);
            k->gelu_bwd_fwd(d, g, c + j, ones, (size_t)n);
            bf16_store(ep->gelu_slope16 + at + j, d, (size_t)n);
        } else {
            k->gelu_fwd(g, c + j, (size_t)n);
        }
        bf16_store(ep->gelu_out16 + at + j, g, (size_t)n);
    }
}

void gemm_bf16_epilogue_block(const gemm_bf16_epilogue *ep, float *C, int ldc, int i0,
                              int j0, int mr, int nr, int first, int last)
{
    gemm_bf16_epilogue_piece(ep, C + (size_t)i0 * ldc + j0, ldc, i0, j0, mr, nr, first, last);
}

/* The epilogues as a step runs them, in one pass a row (simd.h's simd_epilogues_bf16)
 * where the SIMD path has it, on the last depth block (the bias with it when that is
 * also the first): 1 when done. Those that leave C unused: the MLP's forward (GELU of
 * the pre-activation into BF16 storage, and its slope), GELU's backward from a stored
 * slope into BF16 storage, a plain forward into BF16 storage; and the residual add into
 * C. */
static int piece_one_pass(const gemm_bf16_epilogue *ep, float *piece, int ldc, int i0,
                          int j0, int mr, int nr, int first)
{
    const simd_epilogues_bf16 *e = simd_epilogues_bf16_get();
    if (!e || ep->gelu_out || ep->dgelu_out || ep->dgelu_x) return 0;
    const float *const bias = first && ep->bias ? ep->bias + j0 : NULL;
    const int gelu = ep->gelu_out16 != NULL, dgelu = ep->dgelu_out16 || ep->dgelu_slope16,
              to16 = ep->out_bf16 != NULL, plain = !gelu && !dgelu;
    const int gelu_fwd = !ep->residual && gelu && !dgelu && !to16 && ep->c_unused,
              gelu_bwd = !ep->residual && !gelu && ep->dgelu_out16 && ep->dgelu_slope16 &&
                         !bias && !to16,
              bias_store = !ep->residual && plain && to16 && ep->c_unused,
              bias_residual = ep->residual && plain && !to16;
    if (!gelu_fwd && !gelu_bwd && !bias_store && !bias_residual) return 0;
    for (int r = 0; r < mr; r++) {
        float *const c = piece + (size_t)r * ldc;
        const size_t row = (size_t)(i0 + r), n = (size_t)nr;
        if (gelu_fwd)
            e->gelu_fwd(ep->gelu_out16 + row * ep->ld_gelu + j0,
                        ep->gelu_slope16 ? ep->gelu_slope16 + row * ep->ld_gelu + j0 : NULL,
                        c, bias, n);
        else if (gelu_bwd)
            e->gelu_bwd(ep->dgelu_out16 + row * ep->ld_dgelu + j0,
                        ep->dgelu_slope16 + row * ep->ld_dgelu + j0, c, n);
        else if (bias_store)
            e->bias_store(ep->out_bf16 + row * ep->ld_out_bf16 + j0, c, bias, n);
        else
            e->bias_residual(c, bias, ep->residual + row * ep->ld_residual + j0, n);
    }
    return 1;
}

void gemm_bf16_epilogue_piece(const gemm_bf16_epilogue *ep, float *piece, int ldc, int i0,
                              int j0, int mr, int nr, int first, int last)
{
    if (last && piece_one_pass(ep, piece, ldc, i0, j0, mr, nr, first)) return;
    const simd_kernels *k = simd_kernels_get();
    for (int r = 0; r < mr; r++) {
        float *c = piece + (size_t)r * ldc;
        if (first && ep->bias) k->acc(c, ep->bias + j0, (size_t)nr);
        if (!last) continue;
        if (ep->residual) k->acc(c, ep->residual + (size_t)(i0 + r) * ep->ld_residual + j0, (size_t)nr);
        if (ep->out_bf16)
            bf16_store(ep->out_bf16 + (size_t)(i0 + r) * ep->ld_out_bf16 + j0, c, (size_t)nr);
        if (ep->gelu_out) k->gelu_fwd(ep->gelu_out + (size_t)(i0 + r) * ep->ld_gelu + j0, c, (size_t)nr);
        if (ep->gelu_out16) gelu16_row(ep, k, c, (size_t)(i0 + r) * ep->ld_gelu + j0, nr);
        if (ep->dgelu_out || ep->dgelu_out16)
            dgelu_row(ep, k, c, (size_t)(i0 + r) * ep->ld_dgelu + j0, nr);
    }
}
