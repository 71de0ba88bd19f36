/* cli_args — what the verbs' command lines share (main.c and the *_cli.c files): the
 * exit statuses, --help anywhere on the line, option values checked with one error line
 * that names the verb and the option, input paths checked before any work starts, and
 * the end of a verb that may have written HDF5 under MPI. */
#ifndef GT_CLI_ARGS_H
#define GT_CLI_ARGS_H

#include <stddef.h>
#include <stdint.h>

/* 0 success, 1 the work failed (bad data, I/O, ...), 2 the command line or the config
 * was wrong */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

/* Whether argv[first..argc) holds --help or -h before any "--". */
int cli_wants_help(int argc, char **argv, int first);

/* 0 when path names something that can be opened for reading (not a folder unless
 * folder_ok), else -1 (reported). what: "data file", "input file", ... */
int cli_check_readable(const char *path, const char *what, int folder_ok);

/* The verb's exit status rc, after MPI's end; where an HDF5 write failed, the process
 * ends here instead (see cli_args.c). */
int cli_finish_verb(int rc);

/* Option values: 0 with *out set, or -1 after one error line naming verb and opt. */
int cli_opt_int(const char *verb, const char *opt, const char *text, long long lo,
                long long hi, int *out); /* a whole number in [lo, hi] */
int cli_opt_u64(const char *verb, const char *opt, const char *text, uint64_t *out);
int cli_opt_double(const char *verb, const char *opt, const char *text,
                   double *out); /* a finite decimal number */

/* The value of the option argv[*i]: "--name=value", or "--name value" (advancing *i).
 * NULL after reporting that it is missing. name receives the option's name (cap
 * bytes). */
const char *cli_opt_value(const char *verb, int argc, char **argv, int *i, char *name,
                          size_t cap);

#endif
