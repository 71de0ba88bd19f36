/* gemm_bf16_amx_emul — the emulated twin of the AMX path: gemm_bf16_amx_kernel.h over
 * amx_emul.c's software tiles (see gemm_bf16_amx.h). Portable C, built on every CPU;
 * GENTRAIN_BF16=amx-emulated or gemm_bf16_force_path pick it, for tests and for the
 * bench's prediction of the real path.
 *
 * The spans: each 32 x 32 block's run of tile instructions is timed as one span
 * (amx_emul_span_*), not each instruction: a clock read costs about 25 ns, half an
 * emulated tile load, so per-instruction timing would move a few tenths of a second
 * per bench step from the tiles to "everything else"; per block it is two reads per
 * 16 to 136 instructions (4 tilezero, 4 x depth/32 loads and products, 4 stores). What remains in a span besides the instructions is the
 * block's loop, which the real tile unit overlaps. */
#include "amx_emul.h"

#define AMX_ENTRY gemm_bf16_amx_emulated
#define AMX_CONFIG(cfg) amx_emul_loadconfig(cfg)
#define AMX_RELEASE() amx_emul_release()
#define AMX_LOAD(t, p, stride) amx_emul_loadd(t, p, stride)
#define AMX_STORE(t, p, stride) amx_emul_stored(t, p, stride)
#define AMX_ZERO(t) amx_emul_zero(t)
#define AMX_DP(d, a, b) amx_emul_dpbf16ps(d, a, b)
#define AMX_SPAN_BEGIN() amx_emul_span_begin()
#define AMX_SPAN_END() amx_emul_span_end()

#include "gemm_bf16_amx_kernel.h"
