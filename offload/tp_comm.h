/* tp_comm — NCCL for the tensor-parallel all-reduces of a shard's blocks on the GPUs
 * (gpu_model.h, gpu_model_tp.device_sum): one communicator per tp group, the peers'
 * GPUs adding up FP16 partial sums over NVLink or PCIe without the host. C interface, no
 * CUDA or NCCL type (src/ uses it); nothing here calls MPI: the caller carries the id
 * tp rank 0 draws to its peers (src/: a broadcast over the tp communicator).
 *
 * Built with NCCL where configure found it in the CUDA toolkit (HAVE_NCCL: "NCCL: yes"
 * in configure's summary); otherwise tp_comm_built() is 0 and the others fail, and
 * the caller takes the host path (gpu_model_tp.host_sum). NCCL wants one GPU per rank
 * of a communicator: ranks that share a GPU take the host path too (the caller's
 * choice). tp_comm.cu implements it with NCCL; tp_comm_none.c is the stand-in of every
 * build without (no CUDA, no NCCL, the CPU test double of the GPU).
 *
 * Errors: every function returning int gives 0, or -1 with a one-line reason in `why`. */
#ifndef GT_OFFLOAD_TP_COMM_H
#define GT_OFFLOAD_TP_COMM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tp_comm tp_comm;

enum { TP_COMM_ID_BYTES = 128 }; /* NCCL_UNIQUE_ID_BYTES */

/* 1 when this gentrain was built with NCCL. */
int tp_comm_built(void);

/* "NCCL 2.28.9" (the library loaded), or why there is none. */
void tp_comm_describe(char *out, size_t cap);

/* A fresh communicator id (on tp rank 0 of the group, after offload_use_device), for
 * the caller to hand every peer. */
int tp_comm_id(unsigned char id[TP_COMM_ID_BYTES], char *why, size_t cap);

/* The communicator of `size` peers from id, this process being peer `rank`, on its
 * current GPU (offload_use_device). A collective of the group: every peer calls it with
 * the same id, each with its own GPU. NULL with `why` set on failure. */
tp_comm *tp_comm_create(const unsigned char id[TP_COMM_ID_BYTES], int size, int rank,
                        char *why, size_t cap);
void tp_comm_free(tp_comm *c); /* NULL is fine */

/* gpu_model_tp.device_sum with ctx = a tp_comm: buf [n] FP16 on the device summed over
 * the peers in place, queued on `stream` (a cudaStream_t). */
int tp_comm_sum_half(void *ctx, void *buf, size_t n, void *stream, char *why, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
