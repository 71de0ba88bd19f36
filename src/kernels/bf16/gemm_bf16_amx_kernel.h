/* gemm_bf16_amx_kernel — the AMX matrix product (gemm_bf16_amx.h), written once over a
 * tile layer and included by its two builds: gemm_bf16_amx.c (the instructions) and
 * gemm_bf16_amx_emul.c (amx_emul.c's model). Writing it once is the point: the
 * emulated twin runs this exact blocking, packing and tile sequence on any CPU, so a
 * mistake in it shows in `make check` on machines without AMX.
 *
 * The including file defines, then includes this file once:
 *   AMX_ENTRY                 the name of the entry point
 *   AMX_PANEL_ENTRY           the name of the packed-panel entry point, and
 *   AMX_PANEL_BEGIN, AMX_PANEL_END  the names of its tile configuration and release
 *   AMX_CONFIG(cfg)           load the tile configuration (amx_tilecfg *) on this thread
 *   AMX_RELEASE()             release the tiles of this thread
 *   AMX_LOAD(t, p, stride)    tile t <- rows of bytes at p, stride bytes apart
 *   AMX_STORE(t, p, stride)   tile t -> p
 *   AMX_ZERO(t)               tile t <- 0
 *   AMX_DP(d, a, b)           TDPBF16PS: tile d += tile a (BF16 pairs) @ tile b
 * and may define (else they are empty):
 *   AMX_SPAN_BEGIN(), AMX_SPAN_END()  around each run of tile instructions (block32),
 *                             so the emulated build can time them: a span holds
 *                             nothing but tile instructions and their loop
 * Tile numbers are literal constants (the instructions encode them). */
#ifndef GT_BF16_MODULE
#error "gemm_bf16_amx_kernel.h is internal to src/kernels/bf16/ (elsewhere: gemm_bf16.h)"
#endif

#include <stddef.h>
#include <stdint.h>

#include "gemm_bf16.h" /* GEMM_BF16_BPACK */
#include "gemm_bf16_amx.h"
#include "gemm_bf16_packer.h" /* gemm_bf16_amx_packer, gemm_bf16_block_offset */
#include "gemm_split.h"

#ifdef _OPENMP
#include <omp.h>
#endif

enum {
    MC = GEMM_BF16_AMX_MC,
    KC = GEMM_BF16_AMX_KC,
    NC = GEMM_BF16_AMX_NC,
    TW = GEMM_BF16_AMX_TILE, /* 32-bit words in a tile */
    ROWB = AMX_MAX_COLSB,    /* bytes in a tile row, the stride of every load and store */
    PAIR_RUN = 8,            /* depth pairs a thread packs at a time of a B panel as stored */
    SLICE = 16,              /* column strips of a slice at most (slice_strips) */
    SLICE_MIN = 4,           /* ... and at least */
    SLICE_BYTES = 1 << 20,   /* B's BF16 values in a slice at most: half a core's L2 */
    UNITS_OUTER_STRIPS = 8   /* row_block goes unit by unit from this many strips on */
};

#ifndef AMX_SPAN_BEGIN
#define AMX_SPAN_BEGIN() ((void)0)
#define AMX_SPAN_END() ((void)0)
#endif

_Static_assert(GEMM_BF16_AMX_BPANEL <= GEMM_BF16_BPACK, "the B panel fits its buffer");
_Static_assert(MC % 32 == 0 && KC % 32 == 0 && NC % 32 == 0, "blocks of whole tiles");

/* One 32 x 32 block of C, summed over nq depth chunks of 32, stored as four 16 x 16
 * FP32 tiles:
 *   tmm0 = rows 0-15 x columns 0-15     tmm4, tmm5: A tiles of rows 0-15, 16-31
 *   tmm1 = rows 0-15 x columns 16-31    tmm6, tmm7: B tiles of columns 0-15, 16-31
 *   tmm2 = rows 16-31 x columns 0-15
 *   tmm3 = rows 16-31 x columns 16-31
 * a0, a1, b0, b1: the first of each operand's nq consecutive tiles; B's tiles are
 * packed (TW words apart, ROWB bytes a row), A's packed alike or read where they are
 * stored (an operand in BF16 storage: a tile row is 32 depth values of a row of A, so
 * the tile is that matrix's rows; see a_in_place): astep bytes between depth chunks,
 * astride bytes between rows.
 * The sums start from zero, or (from != NULL) from the 32 x 32 FP32 block at from, ldf
 * floats a row: C itself (ldf = ldo), or a bias row repeated (ldf = 0: a tile load reads
 * the same row 16 times).
 * out: the four tiles one after the other into ct (ldo 0), for gemm_bf16_amx_write_c to
 * scale and add into C; or (ldo > 0) the block of C itself, ldo floats a row (see
 * direct_store). */
static void block32(const uint8_t *a0, const uint8_t *a1, size_t astep, size_t astride,
                    const uint32_t *b0, const uint32_t *b1, int nq, float *out, int ldo,
                    const float *from, int ldf)
{
    const size_t fhalf = (size_t)16 * ldf, fstride = (size_t)ldf * sizeof *from;
    AMX_SPAN_BEGIN();
    if (from) {
        AMX_LOAD(0, from, fstride);
        AMX_LOAD(1, from + 16, fstride);
        AMX_LOAD(2, from + fhalf, fstride);
        AMX_LOAD(3, from + fhalf + 16, fstride);
    } else {
        AMX_ZERO(0);
        AMX_ZERO(1);
        AMX_ZERO(2);
        AMX_ZERO(3);
    }
    /* Each chunk's operand tile is loaded right after the last product that reads the
     * tile it replaces, not the four loads ahead of the chunk's products: a tile load
     * waits for the products that read its tile before (all 8 tiles are in use, none
     * is left to double-buffer), and so placed the loads overlap the chunk's other
     * products. bench_tiles (it runs this order), A in L1 and B from L2: 3,119 GFLOP/s
     * against 2,703 on a real AMX Xeon. The products run in the same order: the same
     * bits. */
    if (nq > 0) {
        AMX_LOAD(4, a0, astride);
        AMX_LOAD(5, a1, astride);
        AMX_LOAD(6, b0, ROWB);
        AMX_LOAD(7, b1, ROWB);
        for (int q = 1; q < nq; q++) {
            const size_t o = (size_t)q * TW, oa = (size_t)q * astep;
            AMX_DP(0, 4, 6);
            AMX_DP(1, 4, 7);
            AMX_LOAD(4, a0 + oa, astride);
            AMX_DP(2, 5, 6);
            AMX_LOAD(6, b0 + o, ROWB);
            AMX_DP(3, 5, 7);
            AMX_LOAD(5, a1 + oa, astride);
            AMX_LOAD(7, b1 + o, ROWB);
        }
        AMX_DP(0, 4, 6);
        AMX_DP(1, 4, 7);
        AMX_DP(2, 5, 6);
        AMX_DP(3, 5, 7);
    }
    if (ldo) {
        const size_t half = (size_t)16 * ldo, stride = (size_t)ldo * sizeof *out;
        AMX_STORE(0, out, stride);
        AMX_STORE(1, out + 16, stride);
        AMX_STORE(2, out + half, stride);
        AMX_STORE(3, out + half + 16, stride);
    } else {
        AMX_STORE(0, out, ROWB);
        AMX_STORE(1, out + TW, ROWB);
        AMX_STORE(2, out + 2 * TW, ROWB);
        AMX_STORE(3, out + 3 * TW, ROWB);
    }
    AMX_SPAN_END();
}

/* Whether a block's tiles go straight into C (block32's ldo > 0), starting from zero
 * (beta 0) or from C (beta 1): a whole block with alpha 1. Else block32 stores into ct
 * and gemm_bf16_amx_write_c scales and adds that into C.
 * Why: write_c's pass over ct and C was a fifth of the emulated twin's time around the
 * tiles at the bench's shape. With beta 0 the bits are write_c's (1 x is x). With beta 1
 * the tiles add each depth chunk's products to C in turn, where write_c added their sum
 * to C once: the same value to within the sum's rounding, and as before the same bits
 * on AMX and its emulated twin and on any thread count (the depth is never split among
 * threads). A bias (the fused epilogue's, on the first depth block, beta 0) is where
 * the sums start, so the fused product keeps the bits of the unfused sequence that puts
 * the bias into C and runs the product with beta 1 (gemm_bf16.h). */
static int direct_store(int mr, int nr, float alpha, float beta)
{
    return mr == 32 && nr == 32 && alpha == 1.0f && (beta == 0.0f || beta == 1.0f);
}

/* One 32 x 32 block of C at c (mr x nr of it real): alpha times the sums + beta C, the
 * bias row at bias (or NULL) too where beta is 0 and the tiles can start from it;
 * straight from the tiles where direct_store allows, else through ct and write_c.
 * 1 when the bias went in, 0 when the caller still has to add it. */
static int block_to_c(const uint8_t *a0, const uint8_t *a1, size_t astep, size_t astride,
                      const uint32_t *b0, const uint32_t *b1, int nq, float *c, int ldc,
                      int mr, int nr, float alpha, float beta, const float *bias, float *ct)
{
    if (!direct_store(mr, nr, alpha, beta)) {
        block32(a0, a1, astep, astride, b0, b1, nq, ct, 0, NULL, 0);
        gemm_bf16_amx_write_c(ct, c, ldc, mr, nr, alpha, beta);
        return 0;
    }
    if (beta != 0.0f) {
        block32(a0, a1, astep, astride, b0, b1, nq, c, ldc, c, ldc);
        return 0;
    }
    block32(a0, a1, astep, astride, b0, b1, nq, c, ldc, bias, 0);
    return bias != NULL;
}

/* The product's arguments, as gemm_bf16 has them, the shared B panel, and B's copy
 * packed once per update (NULL: pack B here) */
typedef struct {
    int transa, transb, M, N, K, lda, ldb, ldc;
    float alpha, beta;
    const float *A, *B;
    float *C;
    uint32_t *bp;
    const uint32_t *bpre;
    const gemm_bf16_epilogue *ep; /* or NULL */
    uint32_t *bwhole; /* where to pack all of B first (gemm_bf16_amx's bwhole), or NULL */
} product;

/* Whether the product reads A's tiles where A is stored instead of packing them: A in
 * BF16 storage as stored (row i's depth values contiguous, lda apart: a tile load takes
 * any stride), whole 32-row units and whole 32-deep chunks (a tile load past them would
 * read past A). Packing such an A was a copy of 64-byte rows, a tenth of the packing in
 * the emulated twin's step at the bench's shape (the forward's four products read their
 * input so). */
static int a_in_place(const product *g)
{
    return g->transa == GEMM_BF16_STORED && g->M % 32 == 0 && g->K % 32 == 0;
}

/* Rows m0 .. m0+mc, packed in ap (NULL: read in place, a_in_place), against columns
 * n_from .. n_to of the packed B panel (nc columns from jc) at depth pc of kc; beta: this
 * depth block's (the caller's beta for the first, then 1); the epilogue's first / last
 * depth block.
 * The epilogue runs once on the whole mc x (n_to - n_from) piece after its blocks, on
 * rows up to n_to - n_from long, not on each 32 x 32 block: called on 32 values a row,
 * its elementwise kernels cost 1.5-2.4x as much per value (bias and GELU 1.34 against
 * 0.87 ns, bias and residual 0.49 against 0.20 on a 64 x 1536 piece), and the piece is
 * still in L2. Its kernels treat every value alike, so the bits are the same. The
 * bias is the exception: it goes first, into the tiles' start (direct blocks) or onto
 * each block as it is written, before the rest of the epilogue sees the piece.
 * piece (or NULL: C itself): where the piece of C lies instead (its element (m0, jc +
 * n_from) first, pld floats a row), when C's values are not wanted (c_unused) or C is
 * staged.
 * The blocks go row unit by row unit, each unit against all the piece's column strips,
 * where it has UNITS_OUTER_STRIPS strips or more; else strip by strip, each strip against
 * all its units. Why: an item of 64 rows reads 32 KB of A tiles over a depth block and
 * a strip 16 KB of B tiles, together the whole 48 KB L1, so strip by strip both came
 * from L2 again; unit by unit one unit's 16 KB of A stays in L1 while the strips come
 * from L2. Measured on a real AMX Xeon (2 cores), GPT-2 124M shape, 5 alternating runs:
 * the q|k|v forward 6.5-6.6 ms against 6.9-7.2, the MLP forward 9.0-9.2 against
 * 9.7-10.1, the logits forward 148-151 against 156-163; the 2,304- and 3,072-deep
 * products walk slices of 7 and 5 strips, and those ran 2-4% slower unit by unit. The
 * order of the blocks changes no element's sums: the same bits. */
static void row_block(const product *g, const uint32_t *bpanel, const uint32_t *ap,
                      float *ct, float *piece, int m0, int mc, int jc, int nc, int n_from,
                      int n_to, int pc, int kc, float beta, int first, int last, int pld)
{
    const int nq = (kc + 31) / 32;
    const size_t run = (size_t)nq * TW; /* one operand tile's nq chunks */
    /* A's tiles, in bytes: packed (run words from rows 0-15 to 16-31 of a unit, a tile a
     * chunk), or in place (16 rows of lda BF16 values; 32 depth values a chunk) */
    const uint8_t *const a_stored = (const uint8_t *)g->A;
    const size_t a_next = ap ? run * 4 : (size_t)32 * g->lda, astep = ap ? TW * 4 : 64,
                 astride = ap ? ROWB : (size_t)g->lda * 2;
    const float *const bias = first && g->ep ? g->ep->bias : NULL;
    const gemm_bf16_epilogue bias_only = {.bias = bias};
    const int ldc = piece ? pld : g->ldc;
    float *const c0 = piece ? piece : g->C + (size_t)m0 * g->ldc + jc + n_from;
    const int units = (mc + 31) / 32, strips = (n_to - n_from + 31) / 32;
    const int units_outer = strips >= UNITS_OUTER_STRIPS;
    for (int outer = 0; outer < (units_outer ? units : strips); outer++) {
        for (int inner = 0; inner < (units_outer ? strips : units); inner++) {
            const int i = 32 * (units_outer ? outer : inner);
            const int n0 = n_from + 32 * (units_outer ? inner : outer);
            const uint32_t *b = bpanel + (size_t)(n0 / 16) * run;
            const int nr = nc - n0 < 32 ? nc - n0 : 32;
            const uint8_t *a =
                ap ? (const uint8_t *)(ap + (size_t)(i / 16) * run)
                   : a_stored + ((size_t)(m0 + i) * g->lda + pc) * 2;
            const int mr = mc - i < 32 ? mc - i : 32;
            float *const c = c0 + (size_t)i * ldc + (n0 - n_from);
            const int bias_in = block_to_c(a, a + a_next, astep, astride, b, b + run, nq, c,
                                           ldc, mr, nr, g->alpha, beta,
                                           bias ? bias + jc + n0 : NULL, ct);
            if (bias && !bias_in)
                gemm_bf16_epilogue_piece(&bias_only, c, ldc, m0 + i, jc + n0, mr, nr, 1, 0);
        }
    }
    if (g->ep && gemm_bf16_epilogue_acts(g->ep, 0, last))
        gemm_bf16_epilogue_piece(g->ep, c0, ldc, m0, jc + n_from, mc, n_to - n_from, 0, last);
}

/* Rows m0 .. m0+mc of A at depth pc .. pc+kc into the thread's A buffer ap, unless the
 * tiles read them in place; rb: their row block, *packed: the row block now in ap (a
 * thread's items of one depth block run in order: packed once). The row sums (the
 * first column block and group only, so once) as A^T is packed, else right after,
 * while in cache. */
static void take_a(const product *g, uint32_t *ap, int in_place, int rb, int *packed,
                   int m0, int mc, int jc, int c0, int pc, int kc)
{
    if (rb == *packed) return;
    float *const sums = g->ep && g->ep->row_sums && jc == 0 && c0 == 0 ? g->ep->row_sums : NULL;
    const int fused = sums && !in_place && (g->transa == 1 || g->transa == GEMM_BF16_STORED_T);
    if (!in_place)
        gemm_bf16_amx_pack_a(ap, g->transa, g->A, g->lda, m0, mc, 2 * ((mc + 31) / 32), pc, kc,
                             fused ? sums : NULL);
    *packed = rb;
    if (sums && !fused) gemm_bf16_row_sums(sums, g->transa, g->A, g->lda, m0, mc, pc, kc);
}

/* The rows an item takes so that its piece of C (nc columns of FP32), its A rows and one
 * depth block of B stay within GEMM_BF16_AMX_PIECE_BYTES: MC to 512. Also the rows of
 * an item on all of B packed first (pack_whole_b), whatever B's size: its A is packed
 * MC rows at a time, so taller items keep A's tiles as close as MC rows do. */
static int rows_of_piece(int nc)
{
    const size_t bblock = (size_t)KC * nc * 2, per_row = (size_t)nc * sizeof(float) + KC * 2;
    const int rows = bblock >= GEMM_BF16_AMX_PIECE_BYTES
                         ? MC
                         : (int)((GEMM_BF16_AMX_PIECE_BYTES - bblock) / per_row) / 32 * 32;
    return rows < MC ? MC : rows > 512 ? 512 : rows;
}

/* Whether `cols` columns of B over depth K (BF16 values) outgrow one core's L2: what
 * rows_in_place, slice_strips and stages_c each decide on (of a column block, a slice's
 * block, the whole weight) */
static int past_l2(int K, int cols)
{
    return (size_t)K * (size_t)cols * 2 > GEMM_BF16_AMX_L2_BYTES;
}

/* The rows of one item of the product with B packed once per update, where A is read in
 * place (no A buffer bounds them). Every item reads all of B's depth blocks of its
 * columns again: where those (K x nc BF16 values) outgrow one core's L2, from L3 or
 * memory. There an item takes rows_of_piece's rows (its piece of C loaded and stored
 * once a depth block, from L2).
 * Measured on a real AMX Xeon (2 cores, 2 MB L2 each): the logits' input gradient at the
 * GPT-2 124M shape (768 columns, 50,304 deep: 77 MB of B) ran 20-25% faster with 160
 * rows an item than with MC (B read 26 times instead of 64), and with 384 rows (1.75
 * MB kept) 163-171 ms against 190-196 for 160 (best of 5, alternating runs); the MLP's
 * 3,072-deep products gained 5-10% from 160. Where B stays in L2 (the bench's shape)
 * more rows ran 3-10% slower: each row unit's A tiles, read again for every column
 * strip, no longer stay in L1. Where a depth block of B fills the budget alone (2,048
 * columns: the logits forward), MC. */
static int rows_in_place(int nc, int K)
{
    if (!past_l2(K, nc)) return MC;
    return rows_of_piece(nc);
}

/* The column strips of each slice of a column block nc wide, or 0: the block in one go.
 * Slices where A is read in place (a_in_place) and the block's B (K x nc BF16) outgrows
 * one core's L2: a slice's B (at most SLICE_BYTES) then stays in L2 while a thread's rows
 * go by, instead of every item of 64 rows reading all of the block's B from L3 or memory
 * again; A's rows are read once a slice instead (A in place has no buffer to keep).
 * Measured on a real AMX Xeon (2 cores, 2 MB L2 each, memory at 8-9 GB/s for 2 threads),
 * GPT-2 124M shape, bench_sgemm --operands step --epilogues step, 3 alternating runs: the
 * q|k|v forward 6.5-7.2 ms against 8.0-8.5, its input gradient (2,304 deep, slices of 7)
 * 6.2-6.3 against 6.9-7.4, the MLP forward 12.8-13.5 against 15.0-15.5, the MLP's input
 * gradient (3,072 deep, slices of 5) 9.5-10.2 against 10.3-11.5; all the step's products
 * 1,742-1,798 ms against 1,794-1,872 (a release before, the logits forward alone, slices
 * of 16: 2,107-2,138 GFLOP/s against 1,660-1,758). Not where the epilogue reads rows of
 * its own (a residual, GELU's input): those reads, a slice's width of a row at a time,
 * cost more than the slices save (the MLP projection's input gradient with GELU's
 * backward, slices of 16: 24-36 ms against 18-19). Not past 4,096 deep, where no slice
 * of 4 strips fits (the logits' input gradient, 50,304 deep, slices of 16: 201-206 ms
 * against 169-171). */
static int slice_strips(const product *g, int in_place, int nc)
{
    if (!in_place || !past_l2(g->K, nc)) return 0;
    if (g->ep && (g->ep->residual || g->ep->dgelu_x || g->ep->dgelu_slope16)) return 0;
    const size_t strips = SLICE_BYTES / ((size_t)g->K * 32 * 2);
    if (strips < SLICE_MIN) return 0;
    return strips < SLICE ? (int)strips : SLICE;
}

/* The row stride, in floats, of a thread's piece of C that is `width` floats wide: an
 * odd number of 64-byte lines, so the 16 rows of a tile stored or loaded there fall in
 * 16 different sets of the L1 (64 sets of 12 ways). Why: a slice of 16 strips is 512
 * floats wide, which put a block's rows 2 KB apart and its 64 lines in 4 sets, 16 a
 * set of 12 ways: bench_tiles' tile step with C's rows 2 KB apart ran 3,168 GFLOP/s
 * against 3,977 for the compact block. The piece holds the padding: an item's rows are
 * MC, or as many as rows_of_piece allows, which counts KC * 2 bytes a row besides C's. */
static int piece_ld(int width)
{
    const int lines = (width + 15) / 16;
    return 16 * (lines % 2 ? lines : lines + 1);
}
_Static_assert((size_t)MC * (NC + 31) * sizeof(float) <= GEMM_BF16_AMX_CPIECE,
               "a piece of MC rows, padded, fits the thread's piece");
_Static_assert(KC * 2 >= 31 * sizeof(float), "rows_of_piece's rows leave room for the padding");

/* The product with B's copy packed once per update (g->bpre): no panel to pack and share,
 * so each thread takes an item's depth blocks one after the other, its piece of C (mc
 * rows of the item's columns) in L2 throughout, instead of every depth block of the
 * whole column block in turn, which streamed all of C through memory once a depth
 * block (the MLP projection's 3,072-deep product: six times). Each element still sums
 * the depth blocks in order: the same bits.
 * piece (or NULL): the thread's GEMM_BF16_AMX_CPIECE bytes (an item's rows, rows_in_place,
 * of piece_ld floats) that hold each piece instead of C, where the epilogue leaves C
 * unused: C is then never written (the MLP's two products whose FP32 result only its
 * BF16 outputs were made from wrote and evicted 50 MB of C a layer at the GPT-2 124M
 * shape); or, staged (stages_c): each finished piece
 * (its epilogue run) is then streamed into C, the same values.
 * Where A is read in place a column block may be walked in slices (slice_strips), the
 * threads' items over all rows inside a slice. Each element still sums the same depth
 * blocks in the same order: the same bits. */
static void run_items_depth_inside(const product *g, uint32_t *ap, float *ct, float *piece,
                                   int in_place, int nthreads, int staged, int tall)
{
    const int munits = (g->M + 31) / 32;
    for (int jc = 0; jc < g->N; jc += NC) {
        const int nc = g->N - jc < NC ? g->N - jc : NC, nstrips = (nc + 31) / 32;
        const int per_slice = slice_strips(g, in_place, nc);
        const int slice = per_slice ? per_slice : nstrips;
        for (int s0 = 0; s0 < nstrips; s0 += slice) {
            const int sstrips = nstrips - s0 < slice ? nstrips - s0 : slice;
            const int scols = nc - 32 * s0 < 32 * sstrips ? nc - 32 * s0 : 32 * sstrips;
            const int rows = tall ? rows_of_piece(scols) : in_place ? rows_in_place(scols, g->K)
                                                                    : MC;
            const gemm_split sp = gemm_split_for(munits, rows / 32, sstrips, nthreads);
            const int items = sp.rblocks * sp.groups;
#pragma omp for schedule(static) nowait
            for (int it = 0; it < items; it++) {
                int rb, u0, u1, c0, c1;
                if (!gemm_split_item(sp, it, munits, sstrips, &rb, &u0, &u1, &c0, &c1))
                    continue;
                c0 += s0;
                c1 += s0;
                const int m0 = 32 * u0, mc = (32 * u1 < g->M ? 32 * u1 : g->M) - m0;
                const int n_from = 32 * c0, n_to = c1 < nstrips ? 32 * c1 : nc;
                const int pld = piece_ld(n_to - n_from);
                for (int pc = 0; pc < g->K; pc += KC) {
                    const int kc = g->K - pc < KC ? g->K - pc : KC;
                    const uint32_t *const bpanel =
                        g->bpre +
                        gemm_bf16_block_offset(&gemm_bf16_amx_packer, g->K, g->N, jc, pc);
                    /* a tall item's rows, MC at a time where the thread packs them (its A
                     * buffer holds MC), the depth block of B staying in L2 meanwhile */
                    const int step = in_place ? mc : MC;
                    for (int r0 = m0; r0 < m0 + mc; r0 += step) {
                        const int rc = m0 + mc - r0 < step ? m0 + mc - r0 : step;
                        int packed = -1;
                        take_a(g, ap, in_place, rb, &packed, r0, rc, jc, c0, pc, kc);
                        row_block(g, bpanel, in_place ? NULL : ap, ct,
                                  piece ? piece + (size_t)(r0 - m0) * pld : NULL, r0, rc,
                                  jc, nc, n_from, n_to, pc, kc, pc == 0 ? g->beta : 1.0f,
                                  pc == 0, pc + kc >= g->K, pld);
                    }
                }
                if (staged)
                    gemm_bf16_amx_stream_rows(piece, pld,
                                              g->C + (size_t)m0 * g->ldc + jc + n_from, g->ldc,
                                              mc, n_to - n_from);
            }
        }
    }
}

/* Whether a product on a packed weight (beta 0) sums each item's piece apart and streams
 * it into C once done (run_items_depth_inside's staged): C past GEMM_BF16_AMX_STAGE_BYTES
 * and the weight (K x N BF16 values) past one core's L2, the products that measured
 * faster streamed; the one whose weight fits L2 measured slower (gemm_bf16_amx.h). */
static int stages_c(const product *g)
{
    return g->beta == 0.0f &&
           (size_t)g->M * (size_t)g->N * sizeof(float) > GEMM_BF16_AMX_STAGE_BYTES &&
           past_l2(g->K, g->N);
}

/* All of B (as stored: [k][n]) into g->bwhole, in the layout of a weight packed once
 * (gemm_bf16_packer.h's blocks, gemm_bf16_amx_packer's panels), each panel as the
 * product's own packing writes it, so the items read it as they read a packed weight:
 * the same bits as packing a panel per depth block. The threads share each panel's
 * runs of depth pairs; one barrier at the end.
 * Why (gemm_bf16_amx_wants_whole_b): a product whose B is packed per depth block walks
 * all of C once a depth block; where C is far past the caches (the GPT-2 124M logits'
 * weight gradient: 155 MB of C, 16 depth blocks of 256) that is 5 GB of C through
 * memory a step. Packed whole first (6.3 MB there), each item keeps its piece of C in
 * L2 over the whole depth and reads B's depth blocks again instead: 0.8 GB at items of
 * 384 rows. */
static void pack_whole_b(const product *g)
{
    for (int jc = 0; jc < g->N; jc += NC) {
        const int nc = g->N - jc < NC ? g->N - jc : NC;
        for (int pc = 0; pc < g->K; pc += KC) {
            const int kc = g->K - pc < KC ? g->K - pc : KC;
            uint32_t *const panel =
                g->bwhole + gemm_bf16_block_offset(&gemm_bf16_amx_packer, g->K, g->N, jc, pc);
            const int runs = ((kc + 31) / 32 * 16 + PAIR_RUN - 1) / PAIR_RUN;
#pragma omp for schedule(static) nowait
            for (int r = 0; r < runs; r++)
                gemm_bf16_amx_pack_b_pairs(panel, g->transb, g->B, g->ldb, jc, nc, pc, kc,
                                           r * PAIR_RUN, (r + 1) * PAIR_RUN);
        }
    }
#pragma omp barrier
}

/* What each thread of the team runs (w: its work area). Every thread walks the same
 * (column block, depth block) loops and the omp for's split the work inside, one
 * barrier a panel keeping the B panel's packing and use apart, the panels in two
 * buffers in turn (as the AVX512_BF16 path, gemm_bf16.h; with a packed copy of B,
 * neither packing nor barriers).
 * Each thread loads its own tile configuration: tiles are per thread (the OS's
 * permission is per process). A function of its own, not the parallel region's body,
 * so the tile instructions sit in a function compiled for them (clang does not give
 * the region's outlined body the target of the function around it). */
static void run_thread(const product *g, uint8_t *w)
{
    uint32_t *const ap = (uint32_t *)w;
    float *const ct = (float *)(w + GEMM_BF16_AMX_APANEL);
    amx_tilecfg *const cfg = (amx_tilecfg *)(w + GEMM_BF16_AMX_APANEL + GEMM_BF16_AMX_CTILES);
#ifdef _OPENMP
    const int nthreads = omp_get_num_threads();
#else
    const int nthreads = 1;
#endif
    const int munits = (g->M + 31) / 32; /* rows in whole 32-row units */
    const int in_place = a_in_place(g);
    int panels = 0; /* B panels packed so far: the next goes into the other buffer */
    const int b_rows = g->transb == 0 || g->transb == GEMM_BF16_STORED;
    amx_tilecfg_uniform(cfg, AMX_TILES, AMX_MAX_ROWS, AMX_MAX_COLSB);
    AMX_CONFIG(cfg);
    if (g->bpre) {
        float *const piece =
            g->ep && g->ep->c_unused && g->beta == 0.0f ? (float *)(w + GEMM_BF16_AMX_PANEL_WORK)
                                                        : NULL;
        const int staged = !piece && stages_c(g);
        run_items_depth_inside(g, ap, ct,
                               piece || staged ? (float *)(w + GEMM_BF16_AMX_PANEL_WORK) : NULL,
                               in_place, nthreads, staged, 0);
        AMX_RELEASE();
        return;
    }
    if (g->bwhole) { /* all of B packed first, then the items as on a packed weight */
        pack_whole_b(g);
        product h = *g;
        h.bpre = g->bwhole;
        run_items_depth_inside(&h, ap, ct, NULL, in_place, nthreads, 0, 1);
        AMX_RELEASE();
        return;
    }
    for (int jc = 0; jc < g->N; jc += NC) {
        const int nc = g->N - jc < NC ? g->N - jc : NC, nstrips = (nc + 31) / 32;
        /* (row block, column group) items in 32 x 32 units, an equal share for every
         * thread, as on the AVX512_BF16 path */
        const gemm_split sp = gemm_split_for(munits, MC / 32, nstrips, nthreads);
        const int items = sp.rblocks * sp.groups;
        for (int pc = 0; pc < g->K; pc += KC) {
            const int kc = g->K - pc < KC ? g->K - pc : KC;
            /* the other buffer than the last panel's (see the AVX512_BF16 path) */
            uint32_t *const bpanel =
                g->bp + (size_t)(panels++ & 1) * (GEMM_BF16_BPACK / sizeof *g->bp);
            /* its barrier: the panel is whole before any use. B as stored is packed in
             * runs of depth pairs (gemm_bf16_amx_pack_b_pairs), else strip by strip */
            if (b_rows) {
                const int runs = ((kc + 31) / 32 * 16 + PAIR_RUN - 1) / PAIR_RUN;
#pragma omp for schedule(static)
                for (int r = 0; r < runs; r++)
                    gemm_bf16_amx_pack_b_pairs(bpanel, g->transb, g->B, g->ldb, jc, nc, pc, kc,
                                               r * PAIR_RUN, (r + 1) * PAIR_RUN);
            } else {
#pragma omp for schedule(static)
                for (int s = 0; s < nstrips; s++)
                    gemm_bf16_amx_packer.pack_strip(bpanel, s, nc, g->transb, g->B, g->ldb, jc,
                                                    pc, kc);
            }
            int packed = -1; /* the row block in this thread's A buffer */
#pragma omp for schedule(static) nowait
            for (int it = 0; it < items; it++) {
                int rb, u0, u1, c0, c1;
                if (!gemm_split_item(sp, it, munits, nstrips, &rb, &u0, &u1, &c0, &c1))
                    continue;
                const int m0 = 32 * u0, mc = (32 * u1 < g->M ? 32 * u1 : g->M) - m0;
                take_a(g, ap, in_place, rb, &packed, m0, mc, jc, c0, pc, kc);
                row_block(g, bpanel, in_place ? NULL : ap, ct, NULL, m0, mc, jc, nc, 32 * c0,
                          c1 < nstrips ? 32 * c1 : nc, pc, kc, pc == 0 ? g->beta : 1.0f,
                          pc == 0, pc + kc >= g->K, 0);
            }
        }
    }
    AMX_RELEASE();
}

void AMX_PANEL_BEGIN(void *work)
{
    amx_tilecfg *const cfg =
        (amx_tilecfg *)((uint8_t *)work + GEMM_BF16_AMX_APANEL + GEMM_BF16_AMX_CTILES);
    amx_tilecfg_uniform(cfg, AMX_TILES, AMX_MAX_ROWS, AMX_MAX_COLSB);
    AMX_CONFIG(cfg);
}

void AMX_PANEL_END(void) { AMX_RELEASE(); }

void AMX_PANEL_ENTRY(const uint32_t *ap, size_t a_run, const uint32_t *bp, size_t b_run,
                     int m, int n, int nq, float alpha, int accumulate, float *C, int ldc,
                     void *work)
{
    float *const ct = (float *)((uint8_t *)work + GEMM_BF16_AMX_APANEL);
    for (int j = 0; j < n; j += 32) {
        const uint32_t *b0 = bp + (size_t)(j / 16) * b_run;
        for (int i = 0; i < m; i += 32) {
            const uint8_t *a0 = (const uint8_t *)(ap + (size_t)(i / 16) * a_run);
            const int mr = m - i < 32 ? m - i : 32, nr = n - j < 32 ? n - j : 32;
            (void)block_to_c(a0, a0 + a_run * 4, TW * 4, ROWB, b0, b0 + b_run, nq,
                             C + (size_t)i * ldc + j, ldc, mr, nr, alpha,
                             accumulate ? 1.0f : 0.0f, NULL, ct);
        }
    }
}

void AMX_ENTRY(int transa, int transb, int M, int N, int K, float alpha, const float *A,
               int lda, const float *B, int ldb, float beta, float *C, int ldc,
               void *bpack, void *const *works, int parallel, const void *bpre,
               const gemm_bf16_epilogue *ep, void *bwhole)
{
    const product g = {transa, transb, M, N, K, lda, ldb, ldc, alpha, beta,
                       A,      B,      C, bpack, bpre, ep, bwhole};
#pragma omp parallel if (parallel && (M > 32 || N > 32))
    {
#ifdef _OPENMP
        run_thread(&g, works[parallel ? omp_get_thread_num() : 0]);
#else
        run_thread(&g, works[0]);
#endif
    }
}
