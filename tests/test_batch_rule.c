/* test_batch_rule — the rules of global_batch_size = auto (src/train/batch_rule.h):
 *  - the chosen batch minimises the modelled time to a loss (1 + B_noise/b)(t0 + b)
 *    over every allowed multiple (brute force), for a grid of noise scales and
 *    overheads; it is global_batch_min with no noise estimate or no overhead, and the
 *    largest allowed at a huge noise scale; it grows with the noise scale; the current
 *    batch is kept while within BATCH_RULE_MARGIN of the best time;
 *  - b* = sqrt(B_noise t0) when that is an allowed multiple;
 *  - the lr factors: linear b/b0, sqrt, AdaScale's gain (1 at b0, between 1 and b/b0,
 *    -> b/b0 as the noise dominates, 1 with no estimate);
 *  - the lr schedule in samples equals lr_at_step at whole steps and is continuous
 *    between them. */
#include <math.h>
#include <stdint.h>

#include "batch_rule.h"
#include "optim.h"
#include "testutil.h"

static void test_choose(void)
{
    const int64_t unit = 24, lo = 24, hi = 24 * 16;
    int worst = 0;
    for (double noise = 1; noise < 1e5; noise *= 3.7)
        for (double over = 0.5; over < 5e3; over *= 4.1) {
            const int64_t got = batch_rule_choose(noise, over, unit, lo, hi, 0);
            int64_t best = lo;
            for (int64_t b = lo; b <= hi; b += unit)
                if (batch_rule_cost(noise, over, (double)b) <
                    batch_rule_cost(noise, over, (double)best))
                    best = b;
            if (batch_rule_cost(noise, over, (double)got) >
                batch_rule_cost(noise, over, (double)best) * (1 + 1e-12))
                worst = 1;
        }
    TU_CHECK(!worst, "choose: the least modelled time over every allowed batch (brute force)");
    TU_CHECK(batch_rule_choose(NAN, 100, unit, lo, hi, 0) == lo &&
                 batch_rule_choose(0, 100, unit, lo, hi, 0) == lo &&
                 batch_rule_choose(NAN, 100, unit, lo, hi, 96) == 96,
             "choose: no noise estimate -> global_batch_min, or the batch kept");
    TU_CHECK(batch_rule_choose(1e4, 0, unit, lo, hi, 0) == lo,
             "choose: no step overhead -> global_batch_min");
    TU_CHECK(batch_rule_choose(1e9, 1e3, unit, lo, hi, 0) == hi,
             "choose: a huge noise scale -> global_batch_max");
    /* b* = sqrt(576 x 100) = 240 = 10 x 24 */
    TU_CHECK(batch_rule_choose(576, 100, unit, lo, hi, 0) == 240,
             "choose: b* = sqrt(B_noise x overhead) = 240 (got %lld)",
             (long long)batch_rule_choose(576, 100, unit, lo, hi, 0));
    /* the margin: 216 is within 5% of 240's time there, 24 is not */
    const double c240 = batch_rule_cost(576, 100, 240), c216 = batch_rule_cost(576, 100, 216);
    TU_CHECK(c216 < c240 * (1 + BATCH_RULE_MARGIN) &&
                 batch_rule_choose(576, 100, unit, lo, hi, 216) == 216 &&
                 batch_rule_choose(576, 100, unit, lo, hi, 24) == 240,
             "choose: a batch within %.0f%% of the best time is kept (216), one past it is "
             "not (24 -> 240)", 100 * BATCH_RULE_MARGIN);
    int64_t prev = 0;
    int grows = 1;
    for (double noise = 1; noise < 1e6; noise *= 2) {
        const int64_t b = batch_rule_choose(noise, 50, unit, lo, hi, 0);
        if (b < prev) grows = 0;
        prev = b;
    }
    TU_CHECK(grows, "choose: the batch does not shrink as the noise scale grows");
}

static void test_lr_factor(void)
{
    TU_CHECK(fabs(batch_rule_lr_factor(LR_RULE_LINEAR, 96, 24, 50) - 4.0) < 1e-12,
             "linear: 96/24 = 4");
    TU_CHECK(fabs(batch_rule_lr_factor(LR_RULE_SQRT, 96, 24, 50) - 2.0) < 1e-12,
             "sqrt: sqrt(96/24) = 2");
    const double g = batch_rule_lr_factor(LR_RULE_ADASCALE, 96, 24, 48);
    /* (1 + 48/24) / (1 + 48/96) = 3 / 1.5 = 2 */
    TU_CHECK(fabs(g - 2.0) < 1e-12, "adascale: gain 2 for B_noise 48, b 96, b0 24 (%g)", g);
    TU_CHECK(fabs(batch_rule_lr_factor(LR_RULE_ADASCALE, 24, 24, 48) - 1.0) < 1e-12,
             "adascale: 1 at the base batch");
    TU_CHECK(fabs(batch_rule_lr_factor(LR_RULE_ADASCALE, 96, 24, 1e9) - 4.0) < 1e-6,
             "adascale: -> b/b0 when noise dominates");
    TU_CHECK(batch_rule_lr_factor(LR_RULE_ADASCALE, 96, 24, NAN) == 1.0,
             "adascale: 1 before any estimate");
}

static void test_schedule(void)
{
    int same = 1;
    for (int64_t step = 0; step < 300; step++)
        if (batch_rule_lr_at((double)step, 30, 300, 1e-3, 1e-4) !=
            lr_at_step(step, 30, 300, 1e-3, 1e-4))
            same = 0;
    TU_CHECK(same, "schedule in samples = lr_at_step at every whole step (bit for bit)");
    const double a = batch_rule_lr_at(100.0, 30, 300, 1e-3, 1e-4),
                 b = batch_rule_lr_at(100.5, 30, 300, 1e-3, 1e-4),
                 c = batch_rule_lr_at(101.0, 30, 300, 1e-3, 1e-4);
    TU_CHECK(a > b && b > c, "schedule between whole steps: decreasing through 100.5");
}

int main(void)
{
    test_choose();
    test_lr_factor();
    test_schedule();
    printf("%d checks, %d failed\n", tu_checks, tu_failures);
    return tu_failures ? 1 : 0;
}
