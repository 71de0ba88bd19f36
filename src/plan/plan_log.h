/* plan_log — the gradient noise scale a past run measured, read from its JSON Lines log
 * (`gentrain plan --from-log run/log.jsonl`), as the one number the planner's
 * S(B) = S_min (1 + B_noise / B) takes (plan.h).
 *
 * B_noise grows as the loss falls. A fixed global batch B trains through all of it, so
 * its steps are the sum over the run of (1 + B_noise(t) / B) per unit of progress: the
 * planner's single B_noise is the mean over the run, each estimate weighted by the
 * tokens since the one before it (piecewise constant, the first from token 0). Records
 * without a noise_scale member are passed over; the x position is the record's
 * "tokens", or its "step" in logs that lack it. */
#ifndef GT_PLAN_LOG_H
#define GT_PLAN_LOG_H

#include <stdint.h>

typedef struct plan_log_noise {
    int64_t records;     /* lines read */
    int64_t estimates;   /* of them with a noise_scale */
    double first, last;  /* the first and last estimate (tokens) */
    double min, max;
    double mean;         /* the token-weighted mean (tokens) */
    double span;         /* tokens (or steps) the estimates cover */
    int by_steps;        /* 1: the log had no tokens field: weighted by steps */
} plan_log_noise;

/* The largest noise scale the planner takes (tokens), from a log or --noise-scale: a
 * batch of 10^18 tokens is past any run; a figure above it is a damaged log. */
#define PLAN_NOISE_MAX 1e18
/* The largest tokens (or step) a log's estimate is placed at: past 2^63 tokens no run
 * has counted. With PLAN_NOISE_MAX it bounds the weighted sum (1e37). */
#define PLAN_LOG_MAX_POSITION 1e19

/* Reads path. 0 with out filled; -1 after one error line: the file cannot be read, a
 * line is not a JSON object with a numeric step, a noise_scale is not a number in
 * (0, PLAN_NOISE_MAX], tokens (or step) is not a number from the last estimate's up
 * to PLAN_LOG_MAX_POSITION, or the log holds no noise_scale at all. */
int plan_log_read_noise(const char *path, plan_log_noise *out);

#endif
