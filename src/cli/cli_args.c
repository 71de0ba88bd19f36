/* cli_args — see cli_args.h. */
#include "cli_args.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5util.h"   /* h5io_unusable */
#include "parallel.h" /* par_finalize */
#include "util.h"

int cli_wants_help(int argc, char **argv, int first)
{
    for (int i = first; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) break;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return 1;
    }
    return 0;
}

int cli_check_readable(const char *path, const char *what, int folder_ok)
{
    int fd = gt_open_regular(path, what, folder_ok, NULL);
    if (fd < 0) return -1;
    close(fd);
    return 0;
}

/* The end of a verb that may have written HDF5 files under MPI. After a failed write,
 * HDF5 1.10's own clean-up (at MPI_Finalize and at exit) crashes on the half-closed
 * file (exit 139 after the right error line), so the process ends here instead: the
 * error is reported, the partial file removed. */
int cli_finish_verb(int rc)
{
    if (h5io_unusable()) {
        fflush(NULL);
        _exit(rc != EXIT_OK ? rc : EXIT_FAIL);
    }
    par_finalize();
    return rc;
}

int cli_opt_int(const char *verb, const char *opt, const char *text, long long lo,
                long long hi, int *out)
{
    char shown[72];
    const char *t = gt_printable(text, shown);
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (!*text || end == text || *end != '\0' || isspace((unsigned char)text[0])) {
        gt_error("%s: %s '%s': not an integer; see 'gentrain %s --help'", verb, opt,
                 t, verb);
        return -1;
    }
    if (errno == ERANGE || v < lo || v > hi) {
        gt_error("%s: %s %s: must be >= %lld and <= %lld", verb, opt, t, lo, hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int cli_opt_u64(const char *verb, const char *opt, const char *text, uint64_t *out)
{
    char shown[72];
    const char *t = gt_printable(text, shown);
    /* Digits only: strtoull would accept "-1" (and wrap it) or leading spaces. */
    int digits = text[0] >= '0' && text[0] <= '9';
    char *end = NULL;
    errno = 0;
    unsigned long long v = digits ? strtoull(text, &end, 10) : 0;
    if (!digits || *end != '\0') {
        gt_error("%s: %s '%s': not a non-negative integer", verb, opt, t);
        return -1;
    }
    if (errno == ERANGE) {
        gt_error("%s: %s %s: too large (at most %" PRIu64 ")", verb, opt, t,
                 UINT64_MAX);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

int cli_opt_double(const char *verb, const char *opt, const char *text, double *out)
{
    char shown[72];
    const char *t = gt_printable(text, shown);
    char *end = NULL;
    errno = 0;
    double v = gt_strtod_decimal(text, &end);
    if (!*text || end == text || *end != '\0' || isspace((unsigned char)text[0])) {
        gt_error("%s: %s '%s': not a number; see 'gentrain %s --help'", verb, opt,
                 t, verb);
        return -1;
    }
    if (!isfinite(v)) {
        gt_error("%s: %s %s: must be a finite number", verb, opt, t);
        return -1;
    }
    *out = v;
    return 0;
}

const char *cli_opt_value(const char *verb, int argc, char **argv, int *i, char *name,
                          size_t cap)
{
    const char *a = argv[*i];
    const char *eq = strchr(a, '=');
    size_t n = eq ? (size_t)(eq - a) : strlen(a);
    if (n >= cap) n = cap - 1;
    memcpy(name, a, n);
    name[n] = '\0';
    if (eq) return eq + 1;
    if (*i + 1 >= argc) {
        gt_error("%s: %s needs a value; see 'gentrain %s --help'", verb, name, verb);
        return NULL;
    }
    return argv[++*i];
}
