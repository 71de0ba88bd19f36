/* gemm_bf16_amx_emul — the emulated twin of the AMX path: gemm_bf16_amx_kernel.h over
 * amx_emul.c's software tiles (see gemm_bf16_amx.h). Portable C, built on every CPU;
 * GENTRAIN_BF16=amx-emulated or gemm_bf16_force_path pick it, for tests only. */
#include "amx_emul.h"

#define AMX_ENTRY gemm_bf16_amx_emulated
#define AMX_CONFIG(cfg) amx_emul_loadconfig(cfg)
#define AMX_RELEASE() amx_emul_release()
#define AMX_LOAD(t, p, stride) amx_emul_loadd(t, p, stride)
#define AMX_STORE(t, p, stride) amx_emul_stored(t, p, stride)
#define AMX_ZERO(t) amx_emul_zero(t)
#define AMX_DP(d, a, b) amx_emul_dpbf16ps(d, a, b)

#include "gemm_bf16_amx_kernel.h"
