/* dot_counts — see dot_counts.h: a slot per thread. */
#include "dot_counts.h"

#include <stdatomic.h>

enum { DOT_SLOTS = 256 };

/* one thread's count, alone on its cache line: only the owner writes it, so a bump is a
 * relaxed load and store (plain moves on x86); atomic so that a reader between products
 * is race-free in C11's terms */
typedef struct {
    _Alignas(64) _Atomic uint64_t n;
} dot_slot;

/* slot DOT_SLOTS is shared, with atomic adds, by threads past the first DOT_SLOTS */
static dot_slot slots[DOT_SLOTS + 1];
static atomic_int slots_taken;
static _Thread_local dot_slot *mine;

void dot_counts_add(uint64_t n)
{
    if (!mine) {
        const int i = atomic_fetch_add_explicit(&slots_taken, 1, memory_order_relaxed);
        mine = &slots[i >= 0 && i < DOT_SLOTS ? i : DOT_SLOTS];
    }
    if (mine == &slots[DOT_SLOTS])
        atomic_fetch_add_explicit(&mine->n, n, memory_order_relaxed);
    else
        atomic_store_explicit(&mine->n,
                              atomic_load_explicit(&mine->n, memory_order_relaxed) + n,
                              memory_order_relaxed);
}

void dot_counts_reset(void)
{
    for (int i = 0; i <= DOT_SLOTS; i++) atomic_store_explicit(&slots[i].n, 0, memory_order_relaxed);
}

int dot_counts_read(uint64_t *per_thread, int cap)
{
    int n = 0;
    for (int i = 0; i <= DOT_SLOTS; i++) {
        const uint64_t v = atomic_load_explicit(&slots[i].n, memory_order_relaxed);
        if (!v) continue;
        if (n < cap) per_thread[n] = v;
        n++;
    }
    return n;
}
