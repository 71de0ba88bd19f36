/* test_lossscale — the host side of mixed precision: FP16 gradients unscaled into FP32
 * (overwrite and accumulate, SIMD and scalar conversion), inf/NaN anywhere detected
 * (including the last value of a partial chunk), the variant that also sums the squares
 * (the global norm without a second pass), the same for FP32 gradients (the host's
 * part of offload = blocks), and the dynamic loss scale (halve and skip on overflow,
 * double after the growth interval, bounded). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "lossscale.h"
#include "testutil.h"

static void test_unscale(int simd)
{
    half_allow_simd(simd);
    const char *path = half_path_name();
    enum { N = 10007 }; /* not a multiple of the chunk size */
    float *src = malloc(N * sizeof *src), *dst = malloc(N * sizeof *dst);
    uint16_t *h = malloc(N * sizeof *h);
    if (!src || !dst || !h) {
        TU_CHECK(0, "out of memory");
        goto done;
    }
    /* Scaled gradients as the GPU sends them: a spread of magnitudes. */
    for (int i = 0; i < N; i++) src[i] = (float)((i % 97) - 48) * 37.0f * (1.0f + (float)i / N);
    half_from_float(h, src, N);
    const float inv = 1.0f / 1024.0f;
    int bad = unscale_half_grads(dst, h, N, inv, 0, 2);
    int wrong = 0;
    for (int i = 0; i < N; i++)
        if (dst[i] != half_to_float_scalar(h[i]) * inv) wrong++;
    TU_CHECK(bad == 0 && wrong == 0, "%s: finite gradients unscaled exactly (%d wrong)", path,
             wrong);

    bad = unscale_half_grads(dst, h, N, inv, 1, 3);
    wrong = 0;
    for (int i = 0; i < N; i++)
        if (dst[i] != 2.0f * (half_to_float_scalar(h[i]) * inv)) wrong++;
    TU_CHECK(bad == 0 && wrong == 0, "%s: accumulate adds (%d wrong)", path, wrong);

    /* One inf or NaN anywhere: first, middle, the last of a partial chunk. */
    const int where[] = {0, 4095, 4096, 5000, N - 1};
    const uint16_t specials[] = {0x7C00 /* +inf */, 0xFC00 /* -inf */, 0x7E00 /* NaN */};
    int missed = 0, tries = 0;
    for (size_t w = 0; w < sizeof where / sizeof *where; w++)
        for (size_t k = 0; k < sizeof specials / sizeof *specials; k++) {
            uint16_t keep = h[where[w]];
            h[where[w]] = specials[k];
            missed += unscale_half_grads(dst, h, N, inv, 0, 2) != 1;
            tries++;
            h[where[w]] = keep;
        }
    TU_CHECK(missed == 0, "%s: inf/NaN found in %d of %d placements", path, tries - missed,
             tries);
    TU_CHECK(unscale_half_grads(dst, h, 0, inv, 0, 2) == 0, "%s: empty buffer is clean", path);
done:
    free(src);
    free(dst);
    free(h);
    half_allow_simd(1);
}

/* unscale_half_grads_sumsq: dst exactly as unscale_half_grads writes it, and the sum of
 * the squares of dst afterwards against a plain double sum in index order (another
 * order, so to a relative 1e-12), for lengths of none, part of one, exactly one and
 * several chunks (4096) with a partial last one, on 1 to 3 threads, overwriting and
 * accumulating; bitwise repeatable for a thread count; inf/NaN still found. */
static void test_unscale_sumsq(void)
{
    enum { NMAX = 3 * 4096 + 5 };
    const size_t ns[] = {0, 1, 7, 4095, 4096, 4097, 10007, NMAX};
    float *src = malloc(NMAX * sizeof *src), *dst = malloc(NMAX * sizeof *dst);
    float *want = malloc(NMAX * sizeof *want);
    uint16_t *h = malloc(NMAX * sizeof *h);
    if (!src || !dst || !want || !h) {
        TU_CHECK(0, "out of memory");
        goto done;
    }
    for (int i = 0; i < NMAX; i++)
        src[i] = (float)((i * 7919 % 211) - 105) * 13.0f * (1.0f + (float)i / NMAX);
    half_from_float(h, src, NMAX);
    const float inv = 1.0f / 512.0f;
    int wrong_dst = 0, wrong_sum = 0, not_repeatable = 0, flagged = 0, cases = 0;
    double worst = 0.0;
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++)
        for (int threads = 1; threads <= 3; threads++)
            for (int acc = 0; acc <= 1; acc++) {
                const size_t n = ns[k];
                /* What dst holds before: for accumulate, a first micro-batch. */
                for (size_t i = 0; i < n; i++) dst[i] = want[i] = 0.25f * (float)(i % 5);
                flagged |= unscale_half_grads(want, h, n, inv, acc, threads);
                double got = -1.0;
                flagged |= unscale_half_grads_sumsq(dst, h, n, inv, acc, threads, &got);
                double ref = 0.0;
                for (size_t i = 0; i < n; i++) {
                    wrong_dst += memcmp(&dst[i], &want[i], sizeof(float)) != 0;
                    ref += (double)want[i] * (double)want[i];
                }
                const double rel = n ? tu_relerr(got, ref, 1e-300) : fabs(got);
                worst = fmax(worst, rel);
                wrong_sum += !(rel < 1e-12);
                /* The same call again on the same input: the same bits. */
                for (size_t i = 0; i < n; i++) dst[i] = 0.25f * (float)(i % 5);
                double again = -1.0;
                flagged |= unscale_half_grads_sumsq(dst, h, n, inv, acc, threads, &again);
                not_repeatable += memcmp(&got, &again, sizeof got) != 0;
                cases++;
            }
    TU_CHECK(!flagged, "sumsq: finite gradients not flagged");
    TU_CHECK(wrong_dst == 0, "sumsq: dst as unscale_half_grads writes it (%d values differ)",
             wrong_dst);
    TU_CHECK(wrong_sum == 0, "sumsq: sum of squares matches a double sum in %d of %d cases "
             "(worst relative %.2e)", cases - wrong_sum, cases, worst);
    TU_CHECK(not_repeatable == 0, "sumsq: bitwise repeatable (%d of %d cases differ)",
             not_repeatable, cases);

    const int where[] = {0, 4095, 4096, NMAX - 1};
    const uint16_t specials[] = {0x7C00, 0xFC00, 0x7E00};
    int missed = 0, tries = 0;
    for (size_t w = 0; w < sizeof where / sizeof *where; w++)
        for (size_t k = 0; k < sizeof specials / sizeof *specials; k++) {
            const uint16_t keep = h[where[w]];
            h[where[w]] = specials[k];
            double sq = 0.0;
            missed += unscale_half_grads_sumsq(dst, h, NMAX, inv, 0, 2, &sq) != 1;
            tries++;
            h[where[w]] = keep;
        }
    TU_CHECK(missed == 0, "sumsq: inf/NaN found in %d of %d placements", tries - missed, tries);
done:
    free(src);
    free(dst);
    free(want);
    free(h);
}

/* The FP32 variant (offload = blocks: the host's embedding and head gradients). */
static void test_unscale_float(void)
{
    enum { N = 10007 };
    float *src = malloc(N * sizeof *src), *dst = malloc(N * sizeof *dst);
    if (!src || !dst) {
        TU_CHECK(0, "out of memory");
        goto done;
    }
    for (int i = 0; i < N; i++) src[i] = (float)((i % 97) - 48) * 1e5f * (1.0f + (float)i / N);
    const float inv = 1.0f / 65536.0f;
    int bad = unscale_float_grads(dst, src, N, inv, 0, 2);
    int wrong = 0;
    for (int i = 0; i < N; i++) wrong += dst[i] != src[i] * inv;
    TU_CHECK(bad == 0 && wrong == 0, "fp32: finite gradients unscaled exactly (%d wrong)",
             wrong);
    bad = unscale_float_grads(dst, src, N, inv, 1, 3);
    wrong = 0;
    for (int i = 0; i < N; i++) wrong += dst[i] != 2.0f * (src[i] * inv);
    TU_CHECK(bad == 0 && wrong == 0, "fp32: accumulate adds (%d wrong)", wrong);
    const int where[] = {0, 4095, 4096, N - 1};
    const float specials[] = {INFINITY, -INFINITY, NAN};
    int missed = 0, tries = 0;
    for (size_t w = 0; w < sizeof where / sizeof *where; w++)
        for (size_t k = 0; k < sizeof specials / sizeof *specials; k++) {
            const float keep = src[where[w]];
            src[where[w]] = specials[k];
            missed += unscale_float_grads(dst, src, N, inv, 0, 2) != 1;
            tries++;
            src[where[w]] = keep;
        }
    TU_CHECK(missed == 0, "fp32: inf/NaN found in %d of %d placements", tries - missed, tries);
done:
    free(src);
    free(dst);
}

static void test_scaler(void)
{
    loss_scaler s;
    loss_scaler_init(&s, 0.0f, 0);
    TU_CHECK(s.scale == LOSS_SCALE_INIT && s.growth_interval == LOSS_SCALE_GROWTH_INTERVAL,
             "defaults: scale %g, growth interval %d", s.scale, s.growth_interval);

    loss_scaler_init(&s, 65536.0f, 3);
    loss_scale_event e = loss_scaler_update(&s, 1);
    TU_CHECK(e == LOSS_SCALE_SKIPPED && s.scale == 32768.0f && s.skipped == 1,
             "overflow: skip and halve (scale %g)", s.scale);
    e = loss_scaler_update(&s, 0);
    loss_scale_event e2 = loss_scaler_update(&s, 0);
    TU_CHECK(e == LOSS_SCALE_KEPT && e2 == LOSS_SCALE_KEPT && s.scale == 32768.0f,
             "two clean steps of three: unchanged");
    e = loss_scaler_update(&s, 0);
    TU_CHECK(e == LOSS_SCALE_GREW && s.scale == 65536.0f, "third clean step: doubled (%g)",
             s.scale);
    loss_scaler_update(&s, 0);
    loss_scaler_update(&s, 1);
    loss_scaler_update(&s, 0);
    loss_scaler_update(&s, 0);
    TU_CHECK(s.scale == 32768.0f && s.skipped == 2,
             "an overflow restarts the count of clean steps (scale %g)", s.scale);

    loss_scaler_init(&s, 2.0f, 1);
    for (int i = 0; i < 10; i++) loss_scaler_update(&s, 1);
    TU_CHECK(s.scale == 1.0f && s.skipped == 10, "never below 1 (%g)", s.scale);
    loss_scaler_init(&s, LOSS_SCALE_MAX, 1);
    e = loss_scaler_update(&s, 0);
    TU_CHECK(e == LOSS_SCALE_KEPT && s.scale == LOSS_SCALE_MAX, "never above 2^24 (%g)",
             s.scale);
}

int main(void)
{
    test_unscale(1);
    test_unscale(0);
    test_unscale_sumsq();
    test_unscale_float();
    test_scaler();
    return tu_finish();
}
