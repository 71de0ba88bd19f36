/* nccl_emu — the NCCL calls of offload/tp_comm.cu for the CPU emulation (cuda_emu.h):
 * each emulated rank is an MPI process with its own emulated GPU, so a communicator is
 * an MPI communicator and an all-reduce an exchange over MPI. Plain C, built by the MPI
 * compiler against the toolkit's nccl.h (its types and prototypes; the definitions
 * here), linked into tests/gentrain_emugpu instead of libnccl.
 *
 * What it checks: that ncclCommInitRank's size and rank are the group's the id names;
 * that an all-reduce's buffers are emulated device memory and its stream one of the
 * emulation's (cuda_emu.cpp); that the types and operations are those gentrain uses
 * (sums of FP16 and FP32). What it computes: every peer gathers every peer's buffer and
 * adds them in rank order in FP32 (FP16 rounded once, at the end), so every peer gets
 * the same bits, as from NCCL's all-reduce (whose ring rounds FP16 at every step: the
 * bits can differ from NCCL's with more than 2 peers, the sums cannot).
 *
 * The id: ncclGetUniqueId writes the MPI_COMM_WORLD rank that drew it and how many it
 * had drawn before; ncclCommInitRank splits MPI_COMM_WORLD by the two, so it is a
 * collective of every rank of the job: all must create their communicators together
 * (gentrain's ranks do: every tp group when its engine is made). Nothing here waits:
 * the emulation runs every call when it is made, so the stream is only checked. */
#include <limits.h>
#include <mpi.h>
#include <nccl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"

/* cuda_emu.cpp */
int cuda_emu_is_device(const void *p, size_t n);
int cuda_emu_valid_stream(const void *s);
int cuda_emu_dry(void);

struct ncclComm {
    MPI_Comm comm;
    int size, rank;
};

static const char kMagic[16] = "gentrain-nccl";

typedef struct emu_id {
    char magic[16];
    int32_t world_rank; /* who drew it */
    int32_t serial;     /* how many that rank drew before */
} emu_id;

ncclResult_t ncclGetVersion(int *version)
{
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclSystemError: return "system error (emulation: MPI)";
    case ncclInvalidArgument: return "invalid argument (emulation)";
    case ncclInvalidUsage: return "invalid usage (emulation)";
    default: return "error (emulation)";
    }
}

static int mpi_on(void)
{
    int on = 0;
    return MPI_Initialized(&on) == MPI_SUCCESS && on;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    static int32_t serial = 0;
    emu_id e;
    memset(&e, 0, sizeof e);
    memcpy(e.magic, kMagic, sizeof kMagic);
    int rank = 0;
    if (!mpi_on() || MPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS)
        return ncclSystemError;
    e.world_rank = rank;
    e.serial = serial++;
    memset(id, 0, sizeof *id);
    memcpy(id->internal, &e, sizeof e);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    emu_id e;
    memcpy(&e, id.internal, sizeof e);
    int world = 0;
    if (memcmp(e.magic, kMagic, sizeof kMagic) != 0 || nranks < 1 || rank < 0 ||
        rank >= nranks)
        return ncclInvalidArgument;
    if (!mpi_on() || MPI_Comm_size(MPI_COMM_WORLD, &world) != MPI_SUCCESS)
        return ncclSystemError;
    if (e.world_rank < 0 || e.world_rank >= world || e.serial < 0 ||
        e.serial > (INT_MAX - world) / world)
        return ncclInvalidArgument;
    MPI_Comm c;
    if (MPI_Comm_split(MPI_COMM_WORLD, e.serial * world + e.world_rank, rank, &c) !=
        MPI_SUCCESS)
        return ncclSystemError;
    int size = 0, me = 0;
    if (MPI_Comm_size(c, &size) != MPI_SUCCESS || MPI_Comm_rank(c, &me) != MPI_SUCCESS) {
        MPI_Comm_free(&c);
        return ncclSystemError;
    }
    struct ncclComm *nc = malloc(sizeof *nc);
    if (size != nranks || me != rank || !nc) {
        free(nc);
        MPI_Comm_free(&c);
        return nc ? ncclInvalidUsage : ncclSystemError;
    }
    nc->comm = c;
    nc->size = size;
    nc->rank = me;
    *comm = nc;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!comm) return ncclInvalidArgument;
    const int rc = MPI_Comm_free(&comm->comm);
    free(comm);
    return rc == MPI_SUCCESS ? ncclSuccess : ncclSystemError;
}

/* acc [count] += the FP16 or FP32 values at p. */
static void add_to(float *acc, float *tmp, const void *p, size_t count, int half)
{
    if (half)
        half_to_float(tmp, (const uint16_t *)p, count);
    else
        memcpy(tmp, p, count * sizeof(float));
    for (size_t i = 0; i < count; i++) acc[i] += tmp[i];
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream)
{
    const int half = datatype == ncclHalf;
    const size_t bytes = count * (half ? 2 : 4);
    if (!comm || op != ncclSum || (!half && datatype != ncclFloat) ||
        !cuda_emu_valid_stream(stream) || !cuda_emu_is_device(sendbuff, bytes) ||
        !cuda_emu_is_device(recvbuff, bytes))
        return ncclInvalidArgument;
    if (cuda_emu_dry() || count == 0) return ncclSuccess; /* every peer alike */
    if (bytes > (size_t)INT_MAX / (size_t)comm->size) return ncclInvalidArgument;
    char *all = malloc(bytes * (size_t)comm->size);
    float *acc = calloc(count, sizeof(float)), *tmp = malloc(count * sizeof(float));
    ncclResult_t rc = ncclSystemError;
    if (all && acc && tmp &&
        MPI_Allgather(sendbuff, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE,
                      comm->comm) == MPI_SUCCESS) {
        for (int p = 0; p < comm->size; p++)
            add_to(acc, tmp, all + (size_t)p * bytes, count, half);
        if (half)
            half_from_float((uint16_t *)recvbuff, acc, count);
        else
            memcpy(recvbuff, acc, bytes);
        rc = ncclSuccess;
    }
    free(all);
    free(acc);
    free(tmp);
    return rc;
}
