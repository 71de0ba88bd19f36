/* gemm_steal — the row strips of one product's parts (gemm_split.h's row split, one
 * part a thread) handed out while the product runs: each thread takes its own part's
 * strips from the front, a row block at a time, and once its part is done takes the
 * other parts' last strips from the back, one at a time, until every part is done.
 *
 * Why: a static split gives each thread the same rows, and the threads then finish
 * together only if their cores run at the same speed. On the 2-core VMs gentrain is
 * measured on one core runs a few percent slower than the other for minutes at a time
 * (it follows the core, not the thread: bound the other way round, the other thread
 * waits), and at the end of every product the faster thread waited for it: 12 ms a
 * step of waits, the two threads summed, at L6 C384 on a Zen 4. A thread that has
 * finished its own rows now runs the slower one's last strips instead: the forward and
 * input-gradient products (on packed weights) handed out in alternate steps of one run
 * made the step shorter in all eleven runs, 0.9-9.8 ms (medians of the runs' paired
 * steps 3.6 ms with it on the even steps, six runs, and 4.0 on the odd ones, five; of
 * 390-420 ms; runs with nothing switched spread +-2 ms about -0.9).
 *
 * The weight gradients whose threads pack B for their own rows (gemm_bf16_avx512.c's
 * rows_private) hand out their last depth block's strips the same way, with one
 * difference: only an owner opens its part, once it has summed its rows' earlier depth
 * blocks, and a thief finds nothing in a part not yet open (gemm_steal_back).
 *
 * The bits do not change: every row of C is summed by one thread, in the same order,
 * whichever thread it is and whichever strip it falls in.
 *
 * A part's state is one 64-bit word, its first and its end strip still to run; a claim
 * is a compare-and-swap on it, so the owner and a thief never take the same strip.
 * Header only: static inline functions. */
#ifndef GT_GEMM_STEAL_H
#define GT_GEMM_STEAL_H

#include <stdatomic.h>
#include <stdint.h>

enum { GEMM_STEAL_MAX = 64 }; /* parts (threads) a product's state has room for */

/* One part's strips still to run: first | end << 32; GEMM_STEAL_UNSET before the
 * part's first claim (its size is known inside the product, not before). A cache line
 * each: the owner's claims do not slow a thief's reads of another part. */
typedef struct {
    _Alignas(64) _Atomic uint64_t range;
} gemm_steal_part;

#define GEMM_STEAL_UNSET UINT64_MAX

/* Before the parallel region: parts 0 .. n-1 unset */
static inline void gemm_steal_reset(gemm_steal_part *parts, int n)
{
    for (int i = 0; i < n; i++) atomic_store(&parts[i].range, GEMM_STEAL_UNSET);
}

/* Gives an unset part its `strips` (whoever comes first: the owner, or a thief that
 * finished before the owner started) */
static inline void gemm_steal_open(gemm_steal_part *p, int strips)
{
    uint64_t unset = GEMM_STEAL_UNSET;
    atomic_compare_exchange_strong(&p->range, &unset, (uint64_t)(uint32_t)strips << 32);
}

/* The owner's claim: up to `want` strips from the front into [*s0, *s1); 0 when the
 * part is done */
static inline int gemm_steal_front(gemm_steal_part *p, int want, int *s0, int *s1)
{
    uint64_t v = atomic_load(&p->range);
    for (;;) {
        const uint32_t lo = (uint32_t)v, hi = (uint32_t)(v >> 32);
        if (lo >= hi) return 0;
        const uint32_t n = hi - lo < (uint32_t)want ? hi - lo : (uint32_t)want;
        if (atomic_compare_exchange_weak(&p->range, &v, (uint64_t)(lo + n) | (uint64_t)hi << 32)) {
            *s0 = (int)lo;
            *s1 = (int)(lo + n);
            return 1;
        }
    }
}

/* A thief's claim: the part's last strip into [*s0, *s1); 0 when the part is done, or
 * not yet open (GEMM_STEAL_UNSET: first and end both UINT32_MAX) */
static inline int gemm_steal_back(gemm_steal_part *p, int *s0, int *s1)
{
    uint64_t v = atomic_load(&p->range);
    for (;;) {
        const uint32_t lo = (uint32_t)v, hi = (uint32_t)(v >> 32);
        if (lo >= hi) return 0;
        if (atomic_compare_exchange_weak(&p->range, &v, (uint64_t)lo | (uint64_t)(hi - 1) << 32)) {
            *s0 = (int)(hi - 1);
            *s1 = (int)hi;
            return 1;
        }
    }
}

/* The next strips for `thread` of a product cut into nthreads parts: its own part's
 * from the front (`want` at a time), then the other parts' last ones from the back, one
 * at a time, part after part; part *p's [*s0, *s1). *k: the walk's place, 0 to begin.
 * Returns 0 once every part is done (or, for a thief, not open). */
static inline int gemm_steal_next(gemm_steal_part *parts, int thread, int nthreads, int want,
                                  int *k, int *p, int *s0, int *s1)
{
    for (; *k < nthreads; (*k)++) {
        *p = (thread + *k) % nthreads; /* its own part first */
        if (*k == 0 ? gemm_steal_front(&parts[*p], want, s0, s1)
                    : gemm_steal_back(&parts[*p], s0, s1))
            return 1;
    }
    return 0;
}

#endif
