/* ckpt_compat — ckpt_check_compatible (ckpt.h): may a run with this config resume from
 * a checkpoint? The two config texts are compared key by key, each key by the resume
 * policy the config table gives it (config.h); the file format is ckpt.c's. */
#include "ckpt.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "config.h" /* config_resume_policy, config_text_each, config_text_value,
                     * config_values_same */

static void add_change(char *buf, size_t cap, const char *text)
{
    if (!buf || !cap) return;
    size_t used = strlen(buf);
    if (used + 1 < cap) snprintf(buf + used, cap - used, "%s%s", used ? ", " : "", text);
}

/* One comparison of a checkpoint's config text (then) with the run's (now). */
typedef struct compat {
    const ckpt_meta *meta;
    const char *then, *now;
    char *old_val, *now_val;  /* each as long as the longer text: no value is cut */
    size_t val_cap;
    int pass;                 /* 0: the keys of then; 1: those of now alone */
    char *changes;
    size_t cap;
} compat;

/* config_text_each's callback: one key, refused (-1, reported) or listed (0). */
static int compare_key(void *ctx, const char *key, const char *value)
{
    compat *c = ctx;
    (void)value; /* the last line of each text counts, as when it is loaded */
    const int has_old = config_text_value(c->then, key, c->old_val, c->val_cap);
    const int has_now = config_text_value(c->now, key, c->now_val, c->val_cap);
    if (has_old < 0 || has_now < 0) return -1;
    if (c->pass == 1 && has_old) return 0; /* seen in pass 0 */
    const char *old = has_old ? c->old_val : NULL, *now = has_now ? c->now_val : NULL;
    if (old && now && config_values_same(key, old, now)) return 0;
    if (strcmp(key, "steps") == 0 && now) {
        char *end = NULL;
        long long s = strtoll(now, &end, 10);
        if (end != now && *end == '\0' && s < c->meta->step) {
            gt_error("cannot resume from %s: it is at step %" PRId64
                     ", after steps = %lld: nothing left to train (raise steps)",
                     c->meta->path, c->meta->step, s);
            return -1;
        }
    }
    /* a fixed global batch and auto count steps differently (ckpt.h) */
    if (strcmp(key, "global_batch_size") == 0 && old && now &&
        (strcmp(old, "auto") == 0) != (strcmp(now, "auto") == 0)) {
        gt_error("cannot resume from %s: global_batch_size = %.40s in the checkpoint, "
                 "%.40s now (auto and a fixed batch state the lr schedule and the run "
                 "length differently; start a new run or set it back)",
                 c->meta->path, old, now);
        return -1;
    }
    /* The key table says what a change does; a key it does not know (an older or a
     * newer gentrain's) may come or go, not change. */
    const int policy = config_resume_policy(key);
    /* The data moved (staged to node-local disk, another spelling of its path): the
     * checkpoint's record of what its data held is compared with what the run opened
     * (train_check_resume); without that record there is nothing to compare. */
    if (policy == CONFIG_RESUME_PLACE && !c->meta->data) {
        gt_error("cannot resume from %s: %s = %.200s in the checkpoint, %.200s now (the "
                 "checkpoint does not record what its data held, so a moved file cannot be "
                 "compared; set it back)",
                 c->meta->path, key, old ? old : "(unset)", now ? now : "(unset)");
        return -1;
    }
    if (policy == CONFIG_RESUME_MATH || (policy < 0 && old && now)) {
        gt_error("cannot resume from %s: %s = %.200s in the checkpoint, %.200s now "
                 "(%s; start a new run or set it back)",
                 c->meta->path, key, old ? old : "(unset)", now ? now : "(unset)",
                 policy < 0 ? "a key this check does not know"
                            : config_resume_reason(CONFIG_RESUME_MATH));
        return -1;
    }
    char item[600];
    if (old && now && policy == CONFIG_RESUME_PLACE)
        snprintf(item, sizeof item, "%s %.200s -> %.200s (its fingerprint compared)", key,
                 old, now);
    else if (old && now)
        snprintf(item, sizeof item, "%s %.200s -> %.200s", key, old, now);
    else if (now)
        snprintf(item, sizeof item, "%s = %.200s (not in the checkpoint)", key, now);
    else
        snprintf(item, sizeof item, "%s = %.200s (no longer set)", key, old);
    add_change(c->changes, c->cap, item);
    return 0;
}

int ckpt_check_compatible(const ckpt_meta *meta, const char *config_text, int world_size,
                          char *changes, size_t cap)
{
    if (changes && cap) changes[0] = '\0';
    if (meta->world_size != world_size) {
        char item[96];
        snprintf(item, sizeof item, "replicas %d -> %d", meta->world_size, world_size);
        add_change(changes, cap, item);
    }
    compat c = {.meta = meta, .then = meta->config_text ? meta->config_text : "",
                .now = config_text ? config_text : "", .changes = changes, .cap = cap};
    const size_t la = strlen(c.then), lb = strlen(c.now);
    c.val_cap = (la > lb ? la : lb) + 1;
    c.old_val = malloc(c.val_cap);
    c.now_val = malloc(c.val_cap);
    int rc = -1;
    if (!c.old_val || !c.now_val) {
        gt_error("out of memory comparing configs");
        goto done;
    }
    /* Every key of either text, the checkpoint's first. */
    for (c.pass = 0; c.pass < 2; c.pass++)
        if (config_text_each(c.pass ? c.now : c.then, compare_key, &c) != 0) goto done;
    rc = 0;
done:
    free(c.old_val);
    free(c.now_val);
    return rc;
}
