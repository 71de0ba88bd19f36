/* simd — see simd.h: which table of inner loops runs. */
#include "simd.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_features.h"

static atomic_int g_path = -1; /* enum simd_path once chosen; -1 before */

enum simd_path simd_best_path(void)
{
    enum cpu_isa l = cpu_isa_level();
    return l >= CPU_ISA_AVX512 ? SIMD_AVX512 : l >= CPU_ISA_AVX2 ? SIMD_AVX2 : SIMD_PORTABLE;
}

int simd_path_level(enum simd_path path)
{
    if (path == SIMD_AUTO) path = simd_get_path();
    return path == SIMD_AVX512 ? CPU_ISA_AVX512 : path == SIMD_AVX2 ? CPU_ISA_AVX2
                                                                   : CPU_ISA_GENERIC;
}

/* The path to use for `want` on this CPU; a path the CPU lacks gives the widest it has.
 * (Printed directly, not through util.c: the GPU step's test driver links this file
 * without the rest of gentrain.) */
static enum simd_path resolve(enum simd_path want, int warn)
{
    const enum simd_path best = simd_best_path();
    if (want == SIMD_AUTO) return best;
    if (want <= best) return want;
    if (warn)
        fprintf(stderr, "gentrain: warning: the %s kernels need a CPU this one is not "
                "(%s); using %s\n", simd_kernels_of(want)->name,
                cpu_isa_name(cpu_isa_level()), simd_kernels_of(best)->name);
    return best;
}

static enum simd_path initial_path(void)
{
    const char *env = getenv("GENTRAIN_SIMD");
    if (!env || !*env || strcmp(env, "auto") == 0) return resolve(SIMD_AUTO, 0);
    if (strcmp(env, "portable") == 0) return SIMD_PORTABLE;
    if (strcmp(env, "avx2") == 0) return resolve(SIMD_AVX2, 1);
    if (strcmp(env, "avx512") == 0) return resolve(SIMD_AVX512, 1);
    fprintf(stderr, "gentrain: warning: GENTRAIN_SIMD=%.40s not understood "
            "(portable|avx2|avx512|auto); choosing automatically\n", env);
    return resolve(SIMD_AUTO, 0);
}

enum simd_path simd_get_path(void)
{
    int p = atomic_load_explicit(&g_path, memory_order_relaxed);
    if (p < 0) {
        p = (int)initial_path();
        atomic_store_explicit(&g_path, p, memory_order_relaxed);
    }
    return (enum simd_path)p;
}

enum simd_path simd_set_path(enum simd_path want)
{
    enum simd_path p = resolve(want, 1);
    atomic_store_explicit(&g_path, (int)p, memory_order_relaxed);
    return p;
}

const simd_kernels *simd_kernels_of(enum simd_path path)
{
    switch (path) {
    case SIMD_PORTABLE: return &simd_kernels_portable;
#if GT_SIMD_X86
    case SIMD_AVX2: return &simd_kernels_avx2;
    case SIMD_AVX512: return &simd_kernels_avx512;
#else
    case SIMD_AVX2:
    case SIMD_AVX512: return &simd_kernels_portable;
#endif
    case SIMD_AUTO: break;
    }
    return NULL;
}

const simd_kernels *simd_kernels_get(void) { return simd_kernels_of(simd_get_path()); }

const simd_epilogues_bf16 *simd_epilogues_bf16_get(void)
{
#if GT_SIMD_X86_BF16
    if (simd_get_path() == SIMD_AVX512 && cpu_isa_level() >= CPU_ISA_AVX512_BF16)
        return &simd_epilogues_bf16_avx512;
#endif
    return NULL;
}
