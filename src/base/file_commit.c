/* file_commit — see file_commit.h. */
#include "file_commit.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

const char *file_errno_reason(int err)
{
    switch (err) {
    case ENOENT: return "no such file";
    case EACCES:
    case EPERM: return "permission denied";
    case EISDIR: return "it is a folder";
    case ENOTDIR: return "a part of the path is not a folder";
    case ENOSPC: return "no space left on the device";
    case EROFS: return "read-only file system";
    case EDQUOT: return "disk quota exceeded";
    case ENAMETOOLONG: return "path too long";
    default: return strerror(err);
    }
}

static void set_why(char *why, size_t cap, const char *text)
{
    if (why && cap) snprintf(why, cap, "%s", text);
}

/* Syncs the folder holding path, so the rename itself is durable (best effort: some
 * file systems refuse, and the rename has happened). */
static void sync_folder(const char *path)
{
    char dir[4096];
    if (gt_folder_of(path, dir, sizeof dir) != 0) return;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
}

int file_commit(const char *tmp, const char *path, char *why, size_t cap)
{
    /* rename would replace whatever path is: only a regular file may be replaced */
    const char *kind = gt_special_kind(path);
    if (kind) {
        char msg[160];
        snprintf(msg, sizeof msg, "it is %s; only a regular file is replaced", kind);
        set_why(why, cap, msg);
        return -1;
    }
    int fd = open(tmp, O_RDONLY);
    if (fd < 0 || fsync(fd) != 0) {
        set_why(why, cap, file_errno_reason(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        set_why(why, cap, file_errno_reason(errno));
        return -1;
    }
    sync_folder(path);
    return 0;
}

FILE *file_begin(const char *path, const char *what, char *tmp, size_t cap)
{
    int n = snprintf(tmp, cap, "%s.tmp", path);
    if (n < 0 || (size_t)n >= cap) {
        gt_error("cannot write %s %s: path too long", what, path);
        return NULL;
    }
    FILE *f = fopen(tmp, "wb");
    if (!f) gt_error("cannot write %s %s: %s", what, tmp, file_errno_reason(errno));
    return f;
}

/* Checks the writes and closes f: 0, or -1 with the reason in why. */
static int close_checked(FILE *f, char *why, size_t cap)
{
    int bad = ferror(f) || fflush(f) != 0;
    int err = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        err = errno;
    }
    if (bad) snprintf(why, cap, "%s", err ? file_errno_reason(err) : "write error");
    return bad ? -1 : 0;
}

int file_close_tmp(FILE *f, const char *tmp, const char *path, const char *what)
{
    char why[200] = "";
    if (close_checked(f, why, sizeof why) == 0) return 0;
    gt_error("writing %s %s failed: %s", what, path, why);
    (void)unlink(tmp);
    return -1;
}

int file_end(FILE *f, const char *tmp, const char *path, const char *what)
{
    char why[200] = "";
    int bad = close_checked(f, why, sizeof why) != 0;
    if (!bad && file_commit(tmp, path, why, sizeof why) != 0) bad = 1;
    if (!bad) return 0;
    gt_error("writing %s %s failed: %s", what, path, why);
    (void)unlink(tmp);
    return -1;
}
