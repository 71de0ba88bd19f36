/* gemm_bf16_amx — the AMX-BF16 path of gemm_bf16.h and its emulated twin, for the
 * dispatcher (gemm_bf16.c). Same arguments and contract as gemm_bf16.
 *
 * One kernel (gemm_bf16_amx_kernel.h) is written once over six tile operations and
 * built twice:
 *  - gemm_bf16_amx (gemm_bf16_amx.c): the AMX instructions. Only where the CPU has
 *    AMX-TILE, AMX-BF16 and AVX512_BF16 and Linux granted the tile state
 *    (cpu_has_amx_bf16); Intel Sapphire Rapids and later.
 *  - gemm_bf16_amx_emulated (gemm_bf16_amx_emul.c): the same kernel over amx_emul.c's
 *    software model of the tiles. Runs on every CPU, slowly; never chosen
 *    automatically. It exists so the kernel's blocking, packing, tile shapes and
 *    per-thread tile configuration are tested on machines without AMX: the model
 *    computes what the SDM says TDPBF16PS computes and aborts where the hardware would
 *    fault.
 *
 * Blocking: for each NC columns and KC of depth, B is packed once (the threads share
 * the strips); each thread then takes blocks of MC rows, packs them, and computes
 * every 32 x 32 block of C in the four accumulator tiles (all 8 tiles in use), so each
 * element of C is summed by one thread in one fixed order whatever the thread count.
 *
 * Packed panels (gemm_bf16_amx_pack.c), made of tiles of 16 rows x 64 bytes stored one
 * after the other (1 KB each, loaded with a stride of 64 bytes); a depth block of kc
 * values has nq = ceil(kc / 32) chunks of 16 BF16 pairs:
 *   A tile (i, q) at ap + (i nq + q) 256:  row r, column j = the pair
 *        (A[16 i + r, 32 q + 2 j], A[16 i + r, 32 q + 2 j + 1])
 *   B tile (j, q) at bp + (j nq + q) 256:  row p, column n = the pair (VNNI layout)
 *        (B[32 q + 2 p, 16 j + n], B[32 q + 2 p + 1, 16 j + n])
 * Rows past M, columns past N and depth past K are zeros, so every tile is full. */
#ifndef GT_GEMM_BF16_AMX_H
#define GT_GEMM_BF16_AMX_H

#include <stddef.h>
#include <stdint.h>

#include "amx_tiles.h"
#include "gemm_bf16.h" /* gemm_bf16_epilogue */

enum {
    GEMM_BF16_AMX_MC = 64,   /* rows of A packed by one thread at a time */
    GEMM_BF16_AMX_KC = 256,  /* depth of a packed block (see below) */
    GEMM_BF16_AMX_NC = 2048, /* columns of a packed B panel */
    GEMM_BF16_AMX_TILE = 256 /* 32-bit words in a tile (16 x 64 bytes) */
};

/* KC: on a real AMX Xeon (2 cores) the step's products with their operands as a step has
 * them (bench_sgemm --operands step) ran in 70 ms at 256 deep against 78 at 512 (the
 * bench's shape) and a few percent faster at the GPT-2 124M shape; 128 and 384 were
 * slower, 192 no faster. Likely why: a block32 over 256 of depth reads 32 KB of A and B tiles,
 * which fit the 48 KB L1 beside the next block's; over 512, 64 KB do not.
 *
 * Each thread's work area: its packed A block, the four accumulator tiles as stored
 * for the write to C (4 x 16 x 16 FP32) and its tile configuration (what a panel
 * product needs: GEMM_BF16_AMX_PANEL_WORK); then, for a whole product on a weight
 * packed once, a piece of C of GEMM_BF16_AMX_CPIECE bytes (where the epilogue leaves C
 * unused, gemm_bf16.h's c_unused, or C is staged: GEMM_BF16_AMX_STAGE_BYTES). */
#define GEMM_BF16_AMX_APANEL ((size_t)GEMM_BF16_AMX_MC * GEMM_BF16_AMX_KC * 2)
#define GEMM_BF16_AMX_CTILES ((size_t)4 * GEMM_BF16_AMX_TILE * 4)
#define GEMM_BF16_AMX_PANEL_WORK                                                            \
    ((GEMM_BF16_AMX_APANEL + GEMM_BF16_AMX_CTILES + sizeof(amx_tilecfg) + 63) & ~(size_t)63)
#define GEMM_BF16_AMX_CPIECE ((size_t)7 << 18) /* 1.75 MB: see rows_in_place */
/* A product on a weight packed once with beta 0, more C than this and a weight past one
 * core's L2 (the kernel's stages_c) is summed into the piece and streamed out to C once
 * an item is done, instead of C's lines being read for ownership, kept in L2 over the
 * depth blocks and evicted. On a real AMX Xeon (2 cores): the 124M logits forward
 * (824 MB of C) took 170-175 ms against 182-191 (best of 5, alternating runs). Past 8
 * MB, not 64 as before, where streaming stores wrote 44-47 GB/s to memory against 17
 * for plain ones: the 124M MLP forward (50 MB of C) 9.7-10.9 ms against 11.4-14.0,
 * the q|k|v forward (38 MB) 6.9-8.8 against 8.1-10.4, the MLP's input gradients (13
 * and 50 MB) 9.4-10.7 against 11.5-15.4 (3 alternating runs). Not where the weight
 * stays in L2 (the attention projection's 13 MB of C: its input gradient took 2.5-2.7
 * ms streamed against 2.2-2.3; why is not pinned down: the q|k|v forward's items are as
 * short and gained). Smaller C is left where the next pass reads it from: in the
 * caches. */
#define GEMM_BF16_AMX_STAGE_BYTES ((size_t)8 << 20)
/* A product without a packed copy of B whose C is past this packs all of B first
 * (gemm_bf16_amx_wants_whole_b) */
#define GEMM_BF16_AMX_WHOLE_B_BYTES ((size_t)64 << 20)
/* The most bytes one item of a product with B packed once per update keeps in L2: its
 * piece of C (rows x columns in FP32), its A rows and the depth block of B it reads
 * (rows_in_place); the piece above holds the largest such piece of C */
#define GEMM_BF16_AMX_PIECE_BYTES GEMM_BF16_AMX_CPIECE
/* One core's L2 as the blocking assumes it (the Xeons with AMX have 2 MB) */
#define GEMM_BF16_AMX_L2_BYTES ((size_t)2 << 20)
#define GEMM_BF16_AMX_WORK (GEMM_BF16_AMX_PANEL_WORK + GEMM_BF16_AMX_CPIECE)
/* The shared B panel (in gemm_bf16.h's GEMM_BF16_BPACK buffer) */
#define GEMM_BF16_AMX_BPANEL ((size_t)GEMM_BF16_AMX_NC * GEMM_BF16_AMX_KC * 2)

/* A block: rows m0 .. m0+mc of op(A) (transa = 1: A stored [k][m]), depth k0 .. k0+kc,
 * into mtiles (>= ceil(mc / 16)) A tiles of rows, as above. sums (transa = 1 or
 * GEMM_BF16_STORED_T only, else ignored; or NULL): sums[m0 + i] += op(A)'s row i over that depth, in depth order, one
 * rounded add a value, as gemm_bf16_row_sums adds them (the same bits), while the
 * values are loaded for the packing: a pass of its own over the block, in cache, cost a
 * sixth of the packing. */
void gemm_bf16_amx_pack_a(uint32_t *ap, int transa, const float *A, int lda, int m0, int mc,
                          int mtiles, int k0, int kc, float *sums);
/* B strip: columns n0 .. n0+nc of op(B) (transb = 1: B stored [n][k]), depth k0 ..
 * k0+kc, into ntiles (>= ceil(nc / 16)) B tiles of columns, as above. Besides
 * GEMM_BF16_STORED (gemm_bf16.h), B may be GEMM_BF16_STORED_T: BF16 storage [n][k]. */
void gemm_bf16_amx_pack_b(uint32_t *bp, int transb, const float *B, int ldb, int n0, int nc,
                          int ntiles, int k0, int kc);

/* Depth pairs p0 .. p1 (pair p: depth 2p, 2p + 1) of the whole B panel of columns n0 ..
 * n0+nc and depth k0 .. k0+kc, for B as stored ([k][n]: transb 0, or GEMM_BF16_STORED):
 * what gemm_bf16_amx_pack_b writes there for every strip (ceil(nc / 32) strips of two B
 * tiles; tile (j, q) at bp + (j nq + q) 256), the columns and depth past nc and kc as
 * zeros. p1 <= 16 nq. A thread packs a run of pairs, so its reads go along two of B's
 * rows from start to end (a strip read 64 bytes of each of kc rows a memory page apart,
 * a stride the prefetchers do not follow). */
void gemm_bf16_amx_pack_b_pairs(uint32_t *bp, int transb, const float *B, int ldb, int n0,
                                int nc, int k0, int kc, int p0, int p1);
/* The same with AVX512_BF16; stream: stored past the caches (bp 64-byte aligned; a
 * copy's packing, gemm_bf16_amx_stream_fence after) */
void gemm_bf16_amx_pack_b_pairs_avx512(uint32_t *bp, int transb, const float *B, int ldb,
                                       int n0, int nc, int k0, int kc, int p0, int p1,
                                       int stream);

/* The same packing with AVX512_BF16 (gemm_bf16_amx_pack_avx512.c), the same bits;
 * only where the CPU has AVX512_BF16. */
void gemm_bf16_amx_pack_a_avx512(uint32_t *ap, int transa, const float *A, int lda, int m0,
                                 int mc, int mtiles, int k0, int kc, float *sums);
void gemm_bf16_amx_pack_b_avx512(uint32_t *bp, int transb, const float *B, int ldb, int n0,
                                 int nc, int ntiles, int k0, int kc);
/* The B packing for a copy read a step later, not by the next few products (the
 * weights packed once per update, gemm_bf16_packer.h's gemm_bf16_amx_copy_packer):
 * the same bits, each tile row stored past the caches (bp 64-byte aligned); call
 * gemm_bf16_amx_stream_fence after the last one, before the copy is read. */
void gemm_bf16_amx_pack_b_streamed_avx512(uint32_t *bp, int transb, const float *B, int ldb,
                                          int n0, int nc, int ntiles, int k0, int kc);
void gemm_bf16_amx_stream_fence(void);
/* rows x cols floats from src (lds a row) to dst (ldd a row), stored past the caches
 * where the vector packing runs (else copied): the staged piece of a product whose C
 * is far larger than the caches (gemm_bf16_amx_kernel.h). In dst when it returns. */
void gemm_bf16_amx_stream_rows(const float *src, int lds, float *dst, int ldd, int rows,
                               int cols);
void gemm_bf16_amx_stream_rows_avx512(const float *src, int lds, float *dst, int ldd, int rows,
                                      int cols);
/* C[mr, nr] = alpha * block + beta * C for one 32 x 32 block of sums in ct (the four
 * accumulator tiles as stored, each 16 x 16 FP32 row-major: rows 0-15 x columns 0-15,
 * rows 0-15 x 16-31, rows 16-31 x 0-15, rows 16-31 x 16-31); mr, nr <= 32; beta = 0:
 * C is not read. alpha * sum is rounded, then fmaf(beta, C, that): one rounding each,
 * whatever the compiler contracts. */
void gemm_bf16_amx_write_c(const float *ct, float *c, int ldc, int mr, int nr, float alpha,
                           float beta);
/* The same with AVX-512 (gemm_bf16_amx_pack_avx512.c), the same bits. The scalar one
 * costs about as much as the tile products of a 32 x 32 block over a depth block. */
void gemm_bf16_amx_write_c_avx512(const float *ct, float *c, int ldc, int mr, int nr,
                                  float alpha, float beta);
/* Which packing gemm_bf16_amx_pack_a/b and write-back gemm_bf16_amx_write_c run: the
 * vector ones when `vector` and the CPU has AVX512_BF16 (returns 1), else the portable
 * ones (0). gemm_bf16_init selects the vector ones; call it before products run, never
 * during. */
int gemm_bf16_amx_pack_select(int vector);

/* Whether a product without a copy packed once wants all of B packed first
 * (gemm_bf16_amx's bwhole, as much room as the AMX packer's whole copy of B), else packs
 * B a panel at a time: B as stored ([k][n]: a weight gradient's activation) and C past
 * GEMM_BF16_AMX_WHOLE_B_BYTES (the GPT-2 124M logits' weight gradient; see the kernel's
 * pack_whole_b) */
static inline int gemm_bf16_amx_wants_whole_b(int transb, int M, int N, int K)
{
    return M > 0 && N > 0 && K > 0 && (transb == 0 || transb == GEMM_BF16_STORED) &&
           (size_t)M * (size_t)N * sizeof(float) > GEMM_BF16_AMX_WHOLE_B_BYTES;
}

/* C = alpha op(A) op(B) + beta C. bpack: GEMM_BF16_BPACKS bytes; works: per-thread
 * areas of GEMM_BF16_AMX_WORK bytes (one per OpenMP thread when parallel, else
 * works[0] for the calling thread); bpre: B's copy packed once per update
 * (gemm_bf16_packer.h, the AMX packer), or NULL to pack B in the product; ep: the
 * epilogue (gemm_bf16.h), or NULL; bwhole: NULL, or (parallel only, bpre NULL, where
 * gemm_bf16_amx_wants_whole_b) room for the AMX packer's whole copy of B, 64-byte
 * aligned, where the product packs all of B first: the same bits as without. */
void gemm_bf16_amx(int transa, int transb, int M, int N, int K, float alpha, const float *A,
                   int lda, const float *B, int ldb, float beta, float *C, int ldc,
                   void *bpack, void *const *works, int parallel, const void *bpre,
                   const gemm_bf16_epilogue *ep, void *bwhole);
/* C[m, n] = alpha A B (+ C when accumulate), on the calling thread, from operands
 * packed as above: A's 16-row tiles at ap + i a_run words (i = 0, 1, ... for rows 0-15,
 * 16-31, ...), B's 16-column tiles at bp + j b_run, each the first of nq chunks of 32
 * depth (a_run, b_run >= nq tiles: a panel packed deeper is read in part), tiles past m
 * and n present and zero. work: GEMM_BF16_AMX_PANEL_WORK bytes (the accumulator tiles as
 * stored for the write-back). For products cut finer than a whole gemm_bf16, on
 * operands packed once (attention_tiles.h).
 * The tiles must be configured on the calling thread: gemm_bf16_amx_panel_begin(work)
 * before a run of panels (it writes the configuration into work), _end() after, with
 * no other tile code between. Why not per panel: attention calls 7 panels a block of
 * 32 rows, and a configuration (LDTILECFG, TILERELEASE; in the emulated twin two 8 KB
 * clears) per call was about 7% of its time around the tiles in the twin. */
void gemm_bf16_amx_panel_begin(void *work);
void gemm_bf16_amx_panel_end(void);
void gemm_bf16_amx_panel(const uint32_t *ap, size_t a_run, const uint32_t *bp, size_t b_run,
                         int m, int n, int nq, float alpha, int accumulate, float *C, int ldc,
                         void *work);
void gemm_bf16_amx_panel_begin_emulated(void *work);
void gemm_bf16_amx_panel_end_emulated(void);
void gemm_bf16_amx_panel_emulated(const uint32_t *ap, size_t a_run, const uint32_t *bp,
                                  size_t b_run, int m, int n, int nq, float alpha,
                                  int accumulate, float *C, int ldc, void *work);

void gemm_bf16_amx_emulated(int transa, int transb, int M, int N, int K, float alpha,
                            const float *A, int lda, const float *B, int ldb, float beta,
                            float *C, int ldc, void *bpack, void *const *works, int parallel,
                            const void *bpre, const gemm_bf16_epilogue *ep, void *bwhole);

#endif
