/* gemm_bf16_amx — the AMX-BF16 path of gemm_bf16.h: gemm_bf16_amx_kernel.h over the
 * tile instructions (see gemm_bf16_amx.h). The compiler's target is switched on for
 * this file only, so it builds on every x86-64 machine with GCC 11 / clang 12 or later
 * and no global flags; gemm_bf16.c calls it only where cpu_has_amx_bf16() says the CPU
 * and the OS allow tiles. Elsewhere (other compilers, other architectures) the file is
 * empty. */
#define GT_BF16_MODULE /* may include gemm_bf16_amx_kernel.h */
#include "simd.h" /* defines: GT_SIMD_X86_AMX */

#if GT_SIMD_X86_AMX
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")
#endif

#include <immintrin.h>

/* GCC's tile loads and its LDTILECFG tell the compiler of no memory read (or of only
 * the first 8 bytes of the configuration), so a compiler barrier before each makes the
 * stores that filled the buffer happen first; one after each tile store makes the
 * stored tile visible to the reads that follow. They emit no instruction. */
#define AMX_BARRIER() __asm__ volatile("" ::: "memory")

#define AMX_ENTRY gemm_bf16_amx
#define AMX_PANEL_ENTRY gemm_bf16_amx_panel
#define AMX_PANEL_BEGIN gemm_bf16_amx_panel_begin
#define AMX_PANEL_END gemm_bf16_amx_panel_end
#define AMX_CONFIG(cfg)                                                                   \
    do {                                                                                  \
        __asm__ volatile("" : : "r"(cfg) : "memory");                                     \
        _tile_loadconfig(cfg);                                                            \
    } while (0)
#define AMX_RELEASE() _tile_release()
#define AMX_LOAD(t, p, stride)                                                            \
    do {                                                                                  \
        AMX_BARRIER();                                                                    \
        _tile_loadd(t, p, stride);                                                        \
    } while (0)
#define AMX_STORE(t, p, stride)                                                           \
    do {                                                                                  \
        _tile_stored(t, p, stride);                                                       \
        AMX_BARRIER();                                                                    \
    } while (0)
#define AMX_ZERO(t) _tile_zero(t)
#define AMX_DP(d, a, b) _tile_dpbf16ps(d, a, b)

#include "gemm_bf16_amx_kernel.h"

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif /* GT_SIMD_X86_AMX */
