/* amx_emul_counts — see amx_emul_counts.h: a slot of counts per thread. */
#include "amx_emul_counts.h"

#include <stdatomic.h>
#include <time.h>

#include "thread_slot.h"

enum { C_DP, C_LOAD, C_STORE, C_ZERO, C_SPAN_NS, C_PRODUCT_NS, C_PSPAN_NS, NCOUNT };
/* a slot's attention counts: C_DP .. C_ZERO's in attention's passes, and the passes' */
enum { A_NS = 4, A_PSPAN_NS, NATT };
enum { COUNT_SLOTS = 256 };

/* One thread's counts, alone on its cache line(s) (thread_slot.h) */
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
/* Attention's counts, each slot's apart from its hot line (a slot of two lines measured
 * slower around the tiles), written only between products by the thread that runs the
 * passes: the slots' instruction counts when the pass now running began, and what the
 * passes ran */
static uint64_t att_start[COUNT_SLOTS + 1][4], att[COUNT_SLOTS + 1][NATT];

static count_slot *my_slot(void)
{
    if (!mine) mine = &counts[thread_slot_take(&slots_taken, COUNT_SLOTS)];
    return mine;
}

static void bump(int what, uint64_t n)
{
    count_slot *s = my_slot();
    thread_slot_add(&s->v[what], n, s == &counts[COUNT_SLOTS]);
}

void amx_emul_counts_reset(void)
{
    for (int i = 0; i <= COUNT_SLOTS; i++) {
        for (int c = 0; c < NCOUNT; c++)
            atomic_store_explicit(&counts[i].v[c], 0, memory_order_relaxed);
        for (int c = 0; c < NATT; c++) att[i][c] = 0;
    }
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
            per_thread[n] = (amx_emul_counts){v[C_DP],
                                              v[C_LOAD],
                                              v[C_STORE],
                                              v[C_ZERO],
                                              (double)v[C_SPAN_NS] * 1e-9,
                                              (double)v[C_PRODUCT_NS] * 1e-9,
                                              (double)v[C_PSPAN_NS] * 1e-9,
                                              att[i][C_DP],
                                              att[i][C_LOAD],
                                              att[i][C_STORE],
                                              att[i][C_ZERO],
                                              (double)att[i][A_NS] * 1e-9,
                                              (double)att[i][A_PSPAN_NS] * 1e-9};
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

/* amx_emul_product_end; the product's wall time and its longest tile spans also into
 * *took_out and *longest_out where those are not NULL */
static void product_end(int team, uint64_t *took_out, uint64_t *longest_out)
{
    const uint64_t took = now_ns() - product_start_ns;
    bump(C_PRODUCT_NS, took);
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
    if (took_out) {
        *took_out = took;
        *longest_out = longest;
    }
}

void amx_emul_product_end(int team) { product_end(team, NULL, NULL); }

/* An attention pass's instructions are each slot's growth over the pass, rather than a
 * test in amx_emul_count on every instruction */
void amx_emul_attention_begin(void)
{
    for (int i = 0; i <= COUNT_SLOTS; i++)
        for (int k = 0; k < 4; k++)
            att_start[i][k] = atomic_load_explicit(&counts[i].v[C_DP + k], memory_order_relaxed);
    amx_emul_product_begin(1);
}

void amx_emul_attention_end(void)
{
    uint64_t took, longest;
    product_end(1, &took, &longest);
    for (int i = 0; i <= COUNT_SLOTS; i++)
        for (int k = 0; k < 4; k++)
            att[i][k] += atomic_load_explicit(&counts[i].v[C_DP + k], memory_order_relaxed) -
                         att_start[i][k];
    const int me = (int)(my_slot() - counts);
    att[me][A_NS] += took;
    att[me][A_PSPAN_NS] += longest;
}

void amx_emul_count(enum amx_count_event what)
{
    static const int slot_of[] = {[AMX_COUNT_TDPBF16PS] = C_DP, [AMX_COUNT_TILELOADD] = C_LOAD,
                                  [AMX_COUNT_TILESTORED] = C_STORE,
                                  [AMX_COUNT_TILEZERO] = C_ZERO};
    bump(slot_of[what], 1);
}
