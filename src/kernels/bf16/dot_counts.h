/* dot_counts — how many VDPBF16PS dot-product instructions the avx512-bf16 path's
 * products ran, per thread, and the time its micro-kernels took, for the bench's
 * prediction of that path on CPUs whose dot products run faster than this one's
 * (scripts/bench.sh; gentrain's step log).
 *
 * The micro-kernels' callers (gemm_bf16_avx512.c, attention_pairs.c) mark the runs of
 * micro-kernel calls between their packing and epilogues as spans (two reads of the
 * time-stamp counter, about 16 ns; clock_gettime's, at 25 ns each, came to 0.4% of a
 * step at the bench's shape) and add, as a span ends, the instructions its calls ran:
 * cheap enough to stay on. A thread bumps only its own slot (a cache line of its own,
 * relaxed loads and stores), and the reader gets one record per thread, so a model can
 * take the busiest thread. */
#ifndef GT_DOT_COUNTS_H
#define GT_DOT_COUNTS_H

#include <stdint.h>

/* One thread's dot products since dot_counts_reset */
typedef struct {
    uint64_t vdpbf16ps; /* instructions run */
    double kernel_s;    /* wall seconds inside marked spans of micro-kernel calls */
} dot_count;

/* A span of micro-kernel calls on this thread: t0 = dot_counts_span_begin() before
 * them, dot_counts_span_end(t0, n) after, n the VDPBF16PS they ran. Spans do not
 * nest. */
uint64_t dot_counts_span_begin(void);
void dot_counts_span_end(uint64_t t0, uint64_t n);
/* Zeroes every thread's counts. Call it between products; the times read are right
 * from the first reset on. */
void dot_counts_reset(void);
/* The counts of each thread that ran dot products since the reset, up to `cap` of them
 * into per_thread (in no particular order); returns how many threads there are (more
 * than cap: the rest were left out). Call it between products. */
int dot_counts_read(dot_count *per_thread, int cap);

/* Timing only (on = 1; GENTRAIN_DOT_TIMING, gemm_bf16.c): the micro-kernels run one
 * VFMADD231PS on the same registers in place of each VDPBF16PS, each pair word read as
 * one FP32 value, and count it as before. A multiply-add of 32 flops then stands where
 * a dot product of 64 was, at this CPU's FMA instruction rate: the dot products run at
 * 2x its FMA flops, the CPU the bench's prediction models (AMD Zen 4 and 5), with the
 * loads, stores and code around them running for real, which the prediction's
 * arithmetic takes as they are at this CPU's slower dot products. Each lane then sums
 * the products of the pairs' second values (with their first in the low mantissa
 * bits): results of the data's size that mean nothing. Returns the previous setting;
 * call it while no product runs. */
int dot_counts_timing_only(int on);
/* The setting, read by the micro-kernels once a call */
extern int dot_timing_on;

#endif
