/* fuzz_runlog — the two readers of a run's JSON Lines log on arbitrary bytes: `gentrain
 * inspect RUN_FOLDER` (src/cli/inspect_run.c: the input is the folder's log.jsonl, alone
 * in it) and `gentrain plan --from-log` (src/plan/plan_log.c). A log is a file that a
 * killed run leaves half-written, that a disk-full truncates and that users edit, so
 * neither may crash, read out of bounds or hang on it. Beyond that, what plan_log
 * accepts must make sense to the planner: at least one estimate, every figure finite
 * and positive, and the token-weighted mean between the smallest and the largest
 * estimate (a weighted mean cannot leave them). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "inspect_run.h"
#include "plan_log.h"
#include "fuzz_common.h"

static char log_file[4200];
static FILE *sink; /* inspect's report: only that it is written matters */

/* The run folder (fuzz_folder) and the report's sink, once. */
static void make_folder(void)
{
    snprintf(log_file, sizeof log_file, "%s/log.jsonl", fuzz_folder("fuzz_runlog"));
    if (!(sink = fopen("/dev/null", "w"))) abort();
}

/* What the planner is handed must be a number it can use */
static void check_noise(const plan_log_noise *n)
{
    if (n->estimates < 1 || n->records < n->estimates) abort();
    const double v[] = {n->first, n->last, n->min, n->max, n->mean};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (!isfinite(v[i]) || !(v[i] > 0)) abort();
    if (!(n->min <= n->first && n->first <= n->max && n->min <= n->last && n->last <= n->max))
        abort();
    /* a weighted mean lies between its extremes, up to its rounding */
    const double slack = 1e-12 * n->max;
    if (n->mean < n->min - slack || n->mean > n->max + slack) abort();
    if (!isfinite(n->span) || n->span < 0) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_setup();
    if (!sink) make_folder();
    FILE *f = fopen(log_file, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    if (fclose(f) != 0) abort();

    const int rc = inspect_run_folder(fuzz_folder_path, 0, sink);
    if (rc != 0 && rc != -1) abort();
    if (fflush(sink) != 0) abort();

    plan_log_noise n;
    if (plan_log_read_noise(log_file, &n) == 0) check_noise(&n);
    return 0;
}
