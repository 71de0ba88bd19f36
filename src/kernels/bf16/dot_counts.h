/* dot_counts — how many VDPBF16PS dot-product instructions the avx512-bf16 path's
 * products ran, per thread, for the bench's prediction of that path on CPUs whose dot
 * products run faster than this one's (scripts/bench.sh; gentrain's step log).
 *
 * The micro-kernels (gemm_bf16_avx512.c, attention_pairs.c) add what each call ran:
 * one add of a thread-local pointer's slot per call of some thousands of instructions,
 * so the count costs nothing measurable and is always on. A thread bumps only its own
 * slot (a cache line of its own, a relaxed load and store), and the reader gets one
 * record per thread, so a model can take the busiest thread. */
#ifndef GT_DOT_COUNTS_H
#define GT_DOT_COUNTS_H

#include <stdint.h>

/* The calling thread ran n more VDPBF16PS */
void dot_counts_add(uint64_t n);
/* Zeroes every thread's count. Call it between products. */
void dot_counts_reset(void);
/* The counts of each thread that ran dot products since the reset, up to `cap` of them
 * into per_thread (in no particular order); returns how many threads there are (more
 * than cap: the rest were left out). Call it between products. */
int dot_counts_read(uint64_t *per_thread, int cap);

#endif
