/* whole_model — the reference the model-parallel tests (test_model_tp, test_model_pp)
 * compare their shards and stages with: a whole tiny GPT initialised from a seed, its
 * biases then made non-zero (so a bias added once per shard, or lost, shows), random
 * tokens and targets, one training forward and backward. */
#ifndef GT_TEST_WHOLE_MODEL_H
#define GT_TEST_WHOLE_MODEL_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_cpu.h"
#include "model.h"
#include "rng.h"
#include "testutil.h"

/* The largest |x[i]|: what gradient differences are measured against. */
static inline double max_abs(const float *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)x[i]));
    return m;
}

/* Creates *whole (init_seed), copies its initial weights into *init (malloc'd: the
 * caller frees it), perturbs the biases and draws in/tg [B*T] from data_seed, runs the
 * forward and backward, and returns the loss. NAN when the model cannot be made. */
static inline float whole_model_make(gpt_model *whole, gpt_shape shape, int threads, int B,
                                     int T, uint64_t init_seed, uint64_t data_seed,
                                     float **init, int32_t *in, int32_t *tg)
{
    const int ok = gpt_create(whole, shape, &backend_cpu, threads) == 0 &&
                   gpt_alloc_grads(whole) == 0 && gpt_alloc_acts(whole, B, T) == 0 &&
                   gpt_init_weights(whole, init_seed) == 0 &&
                   (*init = malloc(whole->n_params * sizeof(float))) != NULL;
    TU_CHECK(ok, "whole model created");
    if (!ok) return NAN;
    memcpy(*init, whole->params, whole->n_params * sizeof(float));
    rng r;
    rng_seed(&r, data_seed);
    for (int i = 0; i < whole->n_info; i++)
        if (strstr(whole->info[i].name, ".bias"))
            for (size_t j = 0; j < whole->info[i].numel; j++)
                whole->params[whole->info[i].offset + j] = 0.05f * rng_normal(&r);
    for (int i = 0; i < B * T; i++) {
        in[i] = (int32_t)(rng_u64(&r) % (uint64_t)shape.vocab_size);
        tg[i] = (int32_t)(rng_u64(&r) % (uint64_t)shape.vocab_size);
    }
    gpt_zero_grad(whole);
    const float loss = gpt_forward(whole, in, tg, B, T, 1);
    gpt_backward(whole);
    return loss;
}

#endif
