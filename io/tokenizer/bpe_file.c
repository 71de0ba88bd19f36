/* bpe_file — reading a tokenizer.json from disk (bpe.h): a regular file only (a named
 * pipe or device is refused, never waited on), at most JSON_MAX_BYTES. */
#define GT_TOKENIZER_MODULE /* may include bpe_internal.h */
#include "bpe_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"

int bpe_read_file(const char *path, char **text, size_t *len, char *err, size_t cap)
{
    *text = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, cap, "cannot read it: %s", strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, cap, "it is %s, not a regular file",
                 S_ISDIR(st.st_mode) ? "a folder" : "a pipe, device or socket");
        close(fd);
        return -1;
    }
    if ((uint64_t)st.st_size > JSON_MAX_BYTES) {
        snprintf(err, cap, "it is %lld bytes; a tokenizer is read up to %zu",
                 (long long)st.st_size, (size_t)JSON_MAX_BYTES);
        close(fd);
        return -1;
    }
    size_t n = (size_t)st.st_size, got = 0;
    char *buf = malloc(n + 1);
    if (!buf) {
        snprintf(err, cap, "out of memory (%zu bytes)", n);
        close(fd);
        return -1;
    }
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            snprintf(err, cap, r < 0 ? "cannot read it: %s" : "it shrank while being read%s",
                     r < 0 ? strerror(errno) : "");
            free(buf);
            close(fd);
            return -1;
        }
        got += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return 0;
}
