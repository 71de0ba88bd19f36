/* par_reducer — see par_reducer.h. */
#define GT_DIST_MODULE /* may include grid_mpi.h */
#include "par_reducer.h"

#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>

#include "grid.h"     /* defines: grid_dp_size */
#include "grid_mpi.h" /* defines: grid_dp_comm */
#include "half.h"     /* defines: half_add, half_from_float, half_to_float */
#include "parallel.h" /* defines: par_check_mpi, par_abort */
#include "util.h"     /* defines: gt_calloc, gt_malloc, gt_error */

/* Largest bucket handed to one MPI call: well inside an int (as parallel.c's). */
enum { PAR_CHUNK = 1 << 28 };

typedef struct reducer_slot {
    float *buf;            /* the gradient being reduced */
    size_t lo;             /* buf[lo, n) is final */
    size_t started;        /* buf[started, n) has been handed to MPI */
    int n_req;             /* requests started (buckets) */
    MPI_Request *req;      /* [max_buckets] */
    uint16_t *half;        /* [n] fp16 copy on the wire (fp16 only) */
    int want_sumsq;
    double sumsq;
    int active;            /* begun and not yet waited for */
    int reduced;           /* buf holds the mean, not yet taken by par_reducer_wait */
} reducer_slot;

struct par_reducer {
    MPI_Comm comm;         /* the replicas that average (grid_dp_comm) */
    int size;              /* their number */
    size_t n, bucket;      /* floats in the buffer and per bucket */
    int fp16, n_slots, max_buckets;
    int current;           /* the slot par_reducer_ready fills */
    reducer_slot *slot;
};

static MPI_Op half_sum_op = MPI_OP_NULL;

/* MPI_User_function: inout = in + inout, halves summed in float. */
static void half_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    half_add(inout, in, (size_t)*len);
}

void par_reducer_free(par_reducer *r)
{
    if (!r) return;
    for (int s = 0; s < r->n_slots; s++) {
        free(r->slot[s].req);
        free(r->slot[s].half);
    }
    free(r->slot);
    free(r);
}

par_reducer *par_reducer_create(size_t n, size_t bucket_floats, int slots, int fp16)
{
    par_reducer *r = gt_calloc(sizeof *r, "gradient reducer");
    if (!r) return NULL;
    if (bucket_floats < 1) bucket_floats = 1;
    if (bucket_floats > (size_t)PAR_CHUNK) bucket_floats = PAR_CHUNK;
    r->comm = grid_dp_comm();
    r->size = grid_dp_size();
    r->n = n;
    r->bucket = bucket_floats;
    r->fp16 = fp16;
    r->n_slots = slots;
    /* Buckets are cut from the top of each contiguous ready run; the last one of the
     * buffer may be partial. */
    size_t nb = n / bucket_floats + 1;
    if (nb > INT_MAX) {
        gt_error("bucket_mb is too small: %zu buckets for %zu gradients", nb, n);
        free(r);
        return NULL;
    }
    r->max_buckets = (int)nb;
    r->slot = gt_calloc(sizeof *r->slot * (size_t)slots, "gradient reducer slots");
    if (!r->slot) goto fail;
    for (int s = 0; s < slots; s++) {
        r->slot[s].req = gt_malloc(sizeof(MPI_Request) * nb, "MPI requests");
        if (!r->slot[s].req) goto fail;
        if (fp16 && r->size > 1) {
            r->slot[s].half = gt_malloc(n * sizeof(uint16_t), "fp16 gradients");
            if (!r->slot[s].half) goto fail;
        }
    }
    if (fp16 && r->size > 1 && half_sum_op == MPI_OP_NULL)
        par_check_mpi(MPI_Op_create(half_sum, 1, &half_sum_op), "MPI_Op_create");
    return r;
fail:
    par_reducer_free(r);
    return NULL;
}

size_t par_reducer_bytes(const par_reducer *r) { return r->n * (r->fp16 ? 2 : 4); }

size_t par_reducer_buckets(const par_reducer *r) { return (r->n + r->bucket - 1) / r->bucket; }

void par_reducer_begin(par_reducer *r, int slot, float *buf, int want_sumsq)
{
    reducer_slot *s = &r->slot[slot];
    if (s->active || s->reduced) par_abort("internal: gradient slot %d begun twice", slot);
    s->buf = buf;
    s->lo = s->started = r->n;
    s->n_req = 0;
    s->want_sumsq = want_sumsq;
    s->sumsq = 0.0;
    s->active = 1;
    r->current = slot;
}

/* Hands buf[off, off+len) to MPI. */
static void start_bucket(par_reducer *r, reducer_slot *s, size_t off, size_t len)
{
    if (s->n_req >= r->max_buckets) par_abort("internal: too many gradient buckets");
    MPI_Request *req = &s->req[s->n_req++];
    if (r->fp16) {
        half_from_float(s->half + off, s->buf + off, len);
        par_check_mpi(MPI_Iallreduce(MPI_IN_PLACE, s->half + off, (int)len, MPI_UINT16_T,
                                 half_sum_op, r->comm, req),
                  "MPI_Iallreduce of a gradient bucket (fp16)");
    } else {
        par_check_mpi(MPI_Iallreduce(MPI_IN_PLACE, s->buf + off, (int)len, MPI_FLOAT, MPI_SUM,
                                 r->comm, req),
                  "MPI_Iallreduce of a gradient bucket");
    }
}

void par_reducer_ready(void *ctx, size_t offset, size_t count)
{
    par_reducer *r = ctx;
    reducer_slot *s = &r->slot[r->current];
    if (!s->active || offset + count != s->lo)
        par_abort("internal: gradient range [%zu, %zu) reported out of order", offset,
                  offset + count);
    if (s->want_sumsq) {
        double sq = 0.0;
        const float *g = s->buf + offset;
#pragma omp parallel for reduction(+ : sq) schedule(static)
        for (size_t i = 0; i < count; i++) sq += (double)g[i] * g[i];
        s->sumsq += sq;
    }
    s->lo = offset;
    if (r->size == 1) return;
    while (s->started - s->lo >= r->bucket) {
        start_bucket(r, s, s->started - r->bucket, r->bucket);
        s->started -= r->bucket;
    }
    if (s->lo == 0 && s->started > 0) {
        start_bucket(r, s, 0, s->started);
        s->started = 0;
    }
    /* Let MPI move the buckets already started along while backward goes on. */
    int done = 0;
    par_check_mpi(MPI_Testall(s->n_req, s->req, &done, MPI_STATUSES_IGNORE), "MPI_Testall");
}

/* Waits for the buckets the slot started, then buf = mean over the replicas (fp16:
 * converted back first); the slot is then reduced, no longer active. */
static void complete_slot(par_reducer *r, reducer_slot *s)
{
    s->active = 0;
    s->reduced = 1;
    if (r->size == 1) return;
    if (s->n_req > 0)
        par_check_mpi(MPI_Waitall(s->n_req, s->req, MPI_STATUSES_IGNORE),
                      "MPI_Waitall on the gradient buckets");
    const float scale = 1.0f / (float)r->size;
    float *buf = s->buf;
    const size_t n = r->n;
    if (r->fp16) {
        const uint16_t *h = s->half;
        enum { CH = 4096 };
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i += CH) {
            size_t len = n - i < CH ? n - i : CH;
            half_to_float(buf + i, h + i, len);
            for (size_t j = i; j < i + len; j++) buf[j] *= scale;
        }
    } else {
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) buf[i] *= scale;
    }
}

double par_reducer_wait(par_reducer *r, int slot)
{
    reducer_slot *s = &r->slot[slot];
    if (!s->reduced && (!s->active || s->lo != 0))
        par_abort("internal: waiting for gradient slot %d before its backward ended", slot);
    if (!s->reduced) complete_slot(r, s);
    s->reduced = 0;
    return s->sumsq;
}

double par_reducer_complete(par_reducer *r, int slot)
{
    reducer_slot *s = &r->slot[slot];
    if (s->active) {
        if (s->lo != 0)
            par_abort("internal: completing gradient slot %d before its backward ended", slot);
        complete_slot(r, s);
    }
    return s->reduced ? s->sumsq : 0.0;
}

void par_reducer_set_reduced(par_reducer *r, int slot, float *buf, double sumsq)
{
    reducer_slot *s = &r->slot[slot];
    if (s->active) par_abort("internal: gradient slot %d is in flight", slot);
    s->buf = buf;
    s->sumsq = sumsq;
    s->reduced = 1;
}

void par_reducer_drain(par_reducer *r)
{
    if (!r) return;
    for (int i = 0; i < r->n_slots; i++)
        if (r->slot[i].active) complete_slot(r, &r->slot[i]);
}
