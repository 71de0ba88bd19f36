/* plan_measure — calibrates the planner's machine on the current allocation: times a
 * block's forward + backward, the embedding + head and AdamW with gentrain's own
 * kernels (on this process, for each thread count and shard shape asked, once), and,
 * under mpirun with two or more ranks, MPI all-reduce and point-to-point latency and
 * bandwidth between ranks 0 and 1.
 *
 * Compute is timed on rank 0; when the launched ranks, at the thread count timed, fit
 * the node's cores, the other ranks run the same timing at the same time (the node is
 * as busy as in training), else they wait without spinning (plan_measure_serve). */
#ifndef GT_PLAN_MEASURE_H
#define GT_PLAN_MEASURE_H

#include "plan.h"

typedef struct plan_calibration plan_calibration;

/* For shape s at context T, timing `reps` repetitions (the median counts), on a node
 * of `cores` cores. */
plan_calibration *plan_calibration_create(const gpt_shape *s, int T, int reps, int cores);
void plan_calibration_free(plan_calibration *c);
/* Points mc's compute callbacks at the calibration (measuring on first use). */
void plan_calibration_attach(plan_calibration *c, plan_machine *mc);
/* Whether a timing could not run (the model, or a micro-batch of it, cannot be
 * allocated here): then the callbacks returned -1 from that one on without timing
 * anything more, and no plan may come from them. why (cap bytes) says which timing
 * failed. Its allocation errors are not printed: the caller says it in one line. */
int plan_calibration_failed(const plan_calibration *c, char *why, size_t cap);

/* Collective over all ranks (parallel.h): fits latency and bandwidth of MPI_Allreduce
 * over all ranks (a small and a large message: the ring model of plan.h) and of a
 * ping-pong between ranks 0 and 1, into mc (intra and inter alike: one node). Returns
 * 0, or -1 with fewer than two ranks (nothing measured). */
int plan_measure_links(plan_machine *mc);

/* Ranks other than 0, after plan_measure_links: run the timings rank 0 asks for until
 * it says stop (plan_measure_stop_serving, rank 0, once it is done). */
void plan_measure_serve(const gpt_shape *s, int T, int reps, int cores);
void plan_measure_stop_serving(void);

#endif
