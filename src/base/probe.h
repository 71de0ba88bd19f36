/* probe — reads an untrusted file first in a child process, so that a crash or an
 * endless loop inside the HDF5 library (1.10.8 has both on some damaged files: see
 * tests/fuzz/README.md) costs a clear error line instead of the whole command.
 *
 * probe_child(fn, arg, seconds) fork()s; the child runs fn(arg) under an alarm of
 * `seconds` and exits with its result (0, or PROBE_EXIT_REFUSED when fn returned
 * non-zero). It returns 0 when fn returned 0, 1 when it returned non-zero, -S when
 * signal S ended the child (-SIGALRM: out of time), and -(PROBE_EXITED + N) when the
 * child exited with any other status N: something other than fn ended it (a
 * sanitizer's report on a fault inside HDF5 exits 1), which is a crash too.
 * Error lines fn prints are the child's own and reach stderr as usual.
 *  - Only before MPI starts (train) or in processes without MPI (inspect, sample,
 *    export): a child of an MPI process must not touch the library's state, and HDF5's
 *    parallel build would.
 *  - Where fork fails, fn runs in this process (with a warning). GENTRAIN_PROBE=off
 *    runs it in this process too (for debugging under a debugger);
 *    GENTRAIN_PROBE_SECONDS=N replaces `seconds` (the tests' hang case).
 *
 * probe_report(what, path, rc, seconds) prints the one line for a child that ended
 * early, rc < 0: "gentrain: error: <what> <path>: reading it crashed the HDF5 library
 * (signal 11): the file is damaged", "... did not finish in N s ..." or "... ended the
 * reading process early (exit status N) ...".
 *
 * probe_run(what, path, fn, arg, seconds) is the two together for one file: 0 when fn
 * returned 0, 1 when it returned non-zero (it reported why), -1 after probe_report. */
#ifndef GT_PROBE_H
#define GT_PROBE_H

/* The child's exit status for "fn returned non-zero": one that neither a sanitizer (1)
 * nor a shell's signal convention (128 + S) gives. */
enum { PROBE_EXIT_REFUSED = 113 };
/* probe_child's result for a child that exited with status N: -(PROBE_EXITED + N),
 * below every -signal. */
enum { PROBE_EXITED = 1000 };

int probe_child(int (*fn)(void *), void *arg, int seconds);
void probe_report(const char *what, const char *path, int rc, int seconds);
int probe_seconds(int seconds); /* seconds, or GENTRAIN_PROBE_SECONDS when set */
int probe_run(const char *what, const char *path, int (*fn)(void *), void *arg,
              int seconds);

#endif
