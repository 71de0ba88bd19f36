/* test_noise — the gradient noise scale estimator (src/train/noise_scale.h) against a
 * synthetic gradient distribution with a known B_noise:
 *  - per-token gradients G + e with Cov(e) = s2 I in D dimensions, so a batch of b
 *    tokens has E|g_b|^2 = |G|^2 + D s2 / b and B_noise = D s2 / |G|^2 exactly;
 *  - a step accumulates A micro-batches with weight 1/A in a float buffer, as the
 *    trainer does, and each micro-batch's own |g_k|^2 comes from the accumulator's
 *    sums before and after it (gns_micro_sq), which must equal the direct norm;
 *  - long smoothing recovers B_noise within 5%; the trainer's smoothing (GNS_BETA)
 *    averaged over a run within 10%, and its spread is what docs/adaptive-batch.md
 *    states as the error of one estimate;
 *  - no gradient signal gives NaN, unusable input leaves the state alone;
 *  - gns_sums gives the same bits on 1 and 3 threads. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "noise_scale.h"
#include "testutil.h"

enum { D = 4096, A = 4 };

static uint64_t rng_state = 88172645463325252ull;

static double uniform(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return ((double)(rng_state >> 11) + 0.5) * 0x1p-53;
}

static double gauss(void)
{
    return sqrt(-2.0 * log(uniform())) * cos(2.0 * M_PI * uniform());
}

/* One step: A micro-batches of b_small tokens into acc; returns the mean over them of
 * |g_k|^2 through the accumulator sums, *big = |acc|^2, *worst = the largest relative
 * difference between that and the direct norm of g_k. */
static double one_step(float *acc, float *prev, float *g, double g_i, double sd,
                       double *big, double *worst)
{
    double small = 0.0, prev_sq = 0.0;
    memset(acc, 0, D * sizeof *acc);
    for (int k = 0; k < A; k++) {
        double direct = 0.0;
        for (int i = 0; i < D; i++) {
            g[i] = (float)(g_i + sd * gauss());
            direct += (double)g[i] * g[i];
            acc[i] += g[i] / (float)A;
        }
        double sq, dot = 0.0;
        gns_sums(acc, k > 0 ? prev : NULL, D, &sq, &dot);
        const double micro = gns_micro_sq(sq, dot, prev_sq, A);
        const double rel = fabs(micro - direct) / direct;
        if (rel > *worst) *worst = rel;
        small += micro;
        prev_sq = sq;
        memcpy(prev, acc, D * sizeof *acc);
    }
    gns_sums(acc, NULL, D, big, NULL);
    return small / A;
}

static void test_known_noise_scale(void)
{
    const double g2 = 1.0, b_noise = 2000.0, b_small = 256.0;
    const double s2 = b_noise * g2 / D, g_i = sqrt(g2 / D), sd = sqrt(s2 / b_small);
    float *acc = malloc(D * sizeof *acc), *prev = malloc(D * sizeof *prev),
          *g = malloc(D * sizeof *g);
    if (!acc || !prev || !g) {
        TU_CHECK(0, "out of memory");
        goto done;
    }
    gns_state slow = {0}, fast = {0};
    double worst = 0.0, fast_sum = 0.0, fast_sq = 0.0, est = NAN;
    int n_fast = 0;
    enum { STEPS = 1500, BURN = 50 };
    for (int step = 0; step < STEPS; step++) {
        double big;
        const double small = one_step(acc, prev, g, g_i, sd, &big, &worst);
        est = gns_update(&slow, small, big, b_small, b_small * A, 0.995);
        const double f = gns_update(&fast, small, big, b_small, b_small * A, GNS_BETA);
        if (step >= BURN && isfinite(f)) {
            fast_sum += f;
            fast_sq += f * f;
            n_fast++;
        }
    }
    TU_CHECK(worst < 1e-3, "|g_k|^2 from the accumulator's sums = the direct norm "
             "(worst relative difference %.2e)", worst);
    TU_CHECK(fabs(est - b_noise) < 0.05 * b_noise,
             "long smoothing: B_noise %.0f tokens, true %.0f (within 5%%)", est, b_noise);
    const double mean = fast_sum / n_fast, sdev = sqrt(fast_sq / n_fast - mean * mean);
    TU_CHECK(n_fast == STEPS - BURN && fabs(mean - b_noise) < 0.10 * b_noise,
             "GNS_BETA smoothing: mean over %d estimates %.0f tokens (within 10%% of %.0f)",
             n_fast, mean, b_noise);
    TU_CHECK(sdev / b_noise < 0.10,
             "GNS_BETA smoothing: one estimate's spread %.0f%% of B_noise (A = %d "
             "micro-batches, D = %d)", 100.0 * sdev / b_noise, A, D);
done:
    free(acc);
    free(prev);
    free(g);
}

static void test_edges(void)
{
    gns_state s = {0};
    TU_CHECK(isnan(gns_value(&s)), "no estimate yet: NaN");
    /* pure noise: |G|^2 estimated <= 0 */
    const double v = gns_update(&s, 2.0, 0.5, 100.0, 400.0, 0.8);
    TU_CHECK(isnan(v), "no gradient signal (|G|^2 estimate -0.5): NaN");
    const gns_state before = s;
    gns_update(&s, NAN, 1.0, 100.0, 400.0, 0.8);
    gns_update(&s, 1.0, 1.0, 400.0, 400.0, 0.8);
    TU_CHECK(memcmp(&s, &before, sizeof s) == 0,
             "a NaN norm or b_big = b_small leaves the state alone");
    /* exact two-point solution: |G|^2 = 1, tr = 100 -> |g_100|^2 = 2, |g_400|^2 = 1.25 */
    gns_state t = {0};
    const double b = gns_update(&t, 2.0, 1.25, 100.0, 400.0, 0.8);
    TU_CHECK(fabs(b - 100.0) < 1e-9, "two-point solution: B_noise %.6f, expected 100", b);
    TU_CHECK(fabs(gns_micro_sq(1.0, 0.0, 0.0, 3) - 9.0) < 1e-12,
             "first micro-batch of 3: |g|^2 = 9 |acc|^2");
}

static void test_deterministic_sums(void)
{
    enum { N = 100003 };
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    if (!a || !b) {
        TU_CHECK(0, "out of memory");
        free(a);
        free(b);
        return;
    }
    for (int i = 0; i < N; i++) {
        a[i] = (float)gauss();
        b[i] = (float)gauss();
    }
    double aa1, ab1, aa3, ab3;
#ifdef _OPENMP
    omp_set_num_threads(1);
#endif
    gns_sums(a, b, N, &aa1, &ab1);
#ifdef _OPENMP
    omp_set_num_threads(3);
#endif
    gns_sums(a, b, N, &aa3, &ab3);
    TU_CHECK(aa1 == aa3 && ab1 == ab3, "gns_sums: the same bits on 1 and 3 threads "
             "(%a %a / %a %a)", aa1, ab1, aa3, ab3);
    double ref = 0.0;
    for (int i = 0; i < N; i++) ref += (double)a[i] * a[i];
    TU_CHECK(tu_relerr(aa1, ref, 1e-30) < 1e-12, "gns_sums: |a|^2 %.9g, serial %.9g", aa1, ref);
    free(a);
    free(b);
}

int main(void)
{
    test_known_noise_scale();
    test_edges();
    test_deterministic_sums();
    printf("%d checks, %d failed\n", tu_checks, tu_failures);
    return tu_failures ? 1 : 0;
}
