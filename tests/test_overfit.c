/* The whole training step (forward, backward, clip, AdamW) can drive the loss on one
 * fixed batch to near zero, and the same seed gives bit-identical losses on a second
 * run with the same thread count. */
#include <math.h>
#include <string.h>

#include "kernels_cpu.h"
#include "model.h"
#include "optim.h"
#include "rng.h"
#include "util.h"
#include "testutil.h"

enum { B = 4, T = 16, STEPS = 150 };

static int train(float *losses)
{
    gpt_shape s = {.vocab_size = 32, .block_size = T, .n_layer = 2, .n_head = 4, .n_embd = 32};
    gpt_model m;
    adamw_state opt;
    int threads = gt_resolve_threads(0);
    if (gpt_create(&m, s, &backend_cpu, threads) != 0 || gpt_alloc_grads(&m) != 0 ||
        gpt_alloc_acts(&m, B, T) != 0 || adamw_init(&opt, m.n_params) != 0)
        return -1;
    gpt_init_weights(&m, 42);
    int32_t in[B * T], tg[B * T];
    rng r;
    rng_seed(&r, 5);
    for (int i = 0; i < B * T; i++) in[i] = (int32_t)(rng_u64(&r) % 32);
    for (int i = 0; i < B * T; i++) tg[i] = (int32_t)(rng_u64(&r) % 32);
    for (int step = 0; step < STEPS; step++) {
        gpt_zero_grad(&m);
        losses[step] = gpt_forward(&m, in, tg, B, T, 1);
        gpt_backward(&m);
        double norm = grad_global_norm(m.grads, m.n_params);
        adamw_step(&opt, m.params, m.grads, grad_clip_factor(norm, 1.0), m.info, m.n_info,
                   lr_at_step(step, 10, STEPS, 1e-2, 1e-3), 0.9, 0.99, 1e-8, 0.0);
    }
    adamw_free(&opt);
    gpt_free(&m);
    return 0;
}

int main(void)
{
    float a[STEPS], b[STEPS];
    if (train(a) != 0 || train(b) != 0) return 99;
    printf("loss: step 1 %.4f, step 50 %.4f, step 100 %.4f, step %d %.4f\n", a[0], a[49],
           a[99], STEPS, a[STEPS - 1]);
    TU_CHECK(fabsf(a[0] - logf(32.0f)) < 0.3f, "initial loss %.3f is near ln(32) = %.3f",
             a[0], logf(32.0f));
    TU_CHECK(a[STEPS - 1] < 0.05f, "loss on a fixed batch falls to near zero (%.4f)",
             a[STEPS - 1]);
    TU_CHECK(memcmp(a, b, sizeof a) == 0, "two runs with the same seed give bit-identical losses");
    return tu_finish();
}
