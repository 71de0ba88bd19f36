/* config — see config.h: the parsers (defaults, config text and files, the command
 * line) and the checks of a whole config. The keys themselves are the rows of
 * config_keys.c; printing is config_print.c's, resume policies config_resume.c's. */
#include "config.h"
#include "config_keys.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* Which keys a sequence of sources has set (derive_defaults leaves those alone). */
typedef struct given_set {
    unsigned char given[CONFIG_KEY_MAX];
} given_set;

/* ---------------------------------------------------------------- one value */

/* Integer parsing: optional sign and decimal digits, the whole text, no overflow.
 * Returns 0, -1 (not an integer) or -2 (does not fit). */
static int parse_i64(const char *s, int64_t *out)
{
    if (!*s || isspace((unsigned char)*s)) return -1;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0') return -1;
    if (errno == ERANGE) return -2;
    *out = (int64_t)v;
    return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
    if (!*s || isspace((unsigned char)*s)) return -1;
    const char *p = (*s == '+') ? s + 1 : s;
    if (!isdigit((unsigned char)*p)) return -1; /* also refuses "-1", which strtoull wraps */
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(p, &end, 10);
    if (*end != '\0') return -1;
    if (errno == ERANGE) return -2;
    *out = (uint64_t)v;
    return 0;
}

/* Returns 0, -1 (not a number), -2 (overflows), -3 (nan or inf). */
static int parse_double(const char *s, double *out)
{
    if (!*s || isspace((unsigned char)*s)) return -1;
    errno = 0;
    char *end = NULL;
    double v = gt_strtod_decimal(s, &end);
    if (end == s || *end != '\0') return -1;
    if (isnan(v) || isinf(v)) return errno == ERANGE ? -2 : -3;
    *out = v; /* ERANGE with a finite result is underflow: keep the tiny value */
    return 0;
}

/* A string value must survive being written as `key = value` and read back. */
static const char *string_problem(const char *v)
{
    size_t n = strlen(v);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)v[i];
        if (ch < 0x20 || ch == 0x7f) return "contains a control character";
        if (ch == '#' && (i == 0 || v[i - 1] == ' '))
            return "a '#' at the start or after a space would start a comment";
    }
    if (n > 0 && (v[0] == ' ' || v[n - 1] == ' '))
        return "has leading or trailing spaces";
    return NULL;
}

static int report_unknown(const char *key, const char *origin)
{
    char shown[72];
    const char *s = config_key_suggest(key);
    if (s)
        gt_error("%s: unknown key '%s'; did you mean '%s'?", origin, gt_printable(key, shown),
                 s);
    else
        gt_error("%s: unknown key '%s' (see 'gentrain train --help' for the keys)", origin,
                 gt_printable(key, shown));
    return -1;
}

/* The setters of each key type: raw is the user's text, shown its printable form for
 * error lines, range the allowed values in words. 0, or -1 after one error line. */
static int set_integer(gt_config *c, const key_def *k, const char *raw, const char *shown,
                       const char *origin, const char *range)
{
    if ((k->flags & R_AUTO) && strcmp(raw, "auto") == 0) {
        *(int *)config_field(c, k) = GT_BATCH_AUTO;
        return 0;
    }
    int64_t v = 0;
    int rc = parse_i64(raw, &v);
    if (rc == -1) {
        gt_error("%s: %s = '%.64s': not an integer%s", origin, k->name, shown,
                 (k->flags & R_AUTO) ? " or auto" : "");
        return -1;
    }
    if (rc == -2 && raw[0] == '-') v = INT64_MIN;
    if ((rc == -2 && raw[0] != '-') || v > k->imax) {
        if (k->flags & R_MAX)
            gt_error("%s: %s = %.64s: must be %s", origin, k->name, shown, range);
        else
            gt_error("%s: %s = %.64s: too large (at most %" PRId64 ")", origin, k->name,
                     shown, k->imax);
        return -1;
    }
    if (v < k->imin) {
        gt_error("%s: %s = %.64s: must be %s", origin, k->name, shown, range);
        return -1;
    }
    if (k->type == T_INT)
        *(int *)config_field(c, k) = (int)v;
    else
        *(int64_t *)config_field(c, k) = v;
    return 0;
}

static int set_unsigned(gt_config *c, const key_def *k, const char *raw, const char *shown,
                        const char *origin)
{
    uint64_t v = 0;
    int rc = parse_u64(raw, &v);
    if (rc == -1) {
        gt_error("%s: %s = '%.64s': not a non-negative integer", origin, k->name, shown);
        return -1;
    }
    if (rc == -2) {
        gt_error("%s: %s = %.64s: too large (at most %" PRIu64 ")", origin, k->name, shown,
                 UINT64_MAX);
        return -1;
    }
    *(uint64_t *)config_field(c, k) = v;
    return 0;
}

static int set_real(gt_config *c, const key_def *k, const char *raw, const char *shown,
                    const char *origin, const char *range)
{
    double v = 0;
    int rc = parse_double(raw, &v);
    if (rc != 0) {
        gt_error("%s: %s = %s%.64s%s: %s", origin, k->name, rc == -1 ? "'" : "", shown,
                 rc == -1 ? "'" : "",
                 rc == -1 ? "not a number" : rc == -2 ? "out of range of a double"
                                                      : "must be a finite number");
        return -1;
    }
    int bad = 0;
    if (k->flags & R_MIN) bad |= (k->flags & R_MIN_X) ? !(v > k->dmin) : !(v >= k->dmin);
    if (k->flags & R_MAX) bad |= (k->flags & R_MAX_X) ? !(v < k->dmax) : !(v <= k->dmax);
    if (bad) {
        gt_error("%s: %s = %.64s: must be %s", origin, k->name, shown, range);
        return -1;
    }
    *(double *)config_field(c, k) = v;
    return 0;
}

static int set_enum(gt_config *c, const key_def *k, const char *raw, const char *shown,
                    const char *origin)
{
    const int v = gt_word_index(k->choices, raw);
    if (v < 0) {
        gt_error("%s: %s = '%s': must be one of: %s", origin, k->name, shown, k->choices);
        return -1;
    }
    *(int *)config_field(c, k) = v;
    return 0;
}

static int set_string(gt_config *c, const key_def *k, const char *raw, const char *shown,
                      const char *origin)
{
    size_t n = strlen(raw);
    if (n >= k->cap) {
        gt_error("%s: %s = '%.48s...': too long (%zu characters, at most %zu)", origin,
                 k->name, shown, n, k->cap - 1);
        return -1;
    }
    const char *why = string_problem(raw);
    if (why) {
        gt_error("%s: %s = '%s': %s", origin, k->name, shown, why);
        return -1;
    }
    /* Clear the whole array so that equal configs are equal byte for byte. */
    memset(config_field(c, k), 0, k->cap);
    memcpy(config_field(c, k), raw, n);
    return 0;
}

/* Applies one key; `given` (may be NULL) records that the key was set. */
static int set_key(gt_config *c, const char *key, const char *value, const char *origin,
                   given_set *given)
{
    int ki = config_key_index(key);
    if (ki < 0) return report_unknown(key, origin);
    const key_def *k = &config_keys[ki];
    char range[96];
    config_key_range(k, range, sizeof range);
    /* The value as it is echoed in errors: control characters would break the line. */
    char shown[72];
    const char *printable = gt_printable(value, shown);
    int rc = -1;
    switch (k->type) {
    case T_INT:
    case T_I64: rc = set_integer(c, k, value, printable, origin, range); break;
    case T_U64: rc = set_unsigned(c, k, value, printable, origin); break;
    case T_DBL: rc = set_real(c, k, value, printable, origin, range); break;
    case T_ENUM: rc = set_enum(c, k, value, printable, origin); break;
    case T_STR: rc = set_string(c, k, value, printable, origin); break;
    }
    if (rc == 0 && given) given->given[ki] = 1;
    return rc;
}

/* ---------------------------------------------------------------- sources */

void config_defaults(gt_config *c)
{
    memset(c, 0, sizeof *c);
    for (int i = 0; i < config_key_count; i++) {
        /* The defaults are checked by the same code as user values; a failure here is
         * a bug in the table, reported by set_key. */
        const key_def *k = &config_keys[i];
        if (set_key(c, k->name, k->def, "built-in default", NULL) != 0) abort();
    }
}

int config_set(gt_config *c, const char *key, const char *value, const char *origin)
{
    return set_key(c, key, value, origin ? origin : "command line", NULL);
}

static int is_blank(char ch) { return ch == ' ' || ch == '\t' || ch == '\r'; }

/* Splits one line of a config text in place: a comment ('#' at the start of the line
 * or after a space or tab) and surrounding blanks dropped, then `key = value`. 1 with
 * *key and *value set, 0 for a blank or comment line, -1 when it is not `key = value`
 * (*key then points at the trimmed line, empty when only the key is missing). */
static int split_line(char *line, char **key, char **value)
{
    const size_t len = strlen(line);
    for (size_t i = 0; i < len; i++) {
        if (line[i] == '#' && (i == 0 || is_blank(line[i - 1]))) {
            line[i] = '\0';
            break;
        }
    }
    char *s = line;
    while (is_blank(*s)) s++;
    char *e = s + strlen(s);
    while (e > s && is_blank(e[-1])) *--e = '\0';
    *key = s;
    if (!*s) return 0;
    char *eq = strchr(s, '=');
    if (!eq) return -1;
    char *ke = eq;
    while (ke > s && is_blank(ke[-1])) ke--;
    *ke = '\0';
    char *v = eq + 1;
    while (is_blank(*v)) v++;
    *value = v;
    return *s ? 1 : -1;
}

/* Past a UTF-8 byte order mark, as some editors write one. */
static const char *skip_bom(const char *p)
{
    if ((unsigned char)p[0] == 0xEF && (unsigned char)p[1] == 0xBB &&
        (unsigned char)p[2] == 0xBF)
        return p + 3;
    return p;
}

/* Parses `text` line by line; origin names it in errors ("file.cfg" -> "file.cfg:7"). */
static int load_text(gt_config *c, const char *text, const char *origin, given_set *given)
{
    int line_of[CONFIG_KEY_MAX];
    memset(line_of, 0, sizeof line_of);
    char where[GT_PATH_MAX + 32];
    char line[2 * GT_PATH_MAX];
    const char *p = skip_bom(text);
    for (int lineno = 1; *p; lineno++) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        snprintf(where, sizeof where, "%s:%d", origin, lineno);
        if (len >= sizeof line) {
            gt_error("%s: line too long (%zu characters)", where, len);
            return -1;
        }
        memcpy(line, p, len);
        line[len] = '\0';
        p = eol ? eol + 1 : p + len;

        char *s = NULL, *v = NULL;
        const int kind = split_line(line, &s, &v);
        if (kind == 0) continue;
        if (kind < 0) {
            if (*s)
                gt_error("%s: expected 'key = value', got '%.64s'", where, s);
            else
                gt_error("%s: missing key before '='", where);
            return -1;
        }
        if (set_key(c, s, v, where, given) != 0) return -1;
        int ki = config_key_index(s);
        if (line_of[ki])
            gt_warn("%s: %s was already set on line %d; the later value wins", where,
                    config_keys[ki].name, line_of[ki]);
        line_of[ki] = lineno;
    }
    return 0;
}

int config_load_text(gt_config *c, const char *text, const char *origin)
{
    return load_text(c, text, origin ? origin : "config text", NULL);
}

static int load_file(gt_config *c, const char *path, given_set *given)
{
    enum { MAX_BYTES = 1 << 20 };
    int fd = gt_open_regular(path, "config file", 0, NULL);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        if (fd >= 0) {
            gt_error("cannot open config file %s: %s", path, strerror(errno));
            close(fd);
        }
        return -1;
    }
    char *buf = malloc(MAX_BYTES + 1);
    if (!buf) {
        fclose(f);
        gt_error("out of memory reading config file %s", path);
        return -1;
    }
    size_t n = fread(buf, 1, MAX_BYTES + 1, f);
    int rd_err = ferror(f);
    fclose(f);
    int rc = -1;
    if (rd_err) {
        gt_error("cannot read config file %s (is it a folder?)", path);
    } else if (n > MAX_BYTES) {
        gt_error("config file %s is larger than %d bytes; is it really a config file?",
                 path, MAX_BYTES);
    } else if (memchr(buf, '\0', n)) {
        gt_error("config file %s contains NUL bytes; is it really a config file?", path);
    } else {
        buf[n] = '\0';
        rc = load_text(c, buf, path, given);
    }
    free(buf);
    return rc;
}

int config_load_file(gt_config *c, const char *path)
{
    return load_file(c, path, NULL);
}

/* Values that follow from others when the user did not give them (see the help). */
static int derive_defaults(gt_config *c, const given_set *g)
{
    if (!g->given[config_key_index("warmup_steps")] && c->warmup_steps > c->steps)
        c->warmup_steps = c->steps / 10;
    if (!g->given[config_key_index("min_lr")] && c->min_lr > c->lr) c->min_lr = c->lr / 10;
    if (!g->given[config_key_index("log")] && c->out[0] && strcmp(c->out, "none") != 0) {
        char buf[sizeof c->log];
        int n = snprintf(buf, sizeof buf, "%s/log.jsonl", c->out);
        if (n < 0 || (size_t)n >= sizeof buf) {
            gt_error("out = '%.48s...': too long to hold log.jsonl; set log explicitly",
                     c->out);
            return -1;
        }
        memset(c->log, 0, sizeof c->log);
        memcpy(c->log, buf, (size_t)n);
    }
    return 0;
}

int config_parse_args(gt_config *c, int argc, char **argv, int first)
{
    given_set given;
    memset(&given, 0, sizeof given);
    /* Pass 1: every --config FILE, in order, before any --key value. */
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--config") == 0) {
            if (i + 1 >= argc) {
                gt_error("command line: --config needs a file name");
                return -1;
            }
            if (load_file(c, argv[++i], &given) != 0) return -1;
        } else if (strncmp(a, "--config=", 9) == 0) {
            if (load_file(c, a + 9, &given) != 0) return -1;
        } else if ((strcmp(a, "-o") == 0 || (strncmp(a, "--", 2) == 0 && !strchr(a, '='))) &&
                   i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
            i++; /* skip the value of --key value (pass 2 checks it) */
        }
    }
    /* Pass 2: the --key value / --key=value pairs, later ones winning. */
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--config") == 0) {
            i++;
            continue;
        }
        if (strncmp(a, "--config=", 9) == 0) continue;
        if (strcmp(a, "-o") == 0) { /* -o DIR: --out DIR, as in every verb */
            if (i + 1 >= argc || strncmp(argv[i + 1], "--", 2) == 0) {
                gt_error("command line: -o needs a value (the run folder)");
                return -1;
            }
            if (set_key(c, "out", argv[++i], "command line", &given) != 0) return -1;
            continue;
        }
        if (strncmp(a, "--", 2) != 0 || a[2] == '\0' || a[2] == '=') {
            char shown[72];
            gt_error("command line: unexpected argument '%s' (options are --key VALUE "
                     "or --key=VALUE; see 'gentrain train --help')",
                     gt_printable(a, shown));
            return -1;
        }
        char key[GT_NAME_MAX];
        const char *value;
        const char *eq = strchr(a + 2, '=');
        size_t klen = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
        if (klen >= sizeof key) return report_unknown(a + 2, "command line");
        memcpy(key, a + 2, klen);
        key[klen] = '\0';
        if (eq) {
            value = eq + 1;
        } else {
            if (config_key_index(key) < 0) return report_unknown(key, "command line");
            if (i + 1 >= argc || strncmp(argv[i + 1], "--", 2) == 0) {
                gt_error("command line: --%s needs a value (write --%s=VALUE for a value "
                         "that starts with --)",
                         key, key);
                return -1;
            }
            value = argv[++i];
        }
        if (set_key(c, key, value, "command line", &given) != 0) return -1;
    }
    return derive_defaults(c, &given);
}

/* ---------------------------------------------------------------- the whole config */

/* global_batch_size = auto: the limits, and what it cannot be combined with (what
 * depends on the replica count is the trainer's to check: train_settle_batch). */
static int config_validate_auto_batch(const gt_config *c)
{
    if (c->global_batch_size != GT_BATCH_AUTO) return 0;
    if (c->sync == SYNC_ASYNC) {
        gt_error("global_batch_size = auto needs sync = sync (an async step applies a "
                 "gradient of another step's batch)");
        return -1;
    }
    if (c->global_batch_min > 0 && c->global_batch_min % c->batch_size != 0) {
        gt_error("global_batch_min %d is not a multiple of batch_size %d",
                 c->global_batch_min, c->batch_size);
        return -1;
    }
    if (c->global_batch_max > 0 && c->global_batch_min > 0 &&
        (c->global_batch_max < c->global_batch_min ||
         c->global_batch_max % c->global_batch_min != 0)) {
        gt_error("global_batch_max %d is not a multiple of global_batch_min %d of at "
                 "least it", c->global_batch_max, c->global_batch_min);
        return -1;
    }
    return 0;
}

int config_validate(const gt_config *c)
{
    if (!c->data[0]) {
        gt_error("no data file: set data = FILE.h5 in the config file or give "
                 "--data FILE.h5 ('gentrain prepare' makes one from text)");
        return -1;
    }
    if (!c->train_dataset[0]) {
        gt_error("train_dataset is empty: name the dataset of training tokens, "
                 "e.g. /train/tokens");
        return -1;
    }
    if (c->n_embd % c->n_head != 0) {
        gt_error("n_embd %d is not divisible by n_head %d", c->n_embd, c->n_head);
        return -1;
    }
    /* The grid (grid.h); its product with the number of ranks is checked at start. */
    if (c->n_head % c->tp != 0) {
        gt_error("tp = %d does not divide n_head = %d (each tensor-parallel rank takes "
                 "whole attention heads)", c->tp, c->n_head);
        return -1;
    }
    if (c->vocab_size > 0 && c->vocab_size % c->tp != 0) {
        gt_error("tp = %d does not divide vocab_size = %d (each tensor-parallel rank takes "
                 "a share of the vocabulary; pad it)", c->tp, c->vocab_size);
        return -1;
    }
    if (c->pp > c->n_layer) {
        gt_error("pp = %d is larger than n_layer = %d (each pipeline stage needs a layer)",
                 c->pp, c->n_layer);
        return -1;
    }
    if (c->micro_batches > 0 && c->batch_size % c->micro_batches != 0) {
        gt_error("micro_batches = %d does not divide batch_size = %d", c->micro_batches,
                 c->batch_size);
        return -1;
    }
    if (c->peak_gflops > 0 && c->peak_gflops < 0.001) {
        char a[40];
        config_format_double(c->peak_gflops, a, sizeof a);
        gt_error("peak_gflops = %s is not a machine's peak: give 0 (measure it) or at "
                 "least 0.001", a);
        return -1;
    }
    if (c->min_lr > c->lr) {
        char a[40], b[40];
        config_format_double(c->min_lr, a, sizeof a);
        config_format_double(c->lr, b, sizeof b);
        gt_error("min_lr %s is larger than lr %s", a, b);
        return -1;
    }
    if (c->warmup_steps > c->steps) {
        gt_error("warmup_steps %" PRId64 " is larger than steps %" PRId64, c->warmup_steps,
                 c->steps);
        return -1;
    }
    if (config_validate_auto_batch(c) != 0) return -1;
    const int resuming = c->resume[0] && strcmp(c->resume, "none") != 0;
    const char *ckpt_key = c->ckpt_every > 0 ? "ckpt_every"
                           : c->ckpt_minutes > 0 ? "ckpt_minutes"
                           : resuming ? "resume" : NULL;
    if (ckpt_key && (!c->out[0] || strcmp(c->out, "none") == 0)) {
        gt_error("%s needs a run folder (checkpoints live in <out>/checkpoints/); set out",
                 ckpt_key);
        return -1;
    }
    return 0;
}

int config_is_none(const char *s) { return s[0] == '\0' || strcmp(s, "none") == 0; }

/* ---------------------------------------------------------------- saved config texts */

int config_text_each(const char *text,
                     int (*fn)(void *ctx, const char *key, const char *value), void *ctx)
{
    /* One copy, split line by line in place: unlike load_text, no line is too long. */
    char *copy = strdup(skip_bom(text ? text : ""));
    if (!copy) {
        gt_error("out of memory reading a config text");
        return -1;
    }
    int rc = 0;
    for (char *line = copy; line && *line && rc == 0;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        char *key = NULL, *value = NULL;
        if (split_line(line, &key, &value) == 1) rc = fn(ctx, key, value);
        line = nl ? nl + 1 : NULL;
    }
    free(copy);
    return rc;
}

typedef struct text_lookup {
    const char *key;
    char *out;
    size_t cap;
    int found;
} text_lookup;

static int take_value(void *ctx, const char *key, const char *value)
{
    text_lookup *l = ctx;
    if (strcmp(key, l->key) == 0) {
        snprintf(l->out, l->cap, "%s", value);
        l->found = 1;
    }
    return 0;
}

int config_text_value(const char *text, const char *key, char *out, size_t cap)
{
    text_lookup l = {.key = key, .out = out, .cap = cap, .found = 0};
    if (cap) out[0] = '\0';
    if (config_text_each(text, take_value, &l) != 0) return -1;
    return l.found;
}
