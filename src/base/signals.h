/* signals — asking a training run to stop cleanly (preemption, the end of a time
 * limit) and the exit statuses job scripts act on.
 *
 * signals_install() sets handlers for SIGTERM and SIGUSR1. The first signal only sets
 * a flag: the trainer checks signals_stop_requested() at each step boundary, saves a
 * checkpoint and exits with GT_EXIT_REQUEUE. A second signal (TERM or USR1, while the
 * first is being handled: the checkpoint is too slow, or the user insists) ends the
 * process at once: the handler restores the default action and re-raises the signal,
 * so the process dies of it (a shell shows 128 + signal: 143 for TERM, 138 for USR1)
 * and no checkpoint is half-written (writes go to a .tmp that is then ignored).
 *
 * The handlers are async-signal-safe: they touch only volatile sig_atomic_t variables
 * and call sigaction, sigprocmask, raise and _exit. SIGINT keeps its default action
 * (Ctrl-C stops at once). Under MPI every rank installs them; the launcher (srun,
 * mpirun) forwards the signal to every rank. */
#ifndef GT_SIGNALS_H
#define GT_SIGNALS_H

/* Exit status of a run that stopped on a signal after writing its checkpoint: the job
 * is not finished, requeue it (sysexits.h's EX_TEMPFAIL). scripts/slurm/train.sbatch
 * and scripts/pbs/train.pbs requeue the job on it. */
#define GT_EXIT_REQUEUE 75

/* Installs the handlers and clears the flag and count. 0, or -1 (reported). */
int signals_install(void);
/* Restores the default actions (for tests, and before exec'ing anything). */
void signals_uninstall(void);
/* The signal that asked to stop (SIGTERM or SIGUSR1), or 0 when none has. */
int signals_stop_requested(void);
/* Signals received since signals_install. */
int signals_count(void);
/* Name for a log line: "SIGTERM", "SIGUSR1", or "signal N". */
const char *signals_name(int sig);

#endif
