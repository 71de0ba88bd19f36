/* gemm_bf16_amx_emul — the emulated twin of the AMX path: gemm_bf16_amx_kernel.h over
 * amx_emul.c's software tiles (see gemm_bf16_amx.h). Portable C, built on every CPU;
 * GENTRAIN_BF16=amx-emulated or gemm_bf16_force_path pick it, for tests and for the
 * bench's prediction of the real path.
 *
 * Each 32 x 32 block's run of tile instructions is marked as a span, timed for the
 * bench (amx_emul_counts.h says why per block); what a span holds besides the
 * instructions is the block's loop, which the real tile unit overlaps. */
#define GT_BF16_MODULE /* may include gemm_bf16_amx_kernel.h */
#include "amx_emul.h"
#include "amx_emul_counts.h" /* defines: amx_emul_span_begin, amx_emul_span_end */

#define AMX_ENTRY gemm_bf16_amx_emulated
#define AMX_PANEL_ENTRY gemm_bf16_amx_panel_emulated
#define AMX_PANEL_BEGIN gemm_bf16_amx_panel_begin_emulated
#define AMX_PANEL_END gemm_bf16_amx_panel_end_emulated
#define AMX_CONFIG(cfg) amx_emul_loadconfig(cfg)
#define AMX_RELEASE() amx_emul_release()
#define AMX_LOAD(t, p, stride) amx_emul_loadd(t, p, stride)
#define AMX_STORE(t, p, stride) amx_emul_stored(t, p, stride)
#define AMX_ZERO(t) amx_emul_zero(t)
#define AMX_DP(d, a, b) amx_emul_dpbf16ps(d, a, b)
#define AMX_SPAN_BEGIN() amx_emul_span_begin()
#define AMX_SPAN_END() amx_emul_span_end()

#include "gemm_bf16_amx_kernel.h"
