/* grad_ring — see grad_ring.h. */
#include "grad_ring.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

int grad_ring_init(grad_ring *r, size_t n_params, int lag, int predict, const float *params,
                   int threads)
{
    memset(r, 0, sizeof *r);
    if (lag < 0 || lag + 1 > GRAD_RING_MAX) {
        gt_error("internal: staleness %d outside 0..%d", lag, GRAD_RING_MAX - 1);
        return -1;
    }
    r->n = lag + 1;
    r->lag = lag;
    r->n_params = n_params;
    r->threads = threads;
    for (int i = 0; i < r->n; i++)
        if (!(r->slot[i] = gt_calloc(n_params * sizeof(float),
                                     lag ? "async gradient buffers" : "parameter gradients")))
            return -1;
    if (predict) {
        r->predicted = gt_malloc(n_params * sizeof(float), "predicted parameters");
        r->before_update = gt_malloc(n_params * sizeof(float), "parameters");
        if (!r->predicted || !r->before_update) return -1;
        memcpy(r->before_update, params, n_params * sizeof(float));
    }
    return 0;
}

void grad_ring_free(grad_ring *r)
{
    for (int i = 0; i < GRAD_RING_MAX; i++) free(r->slot[i]);
    free(r->predicted);
    free(r->before_update);
    memset(r, 0, sizeof *r);
}

const float *grad_ring_weights(grad_ring *r, const float *params)
{
    if (!r->predicted) return params;
    const float *w = params, *w0 = r->before_update;
    float *p = r->predicted;
    const float k = (float)r->lag;
    const size_t n = r->n_params;
#pragma omp parallel for num_threads(r->threads) schedule(static)
    for (size_t i = 0; i < n; i++) p[i] = w[i] + k * (w[i] - w0[i]);
    return p;
}

void grad_ring_before_update(grad_ring *r, const float *params)
{
    if (r->before_update) memcpy(r->before_update, params, r->n_params * sizeof(float));
}
