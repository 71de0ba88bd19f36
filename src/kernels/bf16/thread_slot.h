/* thread_slot — counters a thread keeps for itself, read between products by another
 * (amx_emul_counts.c, dot_counts.c): a slot per thread, taken at the thread's first
 * count, alone on its cache line(s). Only the owner writes its slot, so an increment is
 * a relaxed load and store (plain moves on x86, no lock); atomics only so that a reader
 * between products is race-free in C11's terms. Threads past the first `slots` share
 * one last slot, with atomic adds (a team of more threads than that, or one remade many
 * times).
 *
 * Header only: static inline functions. */
#ifndef GT_THREAD_SLOT_H
#define GT_THREAD_SLOT_H

#include <stdatomic.h>
#include <stdint.h>

/* The index of a newly counting thread's slot: 0 .. slots - 1, then `slots` (shared) */
static inline int thread_slot_take(atomic_int *taken, int slots)
{
    const int i = atomic_fetch_add_explicit(taken, 1, memory_order_relaxed);
    return i >= 0 && i < slots ? i : slots;
}

/* *v += n, v a counter of the calling thread's slot; shared: the slot is the shared one */
static inline void thread_slot_add(_Atomic uint64_t *v, uint64_t n, int shared)
{
    if (shared)
        atomic_fetch_add_explicit(v, n, memory_order_relaxed);
    else
        atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + n,
                              memory_order_relaxed);
}

#endif
