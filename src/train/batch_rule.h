/* batch_rule — the rules of `global_batch_size = auto` (docs/adaptive-batch.md): which
 * global batch trains fastest for the measured gradient noise scale and step costs,
 * how the learning rate follows the batch, and the lr schedule in tokens.
 *
 * The goodput rule (Pollux; McCandlish et al.'s model, as the planner's): a global
 * batch of b sequences needs S(b) = S_min (1 + B_noise / b) steps to a loss, and a
 * step costs t(b) = t_fixed + b t_seq (t_fixed: what does not grow with the batch, the
 * optimizer and the communication not hidden behind backward; t_seq: compute per
 * sequence on this allocation). Time to the loss S(b) t(b) is least at
 *     b* = sqrt(B_noise x t_fixed / t_seq)    (B_noise in sequences)
 * and the batch is the multiple of the step `unit` (global_batch_min) in [lo, hi]
 * whose S(b) t(b) is least. Pure functions, no state: the trainer keeps the
 * smoothed inputs (and checkpoints them), so the same inputs give the same batch. */
#ifndef GT_BATCH_RULE_H
#define GT_BATCH_RULE_H

#include <stdint.h>

#include "config.h" /* defines: gt_lr_rule (how the lr follows the batch) */

/* The least relative gain in modelled time that moves the batch: estimates of B_noise
 * scatter, and near the optimum S(b) t(b) is flat, so without it the batch would go
 * back and forth between neighbours on noise alone. */
#define BATCH_RULE_MARGIN 0.05

/* The global batch (sequences, a multiple of unit in [lo, hi], lo and hi multiples of
 * unit) with the least modelled time to a loss for noise_seq = B_noise in sequences
 * and overhead_seq = t_fixed / t_seq (sequences); `current` (the batch now, 0: none)
 * is kept unless the best one's modelled time is more than BATCH_RULE_MARGIN below
 * it. A noise scale that is not positive and finite (not measured yet) keeps current
 * (lo when 0). */
int64_t batch_rule_choose(double noise_seq, double overhead_seq, int64_t unit, int64_t lo,
                          int64_t hi, int64_t current);

/* The modelled time to a loss of a batch b, in units of S_min x t_seq (for reports). */
double batch_rule_cost(double noise_seq, double overhead_seq, double b);

/* The lr factor for a global batch b against the base batch b0 the lr was set for:
 * linear b/b0, sqrt sqrt(b/b0), adascale the AdaScale gain
 *     (1 + B_noise / b0) / (1 + B_noise / b)
 * (between 1 and b/b0; 1 while the noise scale is not known). */
double batch_rule_lr_factor(gt_lr_rule rule, double b, double b0, double noise_seq);

/* The lr schedule of a run at position u (samples trained before this step divided by
 * the base batch: a step of a fixed base batch has u = step) with `warmup` and `total`
 * in the same units: linear warmup, then cosine to min_lr at total - 1. For whole u it
 * is lr_at_step's value (optim.h). */
double batch_rule_lr_at(double u, double warmup, double total, double lr, double min_lr);

#endif
