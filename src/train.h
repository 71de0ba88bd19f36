/* train — the training loop of `gentrain train`: opens the data, builds the model,
 * runs the loader, steps AdamW, evaluates, logs (stdout + JSON Lines), saves the model.
 *
 * Per step it prints: step, loss, lr, step time, tokens/s, achieved GFLOP/s and MFU,
 * loader wait. Every eval_every steps (and after the last step) the validation loss on
 * eval_batches fixed batches. The JSONL log has one object per step:
 *   {"step":..,"loss":..,"lr":..,"ms":..,"tokens_per_s":..,"gflops":..,
 *    "load_wait_ms":..[,"val_loss":..]}
 * At the end the model is saved as <out>/model.h5 (format in io/h5model.h). */
#ifndef GT_TRAIN_H
#define GT_TRAIN_H

#include "config.h"

/* Runs a whole training; returns 0 on success, -1 on any error (reported). The config
 * must have passed config_validate. */
int train_run(const gt_config *c);

#endif
