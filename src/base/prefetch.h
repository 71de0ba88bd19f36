/* prefetch — asking for memory before code reads it: gt_prefetch_l2 asks for the cache
 * lines of a byte range into L2. For operands read soon from places no hardware
 * prefetcher follows (a short piece of each of many rows a page or more apart), where
 * the code would otherwise wait on them one line at a time. Only a hint: no result
 * depends on it, and a range that is never read costs only the bandwidth.
 *
 * Header only: one static inline function. */
#ifndef GT_PREFETCH_H
#define GT_PREFETCH_H

#include <stddef.h>
#include <stdint.h>

static inline void gt_prefetch_l2(const void *p, size_t bytes)
{
    const char *c = (const char *)((uintptr_t)p & ~(uintptr_t)63);
    const char *const end = (const char *)p + bytes;
    for (; c < end; c += 64) {
#if defined(__x86_64__) || defined(__i386__)
        /* PREFETCHT1 as an asm statement, which the compiler keeps as written (GCC 12 at
         * -O2 dropped a loop of nothing but __builtin_prefetch) */
        __asm__ volatile("prefetcht1 %0" ::"m"(*c));
#else
        __builtin_prefetch(c, 0, 2);
#endif
    }
}

#endif
