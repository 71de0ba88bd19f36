/* test_signals — the stop handlers of src/base/signals.c, each case in a child process.
 *
 * A first SIGTERM/SIGUSR1 sets the flag and the count and nothing else; a second one
 * ends the process by that signal (the shell's 143 / 138); a child that sees the flag
 * exits with GT_EXIT_REQUEUE; after signals_uninstall the default action is back. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "signals.h"
#include "testutil.h"

/* Child exit codes: 0 all fine; 10+n check n failed; 99 survived a fatal signal. */
static int child_one(int sig)
{
    if (signals_install() != 0) return 10;
    if (signals_stop_requested() != 0 || signals_count() != 0) return 11;
    raise(sig);
    if (signals_stop_requested() != sig) return 12;
    if (signals_count() != 1) return 13;
    return 0;
}

static int child_two(int first, int second)
{
    if (signals_install() != 0) return 10;
    kill(getpid(), first);
    if (signals_stop_requested() != first || signals_count() != 1) return 12;
    raise(second);
    return 99; /* the second signal must have ended the process */
}

/* Waits in a loop for the flag, as the trainer does at step boundaries. */
static int child_loop(int ready_fd)
{
    if (signals_install() != 0) return 10;
    char c = 'r';
    if (write(ready_fd, &c, 1) != 1) return 11;
    close(ready_fd);
    for (int i = 0; i < 10000 && !signals_stop_requested(); i++) usleep(1000);
    if (signals_stop_requested() != SIGTERM) return 12;
    return GT_EXIT_REQUEUE; /* "checkpoint written, requeue me" */
}

static int child_uninstalled(void)
{
    if (signals_install() != 0) return 10;
    signals_uninstall();
    raise(SIGUSR1);
    return 99;
}

static int run(int (*fn)(int, int), int a, int b)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(fn(a, b));
    int st = 0;
    waitpid(pid, &st, 0);
    return st;
}

static int wrap_one(int a, int b) { (void)b; return child_one(a); }
static int wrap_two(int a, int b) { return child_two(a, b); }
static int wrap_uninstalled(int a, int b) { (void)a; (void)b; return child_uninstalled(); }

static const char *describe(int st, char *buf, size_t cap)
{
    if (WIFEXITED(st))
        snprintf(buf, cap, "exit %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(buf, cap, "killed by signal %d", WTERMSIG(st));
    else
        snprintf(buf, cap, "status %#x", st);
    return buf;
}

int main(void)
{
    char d[64];
    int st = run(wrap_one, SIGTERM, 0);
    TU_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
             "one SIGTERM: flag = SIGTERM, count 1, process goes on (%s)",
             describe(st, d, sizeof d));
    st = run(wrap_one, SIGUSR1, 0);
    TU_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
             "one SIGUSR1: flag = SIGUSR1, count 1, process goes on (%s)",
             describe(st, d, sizeof d));

    st = run(wrap_two, SIGTERM, SIGTERM);
    TU_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM,
             "second SIGTERM ends the process by SIGTERM (shell status 143) (%s)",
             describe(st, d, sizeof d));
    st = run(wrap_two, SIGUSR1, SIGUSR1);
    TU_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGUSR1,
             "second SIGUSR1 ends the process by SIGUSR1 (shell status 138) (%s)",
             describe(st, d, sizeof d));
    st = run(wrap_two, SIGUSR1, SIGTERM);
    TU_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM,
             "SIGUSR1 then SIGTERM: ended by SIGTERM (%s)", describe(st, d, sizeof d));

    /* A signal from another process, while the child waits at "step boundaries". */
    int fds[2];
    if (pipe(fds) != 0) return 99;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        _exit(child_loop(fds[1]));
    }
    close(fds[1]);
    char c;
    int got = (int)read(fds[0], &c, 1);
    close(fds[0]);
    kill(pid, SIGTERM);
    waitpid(pid, &st, 0);
    TU_CHECK(got == 1 && WIFEXITED(st) && WEXITSTATUS(st) == GT_EXIT_REQUEUE,
             "kill(child, SIGTERM): the child sees the flag and exits %d (%s)",
             GT_EXIT_REQUEUE, describe(st, d, sizeof d));

    st = run(wrap_uninstalled, 0, 0);
    TU_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGUSR1,
             "after signals_uninstall SIGUSR1 has its default action (%s)",
             describe(st, d, sizeof d));

    TU_CHECK(strcmp(signals_name(SIGTERM), "SIGTERM") == 0 &&
                 strcmp(signals_name(SIGUSR1), "SIGUSR1") == 0,
             "signal names");
    return tu_finish();
}
