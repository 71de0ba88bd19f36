/* device_step — the trainer's side of offload = all: one rank's micro-batch forward
 * and backward on its GPU (offload/gpu_model.h), with the FP32 master weights, AdamW
 * and the loss scale staying on the host.
 *
 * Each call that reads parameters first sends the host's current FP32 parameters up as
 * FP16 (converted into the pinned staging buffer with OpenMP), so whatever the trainer
 * did to them (an update, async weight prediction, a resume) is what the GPU uses. The
 * gradients come back as FP16 scaled by the loss scale; they are unscaled into the
 * trainer's FP32 gradient buffer and checked for inf/NaN (lossscale.h): an overflow
 * is reported to the caller, who skips the step on every rank and calls
 * loss_scaler_update.
 *
 * Only whole models (tp = pp = 1) go to the GPU; the trainer checks. */
#ifndef GT_DEVICE_STEP_H
#define GT_DEVICE_STEP_H

#include <stddef.h>
#include <stdint.h>

#include "lossscale.h"
#include "model.h"

typedef struct gpu_model gpu_model;

typedef struct device_step {
    gpu_model *g;
    size_t n_params;
    int threads;
    loss_scaler scaler;
} device_step;

/* Makes the GPU model for m's shape and batches up to B x T on the device the rank
 * took (offload_use_device). Returns 0, or -1 (reported: what failed, e.g. the device
 * memory it needs against what is free). */
int device_step_init(device_step *d, const gpt_model *m, int B, int T, int threads);
void device_step_free(device_step *d);

/* One micro-batch at `params`: grads = (accumulate ? grads + : ) grad_scale x
 * d(mean loss)/d(params). With accumulate set the parameters are not sent again (the
 * micro-batches of one step share them). Sets *loss and *overflow (1: FP16 overflowed, grads are
 * unusable). Returns 0, or -1 (reported). */
int device_step_grad(device_step *d, const float *params, float *grads,
                     const int32_t *inputs, const int32_t *targets, int B, int T,
                     int accumulate, float grad_scale, float *loss, int *overflow);

/* The mean loss of one batch at `params` (evaluation; upload = 0 reuses the parameters
 * the last call sent). Returns 0, or -1 (reported). */
int device_step_loss(device_step *d, const float *params, int upload,
                     const int32_t *inputs, const int32_t *targets, int B, int T,
                     float *loss);

#endif
