/* device_step — the trainer's side of offload = all: one whole model's (tp = pp = 1)
 * micro-batch forward and backward, every layer on the rank's GPU (offload/gpu_model.h,
 * gpu_model_step_micro), the FP32 master weights, AdamW and the loss scale staying on
 * the host. offload = blocks, pipeline stages and tensor-parallel shards train through
 * gpu_stage.h instead (the 1F1B schedule of one stage when pp = 1), which shares the
 * two helpers below, so the host-to-device path of the parameters exists once.
 *
 * Each call that reads parameters first sends the host's current FP32 parameters up as
 * FP16 (converted into the pinned staging buffer with OpenMP), so whatever the trainer
 * did to them (an update, async weight prediction, a resume) is what the GPU uses. The
 * gradients come back as FP16 scaled by the loss scale; they are unscaled into the
 * trainer's FP32 gradient buffer and checked for inf/NaN (lossscale.h): an overflow is
 * reported to the caller, who skips the step on every rank and calls
 * loss_scaler_update. */
#ifndef GT_DEVICE_STEP_H
#define GT_DEVICE_STEP_H

#include <stddef.h>
#include <stdint.h>

#include "lossscale.h"
#include "model.h"

typedef struct gpu_model gpu_model;

/* A range of n parameters: at `host` in the trainer's flat layout, at `dev` in the
 * device model's (its staging and gradient buffers). */
typedef struct device_range {
    size_t host, dev, n;
} device_range;

typedef struct device_step {
    gpu_model *g;
    size_t n_params;
    device_range all;      /* every parameter, the same place on both sides */
    int threads;
    loss_scaler scaler;
} device_step;

/* Hands the host's layout info[n] (a table of src/layout/: gpt_layout_make) to the GPU
 * model g, tensor by tensor, to be checked there against the one its kernels compute
 * with (gpu_model_check_layout: names, shapes and offsets). Called once after g is
 * made, before its first upload. 0, or -1 (reported, naming the first tensor that
 * differs). */
int device_step_check_layout(gpu_model *g, const gpt_param_info *info, int n);

/* Sends the ranges r[nr] of params (the trainer's FP32 layout) up to g as FP16:
 * converted with `threads` OpenMP threads into g's pinned staging buffer, then
 * gpu_model_upload_params (which sends the range g holds on the device). 0, or -1
 * (reported). */
int device_step_upload(gpu_model *g, const float *params, const device_range *r, int nr,
                       int threads);

/* Makes the GPU model of every layer for m's shape (a whole model: tp = 1, one stage)
 * and batches up to B x T on the device the rank took (offload_use_device). Returns 0,
 * or -1 (reported: what failed, e.g. the device memory it needs against what is
 * free). */
int device_step_init(device_step *d, const gpt_model *m, int B, int T, int threads);
void device_step_free(device_step *d);

/* One micro-batch at `params`; the micro-batches of a step run from one with
 * accumulate = 0 to one with last = 1, with the same grad_scale. When the last has run,
 * grads = grad_scale x the sum over them of d(mean loss)/d(params); before that grads
 * may or may not hold partial sums (they add up on the GPU and come down once, at the
 * last). With
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
