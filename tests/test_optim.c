/* optim: the learning-rate schedule at its landmarks, global norm and clip factor against
 * double sums, the clip folded into AdamW bit-identical to clipping in place first, and
 * AdamW against a plain double-precision transcription of the update rule (decay on
 * matrices only) over several steps; tensors taken over by the caller
 * (adamw_step_taking) give adamw_step's bits. */
#include <math.h>
#include <string.h>

#include "optim.h"
#include "rng.h"
#include "testutil.h"

static void test_schedule(void)
{
    const double lr = 1e-3, min_lr = 1e-4;
    TU_CHECK(fabs(lr_at_step(0, 100, 2000, lr, min_lr) - lr / 100) < 1e-15,
             "warmup starts at lr/warmup");
    TU_CHECK(fabs(lr_at_step(49, 100, 2000, lr, min_lr) - lr * 0.5) < 1e-15,
             "warmup is linear (step 49 -> lr/2)");
    TU_CHECK(fabs(lr_at_step(100, 100, 2000, lr, min_lr) - lr) < 1e-15,
             "cosine starts at lr right after warmup");
    double mid = lr_at_step(100 + 950, 100, 2001, lr, min_lr); /* span 1900 */
    TU_CHECK(fabs(mid - 0.5 * (lr + min_lr)) < 1e-6 * lr, "cosine midpoint is (lr+min_lr)/2 (%g)", mid);
    TU_CHECK(fabs(lr_at_step(1999, 100, 2000, lr, min_lr) - min_lr) < 1e-15,
             "last step is at min_lr");
    TU_CHECK(fabs(lr_at_step(5000, 100, 2000, lr, min_lr) - min_lr) < 1e-15,
             "past the end stays at min_lr");
    int monotone = 1;
    for (int64_t s = 101; s < 2000; s++)
        if (lr_at_step(s, 100, 2000, lr, min_lr) > lr_at_step(s - 1, 100, 2000, lr, min_lr))
            monotone = 0;
    TU_CHECK(monotone, "decay never increases the lr");
    TU_CHECK(fabs(lr_at_step(0, 0, 10, lr, min_lr) - lr) < 1e-15, "no warmup starts at lr");
}

static void test_norm_and_clip(void)
{
    enum { N = 100003 };
    float *g = malloc(N * sizeof(float));
    if (!g) exit(99);
    rng r;
    rng_seed(&r, 3);
    double ref = 0.0;
    for (int i = 0; i < N; i++) {
        g[i] = rng_normal(&r);
        ref += (double)g[i] * g[i];
    }
    ref = sqrt(ref);
    double norm = grad_global_norm(g, N);
    TU_CHECK(tu_relerr(norm, ref, 1e-12) < 1e-12, "global norm %.9f vs double %.9f", norm, ref);
    TU_CHECK(grad_global_norm(g, N) == norm, "global norm is bitwise repeatable");
    const float f = grad_clip_factor(norm, 1.0);
    TU_CHECK(f == (float)(1.0 / (norm + 1e-6)), "clip factor is (float)(clip / (norm + 1e-6)) "
             "(%.9g)", f);
    double after = 0.0;
    for (int i = 0; i < N; i++) after += (double)(g[i] * f) * (g[i] * f);
    after = sqrt(after);
    TU_CHECK(fabs(after - 1.0) < 1e-5, "clipped norm is 1 (%.7f), factor %.3g", after, f);
    TU_CHECK(grad_clip_factor(after, 5.0) == 1.0f, "no clipping below the threshold");
    TU_CHECK(grad_clip_factor(5.0, 5.0) == 1.0f, "no clipping at the threshold");
    TU_CHECK(grad_clip_factor(norm, 0.0) == 1.0f && grad_clip_factor(norm, -1.0) == 1.0f,
             "clip <= 0 disables clipping");
    TU_CHECK(grad_clip_factor(NAN, 1.0) == 1.0f, "a NaN norm gives factor 1, not NaN");
    free(g);
}

/* The clip folded into the update (grad_scale) against clipping in place first and then
 * stepping with factor 1: parameters and moments bit-identical over several steps, on a
 * buffer long enough for the SIMD body, its tail and the OpenMP split; both with a
 * factor < 1 and with factor 1 (norm under the threshold). */
static void test_folded_clip(void)
{
    enum { NW = 60000, NB = 3001, N = NW + NB, STEPS = 4 };
    gpt_param_info info[2] = {
        {.name = "w", .ndim = 2, .shape = {60, 1000}, .offset = 0, .numel = NW, .decay = 1},
        {.name = "b", .ndim = 1, .shape = {NB, 0}, .offset = NW, .numel = NB, .decay = 0},
    };
    const double clips[] = {1.0, 1e6}; /* factor < 1 every step; factor 1 every step */
    for (int c = 0; c < 2; c++) {
        float *p_new = malloc(N * sizeof(float)), *p_old = malloc(N * sizeof(float));
        float *p_raw = malloc(N * sizeof(float));
        float *g = malloc(N * sizeof(float)), *g_keep = malloc(N * sizeof(float));
        adamw_state s_new, s_old, s_raw;
        if (!p_new || !p_old || !p_raw || !g || !g_keep || adamw_init(&s_new, N) != 0 ||
            adamw_init(&s_old, N) != 0 || adamw_init(&s_raw, N) != 0)
            exit(99);
        rng r;
        rng_seed(&r, 17);
        for (int i = 0; i < N; i++) p_new[i] = p_old[i] = p_raw[i] = 0.02f * rng_normal(&r);
        int factors_ok = 1, grads_kept = 1;
        for (int t = 0; t < STEPS; t++) {
            for (int i = 0; i < N; i++) g_keep[i] = g[i] = rng_normal(&r);
            const double norm = grad_global_norm(g, N);
            const float f = grad_clip_factor(norm, clips[c]);
            factors_ok &= c == 0 ? f < 1.0f : f == 1.0f;
            /* New: the factor inside the update; the gradients stay as they were. */
            adamw_step(&s_new, p_new, g, f, info, 2, 3e-3, 0.9, 0.95, 1e-8, 0.1);
            grads_kept &= memcmp(g, g_keep, N * sizeof(float)) == 0;
            /* Without any clip, to show the clip changes the result when f < 1. */
            adamw_step(&s_raw, p_raw, g, 1.0f, info, 2, 3e-3, 0.9, 0.95, 1e-8, 0.1);
            /* Old: a separate pass scaling the gradients in place, then the update. */
            if (f != 1.0f)
                for (int i = 0; i < N; i++) g[i] *= f;
            adamw_step(&s_old, p_old, g, 1.0f, info, 2, 3e-3, 0.9, 0.95, 1e-8, 0.1);
        }
        const int same = memcmp(p_new, p_old, N * sizeof(float)) == 0 &&
                         memcmp(s_new.m, s_old.m, N * sizeof(float)) == 0 &&
                         memcmp(s_new.v, s_old.v, N * sizeof(float)) == 0;
        const int differs = memcmp(p_new, p_raw, N * sizeof(float)) != 0;
        TU_CHECK(factors_ok, "clip %g: factor %s on every step", clips[c],
                 c == 0 ? "< 1" : "== 1");
        TU_CHECK(same, "clip %g: folded clip is bit-identical to clip-then-step after %d steps "
                 "(parameters, m, v)", clips[c], STEPS);
        TU_CHECK(grads_kept, "clip %g: adamw_step leaves the gradients unchanged", clips[c]);
        if (c == 0)
            TU_CHECK(differs, "clip %g: the clipped update differs from the unclipped one",
                     clips[c]);
        else
            TU_CHECK(!differs, "clip %g: factor 1 is the unclipped update, bit for bit",
                     clips[c]);
        adamw_free(&s_new);
        adamw_free(&s_old);
        adamw_free(&s_raw);
        free(p_new);
        free(p_old);
        free(p_raw);
        free(g);
        free(g_keep);
    }
}

static void test_adamw(void)
{
    /* Two tensors: a matrix (decayed) and a bias (not). */
    gpt_param_info info[2] = {
        {.name = "w", .ndim = 2, .shape = {3, 5}, .offset = 0, .numel = 15, .decay = 1},
        {.name = "b", .ndim = 1, .shape = {7, 0}, .offset = 15, .numel = 7, .decay = 0},
    };
    enum { N = 22, STEPS = 5 };
    float p[N], g[N];
    double pr[N], mr[N] = {0}, vr[N] = {0};
    rng r;
    rng_seed(&r, 11);
    for (int i = 0; i < N; i++) pr[i] = p[i] = rng_normal(&r);
    adamw_state s;
    if (adamw_init(&s, N) != 0) exit(99);
    const double lr = 3e-3, b1 = 0.9, b2 = 0.99, eps = 1e-8, wd = 0.1;
    for (int t = 1; t <= STEPS; t++) {
        for (int i = 0; i < N; i++) g[i] = rng_normal(&r);
        adamw_step(&s, p, g, 1.0f, info, 2, lr, b1, b2, eps, wd);
        for (int i = 0; i < N; i++) {
            mr[i] = b1 * mr[i] + (1 - b1) * g[i];
            vr[i] = b2 * vr[i] + (1 - b2) * (double)g[i] * g[i];
            double mhat = mr[i] / (1 - pow(b1, t)), vhat = vr[i] / (1 - pow(b2, t));
            double decay = i < 15 ? wd : 0.0;
            pr[i] -= lr * (mhat / (sqrt(vhat) + eps) + decay * pr[i]);
        }
    }
    double worst = 0.0;
    for (int i = 0; i < N; i++) worst = fmax(worst, fabs(p[i] - pr[i]));
    TU_CHECK(worst < 1e-6, "AdamW matches the double reference after %d steps (max diff %.2e)",
             STEPS, worst);
    TU_CHECK(s.t == STEPS, "step counter is %lld", (long long)s.t);

    /* Decay only on matrices: with zero gradients, the bias must not move. */
    float before[N];
    memcpy(before, p, sizeof p);
    memset(g, 0, sizeof g);
    adamw_state z;
    if (adamw_init(&z, N) != 0) exit(99);
    adamw_step(&z, p, g, 1.0f, info, 2, lr, b1, b2, eps, wd);
    int bias_same = 1, w_shrunk = 1;
    for (int i = 15; i < N; i++) bias_same &= p[i] == before[i];
    for (int i = 0; i < 15; i++) w_shrunk &= fabsf(p[i]) < fabsf(before[i]);
    TU_CHECK(bias_same, "no weight decay on 1-D tensors");
    TU_CHECK(w_shrunk, "weight decay shrinks matrices");
    adamw_free(&s);
    adamw_free(&z);
}

/* adamw_step_taking's take: applies the tensors whose index is odd itself, in pieces
 * of 7 elements from the end backwards (any split gives the same bits), and records
 * the order it was asked in */
typedef struct {
    int asked[8], n_asked;
} taker;

static int take_odd(void *ctx, const adamw_tensor *t)
{
    taker *tk = ctx;
    const int i = tk->n_asked++;
    tk->asked[i] = (int)t->n;
    if (i % 2 == 0) return 0;
    for (size_t end = t->n; end > 0;) {
        const size_t first = end > 7 ? end - 7 : 0;
        adamw_tensor_apply(t, first, end - first);
        end = first;
    }
    return 1;
}

static void test_taking(void)
{
    /* four tensors, 40000 elements: past adamw_step's chunk of 16384 */
    gpt_param_info info[4] = {
        {.name = "a", .ndim = 2, .shape = {100, 200}, .offset = 0, .numel = 20000, .decay = 1},
        {.name = "b", .ndim = 1, .shape = {13, 0}, .offset = 20000, .numel = 13, .decay = 0},
        {.name = "c", .ndim = 2, .shape = {99, 201}, .offset = 20013, .numel = 19899, .decay = 1},
        {.name = "d", .ndim = 1, .shape = {88, 0}, .offset = 39912, .numel = 88, .decay = 0},
    };
    enum { N = 40000 };
    float *p = malloc(2 * N * sizeof *p), *g = malloc(N * sizeof *g);
    if (!p || !g) exit(99);
    rng r;
    rng_seed(&r, 5);
    for (int i = 0; i < N; i++) p[i] = p[N + i] = rng_normal(&r);
    adamw_state plain, taken;
    if (adamw_init(&plain, N) != 0 || adamw_init(&taken, N) != 0) exit(99);
    int order_ok = 1;
    for (int step = 0; step < 3; step++) {
        for (int i = 0; i < N; i++) g[i] = rng_normal(&r);
        adamw_step(&plain, p, g, 0.5f, info, 4, 1e-3, 0.9, 0.95, 1e-8, 0.1);
        taker tk = {.n_asked = 0};
        adamw_step_taking(&taken, p + N, g, 0.5f, info, 4, 1e-3, 0.9, 0.95, 1e-8, 0.1,
                          take_odd, &tk);
        order_ok &= tk.n_asked == 4;
        for (int i = 0; i < 4 && i < tk.n_asked; i++) order_ok &= tk.asked[i] == (int)info[i].numel;
    }
    TU_CHECK(order_ok, "take is asked once for each tensor, in table order");
    TU_CHECK(memcmp(p, p + N, N * sizeof *p) == 0 &&
                 memcmp(plain.m, taken.m, N * sizeof *p) == 0 &&
                 memcmp(plain.v, taken.v, N * sizeof *p) == 0 && plain.t == taken.t,
             "tensors taken over (applied in pieces by the caller) give adamw_step's bits: "
             "parameters and both moments, 3 steps");
    adamw_free(&plain);
    adamw_free(&taken);
    free(p);
    free(g);
}

int main(void)
{
    test_schedule();
    test_norm_and_clip();
    test_folded_clip();
    test_adamw();
    test_taking();
    return tu_finish();
}
