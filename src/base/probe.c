/* probe — see probe.h. */
#include "probe.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/prctl.h> /* PR_SET_PDEATHSIG */
#endif
#include <sys/wait.h>
#include <unistd.h>

#include "util.h" /* gt_error, gt_warn */

int probe_seconds(int seconds)
{
    const char *limit = getenv("GENTRAIN_PROBE_SECONDS");
    if (limit && atoi(limit) > 0) return atoi(limit);
    return seconds;
}

int probe_child(int (*fn)(void *), void *arg, int seconds)
{
    const char *env = getenv("GENTRAIN_PROBE");
    if (env && strcmp(env, "off") == 0) return fn(arg) == 0 ? 0 : 1;
    seconds = probe_seconds(seconds);
    fflush(NULL); /* the child must not write out the parent's buffered output again */
    const pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        gt_warn("cannot start a process to check the input files first (%s); reading "
                "them directly", strerror(errno));
        return fn(arg) == 0 ? 0 : 1;
    }
    if (pid == 0) {
        /* a killed command (a job's time limit, a user's Ctrl-C) takes its reader
         * along instead of leaving it looping in HDF5 */
#ifdef __linux__
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
        if (getppid() != parent) _exit(1);
        /* the alarm must end the child even where the launcher left SIGALRM ignored
         * or blocked (both are inherited) */
        signal(SIGALRM, SIG_DFL);
        sigset_t alrm;
        sigemptyset(&alrm);
        sigaddset(&alrm, SIGALRM);
        (void)sigprocmask(SIG_UNBLOCK, &alrm, NULL);
        alarm((unsigned)seconds);
        int rc = fn(arg);
        fflush(NULL);
        _exit(rc == 0 ? 0 : PROBE_EXIT_REFUSED);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            gt_error("cannot wait for the process checking the input files (%s)",
                     strerror(errno));
            return -SIGKILL;
        }
    }
    if (WIFEXITED(status)) {
        const int code = WEXITSTATUS(status);
        if (code == 0) return 0;
        if (code == PROBE_EXIT_REFUSED) return 1;
        /* Any other status is no verdict of fn's: something in the child ended it
         * (a sanitizer's report on a fault inside HDF5 exits 1, a library may call
         * exit()), so the file is as much to blame as for a signal. */
        return -(PROBE_EXITED + code);
    }
    return WIFSIGNALED(status) ? -WTERMSIG(status) : -SIGKILL;
}

void probe_report(const char *what, const char *path, int rc, int seconds)
{
    if (rc == -SIGALRM)
        gt_error("%s %s: reading it did not finish in %d s (the HDF5 library loops on "
                 "some damaged files): the file is damaged", what,
                 path, probe_seconds(seconds));
    else if (rc <= -PROBE_EXITED)
        gt_error("%s %s: reading it ended the reading process early (exit status %d): the "
                 "file is damaged", what, path, -rc - PROBE_EXITED);
    else if (rc == -SIGPIPE)
        /* the child's own output met a closed pipe (`gentrain inspect F | head`): the
         * file is not to blame */
        gt_error("%s %s: its output was closed before all of it was written (the reader "
                 "of the pipe ended)", what, path);
    else
        gt_error("%s %s: reading it crashed the HDF5 library (signal %d): the file is "
                 "damaged", what, path, -rc);
}

int probe_run(const char *what, const char *path, int (*fn)(void *), void *arg,
              int seconds)
{
    int rc = probe_child(fn, arg, seconds);
    if (rc >= 0) return rc;
    probe_report(what, path, rc, seconds);
    return -1;
}
