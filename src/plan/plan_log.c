/* plan_log — see plan_log.h. */
#include "plan_log.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h" /* defines: json_parse, json_get, json_number */
#include "util.h"

/* A log line longer than this is not one gentrain wrote (its records are < 4 kB; the
 * emulated-AMX arrays make them longer, far below this). */
enum { MAX_LINE = 1 << 20 };

/* One record into out; *prev_x is the x of the last estimate. 0, or -1 with why. */
static int take_record(const json_value *rec, plan_log_noise *out, double *prev_x,
                       char *why, size_t cap)
{
    if (rec->type != JSON_OBJECT || isnan(json_number(rec, "step"))) {
        snprintf(why, cap, "not a JSON object with a numeric \"step\"");
        return -1;
    }
    out->records++;
    const json_value *nv = json_get(rec, "noise_scale");
    if (!nv || nv->type == JSON_NULL) return 0;
    const double noise = json_number(rec, "noise_scale");
    const double tokens = json_number(rec, "tokens");
    if (!(noise > 0 && noise <= PLAN_NOISE_MAX)) { /* NaN fails too */
        snprintf(why, cap, "noise_scale is not a positive number up to %g tokens",
                 PLAN_NOISE_MAX);
        return -1;
    }
    if (out->estimates == 0) out->by_steps = isnan(tokens);
    const double x = out->by_steps ? json_number(rec, "step") : tokens;
    if (!(x >= *prev_x && x <= PLAN_LOG_MAX_POSITION)) { /* NaN fails too */
        snprintf(why, cap, "%s is not a number at or past the last record's, up to %g",
                 out->by_steps ? "step" : "tokens", PLAN_LOG_MAX_POSITION);
        return -1;
    }
    if (out->estimates == 0) out->first = out->min = out->max = noise;
    out->min = noise < out->min ? noise : out->min;
    out->max = noise > out->max ? noise : out->max;
    out->last = noise;
    /* divided by the span at the end; with both bounds no sum of products overflows */
    out->mean += noise * (x - *prev_x);
    out->span = x;
    *prev_x = x;
    out->estimates++;
    return 0;
}

int plan_log_read_noise(const char *path, plan_log_noise *out)
{
    memset(out, 0, sizeof *out);
    /* a regular file only: a FIFO would block the open, /dev/zero grow one endless line */
    const int fd = gt_open_regular(path, "plan: --from-log: the log", 0, NULL);
    if (fd < 0) return -1;
    FILE *f = fdopen(fd, "r");
    if (!f) {
        gt_error("plan: --from-log: cannot read %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    char *line = NULL, why[256];
    size_t cap = 0;
    ssize_t len;
    int64_t lineno = 0;
    double prev_x = 0.0;
    int rc = 0;
    while (rc == 0 && (len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (len <= 1 && (len == 0 || line[0] == '\n')) continue;
        json_doc doc;
        char err[160];
        if (len > MAX_LINE) {
            snprintf(why, sizeof why, "a line of %lld bytes", (long long)len);
            rc = -1;
        } else if (json_parse(line, (size_t)len, &doc, err, sizeof err) != 0) {
            snprintf(why, sizeof why, "not JSON (%s)", err);
            rc = -1;
        } else {
            rc = take_record(&doc.root, out, &prev_x, why, sizeof why);
            json_free(&doc);
        }
        if (rc != 0) gt_error("plan: --from-log: %s:%lld: %s", path, (long long)lineno, why);
    }
    if (rc == 0 && ferror(f)) {
        gt_error("plan: --from-log: reading %s failed", path);
        rc = -1;
    }
    free(line);
    fclose(f);
    if (rc != 0) return -1;
    if (out->estimates == 0) {
        gt_error("plan: --from-log: %s has no noise_scale in its %lld records (a run logs "
                 "it with 2 or more replicas or micro-steps a step, every noise_every steps)",
                 path, (long long)out->records);
        return -1;
    }
    out->mean = out->span > 0 ? out->mean / out->span : out->last;
    return 0;
}
