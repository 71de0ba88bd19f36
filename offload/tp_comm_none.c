/* tp_comm_none — tp_comm.h where this gentrain has no NCCL (a build without CUDA, a
 * CUDA toolkit without NCCL, the test double of the GPU): tp_comm_built() is 0, so the
 * trainer sums the shards' partial results through host memory over MPI and never
 * calls the others; they refuse, saying why. */
#include "tp_comm.h"

#include <stdio.h>

#define NO_NCCL "this gentrain was built without NCCL"

static void say(char *why, size_t cap)
{
    if (why && cap) snprintf(why, cap, "%s", NO_NCCL);
}

int tp_comm_built(void) { return 0; }

void tp_comm_describe(char *out, size_t cap) { snprintf(out, cap, "no NCCL"); }

int tp_comm_id(unsigned char id[TP_COMM_ID_BYTES], char *why, size_t cap)
{
    (void)id;
    say(why, cap);
    return -1;
}

tp_comm *tp_comm_create(const unsigned char id[TP_COMM_ID_BYTES], int size, int rank,
                        char *why, size_t cap)
{
    (void)id, (void)size, (void)rank;
    say(why, cap);
    return NULL;
}

void tp_comm_free(tp_comm *c) { (void)c; }

int tp_comm_sum_half(void *ctx, void *buf, size_t n, void *stream, char *why, size_t cap)
{
    (void)ctx, (void)buf, (void)n, (void)stream;
    say(why, cap);
    return -1;
}
