/* amx_emul_counts — what the emulated AMX tiles (amx_emul.h) ran, for the bench's
 * prediction of the real AMX path's speed (scripts/bench.sh; gentrain's step log).
 *
 * Counted per thread: every TDPBF16PS, TILELOADD, TILESTORED and TILEZERO the model
 * executed, and the wall time spent in spans of tile instructions and in whole matrix
 * products that its callers mark. A thread bumps only its own slot (a relaxed load and
 * store: no lock, no shared cache line), and the reader gets one record per thread, so
 * a model can take the busiest thread, as a tile unit per core would see it. Only the
 * emulated path calls any of this; the real tile instructions count nothing.
 *
 * Why spans, not each instruction timed: a clock read costs about 25 ns, half an
 * emulated tile load, and a bench step runs some 17 million tile instructions, so
 * timing each would move a few tenths of a second a step from the tiles to the rest,
 * as much as the rest itself; the AMX kernel marks each 32 x 32 block's run of tile
 * instructions (16 to 136 of them) as one span instead, a few ms a step. */
#ifndef GT_AMX_EMUL_COUNTS_H
#define GT_AMX_EMUL_COUNTS_H

#include <stdint.h>

/* One thread's tile instructions since amx_emul_counts_reset */
typedef struct {
    uint64_t dpbf16ps, loadd, stored, zero; /* instructions executed */
    double span_s;                          /* wall seconds inside marked tile spans */
    double product_s;                       /* wall seconds inside marked products */
    double product_span_s; /* over the products it marked: the longest thread's tile
                              spans within each, summed (what the products waited on) */
    /* Of the above, what attention's passes ran (amx_emul_attention_begin / end), so
     * that the Linear layers' products can be told from attention's */
    uint64_t att_dpbf16ps, att_loadd, att_stored, att_zero;
    double att_product_s, att_product_span_s;
} amx_emul_counts;

/* Zeroes every thread's counts. Call it while no thread runs tile instructions (between
 * products); counts made meanwhile may be lost. */
void amx_emul_counts_reset(void);
/* The counts of each thread that executed a tile instruction since the reset, up to
 * `cap` of them into per_thread (in no particular order); returns how many threads
 * there are (more than cap: the rest were left out). Call it between products: a
 * product that ended on another thread (its team joined) is seen whole. */
int amx_emul_counts_read(amx_emul_counts *per_thread, int cap);
/* Marks a span of tile instructions on this thread: its wall time (two clock reads,
 * about 50 ns together) is added to the thread's span_s. Spans do not nest. */
void amx_emul_span_begin(void);
void amx_emul_span_end(void);
/* The same for a whole matrix product on the path that runs these tiles (called by
 * its caller, on the thread that called the product): its wall time goes to the
 * thread's product_s, so that the time outside the tiles (packing, write-back,
 * waiting for the team) can be told from the time outside the products; and the
 * longest tile spans of one thread within it to product_span_s. team: the product runs
 * on a team of threads (called outside any parallel region: one such call at a time),
 * else on the calling thread alone. */
void amx_emul_product_begin(int team);
void amx_emul_product_end(int team);
/* The same for one of attention's passes over its heads (a team product): counted as a
 * product, and its instructions and times also into the att_ counts */
void amx_emul_attention_begin(void);
void amx_emul_attention_end(void);

/* For amx_emul.c: one instruction executed on this thread. */
enum amx_count_event {
    AMX_COUNT_TDPBF16PS,
    AMX_COUNT_TILELOADD,
    AMX_COUNT_TILESTORED,
    AMX_COUNT_TILEZERO
};
void amx_emul_count(enum amx_count_event what);

#endif
