// test_nccl — NCCL on one GPU, through offload/tp_comm.h as gentrain calls it: a
// communicator of one rank (tp_comm_id, tp_comm_create with size 1) and
// tp_comm_sum_half on a buffer of FP16 values, which a one-rank sum must leave exactly
// as it was; then a communicator of one rank made and freed again (a second group).
// So the library loads, initialises on this GPU and runs its kernels where only one
// GPU is lent; the sums between several GPUs need a machine with more than one.
// Built only where configure found NCCL; scripts/gpu-check.sh runs it.
// Exit status: 0 passed, 1 a check or a call failed (or a driver is there and CUDA
// cannot start), 77 no GPU: no NVIDIA driver or device (skipped).
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include <vector>

#include "../tp_comm.h"
#include "cuda_ok.h"

int main(void)
{
    gpu_or_skip(); // exits: 77 without a GPU, 1 where CUDA cannot start
    CUDA_OK(cudaSetDevice(0));
    char lib[64], why[256] = "";
    tp_comm_describe(lib, sizeof lib);
    printf("# %s\n", lib);
    int failures = 0;
    for (int round = 0; round < 2; round++) {
        unsigned char id[TP_COMM_ID_BYTES];
        if (tp_comm_id(id, why, sizeof why) != 0) {
            printf("FAIL tp_comm_id: %s\n", why);
            return 1;
        }
        tp_comm *c = tp_comm_create(id, 1, 0, why, sizeof why);
        if (!c) {
            printf("FAIL tp_comm_create (1 rank): %s\n", why);
            return 1;
        }
        const size_t n = 1000003; // odd: no size NCCL could round to
        std::vector<__half> h(n), back(n);
        for (size_t i = 0; i < n; i++) h[i] = __float2half((float)(i % 2049) * 0.125f - 128.0f);
        __half *d = nullptr;
        cudaStream_t s;
        CUDA_OK(cudaStreamCreate(&s));
        CUDA_OK(cudaMalloc(&d, n * sizeof(__half)));
        CUDA_OK(cudaMemcpy(d, h.data(), n * sizeof(__half), cudaMemcpyHostToDevice));
        if (tp_comm_sum_half(c, d, n, s, why, sizeof why) != 0) {
            printf("FAIL tp_comm_sum_half (1 rank): %s\n", why);
            return 1;
        }
        CUDA_OK(cudaStreamSynchronize(s));
        CUDA_OK(cudaMemcpy(back.data(), d, n * sizeof(__half), cudaMemcpyDeviceToHost));
        size_t diff = 0;
        for (size_t i = 0; i < n; i++) diff += memcmp(&back[i], &h[i], sizeof(__half)) != 0;
        if (diff) failures++;
        printf("%s NCCL all-reduce over a 1-rank communicator (round %d): %zu of %zu FP16 "
               "values changed\n", diff ? "FAIL" : "ok  ", round + 1, diff, n);
        CUDA_OK(cudaFree(d));
        CUDA_OK(cudaStreamDestroy(s));
        tp_comm_free(c);
    }
    return failures ? 1 : 0;
}
