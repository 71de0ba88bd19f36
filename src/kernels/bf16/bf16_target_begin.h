/* bf16_target_begin — switches the compiler's target to AVX-512 with AVX512_BF16 for
 * the functions that follow, up to bf16_target_end.h, so that a file of BF16 kernels
 * builds on every x86-64 machine without global flags (the CPU check that decides
 * whether they run is the caller's). Included twice on purpose: no include guard. Use
 * only inside `#if GT_SIMD_X86_BF16` (simd.h). */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")
#endif
