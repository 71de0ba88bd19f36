/* config_keys — the key table of the run configuration (inside src/config only; the
 * rest of gentrain sees config.h). One row per key: the gt_config field it fills, its
 * type, default, allowed range, resume policy, group and help. config.c parses into the
 * fields the rows name and checks their ranges, config_print.c prints a config and
 * --help from them, config_resume.c reads their resume policies; a new key is one row
 * in config_keys.c. */
#ifndef GT_CONFIG_KEYS_H
#define GT_CONFIG_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* T_ENUM: an int-sized enum field whose value is the index of its word in choices. */
typedef enum { T_INT, T_I64, T_U64, T_DBL, T_STR, T_ENUM } key_type;

/* The groups of train --help, in order (config_group_title names them). */
enum { G_DATA, G_MODEL, G_OPTIM, G_RUN, G_PAR, G_CKPT, G_COUNT };

/* Range flags: which bounds apply and whether they are strict. Integer keys always
 * have a lower bound (imin); their upper bound is imax (the field type's limit unless
 * R_MAX says the table states one on purpose). */
#define R_MIN 1u      /* double: value >= dmin (or > with R_MIN_X) */
#define R_MIN_X 2u
#define R_MAX 4u      /* double: value <= dmax (or < with R_MAX_X); int: imax is a rule */
#define R_MAX_X 8u
#define R_AUTO 16u    /* int: the word "auto" is accepted and stored as GT_BATCH_AUTO */
/* string: names an object inside the data file ("/train/tokens"): two spellings of one
 * object ("train/tokens", "/train//tokens/") are one value to config_values_same */
#define K_H5NAME 32u

typedef struct key_def {
    const char *name;
    key_type type;
    size_t off;       /* offsetof(gt_config, field) */
    size_t cap;       /* strings: size of the char array */
    int group;
    config_resume resume; /* what changing it on resume does (config.h) */
    const char *def;  /* default, as text: parsed by the same code as user values */
    int64_t imin, imax;
    double dmin, dmax;
    unsigned flags;
    const char *help;
    const char *choices; /* strings: the allowed values, '|'-separated; NULL = any */
} key_def;

/* The rows, in --help and printing order, and their count (at most CONFIG_KEY_MAX, so
 * that per-key arrays can be sized at compile time). */
#define CONFIG_KEY_MAX 96
extern const key_def config_keys[];
extern const int config_key_count;
extern const char *const config_group_title[G_COUNT];

/* The field of gt_config that row k names. */
static inline void *config_field(gt_config *c, const key_def *k)
{
    return (char *)c + k->off;
}
static inline const void *config_cfield(const gt_config *c, const key_def *k)
{
    return (const char *)c + k->off;
}

/* The row of a key name ('-' and '_' alike: --n-layer is n_layer), or -1. */
int config_key_index(const char *name);

/* The known key closest to an unknown name (a typo, or words swapped: "lr_min" for
 * "min_lr"), or NULL when none is close. */
const char *config_key_suggest(const char *name);

/* Row k's allowed values in words (">= 1", "> 0", ">= 0 and < 1", "one of: a|b"), or
 * "" when any value of its type is allowed. */
void config_key_range(const key_def *k, char *buf, size_t cap);

/* Word i of a '|'-separated choices list into buf (cap > 0); "?" when there is none. */
const char *config_choice_word(const char *choices, int i, char *buf, size_t cap);

/* The shortest %g text that reads back as exactly v (config_print.c): printing a config
 * and the values named in error lines. */
void config_format_double(double v, char *buf, size_t cap);

#endif
