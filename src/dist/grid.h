/* grid — the ranks of a run as a dp x pp x tp grid, one MPI communicator per axis.
 *
 * World rank w sits at tp coordinate w % tp, pipeline stage w / tp % pp and replica
 * w / (tp x pp): tensor-parallel peers are adjacent ranks (a launcher that fills nodes
 * in rank order puts them on one node, where their per-layer all-reduces stay off the
 * network), then the stages of one replica. Communicators:
 *  - dp: the ranks holding the same part (stage, shard) in every replica: they average
 *    its gradients;
 *  - tp: the shards of one stage of one replica: they add up partial layer outputs;
 *  - pp: the stages of one shard of one replica, ranked by stage: activations and their
 *    gradients go point to point between neighbours;
 *  - mp: all ranks of one replica (pp x tp), ranked stage-major: norms, gathering the
 *    whole model;
 *  - tie: the first and last stage of one shard of one replica (pp > 1), which both hold
 *    the tied token embedding and add its two gradients.
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
int grid_pp_rank(void); /* pipeline stage */
int grid_pp_size(void);
int grid_mp_rank(void); /* pp_rank x tp + tp_rank: place within the replica */
int grid_mp_size(void); /* pp x tp */

/* In place over the tp peers: buf[i] = sum of buf[i]. Every peer gets the same bits.
 * No MPI call with tp 1. */
void grid_tp_allreduce_sum(float *buf, size_t n);
/* The model's tensor-parallel hook (model.h): the same, ctx unused. */
void grid_tp_allreduce_hook(void *ctx, float *buf, size_t n);
/* The same with the maximum instead of the sum (the model's tp_allreduce_max). */
void grid_tp_allreduce_max_hook(void *ctx, float *buf, size_t n);
/* Over the tp peers: buf's `bytes` bytes of tp rank `root` to every peer (nothing with
 * tp 1). */
void grid_tp_bcast(void *buf, size_t bytes, int root);

/* Pipeline: a non-blocking send of n floats to stage `stage` of this rank's pp
 * communicator (the buffer must stay untouched until grid_pp_wait_sends), and a
 * blocking receive from one. Tags tell micro-batches and directions apart. */
void grid_pp_send(const float *buf, size_t n, int stage, int tag);
void grid_pp_recv(float *buf, size_t n, int stage, int tag);
void grid_pp_wait_sends(void);
/* In place over the first and last stage (pp > 1; else and on middle stages: no-op). */
void grid_tie_allreduce_sum(float *buf, size_t n);
/* Over the ranks of this replica (pp x tp). */
double grid_mp_sum_double(double x);
int grid_mp_all_ok(int ok);
/* Gathering a replica's parts on its mp rank 0: the others send, it receives from
 * each (blocking, in the order it chooses). */
void grid_mp_send_root(const float *buf, size_t n);
void grid_mp_recv(float *buf, size_t n, int from);

/* Whether `bytes` is the same on every rank of this rank's dp communicator (the
 * replicas of one shard). A collective over the world; 0 when it is, else -1 with
 * one error line per differing rank. */
int grid_check_same_replicas(const char *what, const void *bytes, size_t n);

#endif
