/* noise_scale — the gradient noise scale B_noise (McCandlish et al., "An empirical
 * model of large-batch training", 2018) from gradient norms at two batch sizes, and
 * the squared norms it needs, summed in an order that does not depend on the threads.
 *
 * For a batch of b tokens, E|g_b|^2 = |G|^2 + tr(Sigma) / b. Two batch sizes, b_small
 * (the mean of several small-batch norms) and b_big, give unbiased estimates of |G|^2
 * and tr(Sigma); each is smoothed by a bias-corrected exponential moving average and
 * B_noise = tr(Sigma) / |G|^2 (tokens) is taken from the smoothed pair. The trainer
 * takes its small batches from the micro-batches of a step (one rank or many) or from
 * each replica's accumulated gradient (tp or pp > 1), its big batch from the step.
 *
 * Contract: pure functions of their arguments (no globals); gns_sums is deterministic
 * for a given n whatever OMP_NUM_THREADS says. */
#ifndef GT_NOISE_SCALE_H
#define GT_NOISE_SCALE_H

#include <stddef.h>

/* The smoothed state: EMAs of |G|^2 and tr(Sigma) and their weight (all 0 at start). */
typedef struct gns_state {
    double ema_g2, ema_s, weight;
} gns_state;

/* Smoothing per estimate: an estimate every noise_every steps; about the last 10 count
 * (one estimate of a small model scatters by a factor of several). */
#define GNS_BETA 0.9

/* One estimate into the state: g_small2 = mean |g|^2 over batches of b_small tokens,
 * g_big2 = |G|^2 of their union of b_big > b_small tokens. Returns the smoothed B_noise
 * in tokens, or NaN while the smoothed |G|^2 is not positive (no signal yet) or the
 * input is not usable (b_big <= b_small, a non-finite norm: the state is unchanged). */
double gns_update(gns_state *s, double g_small2, double g_big2, double b_small,
                  double b_big, double beta);

/* The smoothed B_noise of the state (tokens), NaN when none yet. */
double gns_value(const gns_state *s);

/* The squared norm of the k-th micro-batch's own gradient from an accumulator of
 * `accum` micro-batches each added with weight 1/accum: acc_sq = |acc_k|^2,
 * prev_sq = |acc_(k-1)|^2, dot = acc_k . acc_(k-1) (prev_sq = dot = 0 for k = 0). */
double gns_micro_sq(double acc_sq, double dot, double prev_sq, int accum);

/* *aa = sum a[i]^2 and (b not NULL) *ab = sum a[i] b[i] over n floats, in double, in
 * fixed chunks added in order (OpenMP over the chunks): the same bits on any number
 * of threads. */
void gns_sums(const float *a, const float *b, size_t n, double *aa, double *ab);

#endif
