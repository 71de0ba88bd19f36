/* build_info — `gentrain --build-info`: what this gentrain was built with and what it
 * finds on this machine, one "key: value" line each (compiler, MPI, HDF5, BLAS, the GPU
 * side and the GPUs, the CPU and the kernel paths it gets), for a bug report, a job's
 * log or a module's description. Starts no MPI and measures nothing: quick on a login
 * node. */
#ifndef GT_BUILD_INFO_H
#define GT_BUILD_INFO_H

#include <stdio.h>

/* Prints the lines to f (the caller checks that its writes arrived). */
void build_info_print(FILE *f, const char *version);

#endif
