// cuda_device — offload.h with the CUDA runtime: finding the GPUs and binding to one.
#include "offload.h"

#include "cuda_presence.h" // defines: cuda_driver_present

#include <cublas_api.h> // defines: CUBLAS_VER_*
#include <cuda_runtime.h>
#include <stdio.h>

extern "C" int offload_built(void) { return 1; }

extern "C" void offload_build(char *buf, size_t cap)
{
    snprintf(buf, cap, "built with CUDA %d.%d, cuBLAS %d.%d.%d", CUDART_VERSION / 1000,
             CUDART_VERSION % 1000 / 10, CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR,
             CUBLAS_VER_PATCH);
}

extern "C" int offload_device_count(char *why, size_t cap)
{
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError(); // clear the sticky error state for later calls
        // The same error where no driver is installed and where an old or broken one
        // is (cuda_presence.h): only the driver's presence tells absence from failure.
        char what[128];
        if (cuda_driver_present(what, sizeof what)) {
            snprintf(why, cap, "CUDA cannot start although %s: %s (%s)", what,
                     cudaGetErrorString(e), cudaGetErrorName(e));
            return -1;
        }
        snprintf(why, cap, "%s; the CUDA runtime says: %s", what, cudaGetErrorString(e));
        return 0;
    }
    if (n == 0) snprintf(why, cap, "the CUDA driver sees no device");
    return n;
}

extern "C" int offload_use_device(int index, char *name, size_t name_cap, char *why,
                                  size_t cap)
{
    cudaDeviceProp p;
    cudaError_t e = cudaSetDevice(index);
    if (e == cudaSuccess) e = cudaGetDeviceProperties(&p, index);
    if (e != cudaSuccess) {
        snprintf(why, cap, "GPU %d: %s", index, cudaGetErrorString(e));
        if (name_cap) name[0] = '\0';
        return -1;
    }
    snprintf(name, name_cap, "%s, %.1f GiB, sm_%d%d", p.name,
             (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), p.major, p.minor);
    return 0;
}

extern "C" int offload_device_id(char *id, size_t cap, char *why, size_t why_cap)
{
    int d = 0;
    cudaDeviceProp p;
    cudaError_t e = cudaGetDevice(&d);
    if (e == cudaSuccess) e = cudaGetDeviceProperties(&p, d);
    if (e != cudaSuccess) {
        snprintf(why, why_cap, "the GPU's identity: %s", cudaGetErrorString(e));
        if (cap) id[0] = '\0';
        return -1;
    }
    const unsigned char *u = (const unsigned char *)p.uuid.bytes;
    unsigned any = 0;
    for (int i = 0; i < 16; i++) any |= u[i];
    if (any)
        snprintf(id, cap,
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
                 u[12], u[13], u[14], u[15]);
    else // no UUID reported: the PCI address names the device on its node
        snprintf(id, cap, "PCI %04x:%02x:%02x", p.pciDomainID, p.pciBusID, p.pciDeviceID);
    return 0;
}
