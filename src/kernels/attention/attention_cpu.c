/* attention_cpu — see attention_cpu.h for the contract.
 *
 * One (batch, head) is one job, on one thread; B * NH jobs are split statically. A job's
 * operands are small (T x hs floats each: 64 KB at T = 256, hs = 64), so the job copies
 * them once into contiguous rows (transposed where a product needs them so) and the
 * products run on the SIMD path's gemm_tile (simd.h), a register-blocked micro-kernel
 * that reads those rows in place: no packing per product, no BLAS call per block, and
 * the causal mask skipped tile by tile (tile_rows query rows see keys up to their last
 * row only).
 *
 * Forward, per tile of query rows i0 .. i0 + m (keys 0 .. i0 + m):
 *   S = scale Q K^T       (K transposed once per job into kt, so B's rows are contiguous)
 *   P = softmax(S) by rows, saving each row's log-sum-exp
 *   O = P V
 * S and P live in a tile-sized scratch: the T x T probabilities are never stored.
 *
 * Backward, per block of ATT_ROWS query rows r0 .. r1, first per tile of rows:
 *   P  = exp(scale Q K^T - lse)      rebuilt (one product more than a stored P)
 *   dP = dO V^T                        (V transposed once per job into vt)
 *   dS = P (dP - rowsum(P dP))
 *   dQ  = scale dS K
 * then, over key tiles j0 of keys 0 .. r1, with the block's P and dS as A^T:
 *   dV += P^T dO,  dK += scale dS^T Q  (queries from max(r0, j0): P, dS are 0 above)
 * where a key tile from r0 on meets its first queries, so = rather than +=: every
 * value of dqkv is written, and nothing needs zeroing first.
 * The block's P and dS rows stay in scratch between the two loops.
 *
 * Every element of a gradient is summed by one thread in a fixed order, so the results
 * do not depend on the thread count. */
#include "attention_cpu.h"

#include <math.h>
#include <string.h>

#include "attention_pairs.h" /* the BF16 products on AVX512_BF16 */
#include "attention_tiles.h" /* the BF16 products on the AMX tiles */
#include "bf16_store.h"      /* bf16_widen, bf16_store: q|k|v and out in BF16 */
#include "simd.h"            /* simd_kernels_get: gemm_tile, softmax rows */

#ifdef _OPENMP
#include <omp.h>
#else
static int omp_get_max_threads(void) { return 1; }
static int omp_get_thread_num(void) { return 0; }
#endif

/* Query rows per backward block: dV and dK are read and written once per block, and a
 * block's P and dS rows (2 x ATT_ROWS x T floats) stay in L2 at T = 1024. A multiple of
 * every path's tile_rows (4, 6). */
#define ATT_ROWS 48

/* per thread, for the head kernels: 5 T x hs operand copies, 2 ATT_ROWS x T rows of P
 * and dS; or what the BF16 pairs or the tiles take (attention_pairs.h,
 * attention_tiles.h), when more */
static size_t kernel_floats(int T, int hs)
{
    const size_t fp32 = 5 * (size_t)hs * (size_t)T + 2 * (size_t)ATT_ROWS * (size_t)T,
                 pairs = attention_pairs_scratch_floats(T, hs),
                 tiles = attention_tiles_scratch_floats(T, hs);
    const size_t most = fp32 > pairs ? fp32 : pairs;
    return most > tiles ? most : tiles;
}

/* Which products a BF16 pass runs: the AMX tiles (or their emulated twin) where
 * gemm_bf16 runs them, else the BF16 pairs where the CPU has them, else the FP32 twin
 * on BF16-rounded operands */
enum bf16_kind { TWIN, PAIRS, TILES };

static enum bf16_kind bf16_kind_for(int hs)
{
    return attention_tiles_ready(hs) ? TILES : attention_pairs_ready() ? PAIRS : TWIN;
}

/* then, for BF16 storage (each_head_stored), a head's q|k|v and its q|k|v gradient in
 * FP32 (T x 3 hs each) and its output or output gradient (T x hs) */
static size_t stored_floats(int T, int hs) { return 7 * (size_t)hs * (size_t)T; }

static size_t per_thread(int T, int hs) { return kernel_floats(T, hs) + stored_floats(T, hs); }

size_t attention_scratch_floats(int T, int hs, int threads)
{
    return (size_t)(threads > 0 ? threads : 1) * per_thread(T, hs);
}

size_t attention_saved_floats(int B, int NH, int T)
{
    return (size_t)B * (size_t)NH * (size_t)T;
}

/* dst[j hs + d] = src[j ld + d]: a head's T rows made contiguous. The rows of qkv are
 * 3C apart (4.6 KB at C = 384), so a product walking them in place steps onto another
 * page at nearly every k; with the copies the backward measured 9% faster, the forward
 * 5%. */
static void copy_rows(float *restrict dst, const float *restrict src, int T, int ld, int hs)
{
    for (int j = 0; j < T; j++) /* a loop, not memcpy: hs is 64 floats, a call costs more */
        for (int d = 0; d < hs; d++) dst[(size_t)j * hs + d] = src[(size_t)j * ld + d];
}

/* One (batch, head): q, k, v rows of stride 3C, out rows of stride C, lse[T]; with
 * bf16, every product's operands rounded to BF16 first (their products are then exact
 * in FP32, and summed in FP32 as gemm_bf16's portable path sums them) */
static void fwd_head(const simd_kernels *kr, float *out, float *lse, const float *q,
                     float *scratch, int T, int C, int hs, int bf16)
{
    const float *k = q + C, *v = q + 2 * C;
    const int ld = 3 * C, mr = kr->tile_rows;
    const size_t th = (size_t)T * hs;
    const float scale = 1.0f / sqrtf((float)hs);
    float *kt = scratch, *vc = kt + th, *qc = vc + th, *s = qc + th;
    kr->transpose(kt, (size_t)T, k, (size_t)ld, T, hs);
    copy_rows(vc, v, T, ld, hs);
    const float *qa = q;
    int lda = ld;
    if (bf16) { /* Q is read in place in FP32; in BF16 a rounded copy */
        copy_rows(qc, q, T, ld, hs);
        kr->bf16_round(kt, th);
        kr->bf16_round(vc, th);
        kr->bf16_round(qc, th);
        qa = qc;
        lda = hs;
    }
    for (int i0 = 0; i0 < T; i0 += mr) {
        const int m = T - i0 < mr ? T - i0 : mr, keys = i0 + m;
        kr->gemm_tile(m, keys, hs, scale, qa + (size_t)i0 * lda, lda, 1, kt, (size_t)T, s,
                      (size_t)T, 0);
        for (int i = 0; i < m; i++) {
            lse[i0 + i] = kr->softmax_row(s + (size_t)i * T, i0 + i + 1, keys);
            if (bf16) kr->bf16_round(s + (size_t)i * T, (size_t)keys);
        }
        kr->gemm_tile(m, hs, keys, 1.0f, s, T, 1, vc, (size_t)hs, out + (size_t)i0 * C,
                      (size_t)C, 0);
    }
}

static void bwd_head(const simd_kernels *kr, float *dq, const float *dout, const float *q,
                     const float *lse, float *scratch, int T, int C, int hs, int bf16)
{
    const float *k = q + C, *v = q + 2 * C;
    float *dk = dq + C, *dv = dq + 2 * C;
    const int ld = 3 * C, mr = kr->tile_rows;
    const float scale = 1.0f / sqrtf((float)hs);
    const size_t th = (size_t)T * hs;
    float *kt = scratch, *vt = kt + th, *kc = vt + th, *qc = kc + th, *oc = qc + th,
          *p = oc + th, *d = p + (size_t)ATT_ROWS * T;
    kr->transpose(kt, (size_t)T, k, (size_t)ld, T, hs);
    kr->transpose(vt, (size_t)T, v, (size_t)ld, T, hs);
    copy_rows(kc, k, T, ld, hs);
    copy_rows(qc, q, T, ld, hs);
    copy_rows(oc, dout, T, C, hs);
    if (bf16)
        for (float *x = kt; x < p; x += th) kr->bf16_round(x, th); /* the 5 copies */
    for (int r0 = 0; r0 < T; r0 += ATT_ROWS) {
        const int r1 = r0 + ATT_ROWS < T ? r0 + ATT_ROWS : T;
        for (int i0 = r0; i0 < r1; i0 += mr) {
            const int m = r1 - i0 < mr ? r1 - i0 : mr, keys = i0 + m;
            float *pb = p + (size_t)(i0 - r0) * T, *db = d + (size_t)(i0 - r0) * T;
            kr->gemm_tile(m, keys, hs, scale, qc + (size_t)i0 * hs, hs, 1, kt, (size_t)T, pb,
                          (size_t)T, 0);
            kr->gemm_tile(m, keys, hs, 1.0f, oc + (size_t)i0 * hs, hs, 1, vt, (size_t)T, db,
                          (size_t)T, 0);
            for (int i = 0; i < m; i++) {
                /* rows are zeroed up to r1: the key loop below reads a row as far as
                 * its key tile reaches (keys when ATT_ROWS is a multiple of mr), r1 at
                 * most */
                float *pr = pb + (size_t)i * T, *dr = db + (size_t)i * T;
                kr->softmax_row_lse(pr, i0 + i + 1, r1, lse[i0 + i]);
                kr->softmax_bwd_row(dr, pr, i0 + i + 1, r1); /* on FP32 P and dP */
                if (bf16) { /* then P and dS are operands */
                    kr->bf16_round(pr, (size_t)(i0 + i + 1));
                    kr->bf16_round(dr, (size_t)(i0 + i + 1));
                }
            }
            kr->gemm_tile(m, hs, keys, scale, db, T, 1, kc, (size_t)hs, dq + (size_t)i0 * ld,
                          (size_t)ld, 0);
        }
        for (int j0 = 0; j0 < r1; j0 += mr) {
            const int m = r1 - j0 < mr ? r1 - j0 : mr, q0 = j0 > r0 ? j0 : r0,
                      queries = r1 - q0;
            const size_t at = (size_t)(q0 - r0) * T + (size_t)j0;
            const int add = j0 < r0; /* keys from r0 on meet their first queries here */
            kr->gemm_tile(m, hs, queries, 1.0f, p + at, 1, T, oc + (size_t)q0 * hs,
                          (size_t)hs, dv + (size_t)j0 * ld, (size_t)ld, add);
            kr->gemm_tile(m, hs, queries, scale, d + at, 1, T, qc + (size_t)q0 * hs,
                          (size_t)hs, dk + (size_t)j0 * ld, (size_t)ld, add);
        }
    }
}

/* The team: the runtime's threads, but no more than the scratch has room for */
static int team_size(int threads, int jobs)
{
    int n = omp_get_max_threads();
    if (threads < n) n = threads;
    if (jobs < n) n = jobs;
    return n > 1 ? n : 1;
}

/* One pass's arrays: q|k|v as floats (qkv) or in BF16 storage (qkv16); a forward (dqkv
 * NULL) writes out (or out16, with qkv16) and lse_out, a backward writes dqkv from dout
 * and lse_in, or with dqkv16 that gradient in BF16 storage alone (dqkv then only says
 * that this is a backward: not written). */
typedef struct {
    const float *qkv;
    const uint16_t *qkv16;
    float *out, *lse_out, *dqkv;
    uint16_t *out16, *dqkv16;
    const float *dout, *lse_in;
} pass_io;

/* A head's gradient dh (rows of 3 hs: dq, dk, dv) rounded into its columns of dqkv16
 * (at the head's first value, rows 3C apart; its dk and dv C and 2C on) */
static void head_grad_to16(uint16_t *dqkv16, const float *dh, int T, int C, int hs)
{
    for (int part = 0; part < 3; part++) /* a call a part, not a row: 3 calls, not 3 T */
        bf16_store_rows(dqkv16 + (size_t)part * C, 3 * (size_t)C, dh + (size_t)part * hs,
                        3 * (size_t)hs, (size_t)T, (size_t)hs);
}

/* The FP32 twin on q|k|v in BF16 storage: a head's rows widened into FP32 rows of 3 hs
 * (its output, its gradients, in rows of hs), so its kernels run unchanged with C = hs
 * on values that are already BF16 (their rounding then changes nothing: the bits of the
 * FP32-stored run); the backward writes the head's gradient into dqkv (or its BF16 copy
 * into dqkv16) once, at the end. */
static void stored_twin_head(const simd_kernels *kr, const pass_io *io, int j, float *sc,
                             int T, int C, int NH)
{
    const int hs = C / NH, b = j / NH, h = j % NH;
    const size_t qoff = (size_t)b * T * 3 * C + (size_t)h * hs,
                 ooff = (size_t)b * T * C + (size_t)h * hs, th = (size_t)T * hs,
                 ld3 = 3 * (size_t)hs;
    float *q = sc + kernel_floats(T, hs), *dq = q + 3 * th, *o = dq + 3 * th;
    for (int t = 0; t < T; t++)
        for (int part = 0; part < 3; part++) /* q, k, v */
            bf16_widen(q + t * ld3 + (size_t)part * hs,
                       io->qkv16 + qoff + (size_t)t * 3 * C + (size_t)part * C, (size_t)hs);
    if (!io->dqkv) {
        fwd_head(kr, o, io->lse_out + (size_t)j * T, q, sc, T, hs, hs, 1);
        for (int t = 0; t < T; t++)
            bf16_store(io->out16 + ooff + (size_t)t * C, o + (size_t)t * hs, (size_t)hs);
        return;
    }
    for (int t = 0; t < T; t++)
        memcpy(o + (size_t)t * hs, io->dout + ooff + (size_t)t * C, (size_t)hs * sizeof *o);
    bwd_head(kr, dq, o, q, io->lse_in + (size_t)j * T, sc, T, hs, hs, 1);
    if (io->dqkv16) {
        head_grad_to16(io->dqkv16 + qoff, dq, T, C, hs);
        return;
    }
    for (int t = 0; t < T; t++)
        for (int part = 0; part < 3; part++)
            memcpy(io->dqkv + qoff + (size_t)t * 3 * C + (size_t)part * C,
                   dq + t * ld3 + (size_t)part * hs, (size_t)hs * sizeof *dq);
}

/* The hint (attention_next.h) for head j: head j + team, the one this thread most
 * likely takes next (the heads are equal work, handed out in turn) */
static attention_next next_head(const pass_io *io, int j, int team, int jobs, int T, int C,
                                int NH)
{
    const int n = j + team;
    if (!io->qkv16 || n >= jobs) return attention_next_none();
    const int hs = C / NH, b = n / NH, h = n % NH;
    return (attention_next){io->qkv16 + (size_t)b * T * 3 * C + (size_t)h * hs,
                            io->dqkv ? io->dout + (size_t)b * T * C + (size_t)h * hs : NULL};
}

/* (batch, head) j of the pass, with the products of `kind` (bf16: BF16 operands); next:
 * the hint for the tiles and the pairs */
static void one_head(const simd_kernels *kr, enum bf16_kind kind, const pass_io *io, int j,
                     float *sc, int T, int C, int NH, int bf16, attention_next next)
{
    const int hs = C / NH, b = j / NH, h = j % NH;
    const size_t qoff = (size_t)b * T * 3 * C + (size_t)h * hs,
                 ooff = (size_t)b * T * C + (size_t)h * hs;
    const float *q = io->qkv ? io->qkv + qoff : NULL;
    const uint16_t *q16 = io->qkv16 ? io->qkv16 + qoff : NULL;
    float *dq = io->dqkv ? io->dqkv + qoff : NULL;
    const float *dout = io->dqkv ? io->dout + ooff : NULL;
    const float *lse_in = io->dqkv ? io->lse_in + (size_t)j * T : NULL;
    float *lse_out = io->dqkv ? NULL : io->lse_out + (size_t)j * T;
    float *out = io->out ? io->out + ooff : NULL;
    uint16_t *out16 = io->out16 ? io->out16 + ooff : NULL;
    /* With dqkv16 the tiles and the pairs write the head's gradient into the scratch's
     * part past their own (rows of 3 hs), and it goes from there, while in cache, into
     * dqkv16 alone: dqkv in FP32 (9 MB a layer at the bench's shape) is neither written
     * nor read back */
    const int to16 = dq && q16 && io->dqkv16; /* (dqkv16 comes only with q|k|v in BF16) */
    float *const dh = to16 ? sc + kernel_floats(T, hs) : dq;
    const int dh_C = to16 ? hs : C;
    if (kind == TILES && dq) /* the tiles and the pairs read stored values as they are */
        attention_tiles_bwd_head(dh, dh_C, dout, q, q16, lse_in, sc, T, C, hs, next);
    else if (kind == TILES)
        attention_tiles_fwd_head(out, out16, lse_out, q, q16, sc, T, C, hs, next);
    else if (kind == PAIRS && dq && q16)
        attention_pairs_bwd_head_stored(dh, dh_C, dout, q16, lse_in, sc, T, C, hs, next);
    else if (kind == PAIRS && dq)
        attention_pairs_bwd_head(dq, dout, q, lse_in, sc, T, C, hs);
    else if (kind == PAIRS && q16)
        attention_pairs_fwd_head_stored(out16, lse_out, q16, sc, T, C, hs, next);
    else if (kind == PAIRS)
        attention_pairs_fwd_head(out, lse_out, q, sc, T, C, hs);
    else if (q16) { /* its own scratch layout, and its own stores */
        stored_twin_head(kr, io, j, sc, T, C, NH);
        return;
    } else if (dq)
        bwd_head(kr, dq, dout, q, lse_in, sc, T, C, hs, bf16);
    else
        fwd_head(kr, out, lse_out, q, sc, T, C, hs, bf16);
    if (to16) head_grad_to16(io->dqkv16 + qoff, dh, T, C, hs);
}

/* Every (batch, head) of a pass, one per thread at a time, handed out as the threads
 * come free: the heads are equal work, but a core the host slows for a moment would
 * otherwise leave the other waiting at the end (static halves: 0.8-3.3 ms a step of
 * waits on Zen 4 at L6 C384, 0.3-0.6 handed out). A head's bits do not depend on
 * which thread runs it (each has its own scratch). */
static void each_head(const pass_io *io, float *scratch, int threads, int B, int T, int C,
                      int NH, int bf16)
{
    const simd_kernels *kr = simd_kernels_get();
    const int hs = C / NH, jobs = B * NH, team = team_size(threads, jobs);
    const enum bf16_kind kind = bf16 ? bf16_kind_for(hs) : TWIN;
    const size_t per = per_thread(T, hs);
    if (kind == TILES) attention_tiles_pass_begin();
#pragma omp parallel for schedule(dynamic, 1) num_threads(team) if (team > 1)
    for (int j = 0; j < jobs; j++)
        one_head(kr, kind, io, j, scratch + (size_t)omp_get_thread_num() * per, T, C, NH, bf16,
                 kind != TWIN ? next_head(io, j, team, jobs, T, C, NH) : attention_next_none());
    if (kind == TILES) attention_tiles_pass_end();
}

void attention_forward_stored(uint16_t *out, float *lse, const uint16_t *qkv, float *scratch,
                              int threads, int B, int T, int C, int NH)
{
    const pass_io io = {.qkv16 = qkv, .out16 = out, .lse_out = lse};
    each_head(&io, scratch, threads, B, T, C, NH, 1);
}

void attention_backward_stored(float *dqkv, uint16_t *dqkv16, const float *dout,
                               const uint16_t *qkv, const float *lse, float *scratch,
                               int threads, int B, int T, int C, int NH)
{
    const pass_io io = {.qkv16 = qkv, .dqkv = dqkv, .dqkv16 = dqkv16, .dout = dout,
                        .lse_in = lse};
    each_head(&io, scratch, threads, B, T, C, NH, 1);
}

void attention_forward(float *out, float *lse, const float *qkv, float *scratch, int threads,
                       int B, int T, int C, int NH)
{
    const pass_io io = {.qkv = qkv, .out = out, .lse_out = lse};
    each_head(&io, scratch, threads, B, T, C, NH, 0);
}

void attention_backward(float *dqkv, const float *dout, const float *qkv, const float *lse,
                        float *scratch, int threads, int B, int T, int C, int NH)
{
    const pass_io io = {.qkv = qkv, .dqkv = dqkv, .dout = dout, .lse_in = lse};
    each_head(&io, scratch, threads, B, T, C, NH, 0);
}

void attention_forward_bf16(float *out, float *lse, const float *qkv, float *scratch,
                            int threads, int B, int T, int C, int NH)
{
    const pass_io io = {.qkv = qkv, .out = out, .lse_out = lse};
    each_head(&io, scratch, threads, B, T, C, NH, 1);
}

void attention_backward_bf16(float *dqkv, const float *dout, const float *qkv,
                             const float *lse, float *scratch, int threads, int B, int T,
                             int C, int NH)
{
    const pass_io io = {.qkv = qkv, .dqkv = dqkv, .dout = dout, .lse_in = lse};
    each_head(&io, scratch, threads, B, T, C, NH, 1);
}
