/* gemm_bf16_packer — how each path of gemm_bf16 lays out a whole B operand, so that a
 * weight matrix can be packed once per update (gemm_bf16_weights.h) and its products
 * read the packed copy instead of packing B again on every call.
 *
 * A path cuts op(B) (K x N) into blocks of `nc` columns and `kc` depth, and each block
 * into strips of `strip` columns, exactly as its product loops cut it (nc and kc are
 * multiples of strip); a block's panel
 * holds what the product would have packed into its B buffer for that block. A whole
 * packed matrix is the panels one after the other, column block by column block, depth
 * block by depth block inside each (gemm_bf16_block_offset). Packing a strip writes the
 * very bits the product's own packing writes, so a product on a packed copy gives the
 * same result, bit for bit, as one that packs (tests/test_gemm_bf16.c checks it).
 *
 * Internal to the BF16 products (gemm_bf16*.c). */
#ifndef GT_GEMM_BF16_PACKER_H
#define GT_GEMM_BF16_PACKER_H

#ifndef GT_BF16_MODULE
#error "gemm_bf16_packer.h is internal to src/kernels/bf16/ (elsewhere: gemm_bf16.h)"
#endif

#include <stddef.h>
#include <stdint.h>

typedef struct gemm_bf16_packer {
    int kc, nc, strip; /* depth, columns per block; columns per strip */
    /* 32-bit words of the panel of one block of nc columns and kc depth */
    size_t (*panel_words)(int nc, int kc);
    /* strip s of the block at columns jc (nc wide) and depth pc (kc deep) of op(B)
     * (transb = 1: B stored [n][k], ldb apart), into that block's panel */
    void (*pack_strip)(uint32_t *panel, int s, int nc, int transb, const float *B, int ldb,
                       int jc, int pc, int kc);
    /* depth pc+d0 .. pc+d0+dn of every strip of the block at columns jc (nc wide) and
     * depth pc (kc deep) of op(B) = B (transb = 0), into that block's panel: what
     * pack_strip writes there. d0 is a multiple of `strip`; dn is too unless the slice
     * ends the block. (The optimizer's pass packs a weight's rows as it updates them.) */
    void (*pack_depth)(uint32_t *panel, int nc, const float *B, int ldb, int jc, int pc, int kc,
                       int d0, int dn);
} gemm_bf16_packer;

/* Words of block (jc, pc) of a K x N operand from the start of its packed copy; with
 * jc = N, pc = 0: the words of the whole copy. */
static inline size_t gemm_bf16_block_offset(const gemm_bf16_packer *p, int K, int N, int jc,
                                            int pc)
{
    size_t words = 0;
    for (int j = 0; j < jc; j += p->nc) {
        const int nc = N - j < p->nc ? N - j : p->nc;
        for (int k = 0; k < K; k += p->kc) words += p->panel_words(nc, K - k < p->kc ? K - k : p->kc);
    }
    if (jc < N) {
        const int nc = N - jc < p->nc ? N - jc : p->nc;
        for (int k = 0; k < pc; k += p->kc) words += p->panel_words(nc, K - k < p->kc ? K - k : p->kc);
    }
    return words;
}

/* The paths' packers. The AVX512_BF16 ones exist only where GT_SIMD_X86_BF16 built
 * them; the AMX ones serve the AMX path and its emulated twin. The two copy packers (the
 * same layout and bits as their path's own) pack the weights once per update, storing
 * past the caches: a copy is read a step later, and at the GPT-2 124M shape its 0.5 GB
 * would otherwise be read for ownership and evict what the step is using. */
extern const gemm_bf16_packer gemm_bf16_portable_packer;
extern const gemm_bf16_packer gemm_bf16_avx512_packer;
extern const gemm_bf16_packer gemm_bf16_avx512_copy_packer;
extern const gemm_bf16_packer gemm_bf16_amx_packer;
extern const gemm_bf16_packer gemm_bf16_amx_copy_packer;

#endif
