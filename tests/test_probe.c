/* test_probe — probe_child, probe_report and probe_run (src/base/probe.h), which read an
 * untrusted file in a child so that HDF5's crashes and endless loops on damaged files
 * cost one error line. Each way the child can end is made here on purpose:
 *  - its reader returns 0, or returns non-zero after its own error line;
 *  - a signal ends it (SIGUSR1: a sanitizer would turn a SIGSEGV into an exit);
 *  - it exits with a status of its own, as AddressSanitizer does (exit 1) after a
 *    fault inside HDF5: a crash too, never taken for the reader's verdict;
 *  - it loops past its time (SIGALRM), also where this process ignores and blocks
 *    SIGALRM (a launcher's leftovers, which the child inherits);
 *  - GENTRAIN_PROBE=off: the reader runs in this process.
 * Every error line is captured from stderr: one per run, the reader's or probe_report's. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probe.h"
#include "testutil.h"
#include "util.h"

static int reads_fine(void *arg)
{
    (void)arg;
    return 0;
}

static int refuses(void *arg)
{
    (void)arg;
    gt_error("test: the reader refuses the file");
    return 1;
}

static int killed_by_signal(void *arg)
{
    (void)arg;
    signal(SIGUSR1, SIG_DFL); /* a test driver may have left it ignored */
    raise(SIGUSR1);
    return 0;
}

static int exits_by_itself(void *arg)
{
    exit(*(const int *)arg); /* no verdict: the way a sanitizer ends a process */
}

static int loops(void *arg)
{
    (void)arg;
    sleep(60); /* the probe's alarm (1 s here) ends it first */
    return 0;
}

static int in_this_process(void *arg)
{
    return getpid() == *(const pid_t *)arg ? 1 : 0;
}

/* probe_run with stderr captured: its result, and the text in *text */
static int run_capturing(const char *path, int (*fn)(void *), void *arg, const char **text)
{
    tu_capture_begin();
    const int rc = probe_run("file", path, fn, arg, 1);
    *text = tu_capture_end();
    return rc;
}

int main(void)
{
    unsetenv("GENTRAIN_PROBE");
    unsetenv("GENTRAIN_PROBE_SECONDS");
    const char *err;
    char want[256];

    TU_CHECK(probe_child(reads_fine, NULL, 10) == 0, "a reader that returns 0: 0");
    int rc = run_capturing("f.h5", refuses, NULL, &err);
    TU_CHECK(rc == 1, "a reader that refuses: 1 (got %d)", rc);
    TU_CHECK(tu_count_lines(err) == 1 && strstr(err, "the reader refuses the file"),
             "a reader that refuses: its own line only");

    rc = probe_child(killed_by_signal, NULL, 10);
    TU_CHECK(rc == -SIGUSR1, "a child ended by SIGUSR1: -%d (got %d)", SIGUSR1, rc);
    rc = run_capturing("f.h5", killed_by_signal, NULL, &err);
    snprintf(want, sizeof want, "gentrain: error: file f.h5: reading it crashed the HDF5 "
             "library (signal %d): the file is damaged", SIGUSR1);
    TU_CHECK(rc == -1 && tu_count_lines(err) == 1 && strstr(err, want),
             "a child ended by a signal: -1 and one line");

    for (int status = 1; status <= 2; status++) {
        rc = probe_child(exits_by_itself, &status, 10);
        TU_CHECK(rc == -(PROBE_EXITED + status),
                 "a child that exits %d by itself: a crash, %d (got %d)", status,
                 -(PROBE_EXITED + status), rc);
    }
    const int one = 1;
    rc = run_capturing("f.h5", exits_by_itself, (void *)&one, &err);
    TU_CHECK(rc == -1 && tu_count_lines(err) == 1 &&
                 strstr(err, "gentrain: error: file f.h5: reading it ended the reading "
                             "process early (exit status 1): the file is damaged"),
             "a child that exits 1 by itself: -1 and one line");

    rc = run_capturing("f.h5", loops, NULL, &err);
    TU_CHECK(rc == -1 && tu_count_lines(err) == 1 && strstr(err, "did not finish in 1 s"),
             "a reader that loops: stopped after 1 s, one line");
    /* a launcher may start gentrain with SIGALRM ignored or blocked: the child's alarm
     * must still end it */
    sigset_t alrm, old_mask;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    sigprocmask(SIG_BLOCK, &alrm, &old_mask);
    void (*old_handler)(int) = signal(SIGALRM, SIG_IGN);
    const double t0 = gt_now();
    rc = probe_child(loops, NULL, 1);
    const double waited = gt_now() - t0;
    signal(SIGALRM, old_handler);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    TU_CHECK(rc == -SIGALRM && waited < 30,
             "SIGALRM ignored and blocked here: the child's alarm still ends it (%d after "
             "%.1f s)", rc, waited);

    setenv("GENTRAIN_PROBE", "off", 1);
    pid_t self = getpid();
    TU_CHECK(probe_child(in_this_process, &self, 10) == 1,
             "GENTRAIN_PROBE=off: the reader runs in this process");
    unsetenv("GENTRAIN_PROBE");
    TU_CHECK(probe_child(in_this_process, &self, 10) == 0,
             "by default the reader runs in a child");

    return tu_finish();
}
