/* sample_cli — `gentrain sample`: its options read and checked into sample.h's
 * sample_options, then sample_run. */
#ifndef GT_SAMPLE_CLI_H
#define GT_SAMPLE_CLI_H

#include <stdio.h>

/* argv[2..argc): sample's options. Returns the exit status (cli_args.h). */
int sample_command(int argc, char **argv);

/* The text of `gentrain sample --help`, to f. */
void sample_print_help(FILE *f);

#endif
