/* attention_plan — which batched matrix products causal attention runs, as data: the
 * FP16 kernels of ops_attention.cu execute a plan with cuBLAS, and
 * tests/test_attention_plan.c executes the same plan with a plain CPU product, so the
 * leading dimensions, offsets and strides are checked in `make check` on machines
 * without a GPU.
 *
 * Why row blocks: under the causal mask, query t only needs keys 0..t, yet one T x T
 * product per head computes (and the softmax then reads and writes) the whole square.
 * The queries are cut into nb blocks of R = T/nb rows; block i needs only the keys
 * 0..(i+1)R-1, so the products and the softmax touch (nb+1)/(2nb) of the square (56%
 * at nb = 8) with the same cuBLAS calls on smaller shapes.
 *
 * The probabilities' buffer P [T,T] per head (and dP, its gradient) is therefore
 * defined only up to the end of each row's block: row t holds the probabilities for
 * t2 <= t, exact zeros for t < t2 < att_row_end(t), and is neither written nor read
 * from att_row_end(t) to T.
 *
 * The products, per head (row-major names; Q, K, V, Y, dY, dQ, dK, dV are [T,hs] with
 * row stride hs, P and dP are [T,T] with row stride T, scale = 1/sqrt(hs)):
 *   ATT_SCORES   P  = scale Q K^T          (then the softmax, in place)
 *   ATT_CONTEXT  Y  = P V
 *   ATT_DPROBS   dP = dY V^T               (then the softmax's backward, in place)
 *   ATT_DVALUES  dV = P^T dY
 *   ATT_DQUERIES dQ = scale dP K
 *   ATT_DKEYS    dK = scale dP^T Q
 * ATT_SCORES, ATT_CONTEXT, ATT_DPROBS and ATT_DQUERIES go by query blocks (block i:
 * its R rows against the first (i+1)R keys); ATT_DVALUES and ATT_DKEYS by key blocks
 * (key block j: its R keys against the queries jR..T-1, the only ones that see them).
 * Every output element is written exactly once (beta = 0): no accumulation, no
 * ordering between the products of one plan.
 *
 * Each att_gemm is one call of a column-major strided-batched product (cuBLAS
 * conventions: C = alpha op(A) op(B) + beta C, op(A) [m,k], op(B) [k,n], C [m,n]),
 * batched over the B*NH heads with per-head strides; A, B and C name operands by role
 * and start `off` elements into the role's per-head matrix. Plain C, header only (gcc
 * and nvcc both include it). */
#ifndef GT_OFFLOAD_ATTENTION_PLAN_H
#define GT_OFFLOAD_ATTENTION_PLAN_H

#include <math.h>

/* The operands' roles (ops_attention.cu maps them to device pointers). */
typedef enum att_role {
    ATT_Q, ATT_K, ATT_V, /* [T,hs] per head */
    ATT_P,               /* [T,T] scores, then probabilities */
    ATT_DP,              /* [T,T] d(probabilities), then d(scores) */
    ATT_Y, ATT_DY,       /* [T,hs] context and its gradient */
    ATT_DQ, ATT_DK, ATT_DV,
} att_role;

typedef enum att_product {
    ATT_SCORES, ATT_CONTEXT, ATT_DPROBS, ATT_DVALUES, ATT_DQUERIES, ATT_DKEYS,
} att_product;

typedef struct att_operand {
    att_role role;
    long long off;    /* elements from the start of the role's per-head matrix */
    int ld;           /* leading dimension (column-major) */
    long long stride; /* elements between consecutive heads */
} att_operand;

typedef struct att_gemm {
    int trans_a, trans_b; /* 1: op is the transpose */
    int m, n, k;
    float alpha;          /* beta is always 0 */
    att_operand a, b, c;
} att_gemm;

static inline att_operand att_operand_at(att_role role, long long off, int ld,
                                         long long stride)
{
    att_operand o;
    o.role = role;
    o.off = off;
    o.ld = ld;
    o.stride = stride;
    return o;
}

/* Largest number of row blocks (and so the most products in one plan). */
#define ATT_MAX_ROW_BLOCKS 8

/* The row blocks for sequences of T: the largest nb <= ATT_MAX_ROW_BLOCKS, a power of
 * two, with T % nb == 0 and R = T/nb >= 64 and a multiple of 8 (every offset a multiple
 * of 8 elements keeps the operands 16-byte aligned for the tensor cores; below 64 rows
 * the products get too small to pay for the extra calls); 1 otherwise. */
static inline int att_row_blocks(int T)
{
    int nb = ATT_MAX_ROW_BLOCKS;
    while (nb > 1 && !(T % nb == 0 && T / nb >= 64 && (T / nb) % 8 == 0)) nb /= 2;
    return nb;
}

/* One past the last column of row t that a plan with nb row blocks defines. */
static inline int att_row_end(int t, int T, int nb)
{
    const int R = T / nb;
    return (t / R + 1) * R;
}

/* The row-major product C[M,N] = alpha op(A)[M,K] op(B)[K,N] (A stored [M,K] with row
 * stride lda, or [K,M] when ta; B likewise) as the column-major call that computes
 * C^T = op(B)^T op(A)^T: a row-major matrix is its transpose read column-major. */
static inline att_gemm att_rowmajor(int M, int N, int K, float alpha, att_operand A,
                                    int ta, att_operand B, int tb, att_operand C)
{
    att_gemm g;
    g.trans_a = tb;
    g.trans_b = ta;
    g.m = N;
    g.n = M;
    g.k = K;
    g.alpha = alpha;
    g.a = B;
    g.b = A;
    g.c = C;
    return g;
}

/* Fills out[] (room for ATT_MAX_ROW_BLOCKS) with the calls of one product for heads of
 * T x hs and nb row blocks (nb divides T; att_row_blocks gives the default); returns
 * how many, or 0 when nb does not divide T. */
static inline int att_plan(att_gemm *out, att_product what, int T, int hs, int nb)
{
    if (nb < 1 || nb > ATT_MAX_ROW_BLOCKS || T % nb != 0) return 0;
    const int R = T / nb;
    const long long sH = (long long)T * hs, sP = (long long)T * T;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int i = 0; i < nb; i++) {
        const long long r0 = (long long)i * R; /* first query (or key) of the block */
        const int keys = (i + 1) * R;          /* query block i sees keys 0..keys-1 */
        const int rest = T - (int)r0;          /* key block i is seen by queries r0..T-1 */
        /* [T,hs] operands at row `row`, [T,T] ones at (row, col). */
#define ATT_H(role, row) att_operand_at((role), (row) * hs, hs, sH)
#define ATT_S(role, row, col) att_operand_at((role), (row) * T + (col), T, sP)
        switch (what) {
        case ATT_SCORES: /* P[r0.., 0..keys) = scale Q[r0..] K[0..keys)^T */
            out[i] = att_rowmajor(R, keys, hs, scale, ATT_H(ATT_Q, r0), 0, ATT_H(ATT_K, 0),
                                  1, ATT_S(ATT_P, r0, 0));
            break;
        case ATT_CONTEXT: /* Y[r0..] = P[r0.., 0..keys) V[0..keys) */
            out[i] = att_rowmajor(R, hs, keys, 1.0f, ATT_S(ATT_P, r0, 0), 0, ATT_H(ATT_V, 0),
                                  0, ATT_H(ATT_Y, r0));
            break;
        case ATT_DPROBS: /* dP[r0.., 0..keys) = dY[r0..] V[0..keys)^T */
            out[i] = att_rowmajor(R, keys, hs, 1.0f, ATT_H(ATT_DY, r0), 0, ATT_H(ATT_V, 0),
                                  1, ATT_S(ATT_DP, r0, 0));
            break;
        case ATT_DQUERIES: /* dQ[r0..] = scale dP[r0.., 0..keys) K[0..keys) */
            out[i] = att_rowmajor(R, hs, keys, scale, ATT_S(ATT_DP, r0, 0), 0,
                                  ATT_H(ATT_K, 0), 0, ATT_H(ATT_DQ, r0));
            break;
        case ATT_DVALUES: /* dV[r0..r0+R) = P[r0..T, r0..r0+R)^T dY[r0..T) */
            out[i] = att_rowmajor(R, hs, rest, 1.0f, ATT_S(ATT_P, r0, r0), 1,
                                  ATT_H(ATT_DY, r0), 0, ATT_H(ATT_DV, r0));
            break;
        case ATT_DKEYS: /* dK[r0..r0+R) = scale dP[r0..T, r0..r0+R)^T Q[r0..T) */
            out[i] = att_rowmajor(R, hs, rest, scale, ATT_S(ATT_DP, r0, r0), 1,
                                  ATT_H(ATT_Q, r0), 0, ATT_H(ATT_DK, r0));
            break;
        default:
            return 0;
        }
#undef ATT_H
#undef ATT_S
    }
    return nb;
}

#endif
