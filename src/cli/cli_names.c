/* cli_names — see cli_names.h. */
#include "cli_names.h"

#include <string.h>

#include "util.h" /* gt_note */

/* The renamed options: which verbs still take the old name, and the new one. */
static const struct {
    const char *verbs; /* space-separated */
    const char *old, *now;
} renamed[] = {
    {"sample export", "--checkpoint", "--model"},
    {"prepare export", "--output", "--out"},
};

static int verb_in(const char *verb, const char *verbs)
{
    const size_t n = strlen(verb);
    for (const char *p = verbs; *p;) {
        const size_t len = strcspn(p, " ");
        if (len == n && strncmp(p, verb, n) == 0) return 1;
        p += len;
        while (*p == ' ') p++;
    }
    return 0;
}

void cli_note_old(const char *verb, const char *old, const char *now)
{
    gt_note("%s: %s is spelt %s now (the same option in every verb); the old spelling "
            "still works", verb, old, now);
}

const char *cli_canonical(const char *verb, const char *arg, char *buf, size_t cap)
{
    if (cap == 0) return buf;
    size_t n = strcspn(arg, "=");
    if (n >= cap) n = cap - 1;
    memcpy(buf, arg, n);
    buf[n] = '\0';
    if (strncmp(buf, "--", 2) != 0) return buf;
    for (char *p = buf + 2; *p; p++)
        if (*p == '_') *p = '-';
    for (size_t k = 0; k < sizeof renamed / sizeof renamed[0]; k++) {
        if (strcmp(buf, renamed[k].old) != 0 || !verb_in(verb, renamed[k].verbs)) continue;
        cli_note_old(verb, renamed[k].old, renamed[k].now);
        if (strlen(renamed[k].now) < cap) strcpy(buf, renamed[k].now);
        break;
    }
    return buf;
}
