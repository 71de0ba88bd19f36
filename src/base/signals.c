/* signals — see signals.h. */
#include "signals.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

static volatile sig_atomic_t g_stop_sig = 0;
static volatile sig_atomic_t g_count = 0;

static void on_signal(int sig)
{
    if (g_count < 1000) g_count = g_count + 1;
    if (g_stop_sig == 0) {
        g_stop_sig = sig;
        return;
    }
    /* A second signal: die of it now. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
    _exit(128 + sig); /* not reached: the default action of TERM/USR1 ends the process */
}

int signals_install(void)
{
    g_stop_sig = 0;
    g_count = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    /* One handler at a time: the second signal waits for the first handler to end. */
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaddset(&sa.sa_mask, SIGUSR1);
    sa.sa_flags = SA_RESTART; /* reads and waits go on; the step boundary checks */
    if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGUSR1, &sa, NULL) != 0) {
        gt_error("cannot install the SIGTERM/SIGUSR1 handlers: %s", strerror(errno));
        return -1;
    }
    return 0;
}

void signals_uninstall(void)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGTERM, &dfl, NULL);
    sigaction(SIGUSR1, &dfl, NULL);
}

int signals_stop_requested(void) { return (int)g_stop_sig; }

int signals_count(void) { return (int)g_count; }

const char *signals_name(int sig)
{
    static char buf[32];
    if (sig == SIGTERM) return "SIGTERM";
    if (sig == SIGUSR1) return "SIGUSR1";
    if (sig == SIGINT) return "SIGINT";
    snprintf(buf, sizeof buf, "signal %d", sig);
    return buf;
}
