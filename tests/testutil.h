/* testutil — the few helpers every C test shares. Tests use automake's plain protocol:
 * exit 0 = pass, 77 = skip, anything else = fail. Each check prints one line, so a
 * failing log says exactly which value was wrong. */
#ifndef GT_TESTUTIL_H
#define GT_TESTUTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int tu_failures = 0;
static int tu_checks = 0;

/* Records a boolean check with a printf-style description. */
#define TU_CHECK(cond, ...)                                                   \
    do {                                                                      \
        tu_checks++;                                                          \
        if (cond) {                                                           \
            printf("ok   ");                                                  \
        } else {                                                              \
            tu_failures++;                                                    \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                       \
        }                                                                     \
        printf(__VA_ARGS__);                                                  \
        printf("\n");                                                         \
    } while (0)

/* Relative error |a-b| / max(|a|,|b|,floor). */
static inline double tu_relerr(double a, double b, double floor_)
{
    double d = fabs(a - b), s = fmax(fmax(fabs(a), fabs(b)), floor_);
    return d / s;
}

/* Exit status for main: prints a summary line. */
static inline int tu_finish(void)
{
    printf("%d checks, %d failed\n", tu_checks, tu_failures);
    return tu_failures ? 1 : 0;
}

#endif
