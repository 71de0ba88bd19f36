/* par_reducer — the data-parallel gradient reduction of a step, overlapped with
 * backward: gradients are cut into buckets and each is summed over the replicas of
 * this rank's part (grid.h's dp communicator) as soon as backward has finished it.
 * It sits above grid (which owns the communicators) and parallel (MPI start-up and
 * the error path); its names keep the par_ family's prefix. */
#ifndef GT_PAR_REDUCER_H
#define GT_PAR_REDUCER_H

#include <stddef.h>

/* Overlapped, bucketed gradient reduction (a "reducer").
 *
 * A reducer holds `slots` independent reductions of a gradient buffer of n floats, so
 * that async training can have several steps' gradients in flight. For one slot:
 *  1. par_reducer_begin(r, slot, buf): buf (n floats) is this step's gradient, about
 *     to be computed;
 *  2. par_reducer_ready(r, offset, count), the model's on_grads_ready callback: that
 *     range of buf is final. Ranges must tile buf from its end to its start, each ending
 *     where the previous began (model.h). Ready floats are cut into buckets of
 *     bucket_floats from the top; each full bucket is started at once
 *     (MPI_Iallreduce, in place, MPI_SUM; in fp16 first converted into a half copy
 *     and summed by a user-defined operation that adds halves in float); the last,
 *     partial bucket starts when offset 0 is reached. Each call also tests the slot's
 *     outstanding requests, which lets MPI progress while backward runs;
 *  3. par_reducer_wait(r, slot): waits for all of the slot's buckets (MPI_Waitall),
 *     converts fp16 back, and scales by 1/world: buf = mean over ranks.
 * Only the thread that called par_init may call these (MPI_THREAD_FUNNELED); the
 * model calls its callback on the thread that runs gpt_backward.
 * With a world of one rank no MPI call is made and par_reducer_wait leaves buf as it
 * is. Summing in fp32, a bucket's sum is elementwise, so the result is the same
 * whatever bucket_floats is (up to the MPI library's choice of reduction order by
 * message size with more than two ranks). */
typedef struct par_reducer par_reducer;

/* fp16 != 0: gradients travel as IEEE half. Returns NULL on failure (reported). */
par_reducer *par_reducer_create(size_t n, size_t bucket_floats, int slots, int fp16);
void par_reducer_free(par_reducer *r);
/* Starts collecting slot `slot` for buf. With want_sumsq, the squared norm of this
 * rank's own gradient (before any reduction) is summed as the ranges arrive. */
void par_reducer_begin(par_reducer *r, int slot, float *buf, int want_sumsq);
/* The on_grads_ready callback: ctx is the reducer. */
void par_reducer_ready(void *ctx, size_t offset, size_t count);
/* Waits for the slot (which must have received offset 0), then buf = mean over ranks;
 * a slot already reduced (par_reducer_complete, par_reducer_set_reduced) returns at
 * once. Either way the slot is then free for the next par_reducer_begin. Returns the
 * slot's local squared norm (0 unless want_sumsq). */
double par_reducer_wait(par_reducer *r, int slot);
/* Completes the slot now if its reduction is in flight (as par_reducer_wait: buf =
 * mean over ranks) and keeps it reduced: the par_reducer_wait that takes it later
 * returns at once, so the step that applies it sees the same numbers. A checkpoint
 * uses it to save reduced gradients. Returns the slot's local squared norm, 0 for a
 * slot neither in flight nor reduced. */
double par_reducer_complete(par_reducer *r, int slot);
/* Declares buf (n floats, already the mean over ranks: a resumed run's gradient in
 * flight, from its checkpoint) as the reduced content of slot, with local squared norm
 * sumsq: the next par_reducer_wait of the slot returns it without reducing again. */
void par_reducer_set_reduced(par_reducer *r, int slot, float *buf, double sumsq);
/* Completes every slot still in flight, as par_reducer_complete (a collective: at the
 * end, before leaving training early, for the gradients of the last async steps that
 * are never applied; MPI must not write into freed buffers). */
void par_reducer_drain(par_reducer *r);
/* Bytes one slot's reduction puts on the wire per rank (n x 4, or n x 2 in fp16), and
 * the number of buckets it uses. */
size_t par_reducer_bytes(const par_reducer *r);
size_t par_reducer_buckets(const par_reducer *r);

#endif
