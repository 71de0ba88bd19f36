/* loader — see loader.h.
 *
 * A single producer (the thread) and a single consumer (the step) share a ring of
 * `depth` slots under one mutex. Batches are numbered from 0 in ring order; batch n
 * lives in slot n % depth and holds the samples first_sample + n*B*world onwards.
 *   produced  batches the thread has finished filling
 *   consumed  batches handed to the step by loader_next
 *   released  batches whose slot the step has given back (the one it holds is given
 *             back on its next loader_next call)
 * released <= consumed <= produced, and the thread fills slot produced % depth only
 * while produced - released < depth, so it never writes a slot the step can still read.
 * Slot contents are written outside the lock: the mutex hand-off (produced++ under the
 * lock, read after observing it under the lock) orders the writes before the reads. */
#include "loader.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_features.h" /* cpu_thread_binding */
#include "util.h"

struct loader {
    /* fixed after start */
    h5set *data;
    token_windows w;
    uint64_t seed;
    int B, T, depth;
    int rank, world;
    int64_t vocab_size;
    int64_t first_sample;
    int32_t *slots;   /* depth x [inputs B*T | targets B*T] */
    int32_t *scratch; /* T+1 tokens, owned by the thread */

    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;
    pthread_cond_t not_full;  /* producer waits: ring full */
    pthread_cond_t not_empty; /* consumer waits: nothing new */
    int mu_init, not_full_init, not_empty_init;

    /* guarded by mu */
    int64_t produced, consumed, released;
    int holding; /* the step holds batch consumed-1 */
    int stop;    /* loader_stop asked the thread to quit */
    int failed;  /* the thread hit an error after `produced` good batches */
};

static int32_t *slot_inputs(loader *l, int64_t n)
{
    size_t bt = (size_t)l->B * (size_t)l->T;
    return l->slots + (size_t)(n % l->depth) * 2 * bt;
}

/* Fills slot of ring batch n (this rank's share of the samples first_sample +
 * n*B*world onwards). Only the thread calls it, on a slot no one else touches. */
static int fill_batch(loader *l, int64_t n)
{
    int B = l->B, T = l->T;
    size_t bt = (size_t)B * (size_t)T;
    int32_t *inputs = slot_inputs(l, n);
    int32_t *targets = inputs + bt;
    const int64_t first = l->first_sample + (n * l->world + l->rank) * B;
    for (int b = 0; b < B; b++) {
        int64_t g = first + b, row, col;
        int file;
        windows_locate(&l->w, l->seed, g, &file, &row, &col);
        if (h5set_read(l->data, file, row, col, (int64_t)T + 1, l->scratch,
                       l->vocab_size) != 0)
            return -1;
        memcpy(inputs + (size_t)b * T, l->scratch, (size_t)T * sizeof(int32_t));
        memcpy(targets + (size_t)b * T, l->scratch + 1, (size_t)T * sizeof(int32_t));
    }
    return 0;
}

static void *loader_main(void *arg)
{
    loader *l = arg;
    /* Started by the team's first thread, it inherits that thread's binding where OpenMP
     * binds (OMP_PROC_BIND): one CPU, shared with that thread for every batch it reads.
     * It is no member of the team: any CPU of the team's places will do. */
    cpu_thread_binding(0);
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->stop && l->produced - l->released >= l->depth)
            pthread_cond_wait(&l->not_full, &l->mu);
        if (l->stop) break;
        int64_t n = l->produced;
        pthread_mutex_unlock(&l->mu);

        int rc = fill_batch(l, n);

        pthread_mutex_lock(&l->mu);
        if (rc != 0) {
            l->failed = 1;
            pthread_cond_broadcast(&l->not_empty);
            break;
        }
        l->produced = n + 1;
        pthread_cond_broadcast(&l->not_empty);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static void loader_free(loader *l)
{
    if (l->not_empty_init) pthread_cond_destroy(&l->not_empty);
    if (l->not_full_init) pthread_cond_destroy(&l->not_full);
    if (l->mu_init) pthread_mutex_destroy(&l->mu);
    free(l->scratch);
    free(l->slots);
    free(l);
}

loader *loader_start(h5set *data, const token_windows *w, uint64_t seed, int B, int T,
                     int64_t vocab_size, int64_t first_sample, int depth, int rank,
                     int world)
{
    if (!data || !w) {
        gt_error("loader: no dataset to read");
        return NULL;
    }
    if (B < 1 || T < 1 || depth < 1 || first_sample < 0 || world < 1 || rank < 0 ||
        rank >= world) {
        gt_error("loader: invalid settings (batch_size %d, block_size %d, depth %d, "
                 "first sample %lld, rank %d of %d)",
                 B, T, depth, (long long)first_sample, rank, world);
        return NULL;
    }
    if (T != w->T) {
        gt_error("loader: block_size %d differs from the windows' block_size %d", T, w->T);
        return NULL;
    }
    if (w->count < (int64_t)B * world) {
        gt_error("%s:%s has %lld windows; batch_size x ranks = %d x %d = %lld needs at "
                 "least %lld", h5set_spec(data), h5set_name(data), (long long)w->count,
                 B, world, (long long)B * world, (long long)B * world);
        return NULL;
    }
    size_t bt = (size_t)B * (size_t)T;
    if (bt > SIZE_MAX / sizeof(int32_t) / 2 / (size_t)depth) {
        gt_error("loader: ring of %d batches of %d x %d tokens is too large", depth, B, T);
        return NULL;
    }

    loader *l = gt_calloc(sizeof *l, "loader");
    if (!l) return NULL;
    l->data = data;
    l->w = *w;
    l->seed = seed;
    l->B = B;
    l->T = T;
    l->depth = depth;
    l->rank = rank;
    l->world = world;
    l->vocab_size = vocab_size;
    l->first_sample = first_sample;

    l->slots = gt_malloc((size_t)depth * 2 * bt * sizeof(int32_t), "loader batch ring");
    if (!l->slots) goto fail;
    l->scratch = gt_malloc(((size_t)T + 1) * sizeof(int32_t), "loader window buffer");
    if (!l->scratch) goto fail;

    if (pthread_mutex_init(&l->mu, NULL) != 0) goto fail_sync;
    l->mu_init = 1;
    if (pthread_cond_init(&l->not_full, NULL) != 0) goto fail_sync;
    l->not_full_init = 1;
    if (pthread_cond_init(&l->not_empty, NULL) != 0) goto fail_sync;
    l->not_empty_init = 1;

    if (pthread_create(&l->thread, NULL, loader_main, l) != 0) {
        gt_error("loader: cannot start the data loading thread for %s:%s",
                 h5set_spec(data), h5set_name(data));
        goto fail;
    }
    l->thread_started = 1;
    return l;

fail_sync:
    gt_error("loader: cannot create thread synchronisation objects");
fail:
    loader_free(l);
    return NULL;
}

int loader_next(loader *l, const int32_t **inputs, const int32_t **targets,
                double *wait_s)
{
    double t0 = gt_now();
    pthread_mutex_lock(&l->mu);
    if (l->holding) {
        l->released++;
        l->holding = 0;
        pthread_cond_signal(&l->not_full);
    }
    while (l->consumed == l->produced && !l->failed)
        pthread_cond_wait(&l->not_empty, &l->mu);
    if (l->consumed == l->produced) {
        /* The thread failed on this batch; it reported the error itself. */
        pthread_mutex_unlock(&l->mu);
        if (wait_s) *wait_s = gt_now() - t0;
        return -1;
    }
    int64_t n = l->consumed++;
    l->holding = 1;
    pthread_mutex_unlock(&l->mu);

    const int32_t *in = slot_inputs(l, n);
    if (inputs) *inputs = in;
    if (targets) *targets = in + (size_t)l->B * (size_t)l->T;
    if (wait_s) *wait_s = gt_now() - t0;
    return 0;
}

void loader_stop(loader *l)
{
    if (!l) return;
    if (l->thread_started) {
        pthread_mutex_lock(&l->mu);
        l->stop = 1;
        pthread_cond_broadcast(&l->not_full);
        pthread_cond_broadcast(&l->not_empty);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->thread, NULL);
    }
    loader_free(l);
}
