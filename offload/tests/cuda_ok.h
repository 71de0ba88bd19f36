// cuda_ok — the one check the standalone GPU test programs wrap around every CUDA
// runtime call: on an error, one FAIL line naming the call and the error, then exit 1
// (the programs cannot go on meaningfully after a failed allocation or copy).
#ifndef GT_OFFLOAD_TESTS_CUDA_OK_H
#define GT_OFFLOAD_TESTS_CUDA_OK_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CUDA_OK(call)                                                                  \
    do {                                                                               \
        cudaError_t e_ = (call);                                                       \
        if (e_ != cudaSuccess) {                                                       \
            printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call,                 \
                   cudaGetErrorString(e_));                                            \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

#endif
