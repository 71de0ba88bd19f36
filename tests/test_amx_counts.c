/* test_amx_counts — the tile instructions the AMX matrix product runs, as the emulated
 * path counts them (amx_emul_counts_*), for the bench's prediction of the real path:
 *   (a) exact for known products. From gemm_bf16_amx_kernel.h: every 32 x 32 block of C
 *       (a row unit of 32 x a column strip of 32, padding included) is summed once per
 *       depth block of KC (GEMM_BF16_AMX_KC) by block32: 4 tiles started (TILEZERO; or,
 *       for a whole block after the first depth block, alpha 1, 4 TILELOADD of C), then
 *       per 32 of depth 4 TILELOADD and 4 TDPBF16PS, then 4 TILESTORED. Since MC, NC and KC are
 *       multiples of 32, over the whole product (alpha 1, beta 0)
 *         TDPBF16PS = 4 ceil(M/32) ceil(N/32) ceil(K/32)
 *         TILESTORED = 4 ceil(M/32) ceil(N/32) ceil(K/KC)
 *         C loads = 4 floor(M/32) floor(N/32) (ceil(K/KC) - 1)
 *         TILELOADD = TDPBF16PS + C loads,  TILEZERO = TILESTORED - C loads
 *       whatever the transposes and the thread count (two threads, one, and two
 *       products at once inside a parallel region); the timed tile spans are positive
 *       and no longer than the timed products, which are no longer than the calls;
 *   (b) nothing is counted on the other paths (portable, and avx512-bf16 where the CPU
 *       has it);
 *   (c) the twin's timing mode (amx_emul_timing_only, GENTRAIN_AMX_TIMING) counts the
 *       same instructions and computes no product (C of a beta = 0 product stays zero),
 *       and the twin computes again once it is off. */
#include <stdint.h>

#include "amx_emul.h" /* amx_emul_timing_only */
#include "amx_emul_counts.h"
#include "cpu_features.h"
#include "gemm_bf16.h"
#include "gemm_bf16_amx.h" /* GEMM_BF16_AMX_KC */
#include "util.h"          /* gt_now */
#include "testutil.h"

#ifdef _OPENMP
#include <omp.h>
#endif

static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* The counts summed over threads (the times: the longest thread's); how many threads
 * counted */
static int totals(amx_emul_counts *sum)
{
    amx_emul_counts per[64];
    const int n = amx_emul_counts_read(per, 64);
    memset(sum, 0, sizeof *sum);
    for (int i = 0; i < n && i < 64; i++) {
        sum->dpbf16ps += per[i].dpbf16ps;
        sum->loadd += per[i].loadd;
        sum->stored += per[i].stored;
        sum->zero += per[i].zero;
        if (per[i].span_s > sum->span_s) sum->span_s = per[i].span_s;
        if (per[i].product_s > sum->product_s) sum->product_s = per[i].product_s;
        if (per[i].product_span_s > sum->product_span_s)
            sum->product_span_s = per[i].product_span_s;
    }
    return n;
}

static float A[200000], B[200000], C[2 * 200000];

/* `copies` products of M x N x K (1: from outside a parallel region, on the team; 2:
 * one on each of two threads of a parallel region), then the counts against the
 * formula */
static void check_product(int M, int N, int K, int ta, int tb, int copies)
{
    amx_emul_counts_reset();
    const int lda = ta ? M : K, ldb = tb ? K : N;
    const double t0 = gt_now();
    if (copies == 1) {
        gemm_bf16(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N);
    } else {
#pragma omp parallel num_threads(2)
        {
#ifdef _OPENMP
            const int t = omp_get_thread_num();
#else
            const int t = 0;
#endif
            gemm_bf16(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C + (size_t)t * M * N, N);
        }
    }
    const double wall = gt_now() - t0;
    amx_emul_counts sum;
    const int threads = totals(&sum);
    const uint64_t blocks = (uint64_t)copies * 4 * ceil_div((uint64_t)M, 32) *
                            ceil_div((uint64_t)N, 32);
    const uint64_t dp = blocks * ceil_div((uint64_t)K, 32),
                   st = blocks * ceil_div((uint64_t)K, GEMM_BF16_AMX_KC);
    const uint64_t cload = (uint64_t)copies * 4 * (uint64_t)(M / 32) * (uint64_t)(N / 32) *
                           (ceil_div((uint64_t)K, GEMM_BF16_AMX_KC) - 1),
                   ld = dp + cload, zero = st - cload;
    TU_CHECK(sum.dpbf16ps == dp && sum.loadd == ld && sum.stored == st && sum.zero == zero,
             "%d x %d x %d (%c%c, %s): %llu TDPBF16PS, %llu TILELOADD, %llu TILESTORED, "
             "%llu TILEZERO on %d thread(s); want %llu, %llu, %llu, %llu", M, N, K,
             ta ? 'T' : 'N', tb ? 'T' : 'N', copies == 1 ? "one product" : "two at once",
             (unsigned long long)sum.dpbf16ps, (unsigned long long)sum.loadd,
             (unsigned long long)sum.stored, (unsigned long long)sum.zero, threads,
             (unsigned long long)dp, (unsigned long long)ld, (unsigned long long)st,
             (unsigned long long)zero);
    TU_CHECK(sum.span_s > 0.0 && sum.span_s == sum.product_span_s &&
                 sum.product_s > sum.span_s && sum.product_s <= wall,
             "  timed: tile spans %.3f ms (the longest thread's; in the products: %.3f) < "
             "products %.3f ms <= the calls' %.3f ms", sum.span_s * 1e3,
             sum.product_span_s * 1e3, sum.product_s * 1e3, wall * 1e3);
}

int main(void)
{
#ifdef _OPENMP
    omp_set_num_threads(2);
    omp_set_max_active_levels(1); /* a product inside a region runs on its thread */
#endif
    unsetenv("GENTRAIN_BF16");
    if (gemm_bf16_init(2) != 0) return 1;
    for (size_t i = 0; i < sizeof A / sizeof A[0]; i++) {
        A[i] = (float)((int)(i % 13) - 6) / 8.0f;
        B[i] = (float)((int)(i % 7) - 3) / 4.0f;
    }
    gemm_bf16_force_path(GEMM_BF16_AMX_EMULATED);
    check_product(1, 1, 1, 0, 0, 1);
    check_product(100, 70, 600, 0, 0, 1);  /* two depth blocks, partial units */
    check_product(64, 2100, 40, 1, 1, 1);  /* two column panels (NC = 2048) */
    check_product(130, 96, 1025, 1, 0, 1); /* three depth blocks, one of 1 */
    check_product(96, 64, 1100, 0, 1, 1);  /* whole blocks only: C loaded for two blocks */
    check_product(33, 40, 64, 0, 1, 2);    /* on each of two threads at once */

    /* (c) timing only: the same counts, no product */
    (void)amx_emul_timing_only(1);
    for (int i = 0; i < 96 * 64; i++) C[i] = 1.0f;
    check_product(96, 64, 1100, 0, 1, 1);
    int zeros = 1;
    for (int i = 0; i < 96 * 64; i++) zeros &= C[i] == 0.0f;
    TU_CHECK(zeros, "timing only: the product computed nothing (C of beta = 0 all zeros)");
    TU_CHECK(amx_emul_timing_only(0) == 1, "timing only: the setting was on");
    gemm_bf16(0, 1, 96, 64, 1100, 1.0f, A, 1100, B, 1100, 0.0f, C, 64);
    int nonzero = 0;
    for (int i = 0; i < 96 * 64; i++) nonzero |= C[i] != 0.0f;
    TU_CHECK(nonzero, "timing off again: the product is computed");

    /* (b) the other paths count nothing */
    const enum gemm_bf16_path others[] = {GEMM_BF16_PORTABLE, GEMM_BF16_AVX512};
    for (int i = 0; i < 2; i++) {
        if (others[i] == GEMM_BF16_AVX512 && cpu_isa_level() < CPU_ISA_AVX512_BF16) {
            printf("     avx512-bf16: not run (this CPU lacks AVX512_BF16)\n");
            continue;
        }
        gemm_bf16_force_path(others[i]);
        amx_emul_counts_reset();
        gemm_bf16(0, 0, 100, 70, 600, 1.0f, A, 600, B, 70, 0.0f, C, 70);
        amx_emul_counts per[4];
        const int n = amx_emul_counts_read(per, 4);
        TU_CHECK(n == 0, "the %s path counts no tile instruction (%d threads counted)",
                 gemm_bf16_path_name(), n);
    }
    gemm_bf16_free();
    printf("%d checks, %d failed\n", tu_checks, tu_failures);
    return tu_failures ? 1 : 0;
}
