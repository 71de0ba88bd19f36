/* test_half — fp16 conversion for gradients on the wire (src/kernels/simd/half.h).
 *  - every one of the 65536 halves converts to float and back to the same bits (NaNs:
 *    stay NaN, made quiet), through the scalar path and the dispatched (F16C) path;
 *  - float -> half rounds to nearest, ties to even, against a reference that searches
 *    the sorted table of halves: every midpoint between neighbouring halves, the
 *    floats just above and below each midpoint, the overflow edge, and random floats;
 *    the scalar and the F16C paths agree on all of them;
 *  - half_add (the fp16 reduction) is the rounded float sum. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "half.h"
#include "testutil.h"

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static int is_nan_half(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu); }

/* Reference float -> half for non-NaN x: the nearest of the finite halves (searched in
 * double, in which every half and every float is exact), ties to the even bit pattern,
 * and inf from 65520 (the midpoint between 65504 and the next power of two) on. */
static uint16_t ref_half(float x)
{
    const uint16_t sign = signbit(x) ? 0x8000u : 0;
    const double a = fabs((double)x);
    if (a >= 65520.0) return sign | 0x7c00u;
    /* positive finite halves 0..0x7bff are increasing in value: binary search */
    unsigned lo = 0, hi = 0x7bffu;
    while (hi - lo > 1) {
        unsigned mid = (lo + hi) / 2;
        if ((double)half_to_float_scalar((uint16_t)mid) <= a) lo = mid; else hi = mid;
    }
    const double dl = a - half_to_float_scalar((uint16_t)lo),
                 dh = half_to_float_scalar((uint16_t)hi) - a;
    unsigned pick = dl < dh ? lo : dh < dl ? hi : ((lo & 1u) ? hi : lo);
    return (uint16_t)(sign | pick);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* Checks both paths on xs[n] against the reference; returns the mismatches. */
static long check_rounding(const float *xs, size_t n, const char *what)
{
    static uint16_t simd[1 << 20], scalar[1 << 20];
    half_allow_simd(1);
    half_from_float(simd, xs, n);
    half_allow_simd(0);
    half_from_float(scalar, xs, n);
    half_allow_simd(1);
    long bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t want = ref_half(xs[i]);
        if (simd[i] != want || scalar[i] != want) {
            if (bad < 5)
                printf("    %s: %.9g -> %04x (dispatched) %04x (scalar), want %04x\n", what,
                       (double)xs[i], simd[i], scalar[i], want);
            bad++;
        }
    }
    return bad;
}

int main(void)
{
    printf("# dispatched path: %s\n", half_path_name());

    /* All 65536 halves: half -> float -> half. */
    static uint16_t all[65536], back[65536], back_s[65536];
    static float f[65536], f_s[65536];
    for (unsigned i = 0; i < 65536; i++) all[i] = (uint16_t)i;
    half_to_float(f, all, 65536);
    half_from_float(back, f, 65536);
    half_allow_simd(0);
    half_to_float(f_s, all, 65536);
    half_from_float(back_s, f_s, 65536);
    half_allow_simd(1);
    long rt_bad = 0, nan_bad = 0, agree_bad = 0;
    for (unsigned i = 0; i < 65536; i++) {
        if (memcmp(&f[i], &f_s[i], sizeof(float)) != 0 || back[i] != back_s[i]) agree_bad++;
        if (is_nan_half(all[i])) {
            if (!isnan(f[i]) || back[i] != (all[i] | 0x200u)) nan_bad++;
        } else if (back[i] != all[i]) {
            rt_bad++;
        }
    }
    TU_CHECK(rt_bad == 0, "all 63488 non-NaN halves round-trip through float (%ld differ)",
             rt_bad);
    TU_CHECK(nan_bad == 0, "all 2046 NaN halves stay NaN, made quiet (%ld differ)", nan_bad);
    TU_CHECK(agree_bad == 0, "scalar and dispatched paths agree on all halves (%ld differ)",
             agree_bad);
    TU_CHECK(half_to_float_scalar(0x3c00) == 1.0f && half_to_float_scalar(0x0001) ==
             ldexpf(1.0f, -24) && half_to_float_scalar(0x7bff) == 65504.0f,
             "1.0, the smallest subnormal and the largest half convert exactly");

    /* Midpoints between neighbouring positive halves, and a float either side. */
    static float xs[1 << 20];
    size_t n = 0;
    for (unsigned h = 0; h < 0x7bffu; h++) {
        double lo = half_to_float_scalar((uint16_t)h), hi = half_to_float_scalar((uint16_t)(h + 1));
        float mid = (float)((lo + hi) / 2); /* exact: halves have 11 significant bits */
        xs[n++] = mid;
        xs[n++] = -mid;
        xs[n++] = nextafterf(mid, 0.0f);
        xs[n++] = nextafterf(mid, INFINITY);
    }
    long bad = check_rounding(xs, n, "midpoints");
    TU_CHECK(bad == 0, "%zu midpoints and their neighbours round to nearest even (%ld differ)",
             n, bad);

    n = 0;
    const float edge[] = {65504.0f, 65519.99f, 65520.0f, 65536.0f, 1e30f, INFINITY,
                          -INFINITY, 0.0f, -0.0f, ldexpf(1.0f, -25), ldexpf(1.5f, -25),
                          ldexpf(1.0f, -26), ldexpf(1.0f, -149), ldexpf(1.0f, -14),
                          nextafterf(ldexpf(1.0f, -14), 0.0f)};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) xs[n++] = edge[i];
    while (n < (1 << 20)) {
        /* random finite floats, biased towards the half range */
        uint32_t u = next_u32();
        uint32_t e = 90 + (u >> 24) % 60; /* 2^-37 .. 2^22 */
        float x = from_bits((u & 0x807fffffu) | (e << 23));
        xs[n++] = x;
    }
    bad = check_rounding(xs, n, "random");
    TU_CHECK(bad == 0, "%zu edge and random floats round like the reference (%ld differ)", n,
             bad);

    /* half_add: rounded float sum, both paths. */
    static uint16_t a[4099], b[4099], s1[4099], s2[4099];
    long add_bad = 0;
    for (int i = 0; i < 4099; i++) {
        a[i] = (uint16_t)(next_u32() & 0x7bffu) | (uint16_t)(next_u32() & 0x8000u);
        b[i] = (uint16_t)(next_u32() & 0x7bffu) | (uint16_t)(next_u32() & 0x8000u);
    }
    memcpy(s1, a, sizeof a);
    memcpy(s2, a, sizeof a);
    half_add(s1, b, 4099);
    half_allow_simd(0);
    half_add(s2, b, 4099);
    half_allow_simd(1);
    for (int i = 0; i < 4099; i++) {
        uint16_t want = ref_half(half_to_float_scalar(a[i]) + half_to_float_scalar(b[i]));
        if (s1[i] != want || s2[i] != want) add_bad++;
    }
    TU_CHECK(add_bad == 0, "half_add is the rounded float sum on both paths (%ld differ)",
             add_bad);

    printf("%d checks, %d failed\n", tu_checks, tu_failures);
    return tu_failures ? 1 : 0;
}
