/* gemm_bf16_amx_pack — packs FP32 operands into the BF16 tiles of the AMX matrix product
 * (layout in gemm_bf16_amx.h), and writes the accumulator tiles back into C.
 *
 * Portable C, compiled once and called by both builds of the AMX kernel, so the
 * emulated twin runs the very packing code the hardware path runs; where the CPU has
 * AVX512_BF16 (every CPU with AMX does) both take the vector packing of
 * gemm_bf16_amx_pack_avx512.c instead, which writes the same bits
 * (gemm_bf16_amx_pack_select; tests compare the two). Rounding is FP32 to
 * BF16 to nearest, ties to even (as every BF16 path of gemm_bf16 rounds); a NaN stays a
 * NaN (made quiet); a denormal becomes a zero of its sign, as VCVTNEPS2BF16 makes it
 * (TDPBF16PS would read it as zero anyway).
 *
 * Both operands are seen as `lines` (rows of op(A), columns of op(B)) of kc values
 * along the depth; a line's values pair up as (k, k + 1). Where the depth is
 * contiguous in memory (A as stored, B transposed) each line is read in order; where
 * the lines are (A transposed, B as stored) two memory rows k, k + 1 are read side by
 * side. Either way the reads are sequential and the writes stay inside 1 KB tiles.
 * An operand in BF16 storage (GEMM_BF16_STORED: A or B as stored; GEMM_BF16_STORED_T: A
 * or B transposed) is read the same way, its values already the bits to pack. */
#define GT_BF16_MODULE /* gemm_bf16_packer.h */
#include "gemm_bf16_amx.h"
#include "gemm_bf16_packer.h"

#include <math.h>
#include <string.h>

#include "bf16_store.h"   /* bf16_widen_one */
#include "cpu_features.h" /* cpu_isa_level */
#include "simd.h"         /* GT_SIMD_X86_BF16 */

enum { T = GEMM_BF16_AMX_TILE };

/* x rounded to the nearest BF16 (ties to even), as its 16 bits; NaN quiet; a denormal
 * becomes a zero of its sign, as VCVTNEPS2BF16 makes it (the vector packing's bits) */
static inline uint32_t bf16_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
    if ((u & 0x7f800000u) == 0) return (u >> 16) & 0x8000u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

static inline uint32_t bf16_pair(float lo, float hi) { return bf16_bits(lo) | bf16_bits(hi) << 16; }

/* Where pair p of line l goes: tile (l / 16, p / 16), then inside the tile line
 * l % 16 is `sl` words apart and pair p % 16 `sp` words (A: 16, 1; B: 1, 16). */
typedef struct {
    uint32_t *out;
    int nq, sl, sp;
} layout;

static inline uint32_t *slot_of(const layout *t, int l, int p)
{
    return t->out + ((size_t)(l >> 4) * t->nq + (size_t)(p >> 4)) * T + (l & 15) * t->sl +
           (p & 15) * t->sp;
}

/* lines l < nlines at x + l ld, depth contiguous (kc values each) */
static void pack_depth_contiguous(const layout *t, const float *x, size_t ld, int nlines,
                                  int kc)
{
    const int kc2 = kc / 2;
    for (int l = 0; l < nlines; l++) {
        const float *r = x + (size_t)l * ld;
        for (int p = 0; p < kc2; p++) *slot_of(t, l, p) = bf16_pair(r[2 * p], r[2 * p + 1]);
        if (kc & 1) *slot_of(t, l, kc2) = bf16_pair(r[kc - 1], 0.0f);
    }
}

/* lines contiguous: depth k of line l at x + k ld + l; sums (or NULL): sums[l] += the
 * line's values in depth order */
static void pack_lines_contiguous(const layout *t, const float *x, size_t ld, int nlines,
                                  int kc, float *sums)
{
    for (int p = 0; 2 * p < kc; p++) {
        const float *r0 = x + (size_t)(2 * p) * ld;
        if (2 * p + 1 < kc) {
            const float *r1 = r0 + ld;
            for (int l = 0; l < nlines; l++) *slot_of(t, l, p) = bf16_pair(r0[l], r1[l]);
            if (sums)
                for (int l = 0; l < nlines; l++) sums[l] = (sums[l] + r0[l]) + r1[l];
        } else {
            for (int l = 0; l < nlines; l++) *slot_of(t, l, p) = bf16_pair(r0[l], 0.0f);
            if (sums)
                for (int l = 0; l < nlines; l++) sums[l] += r0[l];
        }
    }
}

/* The same two from BF16 storage (bf16_store.h): a stored value is already its bits */
static void pack_depth_contiguous_stored(const layout *t, const uint16_t *x, size_t ld,
                                         int nlines, int kc)
{
    const int kc2 = kc / 2;
    for (int l = 0; l < nlines; l++) {
        const uint16_t *r = x + (size_t)l * ld;
        for (int p = 0; p < kc2; p++) *slot_of(t, l, p) = r[2 * p] | (uint32_t)r[2 * p + 1] << 16;
        if (kc & 1) *slot_of(t, l, kc2) = r[kc - 1];
    }
}

static void pack_lines_contiguous_stored(const layout *t, const uint16_t *x, size_t ld,
                                         int nlines, int kc, float *sums)
{
    for (int p = 0; 2 * p < kc; p++) {
        const uint16_t *r0 = x + (size_t)(2 * p) * ld, *r1 = 2 * p + 1 < kc ? r0 + ld : NULL;
        for (int l = 0; l < nlines; l++)
            *slot_of(t, l, p) = r0[l] | (r1 ? (uint32_t)r1[l] << 16 : 0u);
        if (sums) /* sums (or NULL) as pack_lines_contiguous's, of the widened values */
            for (int l = 0; l < nlines; l++) {
                sums[l] += bf16_widen_one(r0[l]);
                if (r1) sums[l] += bf16_widen_one(r1[l]);
            }
    }
}

/* The vector packing where the CPU has it (gemm_bf16_amx_pack_avx512.c); set before
 * any product runs, read by every thread */
static int use_vector;

int gemm_bf16_amx_pack_select(int vector)
{
    use_vector = vector && GT_SIMD_X86_BF16 && cpu_isa_level() >= CPU_ISA_AVX512_BF16;
    return use_vector;
}

void gemm_bf16_amx_pack_a(uint32_t *ap, int transa, const float *A, int lda, int m0, int mc,
                          int mtiles, int k0, int kc, float *sums)
{
    if (transa != 1 && transa != GEMM_BF16_STORED_T)
        sums = NULL; /* the caller's gemm_bf16_row_sums does those */
#if GT_SIMD_X86_BF16
    if (use_vector) {
        gemm_bf16_amx_pack_a_avx512(ap, transa, A, lda, m0, mc, mtiles, k0, kc, sums);
        return;
    }
#endif
    const int nq = (kc + 31) / 32;
    const layout t = {ap, nq, 16, 1};
    memset(ap, 0, (size_t)mtiles * nq * T * sizeof *ap); /* the padding */
    if (transa == GEMM_BF16_STORED)
        pack_depth_contiguous_stored(&t, (const uint16_t *)(const void *)A + (size_t)m0 * lda + k0,
                                     (size_t)lda, mc, kc);
    else if (transa == GEMM_BF16_STORED_T)
        pack_lines_contiguous_stored(&t, (const uint16_t *)(const void *)A + (size_t)k0 * lda + m0,
                                     (size_t)lda, mc, kc, sums ? sums + m0 : NULL);
    else if (!transa)
        pack_depth_contiguous(&t, A + (size_t)m0 * lda + k0, (size_t)lda, mc, kc);
    else
        pack_lines_contiguous(&t, A + (size_t)k0 * lda + m0, (size_t)lda, mc, kc,
                              sums ? sums + m0 : NULL);
}

void gemm_bf16_amx_pack_b(uint32_t *bp, int transb, const float *B, int ldb, int n0, int nc,
                          int ntiles, int k0, int kc)
{
#if GT_SIMD_X86_BF16
    if (use_vector) {
        gemm_bf16_amx_pack_b_avx512(bp, transb, B, ldb, n0, nc, ntiles, k0, kc);
        return;
    }
#endif
    const int nq = (kc + 31) / 32;
    const layout t = {bp, nq, 1, 16};
    memset(bp, 0, (size_t)ntiles * nq * T * sizeof *bp);
    if (transb == GEMM_BF16_STORED)
        pack_lines_contiguous_stored(&t, (const uint16_t *)(const void *)B + (size_t)k0 * ldb + n0,
                                     (size_t)ldb, nc, kc, NULL);
    else if (transb == GEMM_BF16_STORED_T)
        pack_depth_contiguous_stored(&t, (const uint16_t *)(const void *)B + (size_t)n0 * ldb + k0,
                                     (size_t)ldb, nc, kc);
    else if (transb)
        pack_depth_contiguous(&t, B + (size_t)n0 * ldb + k0, (size_t)ldb, nc, kc);
    else
        pack_lines_contiguous(&t, B + (size_t)k0 * ldb + n0, (size_t)ldb, nc, kc, NULL);
}

/* gemm_bf16_amx_pack_b_pairs; stream: a copy's packing, stored past the caches where
 * the vector packing runs */
static void pack_pairs(uint32_t *bp, int transb, const float *B, int ldb, int n0, int nc,
                       int k0, int kc, int p0, int p1, int stream)
{
#if GT_SIMD_X86_BF16
    if (use_vector) {
        gemm_bf16_amx_pack_b_pairs_avx512(bp, transb, B, ldb, n0, nc, k0, kc, p0, p1, stream);
        return;
    }
#else
    (void)stream;
#endif
    const int nq = (kc + 31) / 32, width = 32 * ((nc + 31) / 32);
    const layout t = {bp, nq, 1, 16};
    const uint16_t *const h = (const uint16_t *)(const void *)B;
    for (int p = p0; p < p1; p++) {
        const int k = 2 * p, two = k + 1 < kc;
        const size_t r0 = (size_t)(k0 + k) * ldb + n0, r1 = r0 + (size_t)ldb;
        for (int n = 0; n < width; n++) {
            uint32_t v = 0;
            if (n < nc && k < kc) {
                if (transb == GEMM_BF16_STORED)
                    v = h[r0 + n] | (two ? (uint32_t)h[r1 + n] << 16 : 0u);
                else
                    v = bf16_pair(B[r0 + n], two ? B[r1 + n] : 0.0f);
            }
            *slot_of(&t, n, p) = v;
        }
    }
}

void gemm_bf16_amx_pack_b_pairs(uint32_t *bp, int transb, const float *B, int ldb, int n0,
                                int nc, int k0, int kc, int p0, int p1)
{
    pack_pairs(bp, transb, B, ldb, n0, nc, k0, kc, p0, p1, 0);
}

/* gemm_bf16_amx_pack_b, streamed where the vector packing runs (a copy's packing) */
static void pack_b_copy(uint32_t *bp, int transb, const float *B, int ldb, int n0, int nc,
                        int ntiles, int k0, int kc)
{
#if GT_SIMD_X86_BF16
    if (use_vector) {
        gemm_bf16_amx_pack_b_streamed_avx512(bp, transb, B, ldb, n0, nc, ntiles, k0, kc);
        return;
    }
#endif
    gemm_bf16_amx_pack_b(bp, transb, B, ldb, n0, nc, ntiles, k0, kc);
}

static void stream_fence(void)
{
#if GT_SIMD_X86_BF16
    if (use_vector) gemm_bf16_amx_stream_fence();
#endif
}

/* The AMX packer (gemm_bf16_packer.h): strips of 32 columns, two B tiles wide */
static size_t amx_panel_words(int nc, int kc)
{
    return (size_t)((nc + 31) / 32) * 2 * (size_t)((kc + 31) / 32) * T;
}

/* Strip s (32 columns: two B tiles) of the block at jc, pc; a copy's packing streamed */
static void strip_of(uint32_t *panel, int s, int nc, int transb, const float *B, int ldb,
                     int jc, int pc, int kc, int copy)
{
    const int n0 = 32 * s, nr = nc - n0 < 32 ? nc - n0 : 32, nq = (kc + 31) / 32;
    (copy ? pack_b_copy : gemm_bf16_amx_pack_b)(panel + (size_t)2 * s * nq * T, transb, B, ldb,
                                                jc + n0, nr, 2, pc, kc);
}

static void amx_pack_strip(uint32_t *panel, int s, int nc, int transb, const float *B, int ldb,
                           int jc, int pc, int kc)
{
    strip_of(panel, s, nc, transb, B, ldb, jc, pc, kc, 0);
}

static void amx_copy_strip(uint32_t *panel, int s, int nc, int transb, const float *B, int ldb,
                           int jc, int pc, int kc)
{
    strip_of(panel, s, nc, transb, B, ldb, jc, pc, kc, 1);
    stream_fence();
}

/* A slice of depth of every strip (d0 a multiple of 32): its pairs, the last chunk's
 * past the block's depth as zeros */
static void depth_slice(uint32_t *panel, int nc, const float *B, int ldb, int jc, int pc,
                        int kc, int d0, int dn, int copy)
{
    pack_pairs(panel, 0, B, ldb, jc, nc, pc, kc, d0 / 2, d0 / 2 + 16 * ((dn + 31) / 32), copy);
}

static void amx_pack_depth(uint32_t *panel, int nc, const float *B, int ldb, int jc, int pc,
                           int kc, int d0, int dn)
{
    depth_slice(panel, nc, B, ldb, jc, pc, kc, d0, dn, 0);
}

static void amx_copy_depth(uint32_t *panel, int nc, const float *B, int ldb, int jc, int pc,
                           int kc, int d0, int dn)
{
    depth_slice(panel, nc, B, ldb, jc, pc, kc, d0, dn, 1);
    stream_fence();
}

/* The product's own packing of B strips (the AMX kernel), and the packing of copies
 * once per update: the same layout and bits, the copies' stores streamed */
const gemm_bf16_packer gemm_bf16_amx_packer = {.kc = GEMM_BF16_AMX_KC,
                                               .nc = GEMM_BF16_AMX_NC,
                                               .strip = 32,
                                               .panel_words = amx_panel_words,
                                               .pack_strip = amx_pack_strip,
                                               .pack_depth = amx_pack_depth};
const gemm_bf16_packer gemm_bf16_amx_copy_packer = {.kc = GEMM_BF16_AMX_KC,
                                                    .nc = GEMM_BF16_AMX_NC,
                                                    .strip = 32,
                                                    .panel_words = amx_panel_words,
                                                    .pack_strip = amx_copy_strip,
                                                    .pack_depth = amx_copy_depth};

void gemm_bf16_amx_write_c(const float *ct, float *c, int ldc, int mr, int nr, float alpha,
                           float beta)
{
#if GT_SIMD_X86_BF16
    if (use_vector) {
        gemm_bf16_amx_write_c_avx512(ct, c, ldc, mr, nr, alpha, beta);
        return;
    }
#endif
    for (int r = 0; r < mr; r++) {
        const float *s = ct + (size_t)(r >> 4) * 2 * T + (size_t)(r & 15) * 16;
        float *cr = c + (size_t)r * ldc;
        for (int j = 0; j < nr; j++) {
            const float v = alpha * s[(j >> 4) * T + (j & 15)];
            cr[j] = beta == 0.0f ? v : fmaf(beta, cr[j], v);
        }
    }
}

void gemm_bf16_amx_stream_rows(const float *src, int lds, float *dst, int ldd, int rows,
                               int cols)
{
#if GT_SIMD_X86_BF16
    if (use_vector) {
        gemm_bf16_amx_stream_rows_avx512(src, lds, dst, ldd, rows, cols);
        stream_fence();
        return;
    }
#endif
    for (int r = 0; r < rows; r++)
        memcpy(dst + (size_t)r * ldd, src + (size_t)r * lds, (size_t)cols * sizeof *dst);
}
