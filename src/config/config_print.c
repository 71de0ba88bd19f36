/* config_print — see config.h: a config as `key = value` text (printed, or for a
 * checkpoint), and train --help's key table, both from the rows of config_keys.c. */
#include "config_keys.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

void config_format_double(double v, char *buf, size_t cap)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
    snprintf(buf, cap, "%.17g", v);
}

/* The value of key k as config text. buf must hold GT_PATH_MAX + 32 bytes. */
static void format_value(const gt_config *c, const key_def *k, char *buf, size_t cap)
{
    const void *p = config_cfield(c, k);
    switch (k->type) {
    case T_INT:
        if ((k->flags & R_AUTO) && *(const int *)p == GT_BATCH_AUTO)
            snprintf(buf, cap, "auto");
        else
            snprintf(buf, cap, "%d", *(const int *)p);
        break;
    case T_I64: snprintf(buf, cap, "%" PRId64, *(const int64_t *)p); break;
    case T_U64: snprintf(buf, cap, "%" PRIu64, *(const uint64_t *)p); break;
    case T_DBL: config_format_double(*(const double *)p, buf, cap); break;
    case T_STR: snprintf(buf, cap, "%s", (const char *)p); break;
    case T_ENUM: {
        char w[32];
        snprintf(buf, cap, "%s", config_choice_word(k->choices, *(const int *)p, w, sizeof w));
        break;
    }
    }
}

static int name_width(void)
{
    int w = 0;
    for (int i = 0; i < config_key_count; i++)
        if ((int)strlen(config_keys[i].name) > w) w = (int)strlen(config_keys[i].name);
    return w;
}

/* "key = value\n" (or "key =\n" for an empty string) into buf; returns its length. */
static int format_line(const gt_config *c, const key_def *k, int width, char *buf,
                       size_t cap)
{
    char v[GT_PATH_MAX + 32];
    format_value(c, k, v, sizeof v);
    return snprintf(buf, cap, "%-*s =%s%s\n", width, k->name, v[0] ? " " : "", v);
}

void config_print(const gt_config *c, FILE *f)
{
    char line[GT_PATH_MAX + 128];
    int w = name_width();
    for (int i = 0; i < config_key_count; i++) {
        format_line(c, &config_keys[i], w, line, sizeof line);
        fputs(line, f);
    }
}

char *config_to_text(const gt_config *c)
{
    char line[GT_PATH_MAX + 128];
    int w = name_width();
    size_t total = 1;
    for (int i = 0; i < config_key_count; i++)
        total += (size_t)format_line(c, &config_keys[i], w, line, sizeof line);
    char *text = malloc(total);
    if (!text) {
        gt_error("out of memory formatting the run config (%zu bytes)", total);
        return NULL;
    }
    size_t used = 0;
    for (int i = 0; i < config_key_count; i++) {
        int n = format_line(c, &config_keys[i], w, line, sizeof line);
        memcpy(text + used, line, (size_t)n);
        used += (size_t)n;
    }
    text[used] = '\0';
    return text;
}

/* Writes text word-wrapped to 88 columns, continuation lines indented by `indent`;
 * `col` is the column the first line starts at. */
static void print_wrapped(FILE *f, const char *text, int col, int indent)
{
    enum { WIDTH = 88 };
    const char *p = text;
    while (*p) {
        int room = WIDTH - col;
        int n = (int)strlen(p);
        if (n > room) { /* break at the last space that fits, if any */
            int cut = room;
            while (cut > 0 && p[cut] != ' ') cut--;
            if (cut > 0) n = cut;
        }
        fprintf(f, "%.*s\n", n, p);
        p += n;
        while (*p == ' ') p++;
        if (*p) fprintf(f, "%*s", indent, "");
        col = indent;
    }
}

void config_print_help(FILE *f)
{
    gt_config d;
    config_defaults(&d);
    fprintf(f, "Keys: 'key = value' lines in a --config file ('#' starts a comment), or\n"
               "--key VALUE / --key=VALUE on the command line, which wins over the file.\n");
    for (int g = 0; g < G_COUNT; g++) {
        fprintf(f, "\n%s:\n", config_group_title[g]);
        for (int i = 0; i < config_key_count; i++) {
            const key_def *k = &config_keys[i];
            if (k->group != g) continue;
            char v[GT_PATH_MAX + 32], range[96], text[512];
            format_value(&d, k, v, sizeof v);
            config_key_range(k, range, sizeof range);
            snprintf(text, sizeof text, "%s%s%s%s", k->help, range[0] ? " [" : "", range,
                     range[0] ? "]" : "");
            fprintf(f, "  %-14s %-14s ", k->name, v[0] ? v : "''");
            print_wrapped(f, text, 32, 32);
        }
    }
}
