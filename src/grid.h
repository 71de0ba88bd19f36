/* grid — the ranks of a run as a dp x tp grid, one MPI communicator per axis.
 *
 * World rank w sits at tp coordinate w % tp and dp coordinate w / tp: tensor-parallel
 * peers are adjacent ranks, so a launcher that fills nodes in rank order puts them on
 * one node, where their per-layer all-reduces stay off the network. The dp
 * communicator joins the ranks of one tp coordinate (they hold the same shard and
 * average its gradients); the tp communicator joins the tp peers of one replica (they
 * hold one model between them and add up partial layer outputs).
 *
 * Pipeline parallelism (pp) is a key of the config but not built yet: grid_init
 * refuses pp > 1 with a line saying so.
 *
 * In single mode (parallel.h) every function works as in a grid of one rank. All are
 * called by the thread that called par_init. Errors in MPI calls end the job
 * (par_abort); setup errors are reported by rank 0 and agreed by every rank. */
#ifndef GT_GRID_H
#define GT_GRID_H

#include <stddef.h>

/* Checks the shape against the world size (world % (tp x pp) == 0) and splits the
 * communicators. A collective; returns 0, or -1 on every rank (rank 0 said why). */
int grid_init(int tp, int pp);
/* Frees the communicators (before par_finalize). */
void grid_free(void);

int grid_dp_rank(void); /* replica index: which share of the data this rank reads */
int grid_dp_size(void); /* number of replicas */
int grid_tp_rank(void); /* which shard of each split layer this rank holds */
int grid_tp_size(void);

/* In place over the tp peers: buf[i] = sum of buf[i]. Every peer gets the same bits.
 * No MPI call with tp 1. */
void grid_tp_allreduce_sum(float *buf, size_t n);
/* The model's tensor-parallel hook (model.h): the same, ctx unused. */
void grid_tp_allreduce_hook(void *ctx, float *buf, size_t n);
double grid_tp_sum_double(double x);

/* Gathers n floats from every tp peer to tp rank 0: all[p*n .. p*n+n) is peer p's.
 * `all` is only written (and may be NULL) on the other peers. */
void grid_tp_gather(const float *mine, float *all, size_t n);
/* The reverse: tp rank 0 sends all[p*n ..) to peer p, which receives it in mine. */
void grid_tp_scatter(const float *all, float *mine, size_t n);

/* Whether `bytes` is the same on every rank of this rank's dp communicator (the
 * replicas of one shard). A collective over the world; 0 when it is, else -1 with
 * one error line per differing rank. */
int grid_check_same_replicas(const char *what, const void *bytes, size_t n);

#endif
