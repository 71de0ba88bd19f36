/* engine — the step engine: the one seam between the trainer (train.c) and whatever
 * computes this rank's forward and backward of its model part (gpt_create_stage: a
 * tensor shard of a pipeline stage; tp = pp = 1: the whole model). Above the seam,
 * once: gradient accumulation, the data-parallel reduction, the loss-scale decision,
 * clipping, AdamW, evaluation, logging and checkpoints. Three engines below: the CPU
 * passes, the GPU for a whole model, the GPU for a stage or shard (the create calls).
 * On each call the caller passes the parameters to compute at and the gradient buffer
 * to fill (async runs keep several and may step at predicted weights: grad_ring.h);
 * the engine binds them for the call only and owns everything else it needs
 * (activations, device memory, staging). */
#ifndef GT_ENGINE_H
#define GT_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "lossscale.h"
#include "model.h"

typedef struct step_engine step_engine;

/* What an engine implements; every member is required. */
typedef struct engine_ops {
    /* One micro-batch: inputs/targets [B,T] at `params`. Micro-batches of a step run
     * from accumulate = 0 (grads are overwritten) to last = 1; after the last, grads =
     * grad_scale x the sum of d(mean loss)/d(params) over them. Sets *loss (the
     * micro-batch's mean loss; 0 on a pipeline stage that has no head) and *overflow
     * (1: FP16 overflowed; grads unusable). 0, or -1 (reported, this rank only). */
    int (*grad)(step_engine *e, const float *params, float *grads, const int32_t *inputs,
                const int32_t *targets, int accumulate, int last, float grad_scale,
                double *loss, int *overflow);
    /* The mean loss of one batch at params (evaluation). first: the first batch of an
     * evaluation (the parameters may have changed since the last call). */
    int (*loss)(step_engine *e, const float *params, int first, const int32_t *inputs,
                const int32_t *targets, double *loss);
    /* Frees what the engine made (impl, device memory); engine_destroy frees e. */
    void (*destroy)(step_engine *e);
} engine_ops;

struct step_engine {
    const engine_ops *ops;
    const char *name;     /* "cpu", "cpu pipeline", "gpu", "gpu blocks" (pp = tp = 1),
                           * "gpu pipeline", "gpu shard" (tp > 1, pp = 1) */
    gpt_model *model;     /* the part: its layout, and its params = master weights */
    int B, T;             /* the micro-batch every call computes */
    loss_scaler *scaler;  /* FP16 engines: the dynamic loss scale; NULL otherwise */
    /* Optional (NULL: none; engine_set_grads_ready): told each range of the gradient
     * buffer that became final during the last micro-batch's backward, so the bucketed
     * all-reduce (par_reducer.h) overlaps the rest. The CPU engines report ranges as
     * backward goes, the GPU engines the whole buffer at the end. */
    void (*grads_ready)(void *ctx, size_t offset, size_t count);
    void *grads_ready_ctx;
    void *impl;           /* the engine's own state */
};

/* The CPU engine for `model` (created, parameters allocated; activations are made
 * here) and micro-batches of B x T: the model's passes (backend.h: FP32 or BF16
 * products); with pp > 1, `micro` micro-batches per batch through the 1F1B schedule
 * (pipeline.h), activations and their gradients to the neighbouring stages over MPI;
 * with tp > 1 the model's tensor-parallel all-reduces run inside the passes (grid.h
 * hooks). Returns NULL on failure (reported). */
step_engine *engine_cpu_create(gpt_model *model, int B, int T, int micro);
/* The GPU engine of offload = all for a whole model (tp = pp = 1) on the device the
 * rank took (offload_use_device; device_step.h), FP16 with dynamic loss scaling, every
 * layer on the GPU. NULL on failure (reported: what failed, e.g. the device memory it
 * needs). */
step_engine *engine_gpu_create(gpt_model *model, int B, int T, int threads);
/* The GPU engine of a model part: a pipeline stage, a tensor-parallel shard of one
 * (model with its tp hooks set), or a whole model with offload = blocks (pp = tp = 1):
 * every layer of the part on the GPU, its ends vocabulary-parallel with tp > 1
 * (gpu_stage.h); `micro` micro-batches per batch in the 1F1B schedule (of one stage
 * when pp = 1). nccl: the tp all-reduces over NCCL (every rank the same; see
 * gpu_stage_create), else through host memory. A collective of the tp group. NULL on
 * failure (reported). */
step_engine *engine_gpu_pipeline_create(gpt_model *model, int B, int T, int micro,
                                        int threads, int nccl);

static inline int engine_grad(step_engine *e, const float *params, float *grads,
                              const int32_t *inputs, const int32_t *targets, int accumulate,
                              int last, float grad_scale, double *loss, int *overflow)
{
    return e->ops->grad(e, params, grads, inputs, targets, accumulate, last, grad_scale,
                        loss, overflow);
}
static inline int engine_loss(step_engine *e, const float *params, int first,
                              const int32_t *inputs, const int32_t *targets, double *loss)
{
    return e->ops->loss(e, params, first, inputs, targets, loss);
}
static inline void engine_set_grads_ready(step_engine *e,
                                          void (*fn)(void *ctx, size_t offset, size_t count),
                                          void *ctx)
{
    e->grads_ready = fn;
    e->grads_ready_ctx = ctx;
}
/* The loss scale gradients carry (1 without a scaler). */
static inline float engine_loss_scale(const step_engine *e)
{
    return e->scaler ? e->scaler->scale : 1.0f;
}
static inline void engine_destroy(step_engine *e) /* NULL is fine */
{
    if (!e) return;
    e->ops->destroy(e);
    free(e);
}

#endif
