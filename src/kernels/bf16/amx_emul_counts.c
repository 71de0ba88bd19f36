/* amx_emul_counts — see amx_emul_counts.h: a slot of counts per thread. */
#include "amx_emul_counts.h"

#include <stdatomic.h>
#include <time.h>

enum { C_DP, C_LOAD, C_STORE, C_ZERO, C_SPAN_NS, C_PRODUCT_NS, C_PSPAN_NS, NCOUNT };
enum { COUNT_SLOTS = 256 };

/* One thread's counts, alone on its cache line(s): only the owner writes them, so an
 * increment is a relaxed load and store (plain moves on x86, no lock); atomics only so
 * that a reader between products is race-free in C11's terms. */
typedef struct {
    _Alignas(64) _Atomic uint64_t v[NCOUNT];
} count_slot;

/* slot COUNT_SLOTS is shared, with atomic adds, by threads past the first COUNT_SLOTS
 * (a team of more threads than that, or one remade many times) */
static count_slot counts[COUNT_SLOTS + 1];
static atomic_int slots_taken;
static _Thread_local count_slot *mine;
static _Thread_local uint64_t span_start_ns, product_start_ns, product_own_span_ns;
/* every slot's span time when the team product now running began (one at a time) */
static uint64_t team_span_start[COUNT_SLOTS + 1];

static count_slot *my_slot(void)
{
    if (!mine) {
        const int i = atomic_fetch_add_explicit(&slots_taken, 1, memory_order_relaxed);
        mine = &counts[i >= 0 && i < COUNT_SLOTS ? i : COUNT_SLOTS];
    }
    return mine;
}

static void bump(int what, uint64_t n)
{
    count_slot *s = my_slot();
    if (s == &counts[COUNT_SLOTS])
        atomic_fetch_add_explicit(&s->v[what], n, memory_order_relaxed);
    else
        atomic_store_explicit(&s->v[what],
                              atomic_load_explicit(&s->v[what], memory_order_relaxed) + n,
                              memory_order_relaxed);
}

void amx_emul_counts_reset(void)
{
    for (int i = 0; i <= COUNT_SLOTS; i++)
        for (int c = 0; c < NCOUNT; c++)
            atomic_store_explicit(&counts[i].v[c], 0, memory_order_relaxed);
}

int amx_emul_counts_read(amx_emul_counts *per_thread, int cap)
{
    int n = 0;
    for (int i = 0; i <= COUNT_SLOTS; i++) {
        uint64_t v[NCOUNT];
        for (int c = 0; c < NCOUNT; c++)
            v[c] = atomic_load_explicit(&counts[i].v[c], memory_order_relaxed);
        uint64_t any = 0;
        for (int c = 0; c < NCOUNT; c++) any |= v[c];
        if (!any) continue;
        if (n < cap)
            per_thread[n] = (amx_emul_counts){v[C_DP], v[C_LOAD], v[C_STORE], v[C_ZERO],
                                              (double)v[C_SPAN_NS] * 1e-9,
                                              (double)v[C_PRODUCT_NS] * 1e-9,
                                              (double)v[C_PSPAN_NS] * 1e-9};
        n++;
    }
    return n;
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t); /* cannot fail with this clock */
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void amx_emul_span_begin(void) { span_start_ns = now_ns(); }

void amx_emul_span_end(void) { bump(C_SPAN_NS, now_ns() - span_start_ns); }

static uint64_t span_of(int slot)
{
    return atomic_load_explicit(&counts[slot].v[C_SPAN_NS], memory_order_relaxed);
}

/* The longest tile spans of one thread in a product: for a team, the largest growth
 * of any slot's span time since the product began (the team's threads run nothing
 * else meanwhile; a thread new to the tiles starts from 0); alone, this thread's. */
void amx_emul_product_begin(int team)
{
    if (team)
        for (int i = 0; i <= COUNT_SLOTS; i++) team_span_start[i] = span_of(i);
    else
        product_own_span_ns = span_of((int)(my_slot() - counts));
    product_start_ns = now_ns();
}

void amx_emul_product_end(int team)
{
    bump(C_PRODUCT_NS, now_ns() - product_start_ns);
    uint64_t longest = 0;
    if (team) {
        for (int i = 0; i <= COUNT_SLOTS; i++) {
            const uint64_t grew = span_of(i) - team_span_start[i];
            if (grew > longest) longest = grew;
        }
    } else {
        longest = span_of((int)(my_slot() - counts)) - product_own_span_ns;
    }
    bump(C_PSPAN_NS, longest);
}

void amx_emul_count(enum amx_count_event what)
{
    static const int slot_of[] = {[AMX_COUNT_TDPBF16PS] = C_DP, [AMX_COUNT_TILELOADD] = C_LOAD,
                                  [AMX_COUNT_TILESTORED] = C_STORE,
                                  [AMX_COUNT_TILEZERO] = C_ZERO};
    bump(slot_of[what], 1);
}
