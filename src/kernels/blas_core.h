/* blas_core — never train on the wrong BLAS kernels silently.
 *
 * OpenBLAS built with DYNAMIC_ARCH picks its kernels ("core") when it is loaded, from
 * the CPU it recognises. A release older than the CPU falls back to a generic core: on
 * a Xeon with AVX-512 and AMX, OpenBLAS 0.3.21 runs its SSE3 "Prescott" kernels, 8x
 * slower than its SkylakeX ones. The choice is made before main() and is read from
 * OPENBLAS_CORETYPE only then, so the way to correct it is to start the process again
 * with that variable set.
 *
 * Contract of blas_core_fixup(argv), called first thing in main, before MPI starts:
 *  - When the core the library chose is of a lower ISA level than the CPU offers
 *    (cpu_features.h) and the user did not set OPENBLAS_CORETYPE, it re-executes this
 *    program (same pid, arguments and environment, so mpirun and srun see nothing)
 *    with OPENBLAS_CORETYPE set to the best core for the CPU. It marks the variable as
 *    its own (GENTRAIN_BLAS_CORE_SET), so it corrects at most once per core and never
 *    loops: when the library does not know that core either, the run goes on.
 *  - It re-executes only when /proc/self/exe is the file this code was loaded from: a
 *    program started through the dynamic loader by hand or under a tool (valgrind)
 *    gets a warning instead, and runs on the core it has.
 *  - A user's own OPENBLAS_CORETYPE wins: it is kept, with a warning when it is below
 *    what the CPU offers; the summary says when OpenBLAS did not take the name.
 *  - It returns only when no re-execution happened (or the exec failed: a warning),
 *    with none of the variables it set left behind.
 *  - blas_core_summary() is one line saying which core runs and why; the trainer and
 *    the benchmarks print it. Without OpenBLAS it names the BLAS as unknown. */
#ifndef GT_BLAS_CORE_H
#define GT_BLAS_CORE_H

#include "cpu_features.h"

/* The ISA level an OpenBLAS x86 core name needs (case-insensitive); -1 when unknown. */
int blas_core_level(const char *corename);
/* The OpenBLAS core to ask for on a CPU of this level (NULL for generic: nothing to
 * correct). */
const char *blas_core_for_level(enum cpu_isa level);

void blas_core_fixup(char **argv);
/* e.g. "OpenBLAS core Cooperlake (AVX-512+BF16; chosen by OpenBLAS; CPU: AVX-512+BF16)" */
const char *blas_core_summary(void);
/* How the BLAS library was built: OpenBLAS's own line (version, DYNAMIC_ARCH, the
 * threading, MAX_THREADS), or "unknown". */
const char *blas_build_config(void);
/* The core OpenBLAS runs now ("unknown" without OpenBLAS). */
const char *blas_core_name(void);

#endif
