/* batch_rule — see batch_rule.h. */
#include "batch_rule.h"

#include <math.h>

double batch_rule_cost(double noise_seq, double overhead_seq, double b)
{
    const double noise = noise_seq > 0 && isfinite(noise_seq) ? noise_seq : 0.0;
    return (1.0 + noise / b) * (overhead_seq + b);
}

int64_t batch_rule_choose(double noise_seq, double overhead_seq, int64_t unit, int64_t lo,
                          int64_t hi, int64_t current)
{
    const int have = current >= lo && current <= hi;
    if (!(noise_seq > 0) || !isfinite(noise_seq) || unit < 1 || hi <= lo)
        return have ? current : lo;
    const double overhead = overhead_seq > 0 && isfinite(overhead_seq) ? overhead_seq : 0.0;
    const double opt = sqrt(noise_seq * overhead);
    /* S(b) t(b) is convex in b: the best is one of the two multiples around b*. */
    int64_t below = (int64_t)(opt / (double)unit) * unit;
    if (below < lo) below = lo;
    if (below > hi) below = hi;
    const int64_t above = below + unit <= hi ? below + unit : below;
    const double c_below = batch_rule_cost(noise_seq, overhead, (double)below),
                 c_above = batch_rule_cost(noise_seq, overhead, (double)above);
    const int64_t best = c_above < c_below ? above : below;
    if (!have) return best;
    const double c_best = c_above < c_below ? c_above : c_below;
    return batch_rule_cost(noise_seq, overhead, (double)current) > c_best * (1.0 + BATCH_RULE_MARGIN)
               ? best : current;
}

double batch_rule_lr_factor(gt_lr_rule rule, double b, double b0, double noise_seq)
{
    const double scale = b / b0;
    switch (rule) {
    case LR_RULE_LINEAR: return scale;
    case LR_RULE_SQRT: return sqrt(scale);
    case LR_RULE_ADASCALE:
        /* AdaScale's gain r = (sigma^2 + |G|^2) / (sigma^2 / scale + |G|^2) with
         * sigma^2 / |G|^2 = B_noise / b0 at the base batch */
        if (!(noise_seq > 0) || !isfinite(noise_seq)) return 1.0;
        return (1.0 + noise_seq / b0) / (1.0 + noise_seq / b);
    }
    return 1.0;
}

double batch_rule_lr_at(double u, double warmup, double total, double lr, double min_lr)
{
    /* the same arithmetic as lr_at_step, in doubles */
    if (u < warmup) return lr * (u + 1.0) / warmup;
    const double span = total - 1.0 - warmup;
    if (span <= 0 || u >= total - 1.0) return min_lr;
    const double progress = (u - warmup) / span;
    const double cosine = 0.5 * (1.0 + cos(M_PI * progress));
    return min_lr + cosine * (lr - min_lr);
}
