/* test_gemm_bf16 — the BF16 matrix product (src/kernels/bf16/gemm_bf16.h) against a reference in
 * double precision computed here from the operands rounded to bfloat16:
 *   (a) every path the CPU runs (AMX tiles and AVX512_BF16 where it has them, the
 *       portable path always) and the AMX path's emulated twin (always, on every CPU),
 *       all four transposition cases, shapes that leave every kind of edge (1 x 1 x 1,
 *       one element past a tile or micro-tile, odd K, K past one depth block, N past
 *       one column block), padded leading dimensions, several alpha and beta;
 *   (b) beta = 0 never reads C (C filled with NaN), and the elements around C's block
 *       are never written;
 *   (c) a product called from inside a parallel region (as attention calls it, one
 *       head per thread) gives the bits of the same product called outside it (the
 *       portable path: within FP32 rounding, as OpenBLAS may take another kernel);
 *   (d) the AVX512_BF16 and AMX paths give the same bits on 1, 2 and 3 OpenMP threads;
 *   (e) the emulated AMX path gives exactly the bits of a scalar product summed in the
 *       order the SDM gives TDPBF16PS (pairs in even and odd chains per 32 of depth,
 *       tiles accumulating over a depth block of GEMM_BF16_AMX_KC, then alpha and
 *       beta): the kernel's packing and tile sequence put every pair where the
 *       hardware wants it;
 *   (f) the paths agree within FP32 summation order;
 *   (g) rounding really is to bfloat16: an operand that bfloat16 cannot hold changes
 *       the product as the reference says (the FP32 product would differ);
 *   (h) GENTRAIN_BF16 picks the path at gemm_bf16_init; a path the CPU lacks falls
 *       back with a warning; amx-emulated is never picked unless asked for;
 *   (i) the AMX path's two packings (AVX512_BF16 and portable) write the same bits,
 *       and the emulated twin meets (e) on both; a B panel packed in runs of depth
 *       pairs holds the bits of the panel packed strip by strip;
 *   (j) so do its two write-backs of the accumulator tiles into C (AVX-512 and
 *       portable), the twin meeting (e) on both;
 *   (k) a weight matrix packed once (gemm_bf16_weights.h) gives the bits of the same
 *       product packing B itself, in both orientations, past one column and one depth
 *       block, inside and outside parallel regions; after new values and a refresh,
 *       or the optimizer's update packing its bands as it goes
 *       (gemm_bf16_weights_update), the new bits; the update changes each element
 *       once; and a copy packed for another path is never read nor updated;
 *   (l) a fused product (gemm_bf16_fused: bias, residual, GELU or GELU's backward in
 *       the write-back) gives the bits of the unfused sequence, inside and past one
 *       depth block;
 *   (m) operands in BF16 storage (GEMM_BF16_STORED, bf16_store.h): A as stored, B as
 *       stored or both give the bits of the product of the FP32 operands they were
 *       rounded from (odd K, past a depth and a column block, padded leading
 *       dimensions, an A whose tiles the AMX path loads where A is stored, and on a
 *       weight packed once per update an A whose strips the dot-product path reads
 *       where A is stored), and the
 *       epilogue's BF16 copy of C is bf16_store of C (of GELU of C for the GELU output
 *       in BF16 storage, and of its slope beside it; GELU's backward from that stored
 *       slope is the widened slope times C); bf16_store's vector loop rounds ties, NaN,
 *       infinities and denormals as its scalar one; bf16_scale_pow2 is the FP32 product
 *       by 2^shift on every value;
 *   (n) the epilogue's row sums (a bias gradient summed while dout^T is packed) give
 *       the bits of the column-sum pass (simd colsum) and of a plain loop, past a row
 *       block, a depth block and a column block, and past the rows the fused sums
 *       hold (then summed after the product), for A as stored and transposed;
 *   (o) an epilogue that leaves C unused (c_unused: the MLP's GELU forward and backward
 *       into BF16 storage, q|k|v into BF16 storage) gives the BF16 outputs of the same product that writes C,
 *       on a packed weight copy, past a column block and several depth blocks; the
 *       AMX and AVX512_BF16 paths never write C then; a residual add on a packed
 *       weight copy gives the C of the same product that packs B itself;
 *   (p) the AVX512_BF16 path counts the VDPBF16PS its micro-kernel runs, and times it;
 *   (q) in its timing mode (the bench's twin) it runs one FP32 multiply-add of the same
 *       pair words in place of each, counted alike;
 *   (r) a product on a packed weight with C past GEMM_BF16_AMX_STAGE_BYTES and the
 *       weight past L2 (summed apart and streamed into C by the AMX path) gives the
 *       bits of its two halves;
 *   (s) so does a weight gradient (B an activation as stored) with C past
 *       GEMM_BF16_AMX_WHOLE_B_BYTES, which the AMX path runs on all of B packed first,
 *       its items taller than its A buffer: accumulating into C, with its row sums,
 *       alpha 1 and 1/2;
 *   (t) a product with A read in place on a packed weight whose column block's B
 *       outgrows L2, which the AMX path walks in column slices (of 16 strips at 800
 *       deep, of 7 at 2,336 deep, a ragged last one, a column block past them), gives
 *       the bits of the same product on A's FP32 values (packed, never in slices):
 *       plain, with a bias into BF16 storage alone, with a bias and GELU into BF16.
 * Errors are measured against the reference scaled by sum_k |a_k b_k| per element, so
 * they are in units of FP32 rounding of the sums. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "bf16_store.h"
#include "cpu_features.h"
#include "dot_counts.h"
#include "gemm_bf16.h"
#include "gemm_bf16_amx.h" /* GEMM_BF16_AMX_KC: the depth block of (e) */
#include "gemm_bf16_weights.h"
#include "simd.h" /* GT_SIMD_X86_AMX, simd_kernels_get */
#include "testutil.h"

static uint64_t rs = 88172645463325252ull;
static float runif(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (float)((rs >> 40) * 0x1p-24) - 0.5f;
}

static double bf16_value(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

typedef struct {
    int M, N, K, ta, tb, lda, ldb, ldc;
    float alpha, beta;
    float *A, *B, *C0;
} prob;

static prob make(int M, int N, int K, int ta, int tb, float alpha, float beta)
{
    prob p = {M, N, K, ta, tb, (ta ? M : K) + 3, (tb ? K : N) + 5, N + 7, alpha, beta,
              NULL, NULL, NULL};
    size_t na = (size_t)(ta ? K : M) * p.lda, nb = (size_t)(tb ? N : K) * p.ldb,
           nc = (size_t)M * p.ldc;
    p.A = malloc((na ? na : 1) * sizeof(float));
    p.B = malloc((nb ? nb : 1) * sizeof(float));
    p.C0 = malloc(nc * sizeof(float));
    if (!p.A || !p.B || !p.C0) exit(99);
    for (size_t i = 0; i < na; i++) p.A[i] = runif();
    for (size_t i = 0; i < nb; i++) p.B[i] = runif();
    for (size_t i = 0; i < nc; i++) p.C0[i] = beta == 0.0f ? NAN : runif();
    return p;
}

static void drop(prob *p)
{
    free(p->A);
    free(p->B);
    free(p->C0);
}

static float *run(const prob *p)
{
    size_t nc = (size_t)p->M * p->ldc;
    float *C = malloc(nc * sizeof *C);
    if (!C) exit(99);
    memcpy(C, p->C0, nc * sizeof *C);
    gemm_bf16(p->ta, p->tb, p->M, p->N, p->K, p->alpha, p->A, p->lda, p->B, p->ldb, p->beta,
              C, p->ldc);
    return C;
}

/* largest error in units of the element's sum of |terms|; untouched padding checked */
static double error_of(const prob *p, const float *C, int *padding_bad)
{
    double worst = 0.0;
    *padding_bad = 0;
    for (int i = 0; i < p->M; i++) {
        for (int j = 0; j < p->N; j++) {
            double r = 0.0, mag = 0.0;
            for (int k = 0; k < p->K; k++) {
                double a = bf16_value(p->ta ? p->A[(size_t)k * p->lda + i]
                                            : p->A[(size_t)i * p->lda + k]);
                double b = bf16_value(p->tb ? p->B[(size_t)j * p->ldb + k]
                                            : p->B[(size_t)k * p->ldb + j]);
                r += a * b;
                mag += fabs(a * b);
            }
            double c0 = p->beta == 0.0f ? 0.0 : (double)p->C0[(size_t)i * p->ldc + j];
            double want = p->alpha * r + p->beta * c0;
            double scale = fabs(p->alpha) * mag + fabs(p->beta * c0) + 1e-30;
            double e = fabs(want - C[(size_t)i * p->ldc + j]) / scale;
            if (e > worst || e != e) worst = e;
        }
        for (int j = p->N; j < p->ldc; j++) {
            float a = C[(size_t)i * p->ldc + j], b = p->C0[(size_t)i * p->ldc + j];
            *padding_bad += memcmp(&a, &b, sizeof a) != 0;
        }
    }
    return worst;
}

/* The error any order of summing K exact products of BF16 values in FP32 can make, in
 * units of |alpha| sum |a b| + |beta c| (error_of): K - 1 additions, the product by
 * alpha and the multiply-add with beta C, each a rounding of at most 2^-24, with room
 * for one more. Order-free on purpose: the SDM and the Intrinsics Guide describe
 * TDPBF16PS's order differently, and OpenBLAS (the portable path) has its own. A wrong
 * operand rounding (2^-9) or a lost term is far outside it. */
static double bound_of(int K) { return (K + 3) * 0x1p-24; }

/* (a), (b) for the path in use */
static void check_path(const char *path)
{
    static const int shapes[][3] = {
        {1, 1, 1},      {14, 32, 2},   {15, 17, 33},   {17, 15, 1},    {29, 70, 31},
        {33, 33, 33},   {100, 37, 333}, {57, 129, 65}, {64, 256, 64},  {511, 17, 33},
        {17, 513, 15},  {33, 100, 513}, {513, 33, 17}, {3, 2100, 17},  {130, 16, 1100}};
    static const float ab[][2] = {{1.5f, 0.0f}, {1.5f, 0.5f}, {-1.0f, 1.0f}, {0.25f, -2.0f}};
    const int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
    double worst = 0.0;
    int pad = 0, cases = 0;
    for (int s = 0; s < nshapes; s++)
        for (int t = 0; t < 4; t++) {
            const float *c = ab[(s + t) % 4];
            prob p = make(shapes[s][0], shapes[s][1], shapes[s][2], t & 1, t >> 1, c[0], c[1]);
            float *C = run(&p);
            int bad;
            double e = error_of(&p, C, &bad) / bound_of(p.K);
            if (e > 1.0 || bad)
                printf("     %s: M=%d N=%d K=%d ta=%d tb=%d alpha=%g beta=%g: error %.2f of "
                       "the bound, %d written outside\n", path, p.M, p.N, p.K, p.ta, p.tb,
                       (double)c[0], (double)c[1], e, bad);
            worst = fmax(worst, e);
            pad += bad;
            cases++;
            free(C);
            drop(&p);
        }
    TU_CHECK(worst <= 1.0, "%s: %d products within %.2f of the rounding bound of any "
             "summation order from the bf16 reference", path, cases, worst);
    TU_CHECK(pad == 0, "%s: nothing outside C's block written (%d elements)", path, pad);
}

/* The largest |a - b| over C's block, divided by the largest |b| */
static double normwise(const prob *p, const float *a, const float *b)
{
    double d = 0.0, mx = 1e-30;
    for (size_t j = 0; j < (size_t)p->M * p->ldc; j++)
        if (j % (size_t)p->ldc < (size_t)p->N) {
            d = fmax(d, fabs((double)a[j] - b[j]));
            mx = fmax(mx, fabs((double)b[j]));
        }
    return d / mx;
}

/* (c) inside a parallel region, each thread its own product, against the same outside
 * (300 rows: more than a thread's own portable panel holds, fewer than the team's) */
static void check_nested(const char *path)
{
    enum { P = 4 };
    prob p[P];
    float *outside[P], *inside[P];
    for (int i = 0; i < P; i++) {
        p[i] = make(i == 3 ? 300 : 64 + i, 96 - 7 * i, 64, i & 1, (i >> 1) & 1, 1.0f,
                    i == 0 ? 0.0f : 1.0f);
        outside[i] = run(&p[i]);
    }
#pragma omp parallel for schedule(static)
    for (int i = 0; i < P; i++) inside[i] = run(&p[i]);
    int same = 1;
    double e = 0.0;
    for (int i = 0; i < P; i++) {
        const size_t n = (size_t)p[i].M * p[i].ldc;
        same &= memcmp(outside[i], inside[i], n * sizeof(float)) == 0;
        e = fmax(e, normwise(&p[i], inside[i], outside[i]));
        free(outside[i]);
        free(inside[i]);
        drop(&p[i]);
    }
    if (strcmp(path, "portable") == 0) /* OpenBLAS may take another kernel on one thread */
        TU_CHECK(e < 1e-5, "%s: products inside a parallel region within %.1e of the same "
                 "products outside it", path, e);
    else
        TU_CHECK(same, "%s: products inside a parallel region give the bits of the same "
                 "products outside it", path);
}

/* (d) the same products on 1, 2 and 3 threads (gemm_split.h: 300 rows are parts of rows
 * split unevenly over 3 threads; 60 and 20 rows are too few for the threads, so the
 * columns are split too, into 2 or 3 groups, or on the avx512-bf16 path a thread's own
 * columns; 40 rows of 2,100 columns: own columns past a column block; 800 rows: on the
 * avx512-bf16 path, 256 or more a thread, each thread packs B's panels itself; 600
 * deep: 2 depth blocks) */
static void check_threads(const char *path)
{
#ifdef _OPENMP
    static const int rows[] = {300, 60, 20, 40, 800}, cols[] = {200, 200, 200, 2100, 200};
    int same = 1;
    for (int t = 0; t < 20; t++) {
        prob p = make(rows[t / 4], cols[t / 4] + t, 600, t & 1, (t >> 1) & 1, 1.0f,
                      t % 4 == 0 ? 0.0f : 0.5f);
        omp_set_num_threads(1);
        float *one = run(&p);
        for (int n = 2; n <= 3; n++) {
            omp_set_num_threads(n);
            float *more = run(&p);
            same &= memcmp(one, more, (size_t)p.M * p.ldc * sizeof(float)) == 0;
            free(more);
        }
        free(one);
        drop(&p);
    }
    omp_set_num_threads(2);
    TU_CHECK(same, "%s: 1, 2 and 3 OpenMP threads give the same bits (800, 300, 60 and 20 "
             "x 200 x 600 and 40 x 2,100 x 600, all four transpositions; rows and columns "
             "split)", path);
#else
    printf("     %s: one thread only (no OpenMP)\n", path);
#endif
}

/* (e) C as the emulated tiles must compute it: per element and 512 of depth, chunks of
 * 32 (16 pairs), each summed as TDPBF16PS (an even and an odd chain of fused
 * multiply-adds from zero, then added) into the tile, then C = alpha acc + beta C
 * (one fused rounding), beta 1 after the first depth block. In a whole 32 x 32 block
 * with alpha 1 and beta 0 or 1 the tile starts from C instead (from zero for beta 0 on
 * the first depth block) and is stored as it is. No value here is denormal. */
static float sdm_element(const prob *p, int i, int j)
{
    const int whole = i / 32 * 32 + 32 <= p->M && j / 32 * 32 + 32 <= p->N &&
                      p->alpha == 1.0f && (p->beta == 0.0f || p->beta == 1.0f);
    float c = p->C0[(size_t)i * p->ldc + j];
    for (int k0 = 0; k0 < p->K; k0 += GEMM_BF16_AMX_KC) {
        const int kend = k0 + GEMM_BF16_AMX_KC < p->K ? k0 + GEMM_BF16_AMX_KC : p->K;
        float acc = whole ? (k0 == 0 && p->beta == 0.0f ? 0.0f : c) : 0.0f;
        for (int q = k0; q < kend; q += 32) {
            float chain[2] = {0.0f, 0.0f};
            for (int k = q; k < q + 32 && k < kend; k++) {
                float a = (float)bf16_value(p->ta ? p->A[(size_t)k * p->lda + i]
                                                  : p->A[(size_t)i * p->lda + k]);
                float b = (float)bf16_value(p->tb ? p->B[(size_t)j * p->ldb + k]
                                                  : p->B[(size_t)k * p->ldb + j]);
                chain[(k - k0) & 1] = fmaf(a, b, chain[(k - k0) & 1]);
            }
            acc = acc + (chain[0] + chain[1]);
        }
        const float beta = k0 == 0 ? p->beta : 1.0f, v = p->alpha * acc;
        c = whole ? acc : beta == 0.0f ? v : fmaf(beta, c, v);
    }
    return c;
}

/* The emulated twin must follow the SDM's order to the bit. Real tiles (must = 0) are
 * only reported: the Intrinsics Guide describes another order, and which one the
 * hardware takes is what this line records (check_path bounds the error either way). */
static void check_sdm_order(const char *path, int must)
{
    /* alpha 0.75 (write-back through ct) and 1 (whole blocks stored straight into C,
     * from zero or from C: 64 x 70 x 1100 has both kinds of block, three depth blocks) */
    static const struct {
        int M, N, K;
        float alpha;
    } shapes[] = {{20, 19, 99, 0.75f},  {3, 40, 700, 0.75f}, {33, 1, 64, 0.75f},
                  {64, 70, 1100, 1.0f}, {32, 32, 40, 1.0f}};
    const int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
    int same = 1, cases = 0;
    for (int s = 0; s < nshapes; s++)
        for (int t = 0; t < 4; t++) {
            const float alpha = shapes[s].alpha;
            prob p = make(shapes[s].M, shapes[s].N, shapes[s].K, t & 1, t >> 1, alpha,
                          t & 1 ? (alpha == 1.0f ? 1.0f : 0.5f) : 0.0f);
            float *C = run(&p);
            for (int i = 0; i < p.M; i++)
                for (int j = 0; j < p.N; j++) {
                    const float want = sdm_element(&p, i, j);
                    same &= memcmp(&want, &C[(size_t)i * p.ldc + j], sizeof want) == 0;
                }
            cases++;
            free(C);
            drop(&p);
        }
    if (must)
        TU_CHECK(same, "%s: %d products give the bits of the SDM's TDPBF16PS order summed "
                 "here in scalar code", path, cases);
    else
        printf("     %s: %d products %s the bits of the SDM's TDPBF16PS order (reported, "
               "not checked)\n", path, cases, same ? "give" : "do NOT give");
}

/* (i) the two packings of the AMX path write the same bits: every edge of lines and
 * depth, both operands, both memory orders, with ties, denormals, NaN and infinities
 * among the values; the tiles past the lines are zeroed by both */
static float awkward(void)
{
    static const float odd[] = {0x1.008p0f, -0x1.018p0f, 1e-40f, -1e-41f, INFINITY,
                                -INFINITY, NAN, 0x1.fffffep127f, -0.0f};
    const uint64_t pick = rs % 23;
    const float x = runif();
    return pick < 9 ? odd[pick] : x;
}

/* The row sums gemm_bf16_amx_pack_a adds while it packs A^T: the bits of
 * gemm_bf16_row_sums, from the vector and the portable packing, and the same tiles as a
 * packing without them (finite values and denormals: a NaN's payload depends on which
 * operand the compiler puts first) */
static void check_packing_sums(void)
{
    static const int lines[] = {1, 15, 16, 17, 33, 64}, depths[] = {1, 2, 31, 32, 33, 100, 512};
    const size_t words = (size_t)5 * 16 * 512 / 2; /* 5 tile rows, the deepest case (512) */
    uint32_t *a = malloc(words * 4), *b = malloc(words * 4);
    float *x = malloc((size_t)600 * 600 * sizeof *x), sums[3][80];
    int same = 1, cases = 0;
    for (size_t i = 0; x && i < (size_t)600 * 600; i++)
        x[i] = i % 97 == 0 ? 1e-40f : runif() * 3.0f;
    for (int li = 0; a && b && x && li < 6; li++)
        for (int di = 0; di < 7; di++) {
            const int nl = lines[li], kc = depths[di], tiles = (nl + 15) / 16 + 1;
            const size_t n = (size_t)tiles * ((kc + 31) / 32) * GEMM_BF16_AMX_TILE;
            for (int j = 0; j < 80; j++) sums[0][j] = sums[1][j] = sums[2][j] = runif();
            gemm_bf16_row_sums(sums[2], 1, x, 600, 3, nl, 5, kc);
            for (int v = 0; v < 2; v++) {
                if (!gemm_bf16_amx_pack_select(v) && v) break; /* no vector packing here */
                gemm_bf16_amx_pack_a(a, 1, x, 600, 3, nl, tiles, 5, kc, sums[v]);
                gemm_bf16_amx_pack_a(b, 1, x, 600, 3, nl, tiles, 5, kc, NULL);
                same &= memcmp(a, b, n * 4) == 0 && memcmp(sums[v], sums[2], sizeof sums[2]) == 0;
            }
            cases++;
        }
    (void)gemm_bf16_amx_pack_select(1);
    TU_CHECK(a && b && x && same, "AMX tile packing of A^T with its row sums: the bits of "
             "gemm_bf16_row_sums and the tiles of the packing without them, vector and "
             "portable (%d shapes)", cases);
    free(a);
    free(b);
    free(x);
}

static void check_packing(void)
{
    if (!gemm_bf16_amx_pack_select(1)) {
        printf("     AMX tile packing: only the portable one runs (no AVX512_BF16)\n");
        return;
    }
    static const int lines[] = {1, 15, 16, 17, 33, 64}, depths[] = {1, 2, 31, 32, 33, 100, 512};
    const size_t words = (size_t)5 * 16 * 512 / 2; /* 5 tile rows, the deepest case (512) */
    uint32_t *a = malloc(words * 4), *b = malloc(words * 4);
    float *x = malloc((size_t)600 * 600 * sizeof *x);
    int same = 1, cases = 0;
    for (size_t i = 0; x && i < (size_t)600 * 600; i++) x[i] = awkward();
    for (int li = 0; a && b && x && li < 6; li++)
        for (int di = 0; di < 7; di++)
            for (int c = 0; c < 4; c++) {
                const int nl = lines[li], kc = depths[di], trans = c & 1, is_b = c >> 1;
                const int tiles = (nl + 15) / 16 + 1, nq = (kc + 31) / 32;
                const size_t n = (size_t)tiles * nq * GEMM_BF16_AMX_TILE;
                for (int v = 0; v < 2; v++) {
                    uint32_t *out = v ? b : a;
                    memset(out, 0xab, n * 4);
                    (void)gemm_bf16_amx_pack_select(v);
                    if (is_b)
                        gemm_bf16_amx_pack_b(out, trans, x, 600, 3, nl, tiles, 5, kc);
                    else
                        gemm_bf16_amx_pack_a(out, trans, x, 600, 3, nl, tiles, 5, kc, NULL);
                }
                same &= memcmp(a, b, n * 4) == 0;
                cases++;
            }
    (void)gemm_bf16_amx_pack_select(1);
    TU_CHECK(a && b && x && same, "AMX tile packing: the AVX512_BF16 packing writes the "
             "portable packing's bits (%d cases: A and B, both orders, edges, NaN, "
             "denormals, ties)", cases);
    free(a);
    free(b);
    free(x);
}

/* (i) the B panel packed in runs of depth pairs (gemm_bf16_amx_pack_b_pairs: the
 * product's own panel of B as stored, FP32 or in BF16 storage) holds the bits of the
 * panel packed strip by strip with the portable packing, padding included, whichever
 * packing runs and however the pairs are cut into runs */
static void check_pair_packing(void)
{
    static const int cols[] = {1, 15, 16, 17, 33, 64}, depths[] = {1, 2, 31, 32, 33, 100, 256};
    enum { LD = 600, T = GEMM_BF16_AMX_TILE };
    const size_t words = (size_t)4 * 8 * T; /* 2 strips x 2 tiles x 8 depth tiles */
    uint32_t *ref = malloc(words * 4), *got = malloc(words * 4);
    float *x = malloc((size_t)LD * 300 * sizeof *x);
    uint16_t *h = malloc((size_t)LD * 300 * sizeof *h);
    int same = 1, cases = 0;
    for (size_t i = 0; x && i < (size_t)LD * 300; i++) x[i] = awkward();
    if (x && h) bf16_store(h, x, (size_t)LD * 300);
    for (int ci = 0; ref && got && x && h && ci < 6; ci++)
        for (int di = 0; di < 7; di++)
            for (int stored = 0; stored < 2; stored++) {
                const int nc = cols[ci], kc = depths[di], nq = (kc + 31) / 32;
                const int strips = (nc + 31) / 32, transb = stored ? GEMM_BF16_STORED : 0;
                const float *b = stored ? (const float *)(const void *)h : x;
                const size_t n = (size_t)strips * 2 * nq * T;
                (void)gemm_bf16_amx_pack_select(0);
                for (int s = 0; s < strips; s++)
                    gemm_bf16_amx_pack_b(ref + (size_t)2 * s * nq * T, transb, b, LD, 3 + 32 * s,
                                         nc - 32 * s < 32 ? nc - 32 * s : 32, 2, 5, kc);
                for (int v = 0; v < 2; v++)
                    for (int run = 3; run <= 16 * nq; run += 16 * nq - 3) {
                        memset(got, 0xab, n * 4);
                        (void)gemm_bf16_amx_pack_select(v);
                        for (int p0 = 0; p0 < 16 * nq; p0 += run)
                            gemm_bf16_amx_pack_b_pairs(got, transb, b, LD, 3, nc, 5, kc, p0,
                                                       p0 + run < 16 * nq ? p0 + run : 16 * nq);
                        same &= memcmp(ref, got, n * 4) == 0;
                        cases++;
                    }
            }
    (void)gemm_bf16_amx_pack_select(1);
    TU_CHECK(ref && got && x && h && same,
             "AMX B panel packed in runs of depth pairs: the bits of the strip-by-strip "
             "portable packing (%d cases: FP32 and BF16 storage, edges of columns and depth, "
             "both packings, runs of 3 and of the whole depth)", cases);
    free(ref);
    free(got);
    free(x);
    free(h);
}

/* (j) the two write-backs of the AMX path's accumulator tiles into C give the same
 * bits: every edge of rows and columns, alpha, beta = 0 over a C full of NaN and
 * beta != 0, awkward sums and C values; nothing outside the mr x nr block is touched */
static void check_write_back(void)
{
    if (!gemm_bf16_amx_pack_select(1)) {
        printf("     AMX write-back: only the portable one runs (no AVX512_BF16)\n");
        return;
    }
    static const int edges[] = {1, 15, 16, 17, 31, 32};
    static const float alphas[] = {1.0f, -0.3f}, betas[] = {0.0f, 1.0f, 0.75f};
    enum { LDC = 40, ROWS = 34 };
    float ct[4 * GEMM_BF16_AMX_TILE], c0[ROWS * LDC], c[2][ROWS * LDC];
    int same = 1, cases = 0;
    for (size_t i = 0; i < sizeof ct / sizeof ct[0]; i++) ct[i] = awkward();
    for (size_t i = 0; i < sizeof c0 / sizeof c0[0]; i++) c0[i] = awkward();
    for (int mi = 0; mi < 6; mi++)
        for (int ni = 0; ni < 6; ni++)
            for (int ab = 0; ab < 6; ab++) {
                const float alpha = alphas[ab / 3], beta = betas[ab % 3];
                for (int v = 0; v < 2; v++) {
                    for (int i = 0; i < ROWS * LDC; i++) c[v][i] = beta == 0.0f ? NAN : c0[i];
                    (void)gemm_bf16_amx_pack_select(v);
                    gemm_bf16_amx_write_c(ct, c[v] + LDC + 1, LDC, edges[mi], edges[ni], alpha,
                                          beta);
                }
                same &= memcmp(c[0], c[1], sizeof c[0]) == 0;
                cases++;
            }
    (void)gemm_bf16_amx_pack_select(1);
    TU_CHECK(same, "AMX write-back: the AVX-512 write-back gives the portable one's bits "
             "(%d cases: edges of rows and columns, alpha, beta 0 over NaN, beta 1 and 0.75)",
             cases);
}

/* (f) the path in use against the portable one on a model-like shape */
static void check_agree(enum gemm_bf16_path path, const char *name)
{
    prob p = make(128, 384, 384, 0, 1, 1.0f, 0.0f);
    gemm_bf16_force_path(path);
    float *a = run(&p);
    gemm_bf16_force_path(GEMM_BF16_PORTABLE);
    float *b = run(&p);
    const double e = normwise(&p, a, b);
    TU_CHECK(e < 1e-5, "%s vs portable on 128x384x384: %.2e of the largest", name, e);
    free(a);
    free(b);
    drop(&p);
}

/* (g) 1 + 2^-10 is not a bfloat16 (8 bits of mantissa): the product sees 1 */
static void check_rounding(const char *name)
{
    float a = 1.0f + 0x1p-10f, b = 3.0f, c = 0.0f;
    gemm_bf16(0, 0, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1);
    TU_CHECK(c == 3.0f, "%s: (1 + 2^-10) x 3 = %.9g, the product of bf16 operands", name,
             (double)c);
}

/* (h) GENTRAIN_BF16=value then gemm_bf16_init: the path `want`, and a warning on
 * stderr when `warns` */
static void check_env(const char *value, const char *want, int warns)
{
    if (value)
        setenv("GENTRAIN_BF16", value, 1);
    else
        unsetenv("GENTRAIN_BF16");
    tu_capture_begin();
    const int rc = gemm_bf16_init(2);
    const char *text = tu_capture_end();
    TU_CHECK(rc == 0 && strcmp(gemm_bf16_path_name(), want) == 0 &&
                 (strstr(text, "warning") != NULL) == warns,
             "GENTRAIN_BF16=%s: the %s path%s", value ? value : "(unset)",
             gemm_bf16_path_name(), warns ? ", with a warning" : ", no warning");
}

/* C[M, ...] of the forward (A @ W^T) or the backward (A @ W) product on W (rows x
 * cols, row-major), freshly allocated; `nested`: each thread of a team computes it,
 * thread 0's result returned after checking that every thread's is the same */
static float *weight_product(const float *W, int rows, int cols, int M, int fwd, float beta,
                             int nested)
{
    const int N = fwd ? rows : cols, K = fwd ? cols : rows;
    float *A = malloc((size_t)M * K * sizeof *A), *C = malloc((size_t)3 * M * N * sizeof *C);
    if (!A || !C) exit(99);
    uint64_t keep = rs;
    rs = 1234567u + (uint64_t)M; /* the same A and C0 every call */
    for (size_t i = 0; i < (size_t)M * K; i++) A[i] = runif();
    for (size_t i = 0; i < (size_t)M * N; i++) C[i] = runif();
    for (int t = 1; t < 3; t++) memcpy(C + (size_t)t * M * N, C, (size_t)M * N * sizeof *C);
    rs = keep;
    if (!nested) {
        gemm_bf16(0, !fwd ? 0 : 1, M, N, K, 1.0f, A, K, W, cols, beta, C, N);
    } else {
        int same = 1;
#pragma omp parallel num_threads(3)
        {
#ifdef _OPENMP
            const int t = omp_get_thread_num();
#else
            const int t = 0;
#endif
            gemm_bf16(0, !fwd ? 0 : 1, M, N, K, 1.0f, A, K, W, cols, beta,
                      C + (size_t)t * M * N, N);
        }
#ifdef _OPENMP
        const int team = 3;
#else
        const int team = 1;
#endif
        for (int t = 1; t < team; t++)
            same &= memcmp(C, C + (size_t)t * M * N, (size_t)M * N * sizeof *C) == 0;
        TU_CHECK(same, "every thread of a team computes the same bits");
    }
    free(A);
    return C;
}

/* gemm_bf16_weights_update's update: w[i] += delta[i] (an element updated twice or
 * never shows) */
typedef struct {
    float *w;
    const float *delta;
} weight_step;

static void add_delta(const void *ctx, size_t first, size_t count)
{
    const weight_step *st = ctx;
    for (size_t i = first; i < first + count; i++) st->w[i] += st->delta[i];
}

/* W's registered copies updated by gemm_bf16_weights_update; 1 when it took W and
 * changed each element once */
static int update_packing(float *W, int rows, int cols)
{
    const size_t n = (size_t)rows * cols;
    float *delta = malloc(n * sizeof *delta), *want = malloc(n * sizeof *want);
    if (!delta || !want) exit(99);
    for (size_t i = 0; i < n; i++) {
        delta[i] = 0.25f * runif();
        want[i] = W[i] + delta[i];
    }
    const weight_step st = {W, delta};
    const int took = gemm_bf16_weights_update(W, add_delta, &st) == 1;
    const int once = memcmp(W, want, n * sizeof *W) == 0;
    TU_CHECK(took && once, "%d x %d: the update took the matrix (%d) and changed each element "
             "once (%d)", rows, cols, took, once);
    free(delta);
    free(want);
    return took && once;
}

static void check_prepacked(enum gemm_bf16_path path, const char *name)
{
    static const struct {
        int rows, cols, M;
    } shapes[] = {{2100, 600, 33}, {37, 19, 5}, {64, 1030, 1}};
    int all_same = 1, cases = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int rows = shapes[si].rows, cols = shapes[si].cols, M = shapes[si].M;
        float *W = malloc((size_t)rows * cols * sizeof *W);
        if (!W) exit(99);
        for (size_t i = 0; i < (size_t)rows * cols; i++) W[i] = runif();
        TU_CHECK(gemm_bf16_weights_add(W, rows, cols) == 0, "registered");
        for (int round = 0; round < 3; round++) {
            if (round == 1) /* new values: the copy must follow them after a refresh */
                for (size_t i = 0; i < (size_t)rows * cols; i++) W[i] = runif();
            TU_CHECK(gemm_bf16_weights_refresh() == 0, "packed");
            if (round == 2) /* ... or as the update writes them */
                all_same &= update_packing(W, rows, cols);
            float *got[2][2][2];
            for (int fwd = 0; fwd < 2; fwd++)
                for (int b = 0; b < 2; b++)
                    for (int nested = 0; nested < 2; nested++)
                        got[fwd][b][nested] =
                            weight_product(W, rows, cols, M, fwd, (float)b, nested);
            /* the products packing B themselves: the registry emptied, then refilled */
            gemm_bf16_weights_clear();
            for (int fwd = 0; fwd < 2; fwd++)
                for (int b = 0; b < 2; b++) {
                    float *want = weight_product(W, rows, cols, M, fwd, (float)b, 0);
                    const size_t bytes = (size_t)M * (fwd ? rows : cols) * sizeof *want;
                    for (int nested = 0; nested < 2; nested++) {
                        /* the portable path nested may take another OpenBLAS kernel */
                        if (!(nested && path == GEMM_BF16_PORTABLE)) {
                            all_same &= memcmp(got[fwd][b][nested], want, bytes) == 0;
                            cases++;
                        }
                        free(got[fwd][b][nested]);
                    }
                    free(want);
                }
            TU_CHECK(gemm_bf16_weights_add(W, rows, cols) == 0, "registered again");
        }
        gemm_bf16_weights_clear();
        free(W);
    }
    TU_CHECK(all_same && cases > 0, "%s: weights packed once give the bits of products that "
             "pack B (%d cases, both orientations, before and after new values)", name, cases);
    /* packed for this path, then another path runs: the copy is not read */
    const int rows = 70, cols = 90, M = 9;
    float *W = malloc((size_t)rows * cols * sizeof *W);
    if (!W) exit(99);
    for (size_t i = 0; i < (size_t)rows * cols; i++) W[i] = runif();
    const enum gemm_bf16_path other =
        path == GEMM_BF16_PORTABLE ? GEMM_BF16_AMX_EMULATED : GEMM_BF16_PORTABLE;
    gemm_bf16_force_path(other);
    float *want = weight_product(W, rows, cols, M, 1, 0.0f, 0);
    gemm_bf16_force_path(path);
    TU_CHECK(gemm_bf16_weights_add(W, rows, cols) == 0 && gemm_bf16_weights_refresh() == 0,
             "registered and packed");
    gemm_bf16_force_path(other);
    float *got = weight_product(W, rows, cols, M, 1, 0.0f, 0);
    TU_CHECK(memcmp(got, want, (size_t)M * rows * sizeof *got) == 0,
             "%s: a copy packed for %s is not read by the %s path", name, name,
             other == GEMM_BF16_PORTABLE ? "portable" : "amx-emulated");
    const float w0 = W[0];
    TU_CHECK(!gemm_bf16_weights_current() &&
                 gemm_bf16_weights_update(W, add_delta, &(weight_step){W, W}) == 0 && W[0] == w0,
             "%s: a copy packed for another path is not updated (the caller refreshes)", name);
    float other_w = 1.0f;
    gemm_bf16_force_path(path);
    TU_CHECK(gemm_bf16_weights_current() &&
                 gemm_bf16_weights_update(&other_w, add_delta, &(weight_step){W, W}) == 0 &&
                 W[0] == w0,
             "%s: a matrix not registered is left to the caller", name);
    gemm_bf16_force_path(other);
    gemm_bf16_force_path(path);
    gemm_bf16_weights_clear();
    free(W);
    free(want);
    free(got);
}

static float *fnew_rand(size_t n)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    if (!x) exit(99);
    for (size_t i = 0; i < n; i++) x[i] = runif();
    return x;
}

/* (l): out = A @ W^T + bias (+ res), gelu(out), fused and as the model did it before */
static void check_fused(const char *name)
{
    static const struct {
        int M, N, K;
    } shapes[] = {{45, 70, 100}, {33, 96, 1100}, {7, 2100, 40}};
    const simd_kernels *k = simd_kernels_get();
    int same = 1;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int M = shapes[si].M, N = shapes[si].N, K = shapes[si].K;
        const size_t mn = (size_t)M * N;
        float *A = fnew_rand((size_t)M * K), *W = fnew_rand((size_t)N * K), *bias = fnew_rand(N),
              *res = fnew_rand(mn), *want = fnew_rand(mn), *want_g = fnew_rand(mn),
              *got = fnew_rand(mn), *got_g = fnew_rand(mn), *sum = fnew_rand(mn);
        /* bias; + GELU; + residual; GELU's backward (no bias, accumulated into zeros) */
        for (int variant = 0; variant < 4; variant++) {
            const int dgelu = variant == 3;
            for (int i = 0; i < M; i++)
                if (dgelu) memset(want + (size_t)i * N, 0, N * sizeof *want);
                else memcpy(want + (size_t)i * N, bias, N * sizeof *bias);
            gemm_bf16(0, 1, M, N, K, 1.0f, A, K, W, K, 1.0f, want, N);
            if (variant == 1) k->gelu_fwd(want_g, want, mn);
            if (variant == 2) {
                k->add(sum, res, want, mn);
                memcpy(want, sum, mn * sizeof *sum);
            }
            if (dgelu) {
                memset(want_g, 0, mn * sizeof *want_g);
                k->gelu_bwd(want_g, res, want, mn);
                memset(got, 0, mn * sizeof *got);
            }
            const gemm_bf16_epilogue ep = {.bias = dgelu ? NULL : bias,
                                           .residual = variant == 2 ? res : NULL,
                                           .ld_residual = (size_t)N,
                                           .gelu_out = variant == 1 ? got_g : NULL,
                                           .ld_gelu = (size_t)N,
                                           .dgelu_x = dgelu ? res : NULL,
                                           .dgelu_out = dgelu ? got_g : NULL,
                                           .ld_dgelu = (size_t)N};
            gemm_bf16_fused(0, 1, M, N, K, 1.0f, A, K, W, K, dgelu ? 1.0f : 0.0f, got, N, &ep);
            same &= memcmp(got, want, mn * sizeof *got) == 0;
            if (variant == 1 || dgelu) same &= memcmp(got_g, want_g, mn * sizeof *got) == 0;
        }
        free(A), free(W), free(bias), free(res), free(want), free(want_g), free(got);
        free(got_g), free(sum);
    }
    TU_CHECK(same, "%s: the fused bias, GELU, residual and GELU backward give the unfused "
             "bits (K of one and of three depth blocks, N past one column block)", name);
}

/* (m) rows x cols of x (ld apart) into BF16 storage (ld apart), and x rounded in place
 * to the stored values, so both hold the same operand */
static uint16_t *stored_copy(float *x, int rows, int ld)
{
    const size_t n = (size_t)rows * ld;
    uint16_t *h = malloc(n * sizeof *h);
    if (!h) exit(99);
    bf16_store(h, x, n);
    for (size_t i = 0; i < n; i++) x[i] = bf16_widen_one(h[i]);
    return h;
}

/* (m) C[M][N] = A16 W^T (A16 in BF16 storage, lda apart; W [N][K], ldw apart) with
 * epilogue ep: the forward products of check_stored */
static void forward_stored(const uint16_t *A16, int lda, const float *W, int ldw, int M, int N,
                           int K, float *C, const gemm_bf16_epilogue *ep)
{
    gemm_bf16_fused(GEMM_BF16_STORED, 1, M, N, K, 1.0f, (const float *)(const void *)A16, lda, W,
                    ldw, 0.0f, C, N, ep);
}

static void check_stored(const char *name)
{
    static const struct {
        int M, N, K;
    } shapes[] = {{1, 1, 1},     {45, 70, 101}, {33, 96, 1100},
                  {7, 2100, 40}, {300, 33, 17}, {64, 70, 1088},  /* A's tiles read in place
                                                                  * on the AMX path */
                  {120, 130, 37}}; /* each thread on its own columns, whole row blocks */
    int same = 1, copy_same = 1, gelu_same = 1, at_same = 1;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int M = shapes[si].M, N = shapes[si].N, K = shapes[si].K;
        const int lda = K + 3, ldb = N + 5, ldw = K + 1; /* A [M][K], B [K][N], W [N][K] */
        float *A = fnew_rand((size_t)M * lda), *B = fnew_rand((size_t)K * ldb),
              *W = fnew_rand((size_t)N * ldw), *At = fnew_rand((size_t)K * (M + 2));
        float *want = fnew_rand((size_t)M * N), *got = fnew_rand((size_t)M * N);
        uint16_t *A16 = stored_copy(A, M, lda), *B16 = stored_copy(B, K, ldb);
        uint16_t *C16 = malloc((size_t)M * N * sizeof *C16), *W16 = malloc(sizeof *W16);
        if (!C16 || !W16) exit(99);
        const size_t mn = (size_t)M * N;
        /* A stored, B = W transposed (the forward) */
        gemm_bf16(0, 1, M, N, K, 1.0f, A, lda, W, ldw, 0.0f, want, N);
        const gemm_bf16_epilogue ep = {.out_bf16 = C16, .ld_out_bf16 = (size_t)N};
        forward_stored(A16, lda, W, ldw, M, N, K, got, &ep);
        same &= memcmp(got, want, mn * sizeof *got) == 0;
        for (size_t i = 0; i < mn; i++) copy_same &= C16[i] == bf16_store_one(want[i]);
        /* GELU of C into BF16 storage (the MLP's c_fc): bf16_store of gelu_fwd of C */
        const gemm_bf16_epilogue ep_gelu = {.gelu_out16 = C16, .ld_gelu = (size_t)N};
        forward_stored(A16, lda, W, ldw, M, N, K, got, &ep_gelu);
        simd_kernels_get()->gelu_fwd(got, want, mn);
        for (size_t i = 0; i < mn; i++) gelu_same &= C16[i] == bf16_store_one(got[i]);
        /* the MLP's c_fc as a step runs it: a bias, GELU and its slope into BF16
         * storage: bf16_store of gelu_bwd_fwd's GELU and (on dout = 1 into zeros)
         * slope, of C with its bias as the bias alone gives it */
        float *slope = fnew_rand(mn), *bias = fnew_rand(N);
        uint16_t *s16 = malloc(mn * sizeof *s16);
        if (!s16) exit(99);
        {
            float *cb = fnew_rand(mn), *gx = fnew_rand(mn), *ones = fnew_rand(mn);
            uint16_t *g16 = malloc(mn * sizeof *g16);
            if (!g16) exit(99);
            forward_stored(A16, lda, W, ldw, M, N, K, cb, &(gemm_bf16_epilogue){.bias = bias});
            forward_stored(A16, lda, W, ldw, M, N, K, got,
                           &(gemm_bf16_epilogue){.bias = bias, .gelu_out16 = g16,
                                                 .gelu_slope16 = s16, .ld_gelu = (size_t)N});
            for (size_t i = 0; i < mn; i++) slope[i] = 0.0f, ones[i] = 1.0f;
            simd_kernels_get()->gelu_bwd_fwd(slope, gx, cb, ones, mn);
            for (size_t i = 0; i < mn; i++)
                gelu_same &= g16[i] == bf16_store_one(gx[i]) &&
                             s16[i] == bf16_store_one(slope[i]) &&
                             memcmp(got + i, cb + i, sizeof *got) == 0;
            free(cb), free(gx), free(ones), free(g16);
        }
        /* GELU's backward from that stored slope (the MLP's c_proj): the widened slope
         * times C, one rounded multiply; into BF16 storage, bf16_store of those bits */
        {
            float *d1 = fnew_rand(mn), *c2 = fnew_rand(mn);
            uint16_t *d16 = malloc(mn * sizeof *d16);
            if (!d16) exit(99);
            const gemm_bf16_epilogue ep_d = {.dgelu_slope16 = s16, .dgelu_out = d1,
                                             .ld_dgelu = (size_t)N};
            forward_stored(A16, lda, W, ldw, M, N, K, c2, &ep_d);
            gelu_same &= memcmp(c2, want, mn * sizeof *c2) == 0;
            for (size_t i = 0; i < mn; i++) {
                const float d = bf16_widen_one(s16[i]) * want[i];
                gelu_same &= memcmp(d1 + i, &d, sizeof d) == 0;
            }
            gemm_bf16_epilogue ep_d16 = ep_d;
            ep_d16.dgelu_out = NULL;
            ep_d16.dgelu_out16 = d16;
            forward_stored(A16, lda, W, ldw, M, N, K, c2, &ep_d16);
            for (size_t i = 0; i < mn; i++) gelu_same &= d16[i] == bf16_store_one(d1[i]);
            free(d1), free(c2), free(d16);
        }
        free(slope), free(s16), free(bias);
        /* A transposed (FP32), B stored (the weight gradient), beta = 1 */
        memcpy(got, want, mn * sizeof *got);
        gemm_bf16(1, 0, M, N, K, 0.5f, At, M + 2, B, ldb, 1.0f, want, N);
        gemm_bf16(1, GEMM_BF16_STORED, M, N, K, 0.5f, At, M + 2, (const float *)(void *)B16, ldb,
                  1.0f, got, N);
        same &= memcmp(got, want, mn * sizeof *got) == 0;
        /* A transposed in BF16 storage (a weight gradient's dout^T kept in BF16), with
         * its row sums (the bias gradient): the bits of A^T's widened FP32 values */
        {
            uint16_t *At16 = stored_copy(At, K, M + 2);
            float *Atw = fnew_rand((size_t)K * (M + 2)), *sw = calloc((size_t)M, sizeof *sw),
                  *sg = calloc((size_t)M, sizeof *sg);
            if (!sw || !sg) exit(99);
            bf16_widen(Atw, At16, (size_t)K * (M + 2));
            memcpy(got, want, mn * sizeof *got);
            gemm_bf16_fused(1, GEMM_BF16_STORED, M, N, K, 0.5f, Atw, M + 2,
                            (const float *)(void *)B16, ldb, 1.0f, want, N,
                            &(gemm_bf16_epilogue){.row_sums = sw});
            gemm_bf16_fused(GEMM_BF16_STORED_T, GEMM_BF16_STORED, M, N, K, 0.5f,
                            (const float *)(void *)At16, M + 2, (const float *)(void *)B16, ldb,
                            1.0f, got, N, &(gemm_bf16_epilogue){.row_sums = sg});
            at_same &= memcmp(got, want, mn * sizeof *got) == 0 &&
                       memcmp(sg, sw, (size_t)M * sizeof *sg) == 0;
            float one = 0.0f; /* and the sums' values: A^T's rows added in FP32 */
            for (int k = 0; k < K; k++) one += Atw[(size_t)k * (M + 2) + M - 1];
            at_same &= one == sg[M - 1];
            free(At16), free(Atw), free(sw), free(sg);
        }
        /* both stored */
        gemm_bf16(0, 0, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, want, N);
        gemm_bf16(GEMM_BF16_STORED, GEMM_BF16_STORED, M, N, K, 1.0f, (const float *)(void *)A16,
                  lda, (const float *)(void *)B16, ldb, 0.0f, got, N);
        same &= memcmp(got, want, mn * sizeof *got) == 0;
        free(A), free(B), free(W), free(At), free(want), free(got), free(A16), free(B16);
        free(C16), free(W16);
    }
    TU_CHECK(same, "%s: operands in BF16 storage give the bits of their FP32 values' "
             "product (A, B, both; K odd, past a depth and a column block; A read in place by the "
             "AMX path's tile loads)", name);
    TU_CHECK(at_same, "%s: A^T in BF16 storage (GEMM_BF16_STORED_T) gives the bits of its "
             "widened values' product, and its row sums theirs, summed in depth order", name);
    TU_CHECK(copy_same, "%s: the epilogue's BF16 copy of C is bf16_store of C", name);
    TU_CHECK(gelu_same, "%s: the epilogue's GELU in BF16 storage is bf16_store of GELU of C "
             "(also after a bias, with its slope from the same sigmoid, as c_fc's); GELU's "
             "backward from that stored slope is the widened slope times C, and into BF16 "
             "storage bf16_store of those bits", name);
}

/* (m) on a weight packed once per update (the forward's products): A in BF16 storage
 * read where it is stored (an even row length and depth: the dot-product path's
 * kernel reads the 14 rows of a strip in place, a strip short of 14 rows packed) or
 * packed (an odd one), the bits of the product of its FP32 values */
static void check_stored_on_packed(const char *name)
{
    static const int shapes[][4] = {/* M, N, K, lda */
                                    {45, 70, 1100, 1102}, {300, 33, 64, 64}, {14, 40, 2, 2},
                                    {45, 70, 1100, 1103}, {29, 96, 33, 34},
                                    {256, 96, 11008, 11008}, {96, 1400, 800, 800}};
    int same = 1;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int M = shapes[si][0], N = shapes[si][1], K = shapes[si][2], lda = shapes[si][3];
        float *A = fnew_rand((size_t)M * lda), *W = fnew_rand((size_t)N * K);
        float *want = fnew_rand((size_t)M * N), *got = fnew_rand((size_t)M * N);
        uint16_t *A16 = stored_copy(A, M, lda);
        TU_CHECK(gemm_bf16_weights_add(W, N, K) == 0 && gemm_bf16_weights_refresh() == 0,
                 "%s: (m) the weight %d x %d is registered and packed", name, N, K);
        gemm_bf16_fused(0, 1, M, N, K, 1.0f, A, lda, W, K, 0.0f, want, N, NULL);
        forward_stored(A16, lda, W, K, M, N, K, got, NULL);
        same &= memcmp(got, want, (size_t)M * N * sizeof *got) == 0;
        gemm_bf16_weights_clear();
        free(A), free(W), free(want), free(got), free(A16);
    }
    TU_CHECK(same, "%s: A in BF16 storage on a packed weight gives the bits of its FP32 "
             "values' product (read in place: whole strips, a short one, three depth "
             "blocks, 2 MB of B with items of 128 rows, and 2.2 MB of B shared by columns "
             "between two threads; packed: an odd row length or depth)", name);
}

/* (r) a product on a packed weight whose C is just past GEMM_BF16_AMX_STAGE_BYTES, the
 * weight (K x N BF16 values) past one core's L2 (the AMX path sums its pieces apart and
 * streams them into C: its stages_c) gives the bits of the same
 * product in two halves of its rows, each under it: with a bias, alpha 1 and rows of
 * C that start off a 64-byte boundary (ldc odd), and with alpha 1/2 (every block
 * through the write-back); a ragged last strip; C past its columns untouched.
 * stored: A in BF16 storage (GEMM_BF16_STORED), which the AMX path reads in place (its
 * column slices: check_slices) */
static int staged_case(int M, int N, int stored, const char *name)
{
    const int K = 160, ldc = N + 3, ta = stored ? GEMM_BF16_STORED : 0;
    if ((size_t)K * N * 2 <= GEMM_BF16_AMX_L2_BYTES) {
        fprintf(stderr, "staged_case: the weight %d x %d fits L2: not staged\n", N, K);
        exit(99);
    }
    float *A = fnew_rand((size_t)M * K), *W = fnew_rand((size_t)N * K), *bias = fnew_rand(N);
    float *got = malloc((size_t)M * ldc * sizeof *got);
    float *want = malloc((size_t)M * ldc * sizeof *want);
    if (!got || !want) exit(99);
    uint16_t *A16 = malloc((size_t)M * K * sizeof *A16);
    if (!A16) exit(99);
    bf16_store(A16, A, (size_t)M * K);
    const float *A1 = stored ? (const float *)(const void *)A16 : A;
    TU_CHECK(gemm_bf16_weights_add(W, N, K) == 0 && gemm_bf16_weights_refresh() == 0,
             "%s: (r) the weight %d x %d is registered and packed", name, N, K);
    int same = 1;
    for (int round = 0; round < 2; round++) {
        const float alpha = round ? 0.5f : 1.0f;
        const gemm_bf16_epilogue ep = {.bias = round ? NULL : bias};
        for (size_t i = 0; i < (size_t)M * ldc; i++) got[i] = want[i] = 7.0f;
        gemm_bf16_fused(ta, 1, M, N, K, alpha, A1, K, W, K, 0.0f, got, ldc, &ep);
        /* halves at a whole 32-row unit: a partial unit's block adds the bias after its
         * sums instead of starting from it (gemm_bf16_amx_kernel.h's direct_store),
         * which rounds otherwise past one depth chunk */
        const int h = M / 2 / 32 * 32;
        const float *A2 = stored ? (const float *)(const void *)(A16 + (size_t)h * K)
                                 : A + (size_t)h * K;
        gemm_bf16_fused(ta, 1, h, N, K, alpha, A1, K, W, K, 0.0f, want, ldc, &ep);
        gemm_bf16_fused(ta, 1, M - h, N, K, alpha, A2, K, W, K, 0.0f, want + (size_t)h * ldc,
                        ldc, &ep);
        same &= memcmp(got, want, (size_t)M * ldc * sizeof *got) == 0;
        for (int i = 0; i < M; i++)
            for (int j = N; j < ldc; j++) same &= got[(size_t)i * ldc + j] == 7.0f;
    }
    gemm_bf16_weights_clear();
    free(A), free(A16), free(W), free(bias), free(got), free(want);
    return same;
}

/* Two shapes just past the staging size: many rows; and 96 rows, which two threads
 * share by columns too (the second column group's piece starts off column 0) */
static void check_staged(const char *name)
{
    const size_t past = GEMM_BF16_AMX_STAGE_BYTES / sizeof(float);
    const int N1 = 8200, M1 = (int)(past / N1) / 32 * 32 + 32;
    const int M2 = 96, N2 = (int)(past / M2) + 8;
    for (int stored = 0; stored < 2; stored++) {
        const int same = staged_case(M1, N1, stored, name) & staged_case(M2, N2, stored, name);
        TU_CHECK(same, "%s: a product whose C is past the staging size (%d x %d, %d x %d; A %s) "
                 "gives the bits of its two halves (bias; alpha 1/2; rows off a 64-byte "
                 "boundary)", name, M1, N1, M2, N2, stored ? "in BF16 storage" : "in FP32");
    }
}

/* (t) see the list at the top: slices against the unsliced product, three epilogues */
static void check_slices(const char *name)
{
    static const int shapes[][3] = {{96, 1400, 800}, {64, 2100, 2336}}; /* M, N, K */
    int same = 1;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
        const size_t mn = (size_t)M * N;
        float *A = fnew_rand((size_t)M * K), *W = fnew_rand((size_t)N * K), *bias = fnew_rand(N);
        float *want = malloc(mn * sizeof *want), *got = malloc(mn * sizeof *got);
        uint16_t *A16 = stored_copy(A, M, K), *h[2][2];
        if (!want || !got) exit(99);
        for (int v = 0; v < 2; v++)
            for (int o = 0; o < 2; o++)
                if (!(h[v][o] = calloc(mn, sizeof **h))) exit(99);
        TU_CHECK(gemm_bf16_weights_add(W, N, K) == 0 && gemm_bf16_weights_refresh() == 0,
                 "%s: (t) the weight %d x %d is registered and packed", name, N, K);
        for (int e = 0; e < 3; e++) { /* plain; bias into BF16 alone; bias and GELU */
            for (int v = 0; v < 2; v++) { /* 0: A in FP32, packed; 1: A read in place */
                const gemm_bf16_epilogue ep[3] = {
                    {0},
                    {.bias = bias, .out_bf16 = h[v][0], .ld_out_bf16 = (size_t)N, .c_unused = 1},
                    {.bias = bias, .gelu_out16 = h[v][1], .ld_gelu = (size_t)N,
                     .gelu_slope16 = h[v][0], .c_unused = 1}};
                float *C = v ? got : want;
                for (size_t i = 0; i < mn; i++) C[i] = 7.0f;
                if (v) forward_stored(A16, K, W, K, M, N, K, C, &ep[e]);
                else gemm_bf16_fused(0, 1, M, N, K, 1.0f, A, K, W, K, 0.0f, C, N, &ep[e]);
            }
            if (e == 0) same &= memcmp(got, want, mn * sizeof *got) == 0;
            for (int o = 0; o < e; o++)
                same &= memcmp(h[0][o], h[1][o], mn * sizeof **h) == 0;
        }
        gemm_bf16_weights_clear();
        for (int v = 0; v < 2; v++) free(h[v][0]), free(h[v][1]);
        free(A), free(W), free(bias), free(want), free(got), free(A16);
    }
    TU_CHECK(same, "%s: A read in place on a packed weight past L2 (column slices: 96 x 1,400 "
             "x 800, 64 x 2,100 x 2,336) gives the bits of the product on A's FP32 values: "
             "plain, a bias into BF16 storage, a bias and GELU with its slope into BF16", name);
}

/* (s) a weight gradient C (M x N, ldc = N + 3) += alpha op(A) B with op(A) = A^T (FP32
 * stored [k][m], or stored_t: BF16 storage) and B in BF16 storage [k][n], its row sums
 * too, against the same in two halves of its rows (at a 32-row unit), each with C under
 * GEMM_BF16_AMX_STAGE_BYTES (packed a panel at a time); the columns past N untouched.
 * M and N ragged, K not whole chunks. */
static int whole_b_case(int M, int N, int K, int stored_t, float alpha)
{
    /* halves at a whole 32-row unit: with beta 1 a whole 32 x 32 block sums into C in
     * its tiles, a partial one through the write-back (gemm_bf16_amx_kernel.h's
     * direct_store), which rounds otherwise */
    const int ldc = N + 3, ta = stored_t ? GEMM_BF16_STORED_T : 1, h = M / 2 / 32 * 32;
    float *A = fnew_rand((size_t)K * M), *Bf = fnew_rand((size_t)K * N);
    float *got = malloc((size_t)M * ldc * sizeof *got);
    float *want = malloc((size_t)M * ldc * sizeof *want);
    float *sg = calloc((size_t)M, sizeof *sg), *sw = calloc((size_t)M, sizeof *sw);
    uint16_t *A16 = malloc((size_t)K * M * sizeof *A16), *B16 = malloc((size_t)K * N * sizeof *B16);
    if (!got || !want || !sg || !sw || !A16 || !B16) exit(99);
    bf16_store(A16, A, (size_t)K * M);
    bf16_store(B16, Bf, (size_t)K * N);
    for (size_t i = 0; i < (size_t)M * ldc; i++) got[i] = want[i] = (float)(i % 7) - 3.0f;
    const float *B = (const float *)(const void *)B16;
    const float *A1 = stored_t ? (const float *)(const void *)A16 : A;
    const float *A2 = stored_t ? (const float *)(const void *)(A16 + h) : A + h;
    const gemm_bf16_epilogue eg = {.row_sums = sg}, e1 = {.row_sums = sw},
                             e2 = {.row_sums = sw + h};
    gemm_bf16_fused(ta, GEMM_BF16_STORED, M, N, K, alpha, A1, M, B, N, 1.0f, got, ldc, &eg);
    gemm_bf16_fused(ta, GEMM_BF16_STORED, h, N, K, alpha, A1, M, B, N, 1.0f, want, ldc, &e1);
    gemm_bf16_fused(ta, GEMM_BF16_STORED, M - h, N, K, alpha, A2, M, B, N, 1.0f,
                    want + (size_t)h * ldc, ldc, &e2);
    int same = memcmp(got, want, (size_t)M * ldc * sizeof *got) == 0 &&
               memcmp(sg, sw, (size_t)M * sizeof *sg) == 0;
    for (int i = 0; i < M; i++)
        for (int j = N; j < ldc; j++) same &= got[(size_t)i * ldc + j] == (float)((i * (size_t)ldc + j) % 7) - 3.0f;
    free(A), free(Bf), free(got), free(want), free(sg), free(sw), free(A16), free(B16);
    return same;
}

static void check_whole_b(const char *name)
{
    const int N = 200, K = 40;
    const int M = (int)(GEMM_BF16_AMX_WHOLE_B_BYTES / sizeof(float) / N) + 45;
    TU_CHECK(whole_b_case(M, N, K, 0, 1.0f) && whole_b_case(M, N, K, 1, 0.5f),
             "%s: (s) a weight gradient whose C is past the size that packs all of B "
             "first (%d x %d x %d, beta 1, row sums; dout^T in FP32 with alpha 1, in BF16 "
             "storage with alpha 1/2) gives the bits of its two halves", name, M, N, K);
}

/* (n) row sums: from zero in depth order, then added (the reference), against the
 * fused sums; for transa = 1 also the simd column-sum pass the model used */
static void check_row_sums(const char *name)
{
    static const struct {
        int M, N, K, ta;
    } shapes[] = {{1, 1, 1, 1}, {300, 70, 1100, 1}, {45, 2100, 37, 1}, {61, 33, 700, 0},
                  {16500, 3, 5, 1}, {16500, 2, 3, 0}};
    const simd_kernels *k = simd_kernels_get();
    int same = 1, colsum_same = 1;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int M = shapes[si].M, N = shapes[si].N, K = shapes[si].K, ta = shapes[si].ta;
        const int lda = ta ? M + 2 : K + 1;
        float *A = fnew_rand((size_t)(ta ? K : M) * lda), *B = fnew_rand((size_t)K * N);
        float *C = fnew_rand((size_t)M * N), *got = fnew_rand(M), *want = malloc(M * sizeof *want);
        if (!want) exit(99);
        memcpy(want, got, M * sizeof *want);
        for (int m = 0; m < M; m++) {
            float sum = 0.0f;
            for (int kk = 0; kk < K; kk++) sum += ta ? A[(size_t)kk * lda + m] : A[(size_t)m * lda + kk];
            want[m] += sum;
        }
        if (ta) { /* the model's column-sum pass over dout = A stored [K][M] */
            float *cs = malloc(M * sizeof *cs);
            if (!cs) exit(99);
            memcpy(cs, got, M * sizeof *cs);
            for (int c0 = 0; c0 < M; c0 += SIMD_COL_BLOCK)
                k->colsum(cs, A, (size_t)K, (size_t)lda, c0,
                          M - c0 < SIMD_COL_BLOCK ? M - c0 : SIMD_COL_BLOCK);
            colsum_same &= memcmp(cs, want, M * sizeof *cs) == 0;
            free(cs);
        }
        const gemm_bf16_epilogue ep = {.row_sums = got};
        gemm_bf16_fused(ta, 0, M, N, K, 1.0f, A, lda, B, N, 1.0f, C, N, &ep);
        same &= memcmp(got, want, M * sizeof *got) == 0;
        free(A), free(B), free(C), free(got), free(want);
    }
    TU_CHECK(same, "%s: the epilogue's row sums give the bits of summing each row from zero "
             "in depth order, then adding (past a row, depth and column block, and past "
             "the fused sums' rows)", name);
    TU_CHECK(colsum_same, "%s: ... which are the bits of the column-sum pass over dout", name);
}

/* (o) W (R x Q) registered and packed; forward: gelu of A16 (M x Q, BF16 storage) W^T +
 * bias, into BF16 storage with its slope, and A16 W^T + bias into BF16 storage alone
 * (the attention's q|k|v); backward: GELU's backward of dout (M x R) W from a slope in
 * BF16 storage. Each with c_unused 0
 * and 1; C starts as a marker value every time. Returns whether both gave the same
 * outputs; *untouched &= whether C kept its marker where it was unused. */
static int c_unused_case(int M, int R, int Q, int *untouched, const char *name)
{
    float *A = fnew_rand((size_t)M * Q), *W = fnew_rand((size_t)R * Q), *bias = fnew_rand(R),
          *dout = fnew_rand((size_t)M * R), *slope = fnew_rand((size_t)M * Q),
          *C = malloc((size_t)M * R * sizeof *C);
    uint16_t *A16 = stored_copy(A, M, Q), *slope16 = stored_copy(slope, M, Q), *out[2][2];
    if (!C) exit(99);
    for (int cu = 0; cu < 2; cu++)
        for (int o = 0; o < 2; o++)
            if (!(out[cu][o] = calloc((size_t)M * R, sizeof **out))) exit(99);
    TU_CHECK(gemm_bf16_weights_add(W, R, Q) == 0 && gemm_bf16_weights_refresh() == 0,
             "%s: (o) the weight %d x %d is registered and packed", name, R, Q);
    int same = 1;
    for (int fwd = 0; fwd < 3; fwd++) { /* backward, forward with GELU, forward plain */
        const int n = fwd ? R : Q;
        for (int cu = 0; cu < 2; cu++) {
            for (size_t i = 0; i < (size_t)M * R; i++) C[i] = 7.0f;
            if (fwd == 2) {
                const gemm_bf16_epilogue ep = {.bias = bias, .out_bf16 = out[cu][1],
                                               .ld_out_bf16 = (size_t)R, .c_unused = cu};
                gemm_bf16_fused(GEMM_BF16_STORED, 1, M, R, Q, 1.0f,
                                (const float *)(const void *)A16, Q, W, Q, 0.0f, C, R, &ep);
            } else if (fwd) {
                const gemm_bf16_epilogue ep = {.bias = bias, .gelu_out16 = out[cu][0],
                                               .ld_gelu = (size_t)R,
                                               .gelu_slope16 = out[cu][1], .c_unused = cu};
                gemm_bf16_fused(GEMM_BF16_STORED, 1, M, R, Q, 1.0f,
                                (const float *)(const void *)A16, Q, W, Q, 0.0f, C, R, &ep);
            } else {
                const gemm_bf16_epilogue ep = {.dgelu_slope16 = slope16,
                                               .dgelu_out16 = out[cu][0],
                                               .ld_dgelu = (size_t)Q, .c_unused = cu};
                gemm_bf16_fused(0, 0, M, Q, R, 1.0f, dout, R, W, Q, 0.0f, C, Q, &ep);
            }
            if (cu)
                for (size_t i = 0; i < (size_t)M * n; i++) *untouched &= C[i] == 7.0f;
        }
        for (int o = 0; o < 2; o++)
            same &= memcmp(out[0][o], out[1][o], (size_t)M * n * sizeof **out) == 0;
    }
    gemm_bf16_weights_clear();
    for (int cu = 0; cu < 2; cu++)
        for (int o = 0; o < 2; o++) free(out[cu][o]);
    free(A), free(W), free(bias), free(dout), free(slope), free(C), free(A16), free(slope16);
    return same;
}

/* Two shapes: past a column block and a depth block with A packed (100 rows); and A
 * read in place by the AMX path with few columns, so that an item takes more rows than
 * MC (rows_in_place) and C's piece is that many rows of 300 */
static void check_c_unused(enum gemm_bf16_path path, const char *name)
{
    const int holds = path != GEMM_BF16_PORTABLE; /* keeps C's pieces in its own buffer */
    int untouched = 1;
    const int same = c_unused_case(100, 2100, 1100, &untouched, name) &
                     c_unused_case(192, 300, 256, &untouched, name) &
                     c_unused_case(96, 1400, 800, &untouched, name);
    TU_CHECK(same, "%s: an epilogue that leaves C unused gives the BF16 outputs of the product "
             "that writes C (GELU forward and backward, a plain forward into BF16 storage, "
             "past a column block and a depth block, on a packed weight; A read in place, "
             "192 rows of 300 columns, and 96 rows of 1,400 columns 800 deep)", name);
    if (holds) TU_CHECK(untouched, "%s: ... and C is never written", name);
}

/* (o) C = A16 W^T + bias + residual (the attention's and MLP's projections) on W's
 * packed copy, against the product that packs W itself: the same bits. C starts as a
 * marker each time (beta 0 never reads it). */
static int residual_case(int M, int N, int K)
{
    float *A = fnew_rand((size_t)M * K), *W = fnew_rand((size_t)N * K), *bias = fnew_rand(N),
          *res = fnew_rand((size_t)M * N), *C[2];
    uint16_t *A16 = stored_copy(A, M, K);
    for (int v = 0; v < 2; v++)
        if (!(C[v] = malloc((size_t)M * N * sizeof *C[v]))) exit(99);
    for (int v = 0; v < 2; v++) { /* W packing itself, then W's copy */
        if (v == 1 && (gemm_bf16_weights_add(W, N, K) != 0 || gemm_bf16_weights_refresh() != 0))
            exit(99);
        for (size_t i = 0; i < (size_t)M * N; i++) C[v][i] = 7.0f;
        const gemm_bf16_epilogue ep = {.bias = bias, .residual = res, .ld_residual = (size_t)N};
        gemm_bf16_fused(GEMM_BF16_STORED, 1, M, N, K, 1.0f, (const float *)(const void *)A16,
                        K, W, K, 0.0f, C[v], N, &ep);
    }
    gemm_bf16_weights_clear();
    const int same = memcmp(C[0], C[1], (size_t)M * N * sizeof *C[0]) == 0;
    for (int v = 0; v < 2; v++) free(C[v]);
    free(A), free(W), free(bias), free(res), free(A16);
    return same;
}

static void check_residual_on_packed(const char *name)
{
    TU_CHECK(residual_case(100, 2100, 1100) && residual_case(200, 384, 1536) &&
                 residual_case(96, 384, 384),
             "%s: (o) a residual add on a packed weight gives the bits of the product that "
             "packs B itself (past a column block and depth blocks; 384 columns 1,536 and "
             "384 deep)", name);
}

/* (p) the avx512-bf16 path counts its VDPBF16PS (dot_counts.h, what the bench's
 * prediction for faster dot products reads): a 14 x 32 micro-tile a strip of each, a
 * short strip's rows rounded up to even, both vectors over each pair of depth, summed
 * over the threads */
/* The rows of A the avx512-bf16 path runs on `threads` threads (gemm_split.h's row
 * split): one near-equal part of the M rows a thread where they give each thread two
 * strips of 14 or more, else one part; each part in strips of 14 from its first row, its
 * short last strip's rows rounded up to even */
static uint64_t rows_run(int M, int threads)
{
    const int parts = (M + 13) / 14 >= 2 * threads ? threads : 1;
    uint64_t rows = 0;
    for (int i = 0; i < parts; i++) {
        const int n = (int)((long long)(i + 1) * M / parts - (long long)i * M / parts);
        rows += (uint64_t)(n + ((n % 14) & 1)); /* an odd short strip runs one row more */
    }
    return rows;
}

/* The VDPBF16PS the avx512-bf16 path runs on an M x N x K product on `threads` threads,
 * B packed by the product or (packed) a weight packed once: the rows run by each strip
 * of 32 columns (column blocks of 2048 hold whole strips), both vectors, each pair of
 * depth. The rows: rows_run's, or all M on one thread's own columns where the product
 * packs B, the columns are as many as the rows and give every thread a strip */
static uint64_t dots_run(int M, int N, int K, int threads, int packed)
{
    uint64_t strips_n = 0;
    for (int j = 0; j < N; j += 2048)
        strips_n += (uint64_t)((N - j < 2048 ? N - j : 2048) + 31) / 32;
    const int own_columns =
        !packed && threads > 1 && M <= N && (N < 2048 ? N : 2048) >= 32 * threads;
    return rows_run(M, own_columns ? 1 : threads) * strips_n * 2 * (uint64_t)((K + 1) / 2);
}

/* The VDPBF16PS counted since the reset, all threads; their micro-kernel seconds into
 * *took and the thread count into *threads where not NULL */
static uint64_t dots_counted(double *took, int *threads)
{
    dot_count per[64];
    uint64_t sum = 0;
    const int n = dot_counts_read(per, 64);
    for (int i = 0; i < n && i < 64; i++) {
        sum += per[i].vdpbf16ps;
        if (took) *took += per[i].kernel_s;
    }
    if (threads) *threads = n;
    return sum;
}

static void check_dot_counts_on(int threads)
{
    static const int shapes[][5] = {{300, 200, 600, 0, 0}, {20, 33, 1025, 1, 0},
                                    {45, 2100, 70, 0, 1},   {1, 1, 1, 1, 1},
                                    {58, 40, 64, 1, 0}};
    int right = 1, timed = 1;
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        const int *sh = shapes[t];
        prob p = make(sh[0], sh[1], sh[2], sh[3], sh[4], 1.0f, 0.0f);
        dot_counts_reset();
        struct timespec w0, w1;
        clock_gettime(CLOCK_MONOTONIC, &w0);
        free(run(&p));
        clock_gettime(CLOCK_MONOTONIC, &w1);
        const double wall = (double)(w1.tv_sec - w0.tv_sec) + (w1.tv_nsec - w0.tv_nsec) * 1e-9;
        double took = 0.0;
        int n = 0;
        const uint64_t sum = dots_counted(&took, &n), want = dots_run(p.M, p.N, p.K, threads, 0);
        /* inside the product, on at most its threads (ticks converted to seconds) */
        timed &= took > 0.0 && took <= wall * (n > 0 ? n : 1) * 1.01 + 1e-6;
        if (sum != want) {
            printf("     %d x %d x %d, %d thread(s): %llu VDPBF16PS counted, %llu run\n", p.M,
                   p.N, p.K, threads, (unsigned long long)sum, (unsigned long long)want);
            right = 0;
        }
        drop(&p);
    }
    /* a weight packed once and A read in place (the products a step runs most): 47
     * rows, the last 5 a packed strip; 2,100 columns, past a column block; 1,100 deep */
    {
        const int M = 47, N = 2100, K = 1100;
        float *A = fnew_rand((size_t)M * K), *W = fnew_rand((size_t)N * K);
        float *C = fnew_rand((size_t)M * N);
        uint16_t *A16 = stored_copy(A, M, K);
        TU_CHECK(gemm_bf16_weights_add(W, N, K) == 0 && gemm_bf16_weights_refresh() == 0,
                 "a weight registered and packed for the count");
        dot_counts_reset();
        forward_stored(A16, K, W, K, M, N, K, C, NULL);
        gemm_bf16_weights_clear();
        const uint64_t sum = dots_counted(NULL, NULL), want = dots_run(M, N, K, threads, 1);
        if (sum != want) {
            printf("     packed weight, A in place, %d thread(s): %llu VDPBF16PS counted, "
                   "%llu run\n", threads, (unsigned long long)sum, (unsigned long long)want);
            right = 0;
        }
        free(A), free(W), free(C), free(A16);
    }
    /* 60 rows on 2 threads: 30 each, two strips of 14 and one of 2, not one thread's
     * two strips of 14 against the other's three (the last of 4 rows) */
    if (threads == 2) {
        prob p = make(60, 40, 64, 0, 0, 1.0f, 0.0f);
        dot_counts_reset();
        free(run(&p));
        dot_count per[2];
        const int n = dot_counts_read(per, 2);
        TU_CHECK(n == 2 && per[0].vdpbf16ps == per[1].vdpbf16ps &&
                     per[0].vdpbf16ps == (uint64_t)30 * 2 * 2 * 32,
                 "avx512-bf16 on 2 threads: 60 rows are 30 a thread, the same VDPBF16PS on "
                 "each (%llu and %llu)", n > 0 ? (unsigned long long)per[0].vdpbf16ps : 0ULL,
                 n > 1 ? (unsigned long long)per[1].vdpbf16ps : 0ULL);
        drop(&p);
    }
    TU_CHECK(right, "avx512-bf16 on %d thread%s: the VDPBF16PS counted are those the "
             "micro-kernels run (edges, odd K past a depth block, N past a column block; a "
             "packed weight with A read in place)", threads, threads > 1 ? "s" : "");
    TU_CHECK(timed, "avx512-bf16 on %d thread%s: ... and the time in its micro-kernels is "
             "counted, within the product's wall time on each thread", threads,
             threads > 1 ? "s" : "");
}


/* The counts on 1, 2 and 3 threads (one thread where there is no OpenMP) */
static void check_dot_counts(void)
{
#ifdef _OPENMP
    enum { MOST_THREADS = 3 };
#else
    enum { MOST_THREADS = 1 };
#endif
    for (int threads = 1; threads <= MOST_THREADS; threads++) {
#ifdef _OPENMP
        omp_set_num_threads(threads);
#endif
        check_dot_counts_on(threads);
    }
#ifdef _OPENMP
    omp_set_num_threads(2);
#endif
}

/* (q) the timing twin of (p) (dot_counts_timing_only, GENTRAIN_DOT_TIMING): each
 * VDPBF16PS replaced by one FP32 multiply-add of the same pair words. Its results are
 * meaningless but exact: element (i, j) is the chain of fmaf over the depth pairs of A's
 * row i and B's column j, each pair word (the even depth's BF16 value in the low half,
 * the odd one's in the high) read as one float, summed here in scalar code. Within one
 * depth block, alpha 1 and beta 0, as the bench's step runs it; the same VDPBF16PS
 * counted; and off again, the real products. */
static float pair_as_float(float even, float odd)
{
    const uint32_t w = (uint32_t)bf16_store_one(even) | (uint32_t)bf16_store_one(odd) << 16;
    float f;
    memcpy(&f, &w, sizeof f);
    return f;
}

static void check_dot_timing(void)
{
    static const int shapes[][5] = {{40, 70, 130, 0, 0}, {29, 33, 511, 1, 1}, {1, 1, 1, 0, 1}};
    int exact = 1, counted = 1;
    TU_CHECK(dot_counts_timing_only(1) == 0, "the timing twin is off until asked for");
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        const int *sh = shapes[t];
        prob p = make(sh[0], sh[1], sh[2], sh[3], sh[4], 1.0f, 0.0f);
        dot_counts_timing_only(0);
        dot_counts_reset();
        free(run(&p));
        const uint64_t real = dots_counted(NULL, NULL);
        dot_counts_timing_only(1);
        dot_counts_reset();
        float *C = run(&p);
        const uint64_t twin = dots_counted(NULL, NULL);
        counted &= twin == real && real > 0;
#define AT(i, k) (p.ta ? p.A[(size_t)(k) * p.lda + (i)] : p.A[(size_t)(i) * p.lda + (k)])
#define BT(k, j) (p.tb ? p.B[(size_t)(j) * p.ldb + (k)] : p.B[(size_t)(k) * p.ldb + (j)])
        for (int i = 0; i < p.M; i++)
            for (int j = 0; j < p.N; j++) {
                float acc = 0.0f;
                for (int k = 0; k < p.K; k += 2) {
                    const int odd = k + 1 < p.K;
                    acc = fmaf(pair_as_float(AT(i, k), odd ? AT(i, k + 1) : 0.0f),
                               pair_as_float(BT(k, j), odd ? BT(k + 1, j) : 0.0f), acc);
                }
                exact &= memcmp(&acc, &C[(size_t)i * p.ldc + j], sizeof acc) == 0;
            }
#undef AT
#undef BT
        free(C);
        drop(&p);
    }
    TU_CHECK(dot_counts_timing_only(0) == 1, "the timing twin turns off");
    TU_CHECK(exact, "avx512-bf16 timing twin: each dot product ran as one FP32 multiply-add "
             "of the pair words (the bits of a scalar fmaf chain), odd K and every edge");
    TU_CHECK(counted, "avx512-bf16 timing twin: the same VDPBF16PS counted as the real run");
    prob p = make(17, 40, 96, 0, 0, 1.0f, 0.0f);
    float *C = run(&p);
    int bad = 0;
    TU_CHECK(error_of(&p, C, &bad) <= bound_of(p.K) && !bad,
             "avx512-bf16 after the timing twin: the real products again");
    free(C);
    drop(&p);
}

/* (m) bf16_scale_pow2 on every BF16 value, against the FP32 product by the power of two
 * (a zero of its sign below FP32's normal range; zeros, denormals, infinities and NaNs
 * as they are): the vector loop (from the second value, so its vectors start unaligned
 * and a tail is left to the scalar code) and bf16_scale_pow2_one on each value */
static void check_scale_pow2(void)
{
    uint16_t *h = malloc(65536 * sizeof *h);
    if (!h) exit(99);
    int same = 1;
    for (int shift = -1; shift >= -9; shift -= 4) {
        for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
        bf16_scale_pow2(h + 1, 65535, shift);
        h[0] = bf16_scale_pow2_one(0, shift);
        for (int i = 0; i < 65536; i++) {
            const float x = bf16_widen_one((uint16_t)i), y = x * ldexpf(1.0f, shift);
            const int e = (i >> 7) & 0xff;
            uint16_t want;
            if (e == 0 || e == 0xff) {
                want = (uint16_t)i;
            } else if (fabsf(y) < FLT_MIN) {
                want = (uint16_t)(i & 0x8000);
            } else {
                uint32_t u;
                memcpy(&u, &y, sizeof u);
                want = (uint16_t)(u >> 16);
            }
            same &= h[i] == want && bf16_scale_pow2_one((uint16_t)i, shift) == want;
        }
    }
    free(h);
    TU_CHECK(same, "bf16_scale_pow2 (vector loop and one value at a time): all 65,536 BF16 "
             "values times 2^-1, 2^-5, 2^-9 as the FP32 product (below the normal range a "
             "signed zero; zeros, denormals, infinities and NaNs kept)");
}

/* (m) bf16_store's vector loop and its scalar rounding, on the awkward values */
static void check_store_rounding(void)
{
    enum { N = 4096 };
    float *x = malloc(N * sizeof *x), *back = malloc(N * sizeof *back);
    uint16_t *h = malloc(N * sizeof *h);
    if (!x || !h || !back) exit(99);
    uint64_t g = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < N; i++) {
        g = g * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t u = (uint32_t)(g >> 32);
        switch (i % 8) {
        case 0: u = (u & 0xffff0000u) | 0x8000u; break;  /* a tie */
        case 1: u = (u & 0x807fffffu) | 0x7f800000u; break; /* NaN or infinity */
        case 2: u &= 0x807fffffu; break;                  /* denormal or zero */
        default: break;
        }
        memcpy(&x[i], &u, sizeof u);
    }
    bf16_store(h, x, N);
    int same = 1, exact = 1;
    for (int i = 0; i < N; i++) same &= h[i] == bf16_store_one(x[i]);
    bf16_widen(back, h, N);
    for (int i = 0; i < N; i++) exact &= bf16_widen_one(h[i]) == back[i] || back[i] != back[i];
    TU_CHECK(same, "bf16_store: the vector loop rounds ties, NaN, infinities and denormals "
             "as the scalar one");
    TU_CHECK(exact, "bf16_widen: the vector loop widens as the scalar one");
    free(x), free(h), free(back);
}

int main(void)
{
#ifdef _OPENMP
    omp_set_num_threads(2);
#endif
    unsetenv("GENTRAIN_BF16");
    TU_CHECK(gemm_bf16_init(3) == 0, "buffers reserved for 3 threads");
    const int avx = cpu_isa_level() >= CPU_ISA_AVX512_BF16;
    const int amx = GT_SIMD_X86_AMX && avx && cpu_has_amx_bf16();
    /* below AMX, the dot products where they multiply at 1x the FMAs' rate or more */
    const double dot = cpu_bf16_dot_over_fma();
    TU_CHECK(avx ? dot > 0.0 : dot == 0.0, "the dot-product rate is measured where the CPU "
             "has AVX512_BF16 (%.2fx the FMAs)", dot);
    TU_CHECK(gemm_bf16_dot_products_pay() == (avx && dot >= 1.0), "the dot products pay "
             "from 1x the FMA rate");
    const char *best = amx ? "amx-bf16" : avx && dot >= 1.0 ? "avx512-bf16" : "portable";
    printf("     this CPU: %s, %s, BF16 dot products at %.2fx its FMAs; path chosen: %s\n",
           cpu_isa_name(cpu_isa_level()),
           cpu_has_amx_bf16() ? "AMX-BF16 tiles" : "no AMX tiles", dot, gemm_bf16_path_name());
    TU_CHECK(strcmp(gemm_bf16_path_name(), best) == 0, "the path follows the CPU (%s)",
             gemm_bf16_path_name());
    const char *declined = cpu_amx_declined();
    if (declined) printf("     AMX declined: %s\n", declined);
    TU_CHECK(!(cpu_has_amx_bf16() && declined), "AMX granted has no reason given against it");
    const struct {
        enum gemm_bf16_path path;
        const char *name;
        int runs;
        const char *lacks;
    } paths[] = {{GEMM_BF16_AMX, "amx-bf16", amx, "AMX-BF16 tiles"},
                 {GEMM_BF16_AVX512, "avx512-bf16", avx, "AVX512_BF16"},
                 {GEMM_BF16_PORTABLE, "portable", 1, ""},
                 {GEMM_BF16_AMX_EMULATED, "amx-emulated", 1, ""}};
    for (int i = 0; i < 4; i++) {
        if (!paths[i].runs) {
            printf("     %s: not run (this CPU lacks %s); compiled only\n", paths[i].name,
                   paths[i].lacks);
            continue;
        }
        gemm_bf16_force_path(paths[i].path);
        TU_CHECK(strcmp(gemm_bf16_path_name(), paths[i].name) == 0, "the %s path can be "
                 "forced", paths[i].name);
        check_path(paths[i].name);
        if (paths[i].path == GEMM_BF16_AVX512) {
            check_dot_counts();
            check_dot_timing();
        }
        check_nested(paths[i].name);
        check_rounding(paths[i].name);
        check_prepacked(paths[i].path, paths[i].name);
        check_fused(paths[i].name);
        check_stored(paths[i].name);
        check_stored_on_packed(paths[i].name);
        check_row_sums(paths[i].name);
        check_c_unused(paths[i].path, paths[i].name);
        check_residual_on_packed(paths[i].name);
        if (paths[i].path == GEMM_BF16_PORTABLE) continue;
        check_staged(paths[i].name);
        check_whole_b(paths[i].name);
        check_slices(paths[i].name);
        check_threads(paths[i].name);
        if (paths[i].path == GEMM_BF16_AMX_EMULATED) check_sdm_order(paths[i].name, 1);
        if (paths[i].path == GEMM_BF16_AMX) check_sdm_order(paths[i].name, 0);
        check_agree(paths[i].path, paths[i].name);
    }
    check_packing();
    check_pair_packing();
    check_packing_sums();
    check_write_back();
    check_store_rounding();
    check_scale_pow2();
    if (gemm_bf16_amx_pack_select(0) == 0 && avx) { /* the twin ran the vector packing */
        gemm_bf16_force_path(GEMM_BF16_AMX_EMULATED);
        printf("     amx-emulated on the portable packing and write-back:\n");
        check_sdm_order("amx-emulated", 1);
        check_stored("amx-emulated, portable packing");
        check_staged("amx-emulated, portable packing");
        check_whole_b("amx-emulated, portable packing");
        check_prepacked(GEMM_BF16_AMX_EMULATED, "amx-emulated, portable packing");
    }
    (void)gemm_bf16_amx_pack_select(1);
    check_env("amx-emulated", "amx-emulated", 0);
    check_env("portable", "portable", 0);
    check_env("avx512", avx ? "avx512-bf16" : "portable", !avx);
    check_env("amx", best, !amx);
    check_env("bogus", best, 1);
    check_env(NULL, best, 0);
    gemm_bf16_force_path(GEMM_BF16_AUTO);
    TU_CHECK(strcmp(gemm_bf16_path_name(), best) == 0, "the automatic choice is %s, never "
             "amx-emulated", gemm_bf16_path_name());
    gemm_bf16_free();
    printf("%d checks, %d failed\n", tu_checks, tu_failures);
    return tu_failures ? 1 : 0;
}
