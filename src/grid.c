/* grid — see grid.h. */
#include "grid.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "grid_mpi.h"
#include "parallel.h"
#include "util.h"

/* Before grid_init (or in single mode) the grid is dp = world, tp = 1. */
static int inited = 0;
static int tp_size = 1, tp_rank = 0;
static MPI_Comm dp_comm = MPI_COMM_NULL, tp_comm = MPI_COMM_NULL;

static void check(int rc, const char *call)
{
    if (rc != MPI_SUCCESS) par_abort("%s failed (MPI error %d)", call, rc);
}

static int multi(void) { return par_world() > 1; }

int grid_init(int tp, int pp)
{
    const int world = par_world();
    const char *why = NULL;
    char line[200];
    if (pp > 1) {
        why = "pp > 1: pipeline parallelism is not built yet (use tp and data "
              "parallelism)";
    } else if (tp < 1 || world % tp != 0) {
        snprintf(line, sizeof line,
                 "tp = %d does not divide the %d rank%s: the world must be dp x tp x pp "
                 "ranks", tp, world, world == 1 ? "" : "s");
        why = line;
    }
    if (why) {
        if (par_is_root()) gt_error("%s", why);
        return -1;
    }
    tp_size = tp;
    tp_rank = par_rank() % tp;
    if (multi()) {
        check(MPI_Comm_split(MPI_COMM_WORLD, tp_rank, par_rank(), &dp_comm),
              "MPI_Comm_split (data-parallel groups)");
        check(MPI_Comm_split(MPI_COMM_WORLD, par_rank() / tp, tp_rank, &tp_comm),
              "MPI_Comm_split (tensor-parallel groups)");
    }
    inited = 1;
    return 0;
}

void grid_free(void)
{
    if (dp_comm != MPI_COMM_NULL) MPI_Comm_free(&dp_comm);
    if (tp_comm != MPI_COMM_NULL) MPI_Comm_free(&tp_comm);
    inited = 0;
    tp_size = 1;
    tp_rank = 0;
}

int grid_dp_rank(void) { return par_rank() / tp_size; }
int grid_dp_size(void) { return par_world() / tp_size; }
int grid_tp_rank(void) { return tp_rank; }
int grid_tp_size(void) { return tp_size; }

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
        check(MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)len, MPI_FLOAT, MPI_SUM, tp_comm),
              "MPI_Allreduce over the tensor-parallel peers");
    }
}

void grid_tp_allreduce_hook(void *ctx, float *buf, size_t n)
{
    (void)ctx;
    grid_tp_allreduce_sum(buf, n);
}

double grid_tp_sum_double(double x)
{
    if (tp_size == 1) return x;
    double s = 0.0;
    check(MPI_Allreduce(&x, &s, 1, MPI_DOUBLE, MPI_SUM, tp_comm),
          "MPI_Allreduce over the tensor-parallel peers");
    return s;
}

void grid_tp_gather(const float *mine, float *all, size_t n)
{
    if (tp_size == 1) {
        if (all != mine)
            for (size_t i = 0; i < n; i++) all[i] = mine[i];
        return;
    }
    /* One message per peer: sizes beyond an int's count go in chunks. */
    for (int p = 0; p < tp_size; p++)
        for (size_t off = 0; off < n; off += CHUNK) {
            size_t len = n - off < (size_t)CHUNK ? n - off : (size_t)CHUNK;
            if (tp_rank == 0 && p == 0) {
                for (size_t i = 0; i < len; i++) all[off + i] = mine[off + i];
            } else if (tp_rank == 0) {
                check(MPI_Recv(all + (size_t)p * n + off, (int)len, MPI_FLOAT, p, 7, tp_comm,
                               MPI_STATUS_IGNORE), "MPI_Recv of a tensor-parallel shard");
            } else if (tp_rank == p) {
                check(MPI_Send(mine + off, (int)len, MPI_FLOAT, 0, 7, tp_comm),
                      "MPI_Send of a tensor-parallel shard");
            }
        }
}

void grid_tp_scatter(const float *all, float *mine, size_t n)
{
    if (tp_size == 1) {
        if (all != mine)
            for (size_t i = 0; i < n; i++) mine[i] = all[i];
        return;
    }
    for (int p = 0; p < tp_size; p++)
        for (size_t off = 0; off < n; off += CHUNK) {
            size_t len = n - off < (size_t)CHUNK ? n - off : (size_t)CHUNK;
            if (tp_rank == 0 && p == 0) {
                for (size_t i = 0; i < len; i++) mine[off + i] = all[off + i];
            } else if (tp_rank == 0) {
                check(MPI_Send(all + (size_t)p * n + off, (int)len, MPI_FLOAT, p, 8, tp_comm),
                      "MPI_Send of a tensor-parallel shard");
            } else if (tp_rank == p) {
                check(MPI_Recv(mine + off, (int)len, MPI_FLOAT, 0, 8, tp_comm,
                               MPI_STATUS_IGNORE), "MPI_Recv of a tensor-parallel shard");
            }
        }
}

int grid_check_same_replicas(const char *what, const void *bytes, size_t n)
{
    if (!multi()) return 0;
    const uint64_t h = gt_hash64(bytes, n);
    uint64_t mine[2] = {h, ~h}, lo[2] = {0, 0};
    check(MPI_Allreduce(mine, lo, 2, MPI_UINT64_T, MPI_MIN, grid_dp_comm()),
          "MPI_Allreduce of a hash");
    const int same = lo[0] == ~lo[1];
    if (!same)
        gt_error("the %s differs between the replicas of tensor-parallel shard %d (hash "
                 "%016llx here)", what, tp_rank, (unsigned long long)h);
    return par_all_ok(same) ? 0 : -1;
}
