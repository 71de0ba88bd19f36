// test_emu_orders — a test of the emulation itself (cuda_emu.h), not of gentrain's
// kernels: it must catch what it claims to catch. Built only for the emulation;
// tests/test_emu_orders.sh runs it. Modes (argv[1]):
//   barrier  a block's sum through static shared memory with its __syncthreads: the
//            sums must be right (exit 0), in any CUDA_EMU_ORDER;
//   racy     the same kernel without the barrier (the kernel every reduction becomes
//            when its __syncthreads is dropped): under CUDA_EMU_ORDER=all the emulation
//            must stop, naming the kernel; in the forward order thread 0 reads the
//            other threads' slots before they are written, which must read as the
//            poison (NaN), so the program reports wrong sums (exit 1);
//   stale    block 0 alone writes its static shared array, every block reads it: the
//            other blocks must read the poison, not block 0's values (static shared
//            memory is per block on a GPU).
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <vector>

#include "cuda_ok.h"

constexpr int kThreads = 128;

// out[b] = sum of in[b*kThreads .. +kThreads), by thread 0 from shared memory.
__global__ void block_sum(float *out, const float *in, int with_barrier)
{
    __shared__ float part[kThreads];
    part[threadIdx.x] = in[blockIdx.x * kThreads + threadIdx.x];
    if (with_barrier) __syncthreads(); // uniform over the block: legal either way
    if (threadIdx.x == 0) {
        float s = 0.0f;
        for (int i = 0; i < kThreads; i++) s += part[i];
        out[blockIdx.x] = s;
    }
}

// out[b*kThreads + t] = what thread t of block b reads from the shared slot t, which
// only block 0 writes.
__global__ void shared_stale(float *out)
{
    __shared__ float slot[kThreads];
    if (blockIdx.x == 0) slot[threadIdx.x] = 1.0f + (float)threadIdx.x;
    __syncthreads();
    out[blockIdx.x * kThreads + threadIdx.x] = slot[threadIdx.x];
}

int main(int argc, char **argv)
{
    const char *mode = argc == 2 ? argv[1] : "";
    if (strcmp(mode, "barrier") != 0 && strcmp(mode, "racy") != 0 && strcmp(mode, "stale") != 0) {
        fprintf(stderr, "usage: test_emu_orders barrier|racy|stale\n");
        return 2;
    }
    const int blocks = 3;
    float *in = nullptr, *out = nullptr;
    CUDA_OK(cudaMalloc(&in, sizeof(float) * blocks * kThreads));
    CUDA_OK(cudaMalloc(&out, sizeof(float) * blocks * kThreads));
    std::vector<float> h(blocks * kThreads), got(blocks * kThreads);
    int bad = 0;
    if (strcmp(mode, "stale") == 0) {
        shared_stale<<<blocks, kThreads>>>(out);
        CUDA_OK(cudaGetLastError());
        CUDA_OK(cudaMemcpy(got.data(), out, sizeof(float) * got.size(), cudaMemcpyDeviceToHost));
        for (int b = 0; b < blocks; b++)
            for (int t = 0; t < kThreads; t++) {
                const float v = got[(size_t)b * kThreads + t];
                if (b == 0 ? v != 1.0f + (float)t : !isnan(v)) bad++;
            }
        printf("%s stale: block 0 reads its own values, blocks 1-%d the poison (%d wrong)\n",
               bad ? "FAIL" : "ok  ", blocks - 1, bad);
    } else {
        for (size_t i = 0; i < h.size(); i++) h[i] = (float)(i % 7) - 3.0f; // exact sums
        CUDA_OK(cudaMemcpy(in, h.data(), sizeof(float) * h.size(), cudaMemcpyHostToDevice));
        block_sum<<<blocks, kThreads>>>(out, in, strcmp(mode, "barrier") == 0);
        CUDA_OK(cudaGetLastError());
        CUDA_OK(cudaMemcpy(got.data(), out, sizeof(float) * blocks, cudaMemcpyDeviceToHost));
        for (int b = 0; b < blocks; b++) {
            float want = 0.0f;
            for (int t = 0; t < kThreads; t++) want += h[(size_t)b * kThreads + t];
            if (got[(size_t)b] != want) bad++;
            printf("block %d: sum %g (want %g)\n", b, (double)got[(size_t)b], (double)want);
        }
        printf("%s %s: %d of %d block sums wrong\n", bad ? "FAIL" : "ok  ", mode, bad, blocks);
    }
    CUDA_OK(cudaFree(in));
    CUDA_OK(cudaFree(out));
    return bad ? 1 : 0;
}
