/* noise_scale — see noise_scale.h. */
#include "noise_scale.h"

#include <math.h>

double gns_update(gns_state *s, double g_small2, double g_big2, double b_small,
                  double b_big, double beta)
{
    if (!(b_big > b_small) || !(b_small > 0) || !isfinite(g_small2) || !isfinite(g_big2))
        return gns_value(s);
    /* The two-point solution of E|g_b|^2 = |G|^2 + tr(Sigma)/b. */
    const double g_true2 = (b_big * g_big2 - b_small * g_small2) / (b_big - b_small);
    const double trace = (g_small2 - g_big2) / (1.0 / b_small - 1.0 / b_big);
    s->ema_g2 = beta * s->ema_g2 + (1.0 - beta) * g_true2;
    s->ema_s = beta * s->ema_s + (1.0 - beta) * trace;
    s->weight = beta * s->weight + (1.0 - beta);
    return gns_value(s);
}

double gns_value(const gns_state *s)
{
    if (!(s->weight > 0)) return NAN;
    /* the bias correction divides both EMAs by the same weight: it cancels in the
     * ratio, but the sign test needs the corrected |G|^2 only to be positive */
    const double g2 = s->ema_g2 / s->weight, tr = s->ema_s / s->weight;
    return g2 > 0.0 ? tr / g2 : NAN;
}

double gns_micro_sq(double acc_sq, double dot, double prev_sq, int accum)
{
    /* acc_k - acc_(k-1) = g_k / accum */
    const double d = acc_sq - 2.0 * dot + prev_sq;
    return (d > 0.0 ? d : 0.0) * (double)accum * (double)accum;
}

enum { CHUNK = 16384 };

void gns_sums(const float *a, const float *b, size_t n, double *aa, double *ab)
{
    const size_t chunks = (n + CHUNK - 1) / CHUNK;
    double sa = 0.0, sb = 0.0;
    /* Chunks of fixed size: a chunk's sums do not depend on which thread computed
     * them, and the ordered block adds them into the shared totals in chunk order (no
     * reduction clause: its combining order is unspecified). */
#pragma omp parallel for ordered schedule(static)
    for (size_t c = 0; c < chunks; c++) {
        const size_t lo = c * CHUNK, hi = lo + CHUNK < n ? lo + CHUNK : n;
        double pa = 0.0, pb = 0.0;
        for (size_t i = lo; i < hi; i++) pa += (double)a[i] * a[i];
        if (b)
            for (size_t i = lo; i < hi; i++) pb += (double)a[i] * b[i];
#pragma omp ordered
        {
            sa += pa;
            sb += pb;
        }
    }
    *aa = sa;
    if (ab) *ab = sb;
}
