/* cuda_presence — whether this machine has an NVIDIA driver or device at all, asked
 * only after the CUDA runtime failed to start, to tell absence from failure.
 *
 * The runtime gives the same error ("CUDA driver version is insufficient") where no
 * driver is installed and where an old driver is, so the error alone cannot say
 * whether a GPU run should be skipped or reported as broken. The rule here: a machine
 * with neither a loadable libcuda.so.1 (the driver's user-space library, found as the
 * runtime finds it: the loader's search path, LD_LIBRARY_PATH included) nor
 * /proc/driver/nvidia (the kernel module) has no GPU, and a failed start is absence;
 * with either, a failed start is a fault to report with the runtime's message.
 *
 * Header-only (one small function, C and C++) so that the library, the standalone test
 * programs and the emulated builds all ask the same question without a link change. */
#ifndef GT_OFFLOAD_CUDA_PRESENCE_H
#define GT_OFFLOAD_CUDA_PRESENCE_H

#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

/* 1 when an NVIDIA driver or device is here (what in `what`, e.g. "libcuda.so.1
 * loads"), 0 when neither is. */
static inline int cuda_driver_present(char *what, size_t cap)
{
    if (access("/proc/driver/nvidia", F_OK) == 0) {
        snprintf(what, cap, "the NVIDIA kernel driver is loaded (/proc/driver/nvidia)");
        return 1;
    }
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h) {
        dlclose(h);
        snprintf(what, cap, "the NVIDIA driver library libcuda.so.1 loads");
        return 1;
    }
    snprintf(what, cap, "no NVIDIA driver (no libcuda.so.1, no /proc/driver/nvidia)");
    return 0;
}

#endif
