/* dot_counts — see dot_counts.h: a slot per thread. */
#include "dot_counts.h"

#include <stdatomic.h>
#include <time.h>

#include "thread_slot.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
/* Spans in time-stamp counter ticks: a read costs about 8 ns against clock_gettime's
 * 25, and attention's backward marks thousands of short spans a step (the clock's
 * reads were 0.4% of a step). The counter runs at a constant rate on every CPU with
 * AVX512_BF16; dot_counts_read converts with the rate it measures since the reset. */
static uint64_t ticks(void) { return __rdtsc(); }
#else
static uint64_t now_ns(void);
static uint64_t ticks(void) { return now_ns(); }
#endif

enum { DOT_SLOTS = 256 };

/* one thread's counts, alone on their cache line (thread_slot.h) */
typedef struct {
    _Alignas(64) _Atomic uint64_t n;
    _Atomic uint64_t ticks;
} dot_slot;

/* slot DOT_SLOTS is shared, with atomic adds, by threads past the first DOT_SLOTS */
static dot_slot slots[DOT_SLOTS + 1];
static atomic_int slots_taken;
static _Thread_local dot_slot *mine;
/* the clock and the counter at the last reset: the counter's rate, at the read */
static uint64_t reset_ns, reset_ticks;

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t); /* cannot fail with this clock */
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static dot_slot *my_slot(void)
{
    if (!mine) mine = &slots[thread_slot_take(&slots_taken, DOT_SLOTS)];
    return mine;
}

/* *v += n, v in this thread's slot s */
static void bump(const dot_slot *s, _Atomic uint64_t *v, uint64_t n)
{
    thread_slot_add(v, n, s == &slots[DOT_SLOTS]);
}

uint64_t dot_counts_span_begin(void) { return ticks(); }

void dot_counts_span_end(uint64_t t0, uint64_t n)
{
    const uint64_t took = ticks() - t0;
    dot_slot *s = my_slot();
    bump(s, &s->ticks, took);
    bump(s, &s->n, n);
}

int dot_timing_on;

int dot_counts_timing_only(int on)
{
    const int was = dot_timing_on;
    dot_timing_on = on != 0;
    return was;
}

void dot_counts_reset(void)
{
    for (int i = 0; i <= DOT_SLOTS; i++) {
        atomic_store_explicit(&slots[i].n, 0, memory_order_relaxed);
        atomic_store_explicit(&slots[i].ticks, 0, memory_order_relaxed);
    }
    reset_ns = now_ns();
    reset_ticks = ticks();
}

int dot_counts_read(dot_count *per_thread, int cap)
{
    const uint64_t ns = now_ns() - reset_ns, tk = ticks() - reset_ticks;
    const double s_per_tick = ns > 0 && tk > 0 ? (double)ns * 1e-9 / (double)tk : 1e-9;
    int k = 0;
    for (int i = 0; i <= DOT_SLOTS; i++) {
        const uint64_t n = atomic_load_explicit(&slots[i].n, memory_order_relaxed),
                       t = atomic_load_explicit(&slots[i].ticks, memory_order_relaxed);
        if (!n && !t) continue;
        if (k < cap) per_thread[k] = (dot_count){n, (double)t * s_per_tick};
        k++;
    }
    return k;
}
