/* amx_emul — a software model of the AMX tiles and of the six instructions the BF16
 * matrix product uses, so its AMX kernel runs (and is tested) on any CPU.
 *
 * What it follows (Intel SDM, vol. 2, and the AMX exception classes):
 *  - state per thread (as the hardware's tile registers): a thread has no tiles until it
 *    loads a configuration itself; amx_emul_release returns it to that state;
 *  - amx_emul_loadconfig (LDTILECFG) checks the 64 bytes as the hardware does (#GP on a
 *    palette other than 0 or 1, reserved bytes set, more than 16 rows or 64 bytes per
 *    row, a tile with rows but no bytes per row or the other way round, tiles 8-15 used)
 *    and zeroes every tile; palette 0 releases;
 *  - loads, stores and tilezero need a configured, valid (rows > 0) tile 0-7 (#UD);
 *    a load zeroes the bytes past the tile's width and the rows past its height;
 *  - amx_emul_dpbf16ps (TDPBF16PS) needs three different valid tiles of matching shape
 *    (dst rows = src1 rows, dst bytes per row = src2 bytes per row, src1 bytes per row
 *    / 4 = src2 rows, all bytes per row multiples of 4; #UD otherwise) and computes, for
 *    each row m of dst and each column n, exactly the SDM's pseudo-code: two FP32
 *    chains from zero, one over the even elements of the pairs and one over the odd,
 *    each step a fused multiply-add (fmaf) in pair order k = 0, 1, ...; then the two
 *    chains added, then that sum added to dst[m][n]. Every operation treats denormal
 *    inputs as zero and flushes denormal results to zero (DAZ = FTZ = 1), rounds to
 *    nearest even, and does not read or change MXCSR's flags.
 * A fault is a programming error in the kernel: it prints what the hardware would raise
 * and why, then aborts. The model's loads and stores copy the bytes, so a run under
 * AddressSanitizer also catches a tile reaching outside its buffer.
 *
 * What it cannot show: speed; the exact bits where the hardware departs from the SDM's
 * pseudo-code (not checked against a real CPU); faults that need real memory
 * protection without a sanitizer; restarts of an interrupted load (start_row > 0 is
 * refused as not modelled).
 *
 * Each instruction is counted (amx_emul_counts.h), for the bench's prediction of the
 * real path's speed. */
#ifndef GT_AMX_EMUL_H
#define GT_AMX_EMUL_H

#include "amx_tiles.h"

void amx_emul_loadconfig(const amx_tilecfg *cfg);
void amx_emul_release(void);
/* tile t <- rows x colsb bytes from base + r * stride */
void amx_emul_loadd(int t, const void *base, long stride);
/* rows x colsb bytes of tile t -> base + r * stride */
void amx_emul_stored(int t, void *base, long stride);
void amx_emul_zero(int t);
/* dst += src1 (rows x pairs of BF16) @ src2 (pair rows x columns of BF16 pairs) */
void amx_emul_dpbf16ps(int dst, int src1, int src2);

/* The arithmetic of TDPBF16PS on tiles as the model stores them (d: M rows of N FP32;
 * a: M rows of K BF16 pairs; b: K rows of N pairs; M, N, K <= 16; d's rows past M are
 * the caller's), with AVX-512 (amx_emul_avx512.c): the same bits as the model's scalar
 * loop. Returns 0 and changes nothing when an operand holds a NaN (the scalar loop
 * then runs). Only where the CPU has AVX-512 and GT_SIMD_X86. */
int amx_emul_dp_avx512(uint8_t (*d)[AMX_MAX_COLSB], const uint8_t (*a)[AMX_MAX_COLSB],
                       const uint8_t (*b)[AMX_MAX_COLSB], int M, int N, int K);
/* The same with AVX2 and FMA (amx_emul_avx2.c), for CPUs without AVX-512. Only where
 * the CPU has AVX2 and FMA and GT_SIMD_X86. */
int amx_emul_dp_avx2(uint8_t (*d)[AMX_MAX_COLSB], const uint8_t (*a)[AMX_MAX_COLSB],
                     const uint8_t (*b)[AMX_MAX_COLSB], int M, int N, int K);
/* Which loop amx_emul_dpbf16ps computes with: AMX_EMUL_BEST (the default) the widest
 * vector loop the CPU runs (AVX-512, else AVX2, else the scalar one); AMX_EMUL_AVX2 the
 * AVX2 loop even where AVX-512 is (the scalar one without AVX2); AMX_EMUL_SCALAR the
 * scalar model. Tests pick one to compare. Returns the previous setting. Call it while
 * no thread runs tile instructions. */
enum { AMX_EMUL_SCALAR = 0, AMX_EMUL_BEST = 1, AMX_EMUL_AVX2 = 2 };
int amx_emul_vector(int loop);
/* Timing only (on = 1): amx_emul_dpbf16ps checks and counts, and computes nothing (its
 * destination keeps what it held); loads, stores and zeroing still move the data.
 * For the bench's prediction of the real path (GENTRAIN_AMX_TIMING, gemm_bf16.c): with
 * the products computed in software, a step's time outside them is measured between
 * tile spans a thousand times longer than the tile unit's, and grows with that (the
 * host refills this core's caches meanwhile: 8-15% more time around and outside the
 * products at the bench's shape). The results are meaningless in this mode. Returns
 * the previous setting; call it while no thread runs tile instructions. */
int amx_emul_timing_only(int on);

#endif
