/* prepare_cli — `gentrain prepare`: its command line (input files, -o, the validation
 * share, the tokenizer to use, train or save, compression) read and checked, then
 * prepare.h's work. */
#ifndef GT_PREPARE_CLI_H
#define GT_PREPARE_CLI_H

#include <stdio.h>

/* argv[2..argc): prepare's inputs and options. Returns the exit status (cli_args.h). */
int prepare_command(int argc, char **argv);

/* The text of `gentrain prepare --help`, to f. */
void prepare_print_help(FILE *f);

#endif
