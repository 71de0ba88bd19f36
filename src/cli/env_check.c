/* env_check — see env_check.h. */
#include "env_check.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel.h" /* par_launcher_rank */
#include "util.h"

extern char **environ;

/* A variable takes one of `choices` ("a|b|c"), or, when choices is NULL, a whole number
 * from lo to hi (a comma-separated list of them where list is 1). */
typedef struct {
    const char *name;
    const char *choices;
    long long lo, hi;
    int list;
} env_rule;

static const env_rule rules[] = {
    {"GENTRAIN_BF16", "auto|portable|avx512|avx512-bf16|amx|amx-bf16|amx-emulated", 0, 0, 0},
    {"GENTRAIN_BF16_ACTS", "0|exact|1", 0, 0, 0},
    {"GENTRAIN_BF16_PREPACK", "0|1", 0, 0, 0},
    {"GENTRAIN_AMX_TIMING", "0|1", 0, 0, 0},
    {"GENTRAIN_DOT_TIMING", "0|1", 0, 0, 0},
    {"GENTRAIN_SIMD", "auto|portable|avx2|avx512", 0, 0, 0},
    {"GENTRAIN_NCCL", "0|1", 0, 0, 0},
    {"GENTRAIN_CUDA_CHECK", "0|1", 0, 0, 0},
    {"GENTRAIN_PROBE", "on|off", 0, 0, 0},
    {"GENTRAIN_PROBE_SECONDS", NULL, 1, 86400, 0},
    {"GENTRAIN_CHUNK_CHECK_AT_OPEN", NULL, 0, (long long)1 << 62, 0},
    /* thread counts; each against the team's size when it starts (team.c) */
    {"GENTRAIN_TEAM_SCHEDULE", NULL, 1, GT_MAX_THREADS, 1},
};

static int whole_in(const char *value, long long lo, long long hi)
{
    /* digits only where the range has no negatives: "-0" and "+5" are read otherwise
     * by some readers (h5chunk_open_limit takes a '-' for unset) */
    if (lo >= 0 && strspn(value, "0123456789") != strlen(value)) return 0;
    char *end;
    errno = 0;
    const long long v = strtoll(value, &end, 10);
    return end != value && *end == '\0' && errno == 0 && v >= lo && v <= hi;
}

/* each comma-separated item of value a whole number from lo to hi */
static int list_in(const char *value, long long lo, long long hi)
{
    char item[32];
    for (const char *p = value;;) {
        const size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof item) return 0;
        memcpy(item, p, len);
        item[len] = '\0';
        if (!whole_in(item, lo, hi)) return 0;
        if (!p[len]) return 1;
        p += len + 1;
    }
}

static const env_rule *rule_of(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (strlen(rules[i].name) == len && strncmp(rules[i].name, name, len) == 0)
            return &rules[i];
    return NULL;
}

int env_check(void)
{
    const int rank = par_launcher_rank();
    static const char prefix[] = "GENTRAIN_"; /* a cheap first test */
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || strncmp(*e, prefix, sizeof prefix - 1) != 0) continue;
        const size_t len = (size_t)(eq - *e);
        const char *value = eq + 1;
        const env_rule *r = rule_of(*e, len);
        char shown[72];
        if (!r || !*value) continue;
        if (r->choices ? gt_word_index(r->choices, value) >= 0
                       : r->list ? list_in(value, r->lo, r->hi) : whole_in(value, r->lo, r->hi))
            continue;
        /* rank 0 says it for the job; another rank only where rank 0's is fine */
        par_launcher_defer_report();
        char who[32] = "";
        if (rank > 0) snprintf(who, sizeof who, "rank %d: ", rank);
        if (r->choices) {
            gt_error("%s%s=%s: not a value it takes (%s), or leave it unset", who, r->name,
                     gt_printable(value, shown), r->choices);
        } else {
            gt_error("%s%s=%s: want %s from %lld to %lld, or leave it unset", who, r->name,
                     gt_printable(value, shown),
                     r->list ? "whole numbers, separated by commas," : "a whole number",
                     r->lo, r->hi);
        }
        return -1;
    }
    return 0;
}
