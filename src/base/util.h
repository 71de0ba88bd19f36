/* util — small helpers every module shares: error reporting, checked allocation,
 * monotonic time, path helpers.
 *
 * Contract: every user-visible failure is reported once, as one line on stderr of the
 * form "gentrain: error: <what went wrong, naming the file/key/dataset>", by the
 * function that detected it; callers only propagate the -1 / NULL. Warnings likewise
 * start with "gentrain: warning: ". In a job of several MPI ranks the rank follows the
 * prefix ("gentrain: error: rank 3: ..."); parallel.c sets it. */
#ifndef GT_UTIL_H
#define GT_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#if defined(__GNUC__)
#define GT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define GT_PRINTF(a, b)
#endif

/* Prints "gentrain: error: <fmt...>\n" to stderr. */
void gt_error(const char *fmt, ...) GT_PRINTF(1, 2);
/* Prints "gentrain: warning: <fmt...>\n" to stderr. */
void gt_warn(const char *fmt, ...) GT_PRINTF(1, 2);
/* "gentrain: note: ..." on stderr: not a problem, but something the user may want to
 * know or change (an old option spelling, a thread team that changed by itself). */
void gt_note(const char *fmt, ...) GT_PRINTF(1, 2);
/* From now on error and warning lines name this rank ("rank R: "); rank < 0 = none.
 * Called by par_init before any other thread starts. */
void gt_set_report_rank(int rank);
/* While on (1), error and warning lines of this process are not printed: for a verdict
 * every rank reaches from the same shared facts, so that one rank says it, once. Only
 * around such a call, on the thread that made it. */
void gt_mute_reports(int on);

/* malloc/calloc that report "out of memory allocating <what> (<n> bytes)" and
 * return NULL on failure. 64-byte aligned (SIMD loads, cache lines); from 8 MB on,
 * 2 MB aligned with transparent huge pages advised (Linux; where the system allows
 * them); free with free(). */
void *gt_malloc(size_t nbytes, const char *what);
void *gt_calloc(size_t nbytes, const char *what);
/* x[0 .. n) = 0 with stores that go past the caches where the CPU has them (x86's
 * SSE2), else memset: for a big buffer that is read again only much later (the
 * gradients, zeroed before a backward that reaches most of them after many MB of other
 * traffic), so its lines are neither read for ownership nor evicting what is in use.
 * Ordered before anything that follows (a fence). */
void gt_zero_streamed(float *x, size_t n);

/* Bytes of physical memory of this machine, or 0 where the system does not say. */
int64_t gt_physical_memory(void);

/* Monotonic wall-clock seconds. */
double gt_now(void);

/* strtod for numbers a person writes: a hexadecimal one ("0x10", "-0X1p3") is not
 * parsed (*end = s), as a config value or option like "lr = 0x10" is a typo, not 16.
 * Everything else as strtod, nan and inf included (callers refuse those by name). */
double gt_strtod_decimal(const char *s, char **end);

/* Copies src into dst[cap]; returns -1 (without printing) if it does not fit. */
int gt_strlcpy(char *dst, const char *src, size_t cap);

/* Length of the valid UTF-8 sequence at s (at most n bytes, n >= 1) of a printable
 * character (not a C1 control, U+0080..U+009F), or 0. */
size_t gt_utf8_printable(const unsigned char *s, size_t n);

/* The text that shows the character at s (n >= 1 bytes left) on a terminal without
 * steering it: printable ASCII and valid printable UTF-8 as they are, tab as \t,
 * anything else (control characters, escape sequences, broken UTF-8) as \xNN, one
 * byte at a time. Writes it to out (not terminated), the bytes of s it shows to
 * *used, and returns its length. */
size_t gt_escape_unit(const unsigned char *s, size_t n, char out[8], size_t *used);

/* A user's or a file's text for an error line, escaped as gt_escape_unit does (the
 * error stays one line and cannot steer the terminal), cut to about 64 characters
 * ("..." then). Returns buf. */
const char *gt_printable(const char *s, char buf[72]);
/* The same, whole where it fits in cap bytes (at least 4; "..." past that): a path
 * shown on standard output. */
const char *gt_printable_cap(const char *s, char *buf, size_t cap);

/* Numbers for people: v with its thousands grouped ("1,234,567"), and a size in bytes
 * ("834 bytes", "10.0 MiB"), into buf. */
void gt_group_digits(int64_t v, char *buf, size_t cap);
void gt_human_bytes(double bytes, char *buf, size_t cap);

/* The index of word among the '|'-separated words of choices ("a|b|c"), or -1: the
 * config table's choice keys and the GENTRAIN_* variables' value lists. */
int gt_word_index(const char *choices, const char *word);

/* Opens path for reading without ever blocking: a named pipe, device or socket is
 * refused ("<what> <path> is a named pipe (FIFO), not a regular file"), as it could
 * hang the run or feed it an endless stream. Returns the descriptor of a regular file
 * (blocking mode restored), or of a folder when folder_ok (and then *is_dir = 1);
 * otherwise reports one error line and returns -1. */
int gt_open_regular(const char *path, const char *what, int folder_ok, int *is_dir);
/* NULL when path does not exist or is a regular file (following links); else what it
 * is ("a named pipe (FIFO)", "a device", "a socket", "a folder"), for an error line:
 * gentrain only ever replaces regular files. */
const char *gt_special_kind(const char *path);

/* The folder holding path, into buf: its text before the last '/', "/" for a name at
 * the root, "." for a bare name. 0, or -1 when it does not fit in cap. */
int gt_folder_of(const char *path, char *buf, size_t cap);

/* mkdir -p; reports and returns -1 on failure (names the path). */
int gt_mkdirs(const char *path);

/* Makes *p (an array of *cap elements of elem bytes, *p NULL and *cap 0 at first) hold
 * at least need elements, doubling from 64; nothing is printed. 0, or -1 when the size
 * would overflow or realloc fails (*p and *cap unchanged). */
int gt_grow(void **p, size_t *cap, size_t need, size_t elem);

/* The most OpenMP threads a process asks for (the `threads` key, --threads,
 * OMP_NUM_THREADS): libgomp starts a team on the stack of the thread that opens it, and
 * a team of tens of thousands overflows an 8 MiB stack (a segfault, not an error). */
#define GT_MAX_THREADS 4096

/* Threads to use: `requested` if > 0, else OMP_NUM_THREADS if set, else the CPUs this
 * process may run on (cpu_available_count: its affinity mask, as a binding gave it),
 * and never more than OMP_THREAD_LIMIT (warned). Also applies the choice to OpenMP
 * (omp_set_num_threads, with dynamic teams off) and OpenBLAS. -1 (reported) when
 * OMP_NUM_THREADS is not a count from 1 to GT_MAX_THREADS (OpenMP's list form "4,2"
 * counts as its first number). */
int gt_resolve_threads(int requested);

/* Applies n threads (at least 1, at most OMP_THREAD_LIMIT) to OpenMP, with dynamic teams
 * off, silently, and makes n the count the matrix products are cut for
 * (gt_product_parts); OpenBLAS runs on one thread, the products' pieces on the team
 * (sgemm_parts.h). Returns the count applied. For code that changes the thread count
 * after gt_resolve_threads (the planner's timings). */
int gt_set_threads(int n);

/* The thread team's own changes (team.h): applies n threads to OpenMP as gt_set_threads
 * does, but the products stay cut for the count gt_set_threads applied, so a team of
 * any size computes the same bits. Returns the count applied. */
int gt_set_team_threads(int n);

/* How many pieces the matrix products are cut into: the count gt_set_threads applied
 * last; before any call, OpenMP's maximum team size at the time of asking. */
int gt_product_parts(void);

/* 64-bit FNV-1a (cheap; for "is it the same everywhere" checks and file checksums).
 * gt_fnv1a continues hash h over n more bytes (start from GT_FNV_OFFSET); gt_hash64 is
 * the hash of n bytes alone. */
#define GT_FNV_OFFSET 0xcbf29ce484222325ull
#define GT_FNV_PRIME 0x100000001b3ull
uint64_t gt_fnv1a(uint64_t h, const void *bytes, size_t n);
uint64_t gt_hash64(const void *bytes, size_t n);
/* gt_fnv1a over n floats' little-endian bytes, whatever the host's byte order (the
 * checksums of checkpoints and model files). */
uint64_t gt_fnv1a_floats(uint64_t h, const float *f, size_t n);

#endif
