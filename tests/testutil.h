/* testutil — the few helpers every C test shares. Tests use automake's plain protocol:
 * exit 0 = pass, 77 = skip, anything else = fail. Each check prints one line, so a
 * failing log says exactly which value was wrong. */
#ifndef GT_TESTUTIL_H
#define GT_TESTUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The next of Marsaglia's xorshift64 sequence in *state (never 0): the tests' own cheap,
 * portable random numbers, the same on every machine. */
static inline uint64_t tu_xorshift64(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

/* Relative error |a-b| / max(|a|,|b|,floor). */
static inline double tu_relerr(double a, double b, double floor_)
{
    /* a NaN on one side only is as far off as it gets: callers take the largest error
     * with fmax, which would otherwise pass over it */
    if (isnan(a) != isnan(b)) return INFINITY;
    if (isnan(a)) return 0.0;
    double d = fabs(a - b), s = fmax(fmax(fabs(a), fabs(b)), floor_);
    return d / s;
}

/* Capturing stderr, to check the one-line errors a function prints:
 * tu_capture_begin() points fd 2 at a temporary file; tu_capture_end() restores it,
 * echoes the text to stdout (so a failing log shows it) and returns it (a static
 * buffer, valid until the next capture). */
struct tu_capture { FILE *file; int saved_fd; char text[16384]; };
static inline struct tu_capture *tu_capture_state(void)
{
    static struct tu_capture state = {NULL, -1, ""};
    return &state;
}

static inline void tu_capture_begin(void)
{
    struct tu_capture *c = tu_capture_state();
    fflush(stderr);
    c->file = tmpfile();
    if (!c->file) {
        perror("tmpfile");
        exit(99);
    }
    c->saved_fd = dup(2);
    dup2(fileno(c->file), 2);
}

static inline const char *tu_capture_end(void)
{
    struct tu_capture *c = tu_capture_state();
    fflush(stderr);
    dup2(c->saved_fd, 2);
    close(c->saved_fd);
    rewind(c->file);
    size_t n = fread(c->text, 1, sizeof c->text - 1, c->file);
    c->text[n] = '\0';
    fclose(c->file);
    printf("     stderr: %s", c->text[0] ? c->text : "(nothing)\n");
    return c->text;
}

/* Number of '\n' in s. */
static inline int tu_count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* 1 when the two files exist and hold the same bytes. */
static inline int tu_files_equal(const char *x, const char *y)
{
    FILE *a = fopen(x, "rb"), *b = fopen(y, "rb");
    int same = a && b;
    while (same) {
        int c = fgetc(a), d = fgetc(b);
        if (c != d) same = 0;
        if (c == EOF || d == EOF) break;
    }
    if (a) fclose(a);
    if (b) fclose(b);
    return same;
}

/* Makes a fresh folder "<base>/<name>_XXXXXX" into dir[cap], base being TEST_TMPDIR
 * (the build's test folder), else TMPDIR, else /tmp; exits 99 (a hard error for
 * automake) when it cannot. */
static inline void tu_make_tmpdir(char *dir, size_t cap, const char *name)
{
    const char *t = getenv("TEST_TMPDIR");
    if (!t || !t[0]) t = getenv("TMPDIR");
    snprintf(dir, cap, "%s/%s_XXXXXX", t && t[0] ? t : "/tmp", name);
    if (!mkdtemp(dir)) {
        printf("cannot make a temporary folder %s\n", dir);
        exit(99);
    }
}

/* Exit status for main: prints a summary line. */
static inline int tu_finish(void)
{
    printf("%d checks, %d failed\n", tu_checks, tu_failures);
    return tu_failures ? 1 : 0;
}

#endif
