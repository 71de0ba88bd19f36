/* device_step — the trainer's side of the GPU: one rank's micro-batch forward and
 * backward with its GPU (offload/gpu_model.h), the FP32 master weights, AdamW and the
 * loss scale staying on the host. Two placements, chosen at init and hidden behind the
 * same calls:
 *  - offload = all: every layer on the GPU (gpu_model_step);
 *  - offload = blocks: the transformer blocks on the GPU (gpu_model_blocks_forward /
 *    _backward, FP16), the token + position embedding and the final LayerNorm, tied
 *    head and cross-entropy here in FP32 with the model's CPU ops (m->be). The
 *    residual stream crosses to the GPU once each way per forward and once each way
 *    per backward (FP32 over the bus, FP16 on the device).
 *
 * Each call that reads parameters first sends the host's current FP32 parameters up as
 * FP16 (the range the GPU holds, converted into the pinned staging buffer with
 * OpenMP), so whatever the trainer did to them (an update, async weight prediction, a
 * resume) is what the GPU uses; the host's part of offload = blocks reads `params`
 * directly. The gradients are scaled by the loss scale: the GPU's come back as FP16,
 * the host's (blocks: wte from both the head and the embedding, wpe, ln_f) are FP32;
 * all are unscaled into the trainer's FP32 gradient buffer and checked for inf/NaN
 * (lossscale.h): an overflow is reported to the caller, who skips the step on every
 * rank and calls loss_scaler_update.
 *
 * It takes whole models (tp = pp = 1); a pipeline stage or a tensor-parallel shard
 * trains its blocks on the GPU through gpu_stage.h. */
#ifndef GT_DEVICE_STEP_H
#define GT_DEVICE_STEP_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "lossscale.h"
#include "model.h"

typedef struct gpu_model gpu_model;

typedef struct device_step {
    gpu_model *g;
    size_t n_params;
    int threads;
    loss_scaler scaler;
    int blocks;            /* offload = blocks (else all) */
    size_t dev_lo, dev_hi; /* the layout range the GPU computes with */
    /* offload = blocks: the host's part, for batches up to maxB x maxT. */
    gpt_shape shape;
    const gt_backend *be;
    int maxB, maxT;
    size_t wte, wpe, lnf;  /* offsets of wte, wpe and ln_f.weight in the layout */
    float *host_mem;       /* one allocation for the buffers below */
    float *x;              /* [B,T,C] the embedding's output, then the last block's */
    float *lnf_out, *lnf_mean, *lnf_rstd; /* [B,T,C] [B,T] [B,T] */
    float *logits;         /* [B,T,V]; d(scaled loss)/d(logits) after a training pass */
    float *losses;         /* [B,T] */
    float *dln;            /* [B,T,C] gradient of ln_f's output */
    float *dx;             /* [B,T,C] gradient of the last block's output, then of x0 */
    float *grad_embed;     /* [dev_lo] scaled gradients of wte and wpe */
    float *grad_lnf;       /* [2C] scaled gradients of ln_f.weight and ln_f.bias */
} device_step;

/* Hands the host's layout info[n] (a table of src/layout/: gpt_layout_make) to the GPU
 * model g, tensor by tensor, to be checked there against the one its kernels compute
 * with (gpu_model_check_layout: names, shapes and offsets). Called once after g is
 * made, before its first upload. 0, or -1 (reported, naming the first tensor that
 * differs). */
int device_step_check_layout(gpu_model *g, const gpt_param_info *info, int n);

/* Makes the GPU model for m's shape and batches up to B x T on the device the rank
 * took (offload_use_device): every layer (blocks = 0) or the blocks alone (blocks = 1,
 * with the host buffers of the embedding and the head). Returns 0, or -1 (reported:
 * what failed, e.g. the device memory it needs against what is free). */
int device_step_init(device_step *d, const gpt_model *m, int B, int T, int threads,
                     int blocks);
void device_step_free(device_step *d);

/* One micro-batch at `params`; the micro-batches of a step run from one with
 * accumulate = 0 to one with last = 1, with the same grad_scale. When the last has run,
 * grads = grad_scale x the sum over them of d(mean loss)/d(params); before that grads
 * may or may not hold partial sums (offload = all adds them up on the GPU and sends the
 * sum down once; blocks brings each micro-batch's down and adds it here). With
 * accumulate set the parameters are not sent again (the micro-batches share them).
 * Sets *loss, and *overflow (1: FP16 overflowed or a gradient is inf/NaN in some
 * micro-batch: grads are unusable; it may only be known at the last). Returns 0, or
 * -1 (reported). */
int device_step_grad(device_step *d, const float *params, float *grads,
                     const int32_t *inputs, const int32_t *targets, int B, int T,
                     int accumulate, int last, float grad_scale, float *loss,
                     int *overflow);

/* The mean loss of one batch at `params` (evaluation; upload = 0 reuses the parameters
 * the last call sent). Returns 0, or -1 (reported). */
int device_step_loss(device_step *d, const float *params, int upload,
                     const int32_t *inputs, const int32_t *targets, int B, int T,
                     float *loss);

#endif
