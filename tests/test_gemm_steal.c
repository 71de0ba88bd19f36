/* test_gemm_steal — the row strips of a product handed out while it runs
 * (src/kernels/bf16/gemm_steal.h, used by the avx512-bf16 path on a packed weight):
 *
 *   (a) the claims: owners taking their own part's strips from the front, a few at a
 *       time, and every thread then taking the other parts' last strips, run every
 *       strip exactly once, over 300 rounds of 1 to 6 parts and threads, some owners
 *       starting late (so thieves open their parts first) and some parts empty;
 *   (b) the products that hand out their rows (a weight packed once, 700 and 300 rows,
 *       both orientations) give the bits of the same product on one thread, on 2 and 3
 *       threads (3 on a 2-core machine: the threads' progress differs, so strips change
 *       hands), 8 times each, and the bits of the product that packs B itself;
 *   (c) the weight gradients that hand out the rows of their last depth block (rows of
 *       their own, B packed per thread: 900 x 96 x 1100, three depth blocks, and 800 x
 *       130 x 300, one), with the bias gradient's row sums, give the one-thread bits of
 *       C and the sums on 2 and 3 threads, 8 times each. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu_features.h"
#include "gemm_bf16.h"
#include "gemm_bf16_weights.h"
#include "gemm_steal.h"
#include "testutil.h"

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void) { return (uint32_t)(tu_xorshift64(&rs) >> 32); }

static float runif(void) { return (float)((next_u32() >> 8) * 0x1p-24) - 0.5f; }

static void pause_us(long us)
{
    const struct timespec t = {0, us * 1000L};
    nanosleep(&t, NULL);
}

/* (a) */
static void check_claims(void)
{
    enum { ROUNDS = 300, MAX_PARTS = 6, MAX_STRIPS = 40, BIG = 20000 };
    int all_once = 1, rounds_stolen = 0;
    long stolen_total = 0;
    for (int round = 0; round < ROUNDS; round++) {
        const int parts = 1 + round % MAX_PARTS, want = 1 + round % 4;
        int strips[MAX_PARTS], first[MAX_PARTS + 1];
        first[0] = 0;
        /* every fifth round one big part, which the other threads all take from while
         * its owner does: claims on one part at once from every thread */
        const int big = round % 5 == 4;
        for (int p = 0; p < parts; p++) {
            strips[p] = big && p == parts - 1                ? BIG
                        : round % 7 == 3 && p == 0 ? 0
                                                    : (int)(next_u32() % (MAX_STRIPS + 1));
            first[p + 1] = first[p] + strips[p];
        }
        static _Atomic int runs[MAX_PARTS * MAX_STRIPS + BIG];
        for (int i = 0; i < first[parts]; i++) atomic_init(&runs[i], 0);
        gemm_steal_part state[MAX_PARTS];
        gemm_steal_reset(state, parts);
        _Atomic long stolen = 0;
#pragma omp parallel num_threads(parts)
        {
#ifdef _OPENMP
            const int t = omp_get_thread_num(), n = omp_get_num_threads();
#else
            const int t = 0, n = 1;
#endif
            if (n == parts) { /* (a smaller team would leave parts unrun: not a claim's fault) */
                if (t % 2 == 1 && round % 3 == 0) pause_us(300); /* a late owner */
                for (int k = 0; k < parts; k++) {
                    const int p = (t + k) % parts;
                    int s0, s1;
                    gemm_steal_open(&state[p], strips[p]);
                    while (k == 0 ? gemm_steal_front(&state[p], want, &s0, &s1)
                                  : gemm_steal_back(&state[p], &s0, &s1)) {
                        for (int s = s0; s < s1; s++) atomic_fetch_add(&runs[first[p] + s], 1);
                        if (k > 0) atomic_fetch_add(&stolen, s1 - s0);
                    }
                }
            }
        }
        for (int i = 0; i < first[parts]; i++) all_once &= atomic_load(&runs[i]) == 1;
        stolen_total += atomic_load(&stolen);
        rounds_stolen += atomic_load(&stolen) > 0;
    }
    TU_CHECK(all_once, "every strip run exactly once (%d rounds of 1 to 6 parts of up to 40 "
             "strips, one of 20,000 every fifth round, owners taking 1 to 4 at a time, some "
             "starting 0.3 ms late)", ROUNDS);
    TU_CHECK(stolen_total > 0, "strips changed hands: %ld in %d of the rounds", stolen_total,
             rounds_stolen);
}

/* C = A op(W) (fwd: W^T) on `threads` threads */
static float *product(const float *A, const float *W, int rows, int cols, int M, int fwd,
                      int threads)
{
    const int N = fwd ? rows : cols, K = fwd ? cols : rows;
    float *C = malloc((size_t)M * N * sizeof *C);
    if (!C) exit(99);
#ifdef _OPENMP
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    gemm_bf16(0, fwd ? 1 : 0, M, N, K, 1.0f, A, K, W, cols, 0.0f, C, N);
    return C;
}

/* (b) */
static void check_products(void)
{
    static const struct {
        int rows, cols, M;
    } shapes[] = {{384, 200, 700}, {130, 96, 300}};
    int same_threads = 1, same_unpacked = 1, cases = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int rows = shapes[si].rows, cols = shapes[si].cols, M = shapes[si].M;
        const int K_max = rows > cols ? rows : cols;
        float *W = malloc((size_t)rows * cols * sizeof *W);
        float *A = malloc((size_t)M * K_max * sizeof *A);
        if (!W || !A) exit(99);
        for (size_t i = 0; i < (size_t)rows * cols; i++) W[i] = runif();
        for (size_t i = 0; i < (size_t)M * K_max; i++) A[i] = runif();
        for (int fwd = 0; fwd < 2; fwd++) {
            const int N = fwd ? rows : cols;
            const size_t bytes = (size_t)M * N * sizeof(float);
            float *unpacked = product(A, W, rows, cols, M, fwd, 2);
            TU_CHECK(gemm_bf16_weights_add(W, rows, cols) == 0 && gemm_bf16_weights_refresh() == 0,
                     "weight %d x %d registered and packed", rows, cols);
            float *one = product(A, W, rows, cols, M, fwd, 1);
            same_unpacked &= memcmp(one, unpacked, bytes) == 0;
            for (int threads = 2; threads <= 3; threads++)
                for (int rep = 0; rep < 8; rep++) {
                    float *more = product(A, W, rows, cols, M, fwd, threads);
                    same_threads &= memcmp(one, more, bytes) == 0;
                    cases++;
                    free(more);
                }
            gemm_bf16_weights_clear();
            free(one);
            free(unpacked);
        }
        free(W);
        free(A);
    }
#ifdef _OPENMP
    omp_set_num_threads(2);
#endif
    TU_CHECK(same_threads, "products on a packed weight, their rows handed out on 2 and 3 "
             "threads, give the one-thread bits (%d runs: 700 x 384 x 200, 300 x 130 x 96, "
             "both orientations)", cases);
    TU_CHECK(same_unpacked, "... and the bits of the same products packing B themselves");
}

/* (c) */
static void check_weight_gradients(void)
{
    static const struct {
        int M, N, K;
    } shapes[] = {{900, 96, 1100}, {800, 130, 300}};
    int same = 1, cases = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int M = shapes[si].M, N = shapes[si].N, K = shapes[si].K;
        float *A = malloc((size_t)K * M * sizeof *A), *B = malloc((size_t)K * N * sizeof *B);
        float *one = malloc((size_t)M * N * sizeof *one), *C = malloc((size_t)M * N * sizeof *C);
        float *sums1 = calloc((size_t)M, sizeof *sums1), *sums = malloc((size_t)M * sizeof *sums);
        if (!A || !B || !one || !C || !sums1 || !sums) exit(99);
        for (size_t i = 0; i < (size_t)K * M; i++) A[i] = runif();
        for (size_t i = 0; i < (size_t)K * N; i++) B[i] = runif();
        for (int threads = 1; threads <= 3; threads++)
            for (int rep = 0; rep < (threads == 1 ? 1 : 8); rep++) {
#ifdef _OPENMP
                omp_set_num_threads(threads);
#endif
                float *const c = threads == 1 ? one : C, *const rs = threads == 1 ? sums1 : sums;
                memset(rs, 0, (size_t)M * sizeof *rs);
                gemm_bf16_fused(1, 0, M, N, K, 1.0f, A, M, B, N, 0.0f, c, N,
                                &(gemm_bf16_epilogue){.row_sums = rs});
                if (threads == 1) continue;
                same &= memcmp(one, C, (size_t)M * N * sizeof *C) == 0 &&
                        memcmp(sums1, sums, (size_t)M * sizeof *sums) == 0;
                cases++;
            }
        free(A), free(B), free(one), free(C), free(sums1), free(sums);
    }
#ifdef _OPENMP
    omp_set_num_threads(2);
#endif
    TU_CHECK(same, "weight gradients handing out their last depth block's rows give the "
             "one-thread bits of C and of the row sums on 2 and 3 threads (%d runs: 900 x 96 "
             "x 1100, 800 x 130 x 300)", cases);
}

int main(void)
{
    check_claims();
    TU_CHECK(gemm_bf16_init(3) == 0, "buffers reserved for 3 threads");
    if (cpu_isa_level() >= CPU_ISA_AVX512_BF16) {
        gemm_bf16_force_path(GEMM_BF16_AVX512);
        check_products();
        check_weight_gradients();
    } else {
        printf("     products: not run (this CPU lacks AVX512_BF16, whose path hands out "
               "rows); the claims above are the whole check here\n");
    }
    gemm_bf16_free();
    printf("%d checks, %d failed\n", tu_checks, tu_failures);
    return tu_failures ? 1 : 0;
}
