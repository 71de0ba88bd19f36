/* run_folder — see run_folder.h. */
#include "run_folder.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "config.h" /* defines: GT_PATH_MAX */
#include "util.h"

void run_folder_lock_text(int fd, char *who, size_t cap)
{
    char raw[160];
    const ssize_t n = pread(fd, raw, sizeof raw - 1, 0);
    raw[n > 0 ? n : 0] = '\0';
    raw[strcspn(raw, "\n")] = '\0';
    char shown[72];
    snprintf(who, cap, "%s", raw[0] ? gt_printable(raw, shown) : "");
}

run_lock_state run_folder_lock_state(const char *dir, char *who, size_t who_cap, char *why,
                                     size_t why_cap)
{
    who[0] = why[0] = '\0';
    char path[GT_PATH_MAX + 32];
    if (snprintf(path, sizeof path, "%s/" RUN_FOLDER_LOCK, dir) >= (int)sizeof path) {
        snprintf(why, why_cap, "the folder's path is too long");
        return RUN_LOCK_UNKNOWN;
    }
    /* read-only: testing a lock needs no write access, and a reader on a login node
     * may have none. A read lock conflicts with the run's write lock, which is what
     * F_GETLK reports. */
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT) return RUN_LOCK_NO_FILE;
        snprintf(why, why_cap, "cannot open %s: %s", path, strerror(errno));
        return RUN_LOCK_UNKNOWN;
    }
    run_folder_lock_text(fd, who, who_cap);
    struct flock lk;
    memset(&lk, 0, sizeof lk);
    lk.l_type = F_RDLCK;
    lk.l_whence = SEEK_SET; /* the whole file, as the run locks it */
    run_lock_state state;
    if (fcntl(fd, F_GETLK, &lk) != 0) {
        snprintf(why, why_cap, "cannot test the lock of %s: %s", path, strerror(errno));
        state = RUN_LOCK_UNKNOWN;
    } else {
        state = lk.l_type == F_UNLCK ? RUN_LOCK_FREE : RUN_LOCK_HELD;
        /* the file should name the holder; where it does not, the system's pid
         * (meaningful on this host only) */
        if (state == RUN_LOCK_HELD && !who[0] && lk.l_pid > 0)
            snprintf(who, who_cap, "pid %ld", (long)lk.l_pid);
    }
    close(fd);
    return state;
}
