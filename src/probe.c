/* probe — see probe.h. */
#include "probe.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h" /* defines: gt_error, gt_warn, gt_printable */

int probe_run(const char *what, const char *path, int (*fn)(void *), void *arg,
              int seconds)
{
    const char *env = getenv("GENTRAIN_PROBE");
    if (env && strcmp(env, "off") == 0) return fn(arg) == 0 ? 0 : 1;
    const char *limit = getenv("GENTRAIN_PROBE_SECONDS");
    if (limit && atoi(limit) > 0) seconds = atoi(limit);
    fflush(NULL); /* the child must not write out the parent's buffered output again */
    pid_t pid = fork();
    if (pid < 0) {
        gt_warn("cannot start a process to check %s first (%s); reading it directly", path,
                strerror(errno));
        return fn(arg) == 0 ? 0 : 1;
    }
    if (pid == 0) {
        signal(SIGALRM, SIG_DFL);
        alarm((unsigned)seconds);
        int rc = fn(arg);
        fflush(NULL);
        _exit(rc == 0 ? 0 : 1);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            gt_error("%s %s: cannot wait for the process checking it (%s)", what, path,
                     strerror(errno));
            return -1;
        }
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status) == 0 ? 0 : 1;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
        gt_error("%s %s: reading it did not finish in %d s (the HDF5 library loops on "
                 "some damaged files): the file is damaged", what, path,
                 seconds);
    else
        gt_error("%s %s: reading it crashed the HDF5 library (signal %d): the file is "
                 "damaged", what, path,
                 WIFSIGNALED(status) ? WTERMSIG(status) : -1);
    return -1;
}
