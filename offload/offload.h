/* offload — the GPU side of gentrain behind a C interface: nothing of CUDA leaks into
 * src/. Built from cuda_device.cu with `./configure --with-cuda[=DIR]`, else from
 * offload_none.c, which answers "no GPU" with the reason.
 *
 * This part finds the GPUs and binds a rank to one; the training step on the GPU is
 * gpu_model.h, which src/engine/device_step.c (offload = all on a whole model) and
 * src/engine/gpu_stage.c (the blocks of a whole model with offload = blocks, of a
 * pipeline stage or of a tensor-parallel shard) drive, and tp_comm.h the shards'
 * all-reduces over NCCL. All functions are called by the thread that trains. */
#ifndef GT_OFFLOAD_H
#define GT_OFFLOAD_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when this gentrain was built with CUDA. */
int offload_built(void);

/* What this gentrain's GPU side was built with (the CUDA and cuBLAS versions of its
 * headers), or that it was built without CUDA: one line, into buf. */
void offload_build(char *buf, size_t cap);

/* Number of usable GPUs; 0 with `why` set to the reason when there is none (built
 * without CUDA, no NVIDIA driver, no device); -1 with `why` set (the runtime's message)
 * when a driver or a device is there but CUDA cannot start (an old driver, a missing
 * fabric manager, ...): a fault to report, not an absence (cuda_presence.h). */
int offload_device_count(char *why, size_t cap);

/* Makes device `index` (0 .. count-1) this process's and describes it in `name` (e.g.
 * "NVIDIA H200, 139.8 GiB, sm_90"). Returns 0, or -1 with `why` set. */
int offload_use_device(int index, char *name, size_t name_cap, char *why, size_t cap);

/* The identity of the device this process took (offload_use_device), as text: its
 * UUID ("GPU-8c2f...", as nvidia-smi writes it), else its PCI address. Two processes
 * that took the same physical GPU get the same string, whatever each was shown of the
 * node (all its GPUs under mpirun, one renumbered 0 under srun --gpus-per-task=1), so
 * ranks tell a shared GPU by comparing these, not by counting. Returns 0, or -1 with
 * `why` set. */
int offload_device_id(char *id, size_t cap, char *why, size_t why_cap);

#ifdef __cplusplus
}
#endif

#endif
