/* grad_ring — the gradient buffers of a run, and async weight prediction.
 *
 * sync: one buffer; the gradient of step t is applied at step t. async (bounded
 * staleness, lag = staleness): lag + 1 buffers used round robin, the gradient of step
 * t computed into slot t % (lag + 1) and applied at step t + lag, so the reduction of
 * a gradient overlaps the next lag steps. An FP16 overflow flag travels with each
 * slot: an update whose gradient overflowed is skipped whenever it comes due.
 *
 * Checkpoints (io/ckpt/ckpt.h) hold the gradients of the last min(lag, step) steps, not yet
 * applied, with their overflow flags, and before_update; a resumed run copies them back
 * into the slots of their steps (grad_ring_slot_of), so it applies what the straight
 * run would.
 *
 * Weight prediction (async_predict = on): a gradient computed now is applied lag
 * updates later, to weights that have moved on; computing it at the current weights
 * plus lag times the last update instead cancels most of that lag, since AdamW's
 * momentum makes consecutive updates alike. Costs two parameter copies. */
#ifndef GT_GRAD_RING_H
#define GT_GRAD_RING_H

#include <stddef.h>
#include <stdint.h>

enum { GRAD_RING_MAX = 9 }; /* staleness (at most 8) + 1 */

typedef struct grad_ring {
    float *slot[GRAD_RING_MAX];
    int overflow[GRAD_RING_MAX];
    int n, lag;
    size_t n_params;
    int threads;
    float *predicted;     /* prediction: the weights the step computes at */
    float *before_update; /* the weights before the last update */
} grad_ring;

/* lag + 1 zeroed gradient buffers of n_params floats; with predict, the prediction's
 * copies, starting from params (no update yet). 0, or -1 (reported; grad_ring_free
 * cleans up). */
int grad_ring_init(grad_ring *r, size_t n_params, int lag, int predict, const float *params,
                   int threads);
void grad_ring_free(grad_ring *r);

/* The buffer step `step` computes its gradient into. */
static inline int grad_ring_slot_of(const grad_ring *r, int64_t step)
{
    return (int)(step % r->n);
}
/* Whether step `step` has a gradient to apply (after lag steps of warm-up), and the
 * slot of that gradient: the one computed lag steps before. */
static inline int grad_ring_due(const grad_ring *r, int64_t step) { return step >= r->lag; }
static inline int grad_ring_due_slot(const grad_ring *r, int64_t step)
{
    return (int)((step - r->lag) % r->n);
}
/* The weights step computes at: params, or with prediction params + lag x (params -
 * the weights before the last update) (computed here). */
const float *grad_ring_weights(grad_ring *r, const float *params);
/* Call before each update of params (records them for the next prediction). */
void grad_ring_before_update(grad_ring *r, const float *params);

#endif
