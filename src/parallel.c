/* parallel — see parallel.h. */
#include "parallel.h"

#include <limits.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "grid.h"
#include "grid_mpi.h"
#include "util.h"

static int mpi_on = 0; /* MPI mode: MPI_Init_thread done, MPI_Finalize not yet */
static int thread_multiple = 0; /* MPI gave MPI_THREAD_MULTIPLE */
static int g_rank = 0, g_world = 1;

/* Largest count handed to one MPI call: well inside an int, and a multiple of 64. */
enum { PAR_CHUNK = 1 << 28 };

int par_launched(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK",
                                       "SLURM_STEP_NUM_TASKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

int par_launcher_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                       "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        char *end = NULL;
        long r = v ? strtol(v, &end, 10) : -1;
        if (v && end != v && r >= 0 && r <= 1L << 30) return (int)r;
    }
    return -1;
}

_Noreturn static void abort_now(void)
{
    fflush(stdout);
    fflush(stderr);
    if (mpi_on) MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

_Noreturn void par_abort_reported(void) { abort_now(); }

_Noreturn void par_abort(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    gt_error("%s", msg);
    abort_now();
}

void par_check_mpi(int rc, const char *call)
{
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "?");
    par_abort("%s failed: %s (error %d)", call, text, rc);
}

/* World size the launcher announced, or 0 when it says nothing. mpirun's own variable
 * wins over the scheduler's (mpirun inside a Slurm job may start fewer ranks than the
 * step has tasks). */
static long launcher_world(const char **var, const char **value)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
                                       "SLURM_STEP_NUM_TASKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (!v) continue;
        char *end = NULL;
        long n = strtol(v, &end, 10);
        if (end == v) continue;
        *var = vars[i];
        *value = v;
        return n;
    }
    return 0;
}

void par_init(int *argc, char ***argv)
{
    if (mpi_on || !par_launched()) return;
    int provided = 0;
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) {
        gt_error("MPI_Init_thread failed (error %d)", rc);
        exit(1);
    }
    mpi_on = 1;
    thread_multiple = provided >= MPI_THREAD_MULTIPLE;
    par_check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
              "MPI_Comm_set_errhandler");
    par_check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &g_rank), "MPI_Comm_rank");
    par_check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &g_world), "MPI_Comm_size");
    if (g_world > 1) gt_set_report_rank(g_rank);
    if (provided < MPI_THREAD_FUNNELED)
        par_abort("MPI gives thread level %d, below MPI_THREAD_FUNNELED (%d), which the "
                  "data loader thread needs", provided, MPI_THREAD_FUNNELED);
    const char *var = NULL, *value = NULL;
    long announced = launcher_world(&var, &value);
    if (g_world == 1 && announced > 1)
        par_abort("launched as %ld processes (%s=%s), but MPI sees a world of 1 rank: "
                  "each would train its own model; start with mpirun, or srun --mpi=pmix",
                  announced, var, value);
}

int par_thread_multiple(void) { return mpi_on && thread_multiple; }

/* This rank's place on its node and the node's ranks (-1: not asked yet). */
static int local_rank = -1, local_size = -1;

static void find_local(void)
{
    if (local_rank >= 0) return;
    if (!mpi_on) {
        local_rank = 0;
        local_size = 1;
        return;
    }
    MPI_Comm node;
    par_check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank,
                                  MPI_INFO_NULL, &node),
              "MPI_Comm_split_type (ranks of a node)");
    par_check_mpi(MPI_Comm_rank(node, &local_rank), "MPI_Comm_rank");
    par_check_mpi(MPI_Comm_size(node, &local_size), "MPI_Comm_size");
    par_check_mpi(MPI_Comm_free(&node), "MPI_Comm_free");
}

int par_local_rank(void)
{
    find_local();
    return local_rank;
}

int par_local_size(void)
{
    find_local();
    return local_size;
}

void par_finalize(void)
{
    if (!mpi_on) return;
    fflush(stdout);
    MPI_Finalize();
    mpi_on = 0;
}

int par_rank(void) { return g_rank; }
int par_world(void) { return g_world; }
int par_is_root(void) { return g_rank == 0; }

void par_printf(const char *fmt, ...)
{
    if (g_rank != 0) return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
}

void par_allreduce_mean(float *buf, size_t n)
{
    if (g_world == 1) return;
    for (size_t off = 0; off < n; off += PAR_CHUNK) {
        size_t len = n - off < (size_t)PAR_CHUNK ? n - off : (size_t)PAR_CHUNK;
        par_check_mpi(MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)len, MPI_FLOAT, MPI_SUM,
                                MPI_COMM_WORLD),
                  "MPI_Allreduce of the gradients");
    }
    const float scale = 1.0f / (float)g_world;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) buf[i] *= scale;
}

double par_sum_double(double x)
{
    if (g_world == 1) return x;
    double s = 0.0;
    par_check_mpi(MPI_Allreduce(&x, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
              "MPI_Allreduce of a metric");
    return s;
}

double par_mean_double(double x)
{
    if (g_world == 1) return x;
    return par_sum_double(x) / g_world;
}

double par_bcast_double(double x)
{
    if (g_world == 1) return x;
    par_check_mpi(MPI_Bcast(&x, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD), "MPI_Bcast");
    return x;
}

void par_sum_int64(int64_t *buf, size_t n)
{
    if (g_world == 1) return;
    for (size_t at = 0; at < n;) {
        const int m = n - at > (size_t)INT_MAX ? INT_MAX : (int)(n - at);
        par_check_mpi(MPI_Allreduce(MPI_IN_PLACE, buf + at, m, MPI_INT64_T, MPI_SUM,
                                    MPI_COMM_WORLD),
                      "MPI_Allreduce of the data files' shapes");
        at += (size_t)m;
    }
}

int par_all_ok(int ok)
{
    if (g_world == 1) return ok != 0;
    int mine = ok != 0, all = 0;
    par_check_mpi(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
              "MPI_Allreduce (agreeing on success)");
    return all;
}

/* Text that a line-by-line comparison can show: printable, tabs and newlines. */
static int is_text(const unsigned char *p, size_t n)
{
    if (n > ((size_t)1 << 20)) return 0;
    for (size_t i = 0; i < n; i++)
        if ((p[i] < 0x20 && p[i] != '\n' && p[i] != '\t') || p[i] == 0x7f) return 0;
    return 1;
}

/* Copies line `start` of text[n] (up to its newline) into out[cap], '' at the end. */
static void line_at(const char *text, size_t n, size_t start, char *out, size_t cap)
{
    size_t len = 0;
    while (start + len < n && text[start + len] != '\n') len++;
    if (len >= cap) len = cap - 1;
    memcpy(out, text + start, len);
    out[len] = '\0';
}

/* Broadcasts rank 0's hash and, when they are text, its bytes (chunked). Returns a
 * malloc'd copy of rank 0's text on every rank, or NULL (not text, or out of memory). */
static char *bcast_root_text(const void *bytes, size_t n, uint64_t h, size_t *root_n,
                             uint64_t *root_h)
{
    uint64_t head[3] = {n, is_text(bytes, n), h};
    par_check_mpi(MPI_Bcast(head, 3, MPI_UINT64_T, 0, MPI_COMM_WORLD), "MPI_Bcast");
    *root_n = (size_t)head[0];
    *root_h = head[2];
    if (!head[1]) return NULL;
    char *buf = malloc(*root_n + 1);
    int have = buf != NULL, all = 0;
    par_check_mpi(MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
              "MPI_Allreduce");
    if (!all) {
        free(buf);
        return NULL;
    }
    if (g_rank == 0) memcpy(buf, bytes, n);
    for (size_t off = 0; off < *root_n; off += PAR_CHUNK) {
        size_t len = *root_n - off < (size_t)PAR_CHUNK ? *root_n - off : (size_t)PAR_CHUNK;
        par_check_mpi(MPI_Bcast(buf + off, (int)len, MPI_CHAR, 0, MPI_COMM_WORLD), "MPI_Bcast");
    }
    buf[*root_n] = '\0';
    return buf;
}

int par_id_shared(const char *id)
{
    if (g_world == 1) return 0;
    char mine[PAR_ID_MAX] = {0};
    snprintf(mine, sizeof mine, "%s", id);
    char *all = malloc((size_t)g_world * PAR_ID_MAX);
    if (!all) par_abort("out of memory gathering the %d ranks' device ids", g_world);
    par_check_mpi(MPI_Allgather(mine, PAR_ID_MAX, MPI_CHAR, all, PAR_ID_MAX, MPI_CHAR,
                                MPI_COMM_WORLD),
                  "MPI_Allgather of the device ids");
    int shared = 0;
    for (int r = 0; r < g_world && !shared; r++)
        shared = r != g_rank && memcmp(all + (size_t)r * PAR_ID_MAX, mine, PAR_ID_MAX) == 0;
    free(all);
    return shared;
}

int par_check_same(const char *what, const void *bytes, size_t n)
{
    if (g_world == 1) return 0;
    uint64_t h = gt_hash64(bytes, n);
    /* min of h and of ~h (= ~max h) in one call. */
    uint64_t mine[2] = {h, ~h}, lo[2] = {0, 0};
    par_check_mpi(MPI_Allreduce(mine, lo, 2, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD),
              "MPI_Allreduce of a hash");
    if (lo[0] == ~lo[1]) return 0;

    /* Every rank says something, so whichever lines reach the user name the cause. */
    size_t root_n = 0;
    uint64_t root_h = 0;
    char *root = bcast_root_text(bytes, n, h, &root_n, &root_h);
    const char *mine_text = bytes;
    if (g_rank == 0 || h == root_h) {
        gt_error("the %s differs between ranks (this rank's is the same as rank 0's; "
                 "the other ranks' lines show the difference)", what);
    } else if (root && is_text(bytes, n)) {
        size_t i = 0, start = 0; /* start of the first line that differs */
        while (i < n && i < root_n && mine_text[i] == root[i]) {
            if (mine_text[i] == '\n') start = i + 1;
            i++;
        }
        char here[160], there[160];
        line_at(mine_text, n, start, here, sizeof here);
        line_at(root, root_n, start, there, sizeof there);
        gt_error("the %s differs between ranks: '%s' here, '%s' on rank 0", what, here,
                 there);
    } else {
        gt_error("the %s differs between ranks: not the same as rank 0's (hash %016llx "
                 "here, %016llx on rank 0)", what, (unsigned long long)h,
                 (unsigned long long)root_h);
    }
    free(root);
    return -1;
}

/* ---------------------------------------------------------------- gradient buckets */

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
