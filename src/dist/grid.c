/* grid — see grid.h. */
#define GT_DIST_MODULE /* may include grid_mpi.h */
#include "grid.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "grid_mpi.h"
#include "parallel.h"
#include "util.h"

/* Before grid_init (or in single mode) the grid is dp = world, tp = pp = 1. */
static int inited = 0;
static int tp_size = 1, tp_rank = 0, pp_size = 1, pp_rank = 0;
static MPI_Comm dp_comm = MPI_COMM_NULL, tp_comm = MPI_COMM_NULL, pp_comm = MPI_COMM_NULL,
                mp_comm = MPI_COMM_NULL, tie_comm = MPI_COMM_NULL;
/* Point-to-point sends of the pipeline not yet waited for. */
static MPI_Request *sends = NULL;
static int n_sends = 0, cap_sends = 0;

static int multi(void) { return par_world() > 1; }

static void split(int color, int key, MPI_Comm *out, const char *what)
{
    par_check_mpi(MPI_Comm_split(MPI_COMM_WORLD, color, key, out), what);
}

int grid_init(int tp, int pp)
{
    const int world = par_world();
    if (tp < 1 || pp < 1 || world % (tp * pp) != 0) {
        if (par_is_root())
            gt_error("tp x pp = %d x %d = %d does not divide the %d rank%s: the world must "
                     "be dp x tp x pp ranks", tp, pp, tp * pp, world, world == 1 ? "" : "s");
        return -1;
    }
    tp_size = tp;
    pp_size = pp;
    const int w = par_rank();
    tp_rank = w % tp;
    pp_rank = w / tp % pp;
    const int dp_rank = w / (tp * pp);
    if (multi()) {
        split(pp_rank * tp + tp_rank, dp_rank, &dp_comm, "MPI_Comm_split (data parallel)");
        split(w / tp, tp_rank, &tp_comm, "MPI_Comm_split (tensor parallel)");
        split(dp_rank * tp + tp_rank, pp_rank, &pp_comm, "MPI_Comm_split (pipeline)");
        split(dp_rank, pp_rank * tp + tp_rank, &mp_comm, "MPI_Comm_split (model parallel)");
        const int ends = pp > 1 && (pp_rank == 0 || pp_rank == pp - 1);
        split(ends ? dp_rank * tp + tp_rank : MPI_UNDEFINED, pp_rank, &tie_comm,
              "MPI_Comm_split (tied embedding)");
    }
    inited = 1;
    return 0;
}

void grid_free(void)
{
    grid_pp_wait_sends();
    MPI_Comm *comms[] = {&dp_comm, &tp_comm, &pp_comm, &mp_comm, &tie_comm};
    for (size_t i = 0; i < sizeof comms / sizeof comms[0]; i++)
        if (*comms[i] != MPI_COMM_NULL)
            par_check_mpi(MPI_Comm_free(comms[i]), "MPI_Comm_free");
    free(sends);
    sends = NULL;
    n_sends = cap_sends = 0;
    inited = 0;
    tp_size = pp_size = 1;
    tp_rank = pp_rank = 0;
}

int grid_dp_rank(void) { return par_rank() / (tp_size * pp_size); }
int grid_dp_size(void) { return par_world() / (tp_size * pp_size); }
int grid_tp_rank(void) { return tp_rank; }
int grid_tp_size(void) { return tp_size; }
int grid_pp_rank(void) { return pp_rank; }
int grid_pp_size(void) { return pp_size; }
int grid_mp_rank(void) { return pp_rank * tp_size + tp_rank; }
int grid_mp_size(void) { return pp_size * tp_size; }

MPI_Comm grid_dp_comm(void)
{
    return inited && dp_comm != MPI_COMM_NULL ? dp_comm : MPI_COMM_WORLD;
}

enum { CHUNK = 1 << 30 }; /* floats per MPI call: counts are ints */

void grid_tp_allreduce_sum(float *buf, size_t n)
{
    if (tp_size == 1) return;
    for (size_t off = 0; off < n; off += CHUNK) {
        size_t len = n - off < (size_t)CHUNK ? n - off : (size_t)CHUNK;
        par_check_mpi(MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)len, MPI_FLOAT, MPI_SUM, tp_comm),
              "MPI_Allreduce over the tensor-parallel peers");
    }
}

void grid_tp_allreduce_hook(void *ctx, float *buf, size_t n)
{
    (void)ctx;
    grid_tp_allreduce_sum(buf, n);
}

void grid_tp_allreduce_max_hook(void *ctx, float *buf, size_t n)
{
    (void)ctx;
    if (tp_size == 1) return;
    for (size_t off = 0; off < n; off += CHUNK) {
        size_t len = n - off < (size_t)CHUNK ? n - off : (size_t)CHUNK;
        par_check_mpi(MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)len, MPI_FLOAT, MPI_MAX, tp_comm),
              "MPI_Allreduce (max) over the tensor-parallel peers");
    }
}

void grid_tp_bcast(void *buf, size_t bytes, int root)
{
    if (tp_size == 1) return;
    for (size_t off = 0; off < bytes; off += CHUNK) {
        const size_t len = bytes - off < (size_t)CHUNK ? bytes - off : (size_t)CHUNK;
        par_check_mpi(MPI_Bcast((char *)buf + off, (int)len, MPI_BYTE, root, tp_comm),
                      "MPI_Bcast over the tensor-parallel peers");
    }
}

/* Sends and receives in chunks whose counts fit an int. */
void grid_pp_send(const float *buf, size_t n, int stage, int tag)
{
    for (size_t off = 0; off < n; off += CHUNK) {
        size_t len = n - off < (size_t)CHUNK ? n - off : (size_t)CHUNK;
        if (n_sends == cap_sends) {
            int cap = cap_sends ? 2 * cap_sends : 16;
            MPI_Request *r = realloc(sends, sizeof *r * (size_t)cap);
            if (!r) par_abort("out of memory for pipeline send requests");
            sends = r;
            cap_sends = cap;
        }
        par_check_mpi(MPI_Isend(buf + off, (int)len, MPI_FLOAT, stage, tag, pp_comm,
                        &sends[n_sends++]),
              "MPI_Isend to the next pipeline stage");
    }
}

void grid_pp_recv(float *buf, size_t n, int stage, int tag)
{
    for (size_t off = 0; off < n; off += CHUNK) {
        size_t len = n - off < (size_t)CHUNK ? n - off : (size_t)CHUNK;
        par_check_mpi(MPI_Recv(buf + off, (int)len, MPI_FLOAT, stage, tag, pp_comm,
                       MPI_STATUS_IGNORE),
              "MPI_Recv from a pipeline stage");
    }
}

void grid_pp_wait_sends(void)
{
    if (n_sends == 0) return;
    par_check_mpi(MPI_Waitall(n_sends, sends, MPI_STATUSES_IGNORE), "MPI_Waitall (pipeline sends)");
    n_sends = 0;
}

void grid_tie_allreduce_sum(float *buf, size_t n)
{
    if (pp_size == 1 || tie_comm == MPI_COMM_NULL) return;
    for (size_t off = 0; off < n; off += CHUNK) {
        size_t len = n - off < (size_t)CHUNK ? n - off : (size_t)CHUNK;
        par_check_mpi(MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)len, MPI_FLOAT, MPI_SUM,
                                    tie_comm),
                      "MPI_Allreduce of the tied embedding's gradient");
    }
}

double grid_mp_sum_double(double x)
{
    if (grid_mp_size() == 1) return x;
    double s = 0.0;
    par_check_mpi(MPI_Allreduce(&x, &s, 1, MPI_DOUBLE, MPI_SUM, mp_comm),
          "MPI_Allreduce over a model replica");
    return s;
}

int grid_mp_all_ok(int ok)
{
    if (grid_mp_size() == 1) return ok != 0;
    int mine = ok != 0, all = 0;
    par_check_mpi(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, mp_comm),
          "MPI_Allreduce over a model replica");
    return all;
}

void grid_mp_send_root(const float *buf, size_t n)
{
    for (size_t off = 0; off < n; off += CHUNK) {
        size_t len = n - off < (size_t)CHUNK ? n - off : (size_t)CHUNK;
        par_check_mpi(MPI_Send(buf + off, (int)len, MPI_FLOAT, 0, 9, mp_comm),
              "MPI_Send of a model part");
    }
}

void grid_mp_recv(float *buf, size_t n, int from)
{
    for (size_t off = 0; off < n; off += CHUNK) {
        size_t len = n - off < (size_t)CHUNK ? n - off : (size_t)CHUNK;
        par_check_mpi(MPI_Recv(buf + off, (int)len, MPI_FLOAT, from, 9, mp_comm, MPI_STATUS_IGNORE),
              "MPI_Recv of a model part");
    }
}

int grid_check_same_replicas(const char *what, const void *bytes, size_t n)
{
    if (!multi()) return 0;
    const uint64_t h = gt_hash64(bytes, n);
    uint64_t mine[2] = {h, ~h}, lo[2] = {0, 0};
    par_check_mpi(MPI_Allreduce(mine, lo, 2, MPI_UINT64_T, MPI_MIN, grid_dp_comm()),
          "MPI_Allreduce of a hash");
    const int same = lo[0] == ~lo[1];
    if (!same)
        gt_error("the %s differs between the replicas of tensor-parallel shard %d (hash "
                 "%016llx here)", what, tp_rank, (unsigned long long)h);
    return par_all_ok(same) ? 0 : -1;
}
