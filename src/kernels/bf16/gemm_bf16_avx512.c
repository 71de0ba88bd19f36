/* gemm_bf16_avx512 — the AVX512_BF16 path of gemm_bf16.h.
 *
 * The classic blocked product (as BLIS and OpenBLAS cut it): for each block of NC
 * columns and KC depth, B is packed once into strips of NR = 32 columns, then each
 * thread takes its items (gemm_split.h's row split: its own part of the rows in blocks
 * of up to MC rows, or blocks of rows and columns where the rows are few for the
 * threads; on a packed weight, the other parts' last strips too once its own are done,
 * gemm_steal.h), packs their rows into strips of MR = 14 rows, and runs the micro-kernel on
 * every (row strip, column strip) pair, a short strip only on the rows it has. Packing
 * rounds FP32 to BF16 and lays pairs of consecutive k side by side in one 32-bit word,
 * the operand layout of VDPBF16PS:
 * lane i of acc += a[2i] b[2i] + a[2i+1] b[2i+1].
 *
 *   packed A strip: [k2][r]   r < MR,  the pair (A[r, 2 k2], A[r, 2 k2 + 1])
 *   packed B strip: [k2][n]   n < NR,  the pair (B[2 k2, n], B[2 k2 + 1, n])
 *
 * The micro-kernel keeps a 14 x 32 block of C in 28 registers: per pair of k it loads
 * two B vectors and broadcasts 14 A pairs, 28 dot-product instructions of 64 flops.
 * Rows past M and columns past N are packed as zeros and never stored; an odd K gets
 * a zero partner. */
#define GT_BF16_MODULE
#include "gemm_bf16.h"
#include "gemm_bf16_packer.h"
#include "simd.h" /* GT_SIMD_X86_BF16 */

#if GT_SIMD_X86_BF16
#include "bf16_target_begin.h" /* AVX512_BF16 from here on */

#include <immintrin.h>
#include <stdint.h>

#include "bf16_x86.h" /* lanes, pairs_of, bf16_pairs_along_k/across_k (and _stored) */
#include "prefetch.h" /* gt_prefetch_l2 */
#include "gemm_split.h"
#include "gemm_steal.h"
#include "dot_counts.h" /* the bench's count of VDPBF16PS and kernel time */

#ifdef _OPENMP
#include <omp.h>
#endif

/* KC = 512: C is read and written once per 512 of depth (256 measured 5-15% slower on
 * the model's K = 1536 products); a packed B strip (32 KB) and A strip (14 KB) still
 * fit a 48 KB L1 together. */
enum { MR = 14, NR = 32, KC = 512, KC2 = KC / 2, MC = 4 * MR, NC = 2048 };

_Static_assert((size_t)MC * KC2 * 4 <= GEMM_BF16_APACK_PANEL, "A panel fits its buffer");
_Static_assert((size_t)MC * NC * 4 <= GEMM_BF16_APACK - GEMM_BF16_APACK_PANEL,
               "a piece of C fits after it");
_Static_assert((size_t)NC * KC2 * 4 <= GEMM_BF16_BPACK, "B panel fits its buffer");

/* A strip: rows m0 .. m0+mr of op(A), depth k0 .. k0+kc, into ap[kc2][MR]; with trans
 * = 1 or GEMM_BF16_STORED_T, sums (or NULL): sums[m0 + i] += row i's values in depth order (the bits of
 * gemm_bf16_row_sums), as they are loaded */
static void pack_a(uint32_t *ap, int trans, const float *A, int lda, int m0, int mr, int k0,
                   int kc, float *sums)
{
    const int kc2 = (kc + 1) / 2;
    if (trans == GEMM_BF16_STORED) { /* the same from BF16 storage */
        bf16_pairs_along_k_stored(ap, MR, MR, (const uint16_t *)(const void *)A + (size_t)m0 * lda + k0,
                                  (size_t)lda, mr, kc);
        return;
    }
    if (!trans) { /* A[m][k]: each row's pairs are contiguous */
        bf16_pairs_along_k(ap, MR, MR, A + (size_t)m0 * lda + k0, (size_t)lda, mr, kc);
        return;
    }
    if (trans == GEMM_BF16_STORED_T) { /* A stored [k][m] in BF16: rows k, k+1 side by side */
        const uint16_t *h = (const uint16_t *)(const void *)A + (size_t)k0 * lda + m0;
        const __m512i high = _mm512_set1_epi32((int)0xffff0000u);
        __m512 sum = sums ? _mm512_maskz_loadu_ps(lanes(mr), sums + m0) : _mm512_setzero_ps();
        for (int j = 0; j < kc2; j++) {
            const uint16_t *r0 = h + (size_t)(2 * j) * lda;
            const uint16_t *r1 = 2 * j + 1 < kc ? r0 + lda : NULL;
            const __m512i pr = bf16_pairs_of_stored(r0, r1, mr);
            if (sums) { /* the pair's halves widened: rows k, then k + 1 */
                sum = _mm512_add_ps(sum, _mm512_castsi512_ps(_mm512_slli_epi32(pr, 16)));
                if (r1) sum = _mm512_add_ps(sum, _mm512_castsi512_ps(_mm512_and_si512(pr, high)));
            }
            _mm512_mask_storeu_epi32(ap + (size_t)j * MR, lanes(MR), pr);
        }
        if (sums) _mm512_mask_storeu_ps(sums + m0, lanes(mr), sum);
        return;
    }
    /* A stored [k][m]: rows k and k+1 side by side (14 of 16 lanes stored) */
    const __mmask16 m = lanes(mr);
    __m512 sum = sums ? _mm512_maskz_loadu_ps(m, sums + m0) : _mm512_setzero_ps();
    for (int j = 0; j < kc2; j++) {
        const int k = k0 + 2 * j;
        const float *r0 = A + (size_t)k * lda + m0;
        const float *r1 = 2 * j + 1 < kc ? r0 + lda : NULL;
        __m512 x0 = _mm512_maskz_loadu_ps(m, r0);
        __m512 x1 = r1 ? _mm512_maskz_loadu_ps(m, r1) : _mm512_setzero_ps();
        if (sums) {
            sum = _mm512_add_ps(sum, x0);
            if (r1) sum = _mm512_add_ps(sum, x1);
        }
        _mm512_mask_storeu_epi32(ap + (size_t)j * MR, lanes(MR), pairs_of(x0, x1));
    }
    if (sums) _mm512_mask_storeu_ps(sums + m0, m, sum);
}

/* Part `part` of `parts` of the block of A^T a weight gradient packs next (rows m0 ..
 * m0+mc of op(A), depth k0 .. k0+kc; A stored [k][m] in BF16, GEMM_BF16_STORED_T),
 * asked into L2 (gt_prefetch_l2): a part per column strip of the block running now, so
 * the lines come spread over it. That block is a short piece of each of KC rows of the
 * output gradient (0.5-3 KB apart at L6 C384), which its packing otherwise waits on:
 * Zen 4, L6 C384, the weight gradients 0.9-2.5 ms a step faster in alternated steps of
 * one run (six runs). Other A: nothing (the products that read A in place gained
 * nothing from it). */
static void ask_next_a(int transa, const float *A, int lda, int m0, int mc, int k0, int kc,
                       int part, int parts)
{
    if (transa != GEMM_BF16_STORED_T) return;
    const uint16_t *const h = (const uint16_t *)(const void *)A;
    const int r0 = k0 + (int)((long long)kc * part / parts);
    const int r1 = k0 + (int)((long long)kc * (part + 1) / parts);
    for (int r = r0; r < r1; r++) gt_prefetch_l2(h + (size_t)r * lda + m0, (size_t)mc * 2);
}

/* Rows m0 .. m0+mc of op(A) at depth k0 .. k0+kc into strips of MR at ap (kc2 x MR
 * words apart), or with in_place only a short last strip (the others are read where
 * they are stored); sums (or NULL) += the rows' values, added as they are packed where
 * the layout runs along the rows' depth, else right after, while in cache (in place,
 * A is stored as rows: right after) */
static void pack_a_block(uint32_t *ap, int transa, const float *A, int lda, int m0, int mc,
                         int k0, int kc, float *sums, int in_place)
{
    const int kc2 = (kc + 1) / 2, fused = transa == 1 || transa == GEMM_BF16_STORED_T;
    for (int i = 0; i < mc; i += MR)
        if (!in_place || mc - i < MR)
            pack_a(ap + (size_t)(i / MR) * kc2 * MR, transa, A, lda, m0 + i,
                   mc - i < MR ? mc - i : MR, k0, kc, fused ? sums : NULL);
    if (sums && !fused) gemm_bf16_row_sums(sums, transa, A, lda, m0, mc, k0, kc);
}

/* B strip: columns n0 .. n0+nr of op(B), depth k0 .. k0+kc, into bp[kc2][NR]; stream
 * (FP32 B only): a weight copy's packing, its whole vectors stored past the caches */
static inline __attribute__((always_inline)) void
pack_b_to(uint32_t *bp, int trans, const float *B, int ldb, int n0, int nr, int k0, int kc,
          int stream)
{
    const int kc2 = (kc + 1) / 2;
    if (trans == GEMM_BF16_STORED) { /* B[k][n] from BF16 storage */
        const uint16_t *h = (const uint16_t *)(const void *)B;
        for (int j = 0; j < kc2; j++) {
            const uint16_t *r0 = h + (size_t)(k0 + 2 * j) * ldb + n0;
            bf16_pairs_across_k_stored(bp + (size_t)j * NR, NR / 16, r0,
                                       2 * j + 1 < kc ? r0 + ldb : NULL, nr);
        }
        return;
    }
    if (trans) { /* B stored [n][k]: each column's pairs are contiguous */
        for (int g = 0; g < NR; g += 16)
            bf16_pairs_along_k_to(bp + g, NR, 16, B + (size_t)(n0 + g) * ldb + k0,
                                  (size_t)ldb, nr - g, kc, stream);
        return;
    }
    for (int j = 0; j < kc2; j++) {
        const int k = k0 + 2 * j;
        const float *r0 = B + (size_t)k * ldb + n0;
        bf16_pairs_across_k_to(bp + (size_t)j * NR, NR / 16, r0,
                               2 * j + 1 < kc ? r0 + ldb : NULL, nr, stream);
    }
}

static void pack_b(uint32_t *bp, int trans, const float *B, int ldb, int n0, int nr, int k0,
                   int kc)
{
    pack_b_to(bp, trans, B, ldb, n0, nr, k0, kc, 0);
}

/* Strip s of a block's panel (gemm_bf16_packer.h): the product's own packing of B, and
 * (copy) the packing of a weight matrix once per update, streamed */
static inline __attribute__((always_inline)) void
strip_to(uint32_t *panel, int s, int nc, int transb, const float *B, int ldb, int jc, int pc,
         int kc, int copy)
{
    const int kc2 = (kc + 1) / 2, n0 = s * NR, nr = nc - n0 < NR ? nc - n0 : NR;
    pack_b_to(panel + (size_t)s * kc2 * NR, transb, B, ldb, jc + n0, nr, pc, kc, copy);
}

static void pack_strip(uint32_t *panel, int s, int nc, int transb, const float *B, int ldb,
                       int jc, int pc, int kc)
{
    strip_to(panel, s, nc, transb, B, ldb, jc, pc, kc, 0);
}

static void copy_strip(uint32_t *panel, int s, int nc, int transb, const float *B, int ldb,
                       int jc, int pc, int kc)
{
    strip_to(panel, s, nc, transb, B, ldb, jc, pc, kc, 1);
    _mm_sfence(); /* streamed stores are weakly ordered: they land before what follows */
}

static size_t panel_words(int nc, int kc)
{
    return (size_t)((nc + NR - 1) / NR) * (size_t)((kc + 1) / 2) * NR;
}

/* Depth d0 (even: a strip of NR) .. d0+dn of every strip: rows d0/2 .. of its pairs */
static inline __attribute__((always_inline)) void
depth_to(uint32_t *panel, int nc, const float *B, int ldb, int jc, int pc, int kc, int d0,
         int dn, int copy)
{
    const int kc2 = (kc + 1) / 2;
    for (int s = 0, n0 = 0; n0 < nc; s++, n0 += NR)
        pack_b_to(panel + ((size_t)s * kc2 + d0 / 2) * NR, 0, B, ldb, jc + n0,
                  nc - n0 < NR ? nc - n0 : NR, pc + d0, dn, copy);
}

static void pack_depth(uint32_t *panel, int nc, const float *B, int ldb, int jc, int pc,
                       int kc, int d0, int dn)
{
    depth_to(panel, nc, B, ldb, jc, pc, kc, d0, dn, 0);
}

static void copy_depth(uint32_t *panel, int nc, const float *B, int ldb, int jc, int pc,
                       int kc, int d0, int dn)
{
    depth_to(panel, nc, B, ldb, jc, pc, kc, d0, dn, 1);
    _mm_sfence();
}

/* The product's own packing, and the weight copies' (the same layout and bits, the
 * copies streamed: a copy is read a step later, as the AMX path's) */
const gemm_bf16_packer gemm_bf16_avx512_packer = {.kc = KC,
                                                  .nc = NC,
                                                  .strip = NR,
                                                  .panel_words = panel_words,
                                                  .pack_strip = pack_strip,
                                                  .pack_depth = pack_depth};
const gemm_bf16_packer gemm_bf16_avx512_copy_packer = {.kc = KC,
                                                       .nc = NC,
                                                       .strip = NR,
                                                       .panel_words = panel_words,
                                                       .pack_strip = copy_strip,
                                                       .pack_depth = copy_depth};

/* C[mr, nr] = alpha * (A strip @ B strip) + beta * C (beta = 0: C is not read), on the
 * strip's first `rows` rows (a constant, mr <= rows <= MR: a short strip runs only the
 * rows it has, rounded up to even). The strip's pair j of row r is the word
 * ap[j * acs + r * ars]: packed (acs = MR, ars = 1), or read where A is stored as BF16
 * (acs = 1, ars = the row's length in words; see a_in_place). Inlined into the kernels
 * below, each with its own strides and rows. */
typedef uint32_t __attribute__((may_alias)) pair_word; /* a pair of BF16 storage's values */

static inline __attribute__((always_inline)) void
kernel_on(int kc2, const pair_word *ap, size_t acs, size_t ars, const uint32_t *bp, float *c,
          int ldc, int mr, int nr, float alpha, float beta, const int rows, const int fma_twin)
{
    __m512 acc[MR][2];
#pragma GCC unroll 14
    for (int r = 0; r < rows; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int j = 0; j < kc2; j++) {
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp + (size_t)j * NR);
        const __m512bh b1 = (__m512bh)_mm512_loadu_si512(bp + (size_t)j * NR + 16);
        const pair_word *a = ap + (size_t)j * acs;
#pragma GCC unroll 14
        for (int r = 0; r < rows; r++) {
            const __m512bh av = (__m512bh)_mm512_set1_epi32((int)a[(size_t)r * ars]);
            if (fma_twin) { /* dot_counts_timing_only: the bench's timing twin */
                acc[r][0] = _mm512_fmadd_ps((__m512)av, (__m512)b0, acc[r][0]);
                acc[r][1] = _mm512_fmadd_ps((__m512)av, (__m512)b1, acc[r][1]);
            } else {
                acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
                acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
            }
        }
    }
    /* alpha = 1 (a step's products) skips the multiply and beta = 1 adds: the same
     * bits (1 x is x; 1 C + v is C + v in one rounding either way), and neither takes
     * the pipes the dot products run on (Zen 4 multiplies and fuses there; it adds on
     * two others) */
    const __mmask16 m0 = lanes(nr), m1 = lanes(nr > 16 ? nr - 16 : 0);
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    const int scaled = alpha != 1.0f;
    for (int r = 0; r < mr; r++) {
        float *cr = c + (size_t)r * ldc;
        __m512 v0 = acc[r][0], v1 = acc[r][1];
        if (scaled) v0 = _mm512_mul_ps(va, v0), v1 = _mm512_mul_ps(va, v1);
        if (beta == 1.0f) {
            v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, cr), v0);
            v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, cr + 16), v1);
        } else if (beta != 0.0f) {
            v0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, cr), v0);
            v1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, cr + 16), v1);
        }
        _mm512_mask_storeu_ps(cr, m0, v0);
        _mm512_mask_storeu_ps(cr + 16, m1, v1);
    }
}

/* The rows a strip of mr rows runs: all MR of a whole strip, a short one's rounded up
 * to even */
static int rows_run(int mr)
{
    return mr >= MR ? MR : mr + (mr & 1);
}

/* The VDPBF16PS that the micro-kernels run on `strips` column strips of mc rows at
 * depth kc2 pairs: each strip of MR rows and the short one's rows run (rows_run), both
 * vectors, whatever they store. Counted once a span, not once a call: a count per call
 * (a slot looked up, a load and a store) cost 1-3% of a bench step on a Zen 4. */
static uint64_t kernel_dots(int strips, int mc, int kc2)
{
    const int rows = mc / MR * MR + (mc % MR ? rows_run(mc % MR) : 0);
    return (uint64_t)strips * (uint64_t)rows * (uint64_t)kc2 * 2;
}

/* A packed strip's kernel, one for each even count of rows run */
typedef void (*packed_kernel)(int kc2, const uint32_t *ap, const uint32_t *bp, float *c,
                              int ldc, int mr, int nr, float alpha, float beta);
#define PACKED_KERNEL(R)                                                                    \
    static void kernel_##R(int kc2, const uint32_t *ap, const uint32_t *bp, float *c,       \
                           int ldc, int mr, int nr, float alpha, float beta)                \
    {                                                                                       \
        if (dot_timing_on)                                                                  \
            kernel_on(kc2, ap, MR, 1, bp, c, ldc, mr, nr, alpha, beta, R, 1);               \
        else                                                                                \
            kernel_on(kc2, ap, MR, 1, bp, c, ldc, mr, nr, alpha, beta, R, 0);               \
    }
PACKED_KERNEL(2)
PACKED_KERNEL(4)
PACKED_KERNEL(6)
PACKED_KERNEL(8)
PACKED_KERNEL(10)
PACKED_KERNEL(12)
PACKED_KERNEL(14)
_Static_assert(MR == 14, "a kernel for each even count of rows up to MR");

static void kernel(int kc2, const uint32_t *ap, const uint32_t *bp, float *c, int ldc, int mr,
                   int nr, float alpha, float beta)
{
    static const packed_kernel by_rows[] = {kernel_2,  kernel_4,  kernel_6, kernel_8,
                                            kernel_10, kernel_12, kernel_14};
    by_rows[rows_run(mr) / 2 - 1](kc2, ap, bp, c, ldc, mr, nr, alpha, beta);
}

/* The strip's 14 rows of A read where they are stored: a is row 0's value at the
 * block's first depth in BF16 storage, lda (even) values a row */
static void kernel_in_place(int kc2, const uint16_t *a, int lda, const uint32_t *bp, float *c,
                            int ldc, int nr, float alpha, float beta)
{
    const pair_word *ap = (const pair_word *)(const void *)a;
    if (dot_timing_on)
        kernel_on(kc2, ap, 1, (size_t)lda / 2, bp, c, ldc, MR, nr, alpha, beta, MR, 1);
    else
        kernel_on(kc2, ap, 1, (size_t)lda / 2, bp, c, ldc, MR, nr, alpha, beta, MR, 0);
}

/* Whether a product's A strips are read where A is stored rather than packed: A in BF16
 * storage as stored (a row's depth values contiguous), each pair two values of one row
 * and one aligned word (A at a word, an even row length and depth; a depth block starts
 * at a multiple of KC). Packing such an A is a 14-row interleave of its words, which
 * took about a tenth of the dot-product path's time outside its micro-kernel at the
 * bench's shape; the kernel's broadcasts read the 14 rows instead, each row's cache
 * line over 16 pairs. A strip short of 14 rows is still packed (its missing rows are
 * zeros there). */
static int a_in_place(int transa, const float *A, int lda, int K)
{
    return transa == GEMM_BF16_STORED && (uintptr_t)(const void *)A % 4 == 0 && lda % 2 == 0 &&
           K % 2 == 0;
}

/* One item of depth_inside: rows m0 .. m1 and column strips c0 .. c1 of the column
 * block at jc (nc columns), every depth block in turn, its piece of C in C or in piece */
static void depth_item(uint32_t *ap, float *piece, int transa, int N, int K, float alpha,
                       const float *A, int lda, float beta, float *C, int ldc,
                       const void *bpre, const gemm_bf16_epilogue *ep, int in_place, int jc,
                       int nc, int m0, int m1, int c0, int c1)
{
    const uint16_t *const a16 = (const uint16_t *)(const void *)A;
    const int mc = m1 - m0;
    const int n_from = c0 * NR, n_to = c1 * NR < nc ? c1 * NR : nc;
    float *const cp = piece ? piece : C + (size_t)m0 * ldc + jc + n_from;
    const int ldp = piece ? NC : ldc;
    for (int pc = 0; pc < K; pc += KC) {
        const int kc = K - pc < KC ? K - pc : KC, kc2 = (kc + 1) / 2;
        const uint32_t *bp = (const uint32_t *)bpre +
                             gemm_bf16_block_offset(&gemm_bf16_avx512_packer, K, N, jc, pc);
        float *const sums = ep && ep->row_sums && jc == 0 && c0 == 0 ? ep->row_sums : NULL;
        pack_a_block(ap, transa, A, lda, m0, mc, pc, kc, sums, in_place);
        const uint64_t t0 = dot_counts_span_begin();
        for (int s = c0; s < c1; s++) {
            const int n0 = s * NR, nr = nc - n0 < NR ? nc - n0 : NR;
            const uint32_t *const bs = bp + (size_t)s * kc2 * NR;
            for (int i = 0; i < mc; i += MR) {
                float *const ci = cp + (size_t)i * ldp + (n0 - n_from);
                const float bet = pc == 0 ? beta : 1.0f;
                if (in_place && mc - i >= MR)
                    kernel_in_place(kc2, a16 + (size_t)(m0 + i) * lda + pc, lda, bs, ci, ldp,
                                    nr, alpha, bet);
                else
                    kernel(kc2, ap + (size_t)(i / MR) * kc2 * MR, bs, ci, ldp,
                           mc - i < MR ? mc - i : MR, nr, alpha, bet);
            }
        }
        dot_counts_span_end(t0, kernel_dots(c1 - c0, mc, kc2));
        if (gemm_bf16_epilogue_acts(ep, pc == 0, pc + kc >= K))
            gemm_bf16_epilogue_piece(ep, cp, ldp, m0, jc + n_from, mc, n_to - n_from, pc == 0,
                                     pc + kc >= K);
    }
}

/* Part p's rows [*lo, *hi) of M and its strips: gemm_row_split's parts */
static int part_strips(int p, int parts, int M, int *lo, int *hi)
{
    gemm_split_part(p, parts, M, lo, hi);
    return (*hi - *lo + MR - 1) / MR;
}

/* depth_inside's items handed out as they run (gemm_steal.h): this thread's own part a
 * row block at a time, then the other parts' last strips */
static void depth_stolen(uint32_t *ap, float *piece, int transa, int M, int N, int K,
                         float alpha, const float *A, int lda, float beta, float *C, int ldc,
                         const void *bpre, const gemm_bf16_epilogue *ep, int in_place,
                         gemm_steal_part *steal, int thread, int nthreads)
{
    const int nstrips = (N + NR - 1) / NR;
    int lo, hi, k = 0, p, s0, s1;
    for (int q = 0; q < nthreads; q++) /* any thread may open any part: no order to keep */
        gemm_steal_open(&steal[q], part_strips(q, nthreads, M, &lo, &hi));
    while (gemm_steal_next(steal, thread, nthreads, MC / MR, &k, &p, &s0, &s1)) {
        part_strips(p, nthreads, M, &lo, &hi);
        const int m0 = lo + s0 * MR, m1 = lo + s1 * MR < hi ? lo + s1 * MR : hi;
        depth_item(ap, piece, transa, N, K, alpha, A, lda, beta, C, ldc, bpre, ep, in_place,
                   0, N, m0, m1, 0, nstrips);
    }
}

/* The product on B's packed copy bpre, run by each thread of the team: its items' depth
 * blocks in turn; each piece of C (mc rows of the item's columns) in C, or where piece
 * is not NULL there (NC floats a row), the epilogue's outputs alone leaving it. With
 * steal (room for the team's parts, reset), where the rows are cut one part a thread
 * and the columns are one block, the items are handed out as they run (depth_stolen). */
static void depth_inside(uint32_t *ap, float *piece, int transa, int M, int N, int K,
                         float alpha, const float *A, int lda, float beta, float *C, int ldc,
                         const void *bpre, const gemm_bf16_epilogue *ep, int thread,
                         int nthreads, gemm_steal_part *steal)
{
    const int in_place = a_in_place(transa, A, lda, K);
    if (steal && N <= NC &&
        gemm_row_split_for(M, MR, MC / MR, (N + NR - 1) / NR, nthreads).parts == nthreads &&
        nthreads > 1) {
        depth_stolen(ap, piece, transa, M, N, K, alpha, A, lda, beta, C, ldc, bpre, ep,
                     in_place, steal, thread, nthreads);
        return;
    }
    for (int jc = 0; jc < N; jc += NC) {
        const int nc = N - jc < NC ? N - jc : NC, nstrips = (nc + NR - 1) / NR;
        const gemm_row_split sp = gemm_row_split_for(M, MR, MC / MR, nstrips, nthreads);
        const int items = gemm_row_split_items(sp);
#pragma omp for schedule(static) nowait
        for (int it = 0; it < items; it++) {
            int rb, m0, m1, c0, c1;
            if (gemm_row_split_item(sp, it, M, MR, nstrips, &rb, &m0, &m1, &c0, &c1))
                depth_item(ap, piece, transa, N, K, alpha, A, lda, beta, C, ldc, bpre, ep,
                           in_place, jc, nc, m0, m1, c0, c1);
        }
    }
}

/* Whether a product whose B is packed per call gives each thread its own column strips
 * of every panel (columns_own) rather than its own rows of the whole panel: when the
 * columns are at least as many as the rows, and a strip for every thread. Each thread
 * then packs the strips it reads and reads no other, so no barrier waits for the panel
 * and no strip crosses from the other core's cache; the price is every thread packing
 * all of A. The weight gradients with few rows gain (a Zen 4, 2 threads, in an hour
 * when the host kept L3 busy: 384 x 1536 x 2048 7.25 -> 6.2 ms, 384 x 384 x 2048 1.77
 * -> 1.53, 256 x 384 x 2048 1.28 -> 1.04; in a quiet hour 1-9% and never slower);
 * those with more rows than columns (1536 x 384 x 2048) lost 2-3%, so keep rows. */
_Static_assert((size_t)2 * NC / NR * KC2 * NR * 4 <= GEMM_BF16_BPACKS,
               "columns_own's parts fit both panel buffers");
static int columns_owned(int M, int N, int nthreads)
{
    return nthreads > 1 && M <= N && (N < NC ? N : NC) >= nthreads * NR;
}

/* Rows m0 .. m0+mc (at most MC) of A at depth pc .. pc+kc packed (sums, or NULL: the row
 * sums, added as A^T is packed), times column strips [c0, c1) of the column block at jc
 * (nc wide), packed at `strips` (strip c0 first, strip_words apart); the epilogue
 * where the depth block asks for it. (nm0, nmc, npc): the block this thread runs next,
 * whose A^T is asked into L2 meanwhile (npc >= K: none). The B panel is the caller's
 * own (columns_own, rows_private): nothing else writes it while this runs. */
static void block_on_strips(uint32_t *ap, const uint32_t *strips, size_t strip_words,
                            int transa, int K, float alpha, const float *A, int lda,
                            float beta, float *C, int ldc, const gemm_bf16_epilogue *ep,
                            float *sums, int jc, int nc, int c0, int c1, int pc, int kc, int m0,
                            int mc, int nm0, int nmc, int npc)
{
    const int kc2 = (kc + 1) / 2, n_to = c1 * NR < nc ? c1 * NR : nc;
    const float bet = pc == 0 ? beta : 1.0f;
    pack_a_block(ap, transa, A, lda, m0, mc, pc, kc, sums, 0);
    const int nkc = K - npc < KC ? K - npc : KC;
    const uint64_t t0 = dot_counts_span_begin();
    for (int s = c0; s < c1; s++) {
        if (npc < K && nmc > 0) ask_next_a(transa, A, lda, nm0, nmc, npc, nkc, s - c0, c1 - c0);
        const int n0 = s * NR, nr = nc - n0 < NR ? nc - n0 : NR;
        for (int i = 0; i < mc; i += MR)
            kernel(kc2, ap + (size_t)(i / MR) * kc2 * MR, strips + (size_t)(s - c0) * strip_words,
                   C + (size_t)(m0 + i) * ldc + jc + n0, ldc, mc - i < MR ? mc - i : MR, nr,
                   alpha, bet);
    }
    dot_counts_span_end(t0, kernel_dots(c1 - c0, mc, kc2));
    if (gemm_bf16_epilogue_acts(ep, pc == 0, pc + kc >= K))
        gemm_bf16_epilogue_block(ep, C, ldc, m0, jc + c0 * NR, mc, n_to - c0 * NR, pc == 0,
                                 pc + kc >= K);
}

/* The product with each thread on its own column strips of every column block (strips
 * split as gemm_split_part does), all rows, B packed by that thread alone into its own
 * part of both panel buffers (bp: GEMM_BF16_BPACKS bytes, 2 NC / NR strips of KC2
 * pairs; a thread's part holds its strips of any column block, columns_owned asking
 * for a strip a thread), so a thread packing its next depth block or column block never
 * writes where another still reads. */
static void columns_own(uint32_t *ap, uint32_t *bp, int transa, int transb, int M, int N,
                        int K, float alpha, const float *A, int lda, const float *B, int ldb,
                        float beta, float *C, int ldc, const gemm_bf16_epilogue *ep, int thread,
                        int nthreads)
{
    uint32_t *const mine = bp + (size_t)thread * (2 * NC / NR / nthreads) * KC2 * NR;
    for (int jc = 0; jc < N; jc += NC) {
        const int nc = N - jc < NC ? N - jc : NC, nstrips = (nc + NR - 1) / NR;
        int c0, c1;
        gemm_split_part(thread, nthreads, nstrips, &c0, &c1);
        /* the row sums by the thread with the first columns, once a row and depth */
        float *const sums = ep && ep->row_sums && jc == 0 && c0 == 0 ? ep->row_sums : NULL;
        for (int pc = 0; pc < K && c0 < c1; pc += KC) {
            const int kc = K - pc < KC ? K - pc : KC;
            for (int s = c0; s < c1; s++) {
                const int n0 = s * NR;
                pack_b(mine + (size_t)(s - c0) * KC2 * NR, transb, B, ldb, jc + n0,
                       nc - n0 < NR ? nc - n0 : NR, pc, kc);
            }
            for (int m0 = 0; m0 < M; m0 += MC) {
                const int mc = M - m0 < MC ? M - m0 : MC;
                /* the next block: the next rows at this depth, else the first at the next */
                const int nm0 = m0 + MC < M ? m0 + MC : 0, npc = m0 + MC < M ? pc : pc + KC;
                block_on_strips(ap, mine, (size_t)KC2 * NR, transa, K, alpha, A, lda, beta, C,
                                ldc, ep, sums, jc, nc, c0, c1, pc, kc, m0, mc, nm0,
                                M - nm0 < MC ? M - nm0 : MC, npc);
            }
        }
    }
}

/* Whether each thread of a product packing B per call packs every panel whole into its
 * own part of the panel buffers (GEMM_BF16_BPACKS bytes, private_b_words a thread), for
 * its own rows, rather than its share of one shared panel and a barrier before any
 * thread reads it: where the rows give every thread ROWS_PRIVATE_B or more (so
 * gemm_row_split_for cuts them one part a thread, every item spanning all columns) and
 * a panel fits a thread's part. Nothing then waits between panels; the price is B
 * packed by every thread, small beside the rows a thread multiplies into it. The weight
 * gradients with more rows than columns (q|k|v's and the MLP's, 1152 and 1536 x 384 x
 * 2048), Zen 4, 2 threads, on in alternate steps of one run: about 2 ms a step less
 * (medians of the runs' paired steps: 3.6 ms over 7 runs with it on the even steps, 1.5
 * over 5 with it on the odd ones; runs with nothing switched spread +-2 ms about -0.9).
 * Their B comes from memory, and the threads finished packing it at different times. */
enum { ROWS_PRIVATE_B = 256 };
static size_t private_b_words(int nthreads)
{
    return GEMM_BF16_BPACKS / 4 / (size_t)nthreads / 16 * 16; /* 64-byte aligned parts */
}

static int private_b_panels(int M, int N, int nthreads)
{
    return nthreads > 1 && M / nthreads >= ROWS_PRIVATE_B &&
           panel_words(N < NC ? N : NC, KC) <= private_b_words(nthreads);
}

/* The product with each thread on its own rows (gemm_row_split's parts: part_strips) in
 * blocks of MC, every panel of B packed whole by that thread into its own part of the
 * panel buffers (private_b_panels), so nothing waits between the panels.
 * With steal (room for the team's parts, reset) and one column block, the last depth
 * block's rows are handed out as they run (gemm_steal.h): a thread that has run its
 * own part's earlier depth blocks opens its part, takes its strips from the front, then
 * the other opened parts' last strips from the back. A part opens only once its owner
 * has summed every earlier depth block of its rows (the open publishes them), so a
 * stolen strip adds the last block to sums that are complete, in the same order: the
 * same bits. Its panel of that depth block is the thief's own, packed as the owner's.
 * Why: these weight gradients' threads finished 0.1-0.6 ms apart, either one last
 * (not the same core's thread each time: rows dealt by each thread's measured speed
 * did not shorten the waits), product after product; their parts cannot be handed out
 * over the whole depth without a barrier between the depth blocks, and the last one (a
 * quarter of the depth at K = 2048) holds more than the gap. Zen 4, L6 C384, 2 threads:
 * the first thread done waited 8.4-8.8 ms a step at the ends of the weight gradients,
 * 2.5 ms with this (the rest in those with columns of their own); on in alternate
 * steps of ten runs, the step 1.0-1.5 ms shorter (medians of the paired steps: 1.5 with
 * it on the even steps, five runs, all shorter; 0.8 on the odd ones, five runs, three
 * shorter and two even). */
static void rows_private(uint32_t *ap, uint32_t *bbuf, int transa, int transb, int M, int N,
                         int K, float alpha, const float *A, int lda, const float *B, int ldb,
                         float beta, float *C, int ldc, const gemm_bf16_epilogue *ep,
                         int thread, int nthreads, gemm_steal_part *steal)
{
    uint32_t *const mine = bbuf + (size_t)thread * private_b_words(nthreads);
    int lo, hi;
    const int own = part_strips(thread, nthreads, M, &lo, &hi);
    const int hand_out = steal && N <= NC;
    for (int jc = 0; jc < N; jc += NC) {
        const int nc = N - jc < NC ? N - jc : NC, nstrips = (nc + NR - 1) / NR;
        /* the row sums once a row block and depth block, as A^T is packed */
        float *const sums = ep && ep->row_sums && jc == 0 ? ep->row_sums : NULL;
        for (int pc = 0; pc < K; pc += KC) {
            const int kc = K - pc < KC ? K - pc : KC;
            const size_t strip_words = (size_t)((kc + 1) / 2) * NR; /* as pack_strip lays them */
            for (int s = 0; s < nstrips; s++)
                pack_strip(mine, s, nc, transb, B, ldb, jc, pc, kc);
            if (hand_out && pc + kc >= K) { /* the last depth block */
                gemm_steal_open(&steal[thread], own); /* only its own, once summed */
                int k = 0, p, s0, s1, plo, phi;
                while (gemm_steal_next(steal, thread, nthreads, MC / MR, &k, &p, &s0, &s1)) {
                    part_strips(p, nthreads, M, &plo, &phi);
                    const int m0 = plo + s0 * MR, m1 = plo + s1 * MR < phi ? plo + s1 * MR : phi;
                    block_on_strips(ap, mine, strip_words, transa, K, alpha, A, lda, beta, C,
                                    ldc, ep, sums, jc, nc, 0, nstrips, pc, kc, m0, m1 - m0, 0, 0,
                                    K);
                }
                continue;
            }
            for (int m0 = lo; m0 < hi; m0 += MC) {
                const int mc = hi - m0 < MC ? hi - m0 : MC;
                /* the next block: the next rows at this depth, else the first at the next */
                const int nm0 = m0 + MC < hi ? m0 + MC : lo, npc = m0 + MC < hi ? pc : pc + KC;
                block_on_strips(ap, mine, strip_words, transa, K, alpha, A, lda, beta, C, ldc,
                                ep, sums, jc, nc, 0, nstrips, pc, kc, m0, mc, nm0,
                                hi - nm0 < MC ? hi - nm0 : MC, npc);
            }
        }
    }
}

void gemm_bf16_avx512(int transa, int transb, int M, int N, int K, float alpha,
                      const float *A, int lda, const float *B, int ldb, float beta, float *C,
                      int ldc, void *bpack, void *const *apacks, int parallel,
                      const void *bpre, const gemm_bf16_epilogue *ep)
{
    uint32_t *const bbuf = bpack;
    const int mstrips = (M + MR - 1) / MR;
    /* the parts' state for handing out a packed-copy product's rows (gemm_steal.h) */
    gemm_steal_part steal[GEMM_STEAL_MAX];
#ifdef _OPENMP
    const int team_max = parallel ? omp_get_max_threads() : 1;
#else
    const int team_max = 1;
#endif
    const int stealing = (bpre || private_b_panels(M, N, team_max)) && team_max > 1 &&
                         team_max <= GEMM_STEAL_MAX;
    if (stealing) gemm_steal_reset(steal, team_max);
#pragma omp parallel if (parallel && (mstrips > 1 || N > NR))
    {
#ifdef _OPENMP
        const int thread = omp_get_thread_num(), nthreads = omp_get_num_threads();
#else
        const int thread = 0, nthreads = 1;
#endif
        uint32_t *const ap = apacks[parallel ? thread : 0];
        /* Every thread walks the same (column block, depth block) loops; the work inside
         * each is split by the omp for's, and one barrier a panel keeps packing B and its
         * use apart (two buffers in turn: see gemm_bf16.h); none where each thread packs
         * its own panels for its own rows (private_b_panels: rows_private).
         * A packed copy (bpre) needs neither the packing nor the barriers: a thread's
         * items are the same C blocks at every depth block, so it alone follows up its
         * own sums, an item's depth blocks one after the other with its piece of C in
         * L2 (as the AMX path: gemm_bf16_amx_kernel.h), held in the thread's own buffer
         * where the epilogue leaves C unused. Nor does a product whose threads each own
         * their columns (columns_owned): each packs and reads only its own strips. */
        const int owned = !bpre && columns_owned(M, N, nthreads);
        const int private_b = !bpre && !owned && private_b_panels(M, N, nthreads);
        if (owned) {
            columns_own(ap, bbuf, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C,
                        ldc, ep, thread, nthreads);
        } else if (private_b) {
            rows_private(ap, bbuf, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C,
                         ldc, ep, thread, nthreads,
                         stealing && nthreads <= team_max ? steal : NULL);
        } else if (bpre) {
            float *const piece = ep && ep->c_unused && beta == 0.0f
                                     ? (float *)(ap + GEMM_BF16_APACK_PANEL / sizeof *ap)
                                     : NULL;
            depth_inside(ap, piece, transa, M, N, K, alpha, A, lda, beta, C, ldc, bpre, ep,
                         thread, nthreads, stealing && nthreads <= team_max ? steal : NULL);
        }
        int panels = 0; /* B panels packed so far: the next goes into the other buffer */
        /* (with a copy depth_inside did it, with own columns columns_own, with own rows
         * and panels rows_private) */
        for (int jc = 0; jc < N && !bpre && !owned && !private_b; jc += NC) {
            const int nc = N - jc < NC ? N - jc : NC, nstrips = (nc + NR - 1) / NR;
            /* (part, row block, column group) items, an equal share for every thread */
            const gemm_row_split sp = gemm_row_split_for(M, MR, MC / MR, nstrips, nthreads);
            const int items = gemm_row_split_items(sp);
            for (int pc = 0; pc < K; pc += KC) {
                const int kc = K - pc < KC ? K - pc : KC, kc2 = (kc + 1) / 2;
                const float bet = pc == 0 ? beta : 1.0f;
                /* the other buffer than the last panel's: a thread that packs into it has
                 * passed the barrier after the last panel's packing, so every thread is
                 * done with the panel before, which was in it */
                uint32_t *const bp =
                    bbuf + (size_t)(panels++ & 1) * (GEMM_BF16_BPACK / sizeof *bbuf);
#pragma omp for schedule(static) /* its barrier: the panel is whole before any use */
                for (int s = 0; s < nstrips; s++)
                    pack_strip(bp, s, nc, transb, B, ldb, jc, pc, kc);
                int packed = -1; /* the row block in this thread's A buffer */
#pragma omp for schedule(static) nowait
                for (int it = 0; it < items; it++) {
                    int rb, m0, m1, c0, c1;
                    if (!gemm_row_split_item(sp, it, M, MR, nstrips, &rb, &m0, &m1, &c0, &c1))
                        continue;
                    const int mc = m1 - m0;
                    if (rb != packed) { /* a thread's items run in order: pack once */
                        /* the row sums once a row block and depth block: as A^T is
                         * packed, else right after, while in cache */
                        float *const sums =
                            ep && ep->row_sums && jc == 0 && c0 == 0 ? ep->row_sums : NULL;
                        pack_a_block(ap, transa, A, lda, m0, mc, pc, kc, sums, 0);
                        packed = rb;
                    }
                    /* the next item's rows, where they are another block (the items of
                     * one thread run in order; the last one's next may be the other's) */
                    int nrb = rb, nm0 = 0, nm1 = 0, nc0, nc1;
                    if (it + 1 < items)
                        gemm_row_split_item(sp, it + 1, M, MR, nstrips, &nrb, &nm0, &nm1, &nc0,
                                            &nc1);
                    const int ask = nrb != rb && nm1 > nm0;
                    const uint64_t t0 = dot_counts_span_begin();
                    for (int s = c0; s < c1; s++) {
                        if (ask)
                            ask_next_a(transa, A, lda, nm0, nm1 - nm0, pc, kc, s - c0, c1 - c0);
                        const int n0 = s * NR, nr = nc - n0 < NR ? nc - n0 : NR;
                        for (int i = 0; i < mc; i += MR) {
                            const int mr = mc - i < MR ? mc - i : MR;
                            kernel(kc2, ap + (size_t)(i / MR) * kc2 * MR,
                                   bp + (size_t)s * kc2 * NR,
                                   C + (size_t)(m0 + i) * ldc + jc + n0, ldc, mr, nr, alpha,
                                   bet);
                        }
                    }
                    dot_counts_span_end(t0, kernel_dots(c1 - c0, mc, kc2));
                    /* the epilogue once on the item's piece of C (in L2), on rows of up
                     * to NC values, not on each 14 x 32 block: on 32 values a row its
                     * kernels cost 1.5-2.4x as much per value (as on the AMX path,
                     * gemm_bf16_amx_kernel.h); elementwise, so the same bits */
                    if (gemm_bf16_epilogue_acts(ep, pc == 0, pc + kc >= K)) {
                        const int n_to = c1 * NR < nc ? c1 * NR : nc;
                        gemm_bf16_epilogue_block(ep, C, ldc, m0, jc + c0 * NR, mc,
                                                 n_to - c0 * NR, pc == 0, pc + kc >= K);
                    }
                }
            }
        }
    }
}

#include "bf16_target_end.h"
#endif /* GT_SIMD_X86_BF16 */
