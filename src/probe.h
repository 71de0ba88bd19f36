/* probe — reads an untrusted file first in a child process, so that a crash or an
 * endless loop inside the HDF5 library (1.10.8 has both on some damaged files: see
 * tests/fuzz/README.md) costs a clear error line instead of the whole command.
 *
 * Contract of probe_run(what, path, fn, arg, seconds):
 *  - fork()s; the child runs fn(arg) under an alarm of `seconds` and exits with its
 *    result (0 or not); error lines fn prints are the child's and reach stderr as usual;
 *  - returns 0 when fn returned 0, 1 when it returned non-zero (it reported why);
 *    -1 when the child was killed by a signal or the alarm: then one line says so,
 *    "gentrain: error: <what> <path>: reading it crashed the HDF5 library (signal 11):
 *    the file is damaged" (or "did not finish in N s");
 *  - only for processes without MPI (inspect, sample): a child of an MPI process must
 *    not touch the library's state, and HDF5's parallel build would.
 *  - where fork fails, fn runs in this process (with a warning). GENTRAIN_PROBE=off
 *    runs it in this process too (for debugging under a debugger);
 *    GENTRAIN_PROBE_SECONDS=N replaces `seconds` (the tests' hang case). */
#ifndef GT_PROBE_H
#define GT_PROBE_H

int probe_run(const char *what, const char *path, int (*fn)(void *), void *arg,
              int seconds);

#endif
