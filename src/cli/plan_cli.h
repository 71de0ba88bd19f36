/* plan_cli — `gentrain plan`: which dp x pp x tp grid trains a config fastest to its
 * target on a machine (plan.h has the model). */
#ifndef GT_PLAN_CLI_H
#define GT_PLAN_CLI_H

#include <stdio.h>

/* argv[first..argc): plan options (--measure, --nodes, ...) and config keys
 * (--config FILE, --KEY VALUE). Under mpirun every rank calls it (the link
 * measurement is collective); rank 0 prints. Returns the exit status. */
int plan_command(int argc, char **argv, int first);

/* The text of `gentrain plan --help`, to f. */
void plan_print_help(FILE *f);

#endif
