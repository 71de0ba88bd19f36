/* train — the training loop of `gentrain train`: opens the data, builds the model,
 * runs the loader, steps AdamW, evaluates, logs (stdout + JSON Lines), saves the model.
 * The forward and backward passes run behind the step engine (engine.h), the same
 * way on the CPU and the GPU; train_run.h lists the files of the trainer.
 *
 * Data parallel when parallel.h runs MPI with N > 1 ranks: one model, each rank taking
 * batch_size sequences of a global batch of batch_size x N (loader.h), the gradients
 * and the loss averaged over the ranks, the same clipped AdamW update on every rank.
 * Rank 0 alone prints, logs and saves. Configs and datasets that differ between ranks,
 * and too few training windows for batch_size x N, stop every rank before the first step.
 *
 * Per step it prints: step, loss, lr, step time, tokens/s (all ranks), achieved
 * GFLOP/s and MFU, loader wait, and with N > 1 the reduction time. Every eval_every
 * steps (and after the last step) the validation loss on eval_batches fixed global
 * batches, split over the ranks. The JSONL log has one object per step:
 *   {"step":..,"loss":..,"lr":..,"global_batch_size":..,"grad_norm":..,"ms":..,
 *    "tokens_per_s":..,"gflops":..,"load_wait_ms":..,"comm_ms":..[,"val_loss":..]
 *    [,"noise_scale":..][,"step_overhead":..]}
 * With global_batch_size = auto the micro-steps of a step change between steps
 * (train_batch.c, docs/adaptive-batch.md).
 * At the end the model is saved as <out>/model.h5 (format in io/h5/h5model.h).
 *
 * Checkpoints (io/ckpt/ckpt.h) go to <out>/checkpoints/: every ckpt_every steps, when
 * ckpt_minutes of wall time passed since the last one (rank 0's clock), at the end of
 * a run with either set, and at the step boundary after a SIGTERM/SIGUSR1 (then the
 * run stops: TRAIN_STOPPED); with sync = async they hold the gradients still in flight
 * (reductions completed first). resume = auto / PATH loads one on every rank before the
 * first step and continues at its step: the same samples, lr, AdamW state (and async
 * gradients in flight) as a run that never stopped, bit for bit on the same grid. On
 * another number of replicas or another tp/pp it keeps the checkpoint's global batch
 * (micro-steps of batch_size x replicas; refused with the nearest working values when
 * they cannot make it, unless global_batch_size sets another one) and continues within
 * float rounding. Under global_batch_size = auto the checkpoint also holds the noise
 * scale's and the step costs' state, so the resumed run chooses the batches the
 * unbroken one would have. */
#ifndef GT_TRAIN_H
#define GT_TRAIN_H

#include "config.h"

/* train_run's status when a stop signal (signals.h) ended the run after a checkpoint:
 * the command exits with GT_EXIT_REQUEUE. */
#define TRAIN_STOPPED 1

/* Runs a whole training; returns 0 on success, TRAIN_STOPPED, or -1 on any error
 * (reported). The config must have passed config_validate. Under MPI every rank calls
 * it; an error only one rank meets during the steps ends the whole job (par_abort)
 * instead of returning. */
int train_run(const gt_config *c);

/* `gentrain train --dry-run`: everything train_run does before its first step (the
 * grid, the device, the data opened and checked, the run folder and its lock, the
 * checkpoint to resume and its compatibility, the model, optimizer and buffers made),
 * then a report of what the run would do, and no step. It writes no checkpoint, model
 * or log line and empties no log; it makes the run folder (with its lock, checkpoints
 * folder and log file where they are missing), as a run's start does. Returns 0, or -1
 * on an error (reported): the error the run would have met before its first step. */
int train_dry_run(const gt_config *c);

#endif
