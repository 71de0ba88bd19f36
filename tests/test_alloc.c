/* test_alloc — gt_malloc and gt_calloc (src/base/util.h): 64-byte aligned; from 8 MB on
 * on a 2 MB boundary (transparent huge pages advised), every byte usable; calloc's
 * zeros; gt_zero_streamed zeros exactly its range at any start and length; an
 * impossible size is one error line and NULL, not a crash. Whether Linux
 * then backs a big array with huge pages is its choice (the system's THP setting, free
 * huge pages): reported, not asserted. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "util.h"

/* AnonHugePages of this process in kB, or -1 where the system does not say */
static long anon_huge_kb(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) break;
    fclose(f);
    return kb;
}

int main(void)
{
    const size_t small = 100, big = ((size_t)8 << 20) + 4096, huge_page = (size_t)2 << 20;
    unsigned char *s = gt_malloc(small, "a small test array");
    TU_CHECK(s && (uintptr_t)s % 64 == 0, "a small array is 64-byte aligned");
    if (s) memset(s, 1, small);
    free(s);

    const long before = anon_huge_kb();
    unsigned char *b = gt_malloc(big, "a big test array");
    TU_CHECK(b && (uintptr_t)b % huge_page == 0, "an array of 8 MB and more starts on a 2 MB "
             "boundary (%p)", (void *)b);
    int kept = b != NULL;
    if (b) {
        for (size_t i = 0; i < big; i++) b[i] = (unsigned char)(i * 7u);
        for (size_t i = 0; i < big; i++) kept &= b[i] == (unsigned char)(i * 7u);
    }
    TU_CHECK(kept, "every byte of it holds what was written");
    const long after = anon_huge_kb();
    printf("     huge pages of this process: %ld kB before, %ld kB with the array touched "
           "(the system's choice: not a check)\n", before, after);
    free(b);

    float *z = gt_calloc(big, "a big zeroed test array");
    int zeros = z != NULL;
    for (size_t i = 0; z && i < big / sizeof *z; i++) zeros &= z[i] == 0.0f;
    TU_CHECK(zeros && (uintptr_t)z % huge_page == 0, "gt_calloc: big, aligned, all zeros");
    free(z);

    /* every start within a 16-byte line and lengths around the 4-float stores: the
     * range zeroed (-0 would not be 0's bits), its neighbours untouched */
    enum { N = 64 };
    float buf[N + 8];
    int exact = 1;
    for (int start = 1; start <= 4; start++)
        for (size_t len = 0; len <= 13; len++) {
            for (int i = 0; i < N + 8; i++) buf[i] = -1.5f;
            gt_zero_streamed(buf + start, len);
            for (int i = 0; i < N + 8; i++) {
                const int in = i >= start && (size_t)i < start + len;
                uint32_t bits;
                memcpy(&bits, &buf[i], sizeof bits);
                exact &= in ? bits == 0 : buf[i] == -1.5f;
            }
        }
    TU_CHECK(exact, "gt_zero_streamed: +0 over exactly its range, any start and length");

    TU_CHECK(gt_malloc(SIZE_MAX - 4096, "an impossible test array") == NULL,
             "an impossible size: NULL (and one error line above)");
    return tu_finish();
}
