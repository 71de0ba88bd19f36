// cuda_ok — the one check the standalone GPU test programs wrap around every CUDA
// runtime call: on an error, one FAIL line naming the call and the error, then exit 1
// (the programs cannot go on meaningfully after a failed allocation or copy); and
// gpu_or_skip, their one way of deciding that there is no GPU to test.
#ifndef GT_OFFLOAD_TESTS_CUDA_OK_H
#define GT_OFFLOAD_TESTS_CUDA_OK_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "../cuda_presence.h" // defines: cuda_driver_present

#define CUDA_OK(call)                                                                  \
    do {                                                                               \
        cudaError_t e_ = (call);                                                       \
        if (e_ != cudaSuccess) {                                                       \
            printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call,                 \
                   cudaGetErrorString(e_));                                            \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

// Returns when a GPU is there to test. Without an NVIDIA driver or device it prints one
// "skip:" line and exits 77 (the tests' "skipped"); where a driver or device is there
// but CUDA cannot start, or starts and sees no device, that is a failure: one FAIL
// line with the runtime's message, exit 1 (cuda_presence.h says why the error alone
// cannot decide).
static inline void gpu_or_skip(void)
{
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaSuccess && count > 0) return;
    char what[128];
    if (!cuda_driver_present(what, sizeof what)) {
        printf("skip: no GPU: %s (the CUDA runtime says: %s)\n", what,
               e != cudaSuccess ? cudaGetErrorString(e) : "no device");
        exit(77);
    }
    printf("FAIL CUDA cannot start although %s: %s (%s)\n", what,
           e != cudaSuccess ? cudaGetErrorString(e) : "the driver sees no device",
           e != cudaSuccess ? cudaGetErrorName(e) : "count 0");
    exit(1);
}

#endif
