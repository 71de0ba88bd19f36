// tp_comm — see tp_comm.h: NCCL's communicator and all-reduce. Built only where
// configure found NCCL (HAVE_NCCL); elsewhere tp_comm_none.c stands in.
#include "tp_comm.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <nccl.h>

namespace {

void say(char *why, size_t cap, const char *fmt, ...)
{
    if (!why || cap == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
}

} // namespace

static_assert(TP_COMM_ID_BYTES == NCCL_UNIQUE_ID_BYTES, "the id's size is NCCL's");

struct tp_comm {
    ncclComm_t comm;
};

#define NC(call, what)                                                                 \
    do {                                                                               \
        ncclResult_t r_ = (call);                                                      \
        if (r_ != ncclSuccess) {                                                       \
            say(why, cap, "NCCL: %s: %s", what, ncclGetErrorString(r_));               \
            return -1;                                                                 \
        }                                                                              \
    } while (0)

extern "C" {

int tp_comm_built(void) { return 1; }

void tp_comm_describe(char *out, size_t cap)
{
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess) {
        snprintf(out, cap, "NCCL (version unknown)");
        return;
    }
    // NCCL_VERSION(X, Y, Z) is X*10000 + Y*100 + Z from 2.9 on.
    snprintf(out, cap, "NCCL %d.%d.%d", v / 10000, v / 100 % 100, v % 100);
}

int tp_comm_id(unsigned char id[TP_COMM_ID_BYTES], char *why, size_t cap)
{
    ncclUniqueId u;
    NC(ncclGetUniqueId(&u), "ncclGetUniqueId");
    memcpy(id, u.internal, TP_COMM_ID_BYTES);
    return 0;
}

tp_comm *tp_comm_create(const unsigned char id[TP_COMM_ID_BYTES], int size, int rank,
                        char *why, size_t cap)
{
    if (size < 1 || rank < 0 || rank >= size) {
        say(why, cap, "NCCL: peer %d of %d", rank, size);
        return nullptr;
    }
    tp_comm *c = (tp_comm *)calloc(1, sizeof *c);
    if (!c) {
        say(why, cap, "NCCL: out of host memory");
        return nullptr;
    }
    ncclUniqueId u;
    memcpy(u.internal, id, TP_COMM_ID_BYTES);
    const ncclResult_t r = ncclCommInitRank(&c->comm, size, u, rank);
    if (r != ncclSuccess) {
        say(why, cap, "NCCL: ncclCommInitRank (peer %d of %d): %s", rank, size,
            ncclGetErrorString(r));
        free(c);
        return nullptr;
    }
    return c;
}

void tp_comm_free(tp_comm *c)
{
    if (!c) return;
    ncclCommDestroy(c->comm); // nothing to do about a failure while tearing down
    free(c);
}

int tp_comm_sum_half(void *ctx, void *buf, size_t n, void *stream, char *why, size_t cap)
{
    tp_comm *c = (tp_comm *)ctx;
    NC(ncclAllReduce(buf, buf, n, ncclHalf, ncclSum, c->comm, (cudaStream_t)stream),
       "ncclAllReduce");
    return 0;
}

} // extern "C"

