/* test_tensors — the table of named tensors (src/layout/tensors.c) and the model's description
 * of its parameters as one (gpt_tensor_table in src/model/model_build.c,
 * gpt_shape_tensor_table in src/layout/layout.c).
 *
 * Tensors tile the buffer in table order; bad names, ranks, dimensions and sizes are
 * refused in one error line, the table unchanged; the table grows past its first room;
 * a model's table is its parameter layout (whole model, tensor-parallel shard,
 * pipeline stage); the table of a shape is the whole model's, without a model. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "model.h"
#include "tensors.h"
#include "testutil.h"

static void basics(void)
{
    gt_tensor_table t = {0};
    TU_CHECK(t.count == 0 && t.total == 0 && gt_tensor_table_find(&t, "a") < 0,
             "an all-zero table is empty");
    gt_tensor_table_free(&t);
    TU_CHECK(gt_tensor_table_init(&t, 1) == 0, "init with room for 1");
    const int64_t a[2] = {3, 4}, b[1] = {5}, c[4] = {2, 1, 3, 2};
    TU_CHECK(gt_tensor_table_add(&t, "a", 2, a) == 0 && gt_tensor_table_add(&t, "b", 1, b) == 0 &&
                 gt_tensor_table_add(&t, "c", 4, c) == 0,
             "three tensors added (past the first room)");
    TU_CHECK(t.count == 3 && t.total == 12 + 5 + 12, "count 3, total %zu", t.total);
    TU_CHECK(t.tensors[0].offset == 0 && t.tensors[1].offset == 12 && t.tensors[2].offset == 17,
             "they tile the buffer in order (offsets %zu %zu %zu)", t.tensors[0].offset,
             t.tensors[1].offset, t.tensors[2].offset);
    TU_CHECK(t.tensors[1].numel == 5 && t.tensors[1].ndim == 1 && t.tensors[1].dims[0] == 5 &&
                 t.tensors[1].dims[1] == 0,
             "b: numel 5, ndim 1, dims past ndim are 0");
    TU_CHECK(gt_tensor_table_find(&t, "c") == 2 && gt_tensor_table_find(&t, "d") == -1,
             "find by name");

    /* refusals: one error line each, the table unchanged */
    char long_name[80];
    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    const int64_t zero[1] = {0}, neg[1] = {-3}, huge[2] = {INT64_MAX / 2, 16};
    const int64_t big[1] = {(int64_t)(SIZE_MAX / 2)};
    struct {
        const char *what, *name;
        int ndim;
        const int64_t *dims;
        const char *want;
    } bad[] = {
        {"empty name", "", 1, b, "bad tensor name"},
        {"a '/' in the name", "x/y", 1, b, "bad tensor name"},
        {"a 79-character name", long_name, 1, b, "bad tensor name"},
        {"ndim 0", "z", 0, b, "has 0 dimensions"},
        {"ndim 5", "z", 5, c, "has 5 dimensions"},
        {"a dimension 0", "z", 1, zero, "must be >= 1"},
        {"a negative dimension", "z", 1, neg, "must be >= 1"},
        {"a size past SIZE_MAX", "z", 2, huge, "too large"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tu_capture_begin();
        int rc = gt_tensor_table_add(&t, bad[i].name, bad[i].ndim, bad[i].dims);
        const char *msg = tu_capture_end();
        TU_CHECK(rc != 0 && strstr(msg, bad[i].want) && tu_count_lines(msg) == 1 &&
                     t.count == 3 && t.total == 29,
                 "refused: %s, table unchanged", bad[i].what);
    }
    /* each fits alone, their sum does not */
    TU_CHECK(gt_tensor_table_add(&t, "big1", 1, big) == 0, "a tensor of SIZE_MAX/2 floats");
    tu_capture_begin();
    int rc = gt_tensor_table_add(&t, "big2", 1, big);
    const char *msg = tu_capture_end();
    TU_CHECK(rc != 0 && strstr(msg, "does not fit") && t.count == 4,
             "refused: a total past SIZE_MAX");
    gt_tensor_table_free(&t);
    TU_CHECK(t.count == 0 && t.tensors == NULL && t.total == 0, "freed: empty again");

    TU_CHECK(gt_tensor_table_init(&t, 0) == 0, "init with no room");
    int ok = 1;
    for (int i = 0; i < 1000 && ok; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%d", i);
        const int64_t d[1] = {i + 1};
        ok = gt_tensor_table_add(&t, name, 1, d) == 0;
    }
    TU_CHECK(ok && t.count == 1000 && t.total == 500500 && t.tensors[999].offset == 499500 &&
                 gt_tensor_table_find(&t, "t517") == 517,
             "1000 tensors: it grows, and still tiles");
    gt_tensor_table_free(&t);
}

/* Does tab describe m's parameter layout, entry for entry? */
static int matches_model(const gt_tensor_table *tab, const gpt_model *m)
{
    if (tab->count != m->n_info || tab->total != m->n_params) return 0;
    for (int i = 0; i < m->n_info; i++) {
        const gt_tensor *t = &tab->tensors[i];
        const gpt_param_info *p = &m->info[i];
        if (strcmp(t->name, p->name) != 0 || t->ndim != p->ndim || t->offset != p->offset ||
            t->numel != p->numel || t->dims[0] != p->shape[0] ||
            (p->ndim == 2 && t->dims[1] != p->shape[1]))
            return 0;
    }
    return 1;
}

static void model_tables(void)
{
    const gpt_shape s = {64, 16, 3, 4, 32};
    gpt_model whole, shard, stage;
    gt_tensor_table t, u;
    if (gpt_create(&whole, s, NULL, 1) != 0 || gpt_create_tp(&shard, s, NULL, 1, 2, 1) != 0 ||
        gpt_create_stage(&stage, s, NULL, 1, 1, 0, 1, 2) != 0) {
        printf("cannot make the models\n");
        exit(99);
    }
    TU_CHECK(gpt_tensor_table(&whole, &t) == 0 && matches_model(&t, &whole),
             "whole model: its table is its layout (%d tensors, %zu floats)", t.count,
             t.total);
    TU_CHECK(t.count == 2 + 12 * 3 + 2 && strcmp(t.tensors[0].name, "transformer.wte.weight") == 0 &&
                 t.tensors[0].dims[0] == 64 && t.tensors[0].dims[1] == 32,
             "whole model: GPT-2 names, wte first, [V, C]");
    TU_CHECK(gpt_shape_tensor_table(s, &u) == 0 && matches_model(&u, &whole),
             "the table of the shape is the whole model's, without a model");
    gt_tensor_table_free(&t);
    gt_tensor_table_free(&u);

    TU_CHECK(gpt_tensor_table(&shard, &t) == 0 && matches_model(&t, &shard) &&
                 t.total < whole.n_params,
             "tp shard: its own layout, shard shapes (%zu floats)", t.total);
    gt_tensor_table_free(&t);
    TU_CHECK(gpt_tensor_table(&stage, &t) == 0 && matches_model(&t, &stage) &&
                 strcmp(t.tensors[t.count - 1].name, "transformer.wte.weight") == 0,
             "last pipeline stage: its blocks, ln_f and its own wte copy last");
    gt_tensor_table_free(&t);

    const gpt_shape bad = {64, 16, 3, 5, 32};
    tu_capture_begin();
    int rc = gpt_shape_tensor_table(bad, &u);
    const char *msg = tu_capture_end();
    TU_CHECK(rc != 0 && strstr(msg, "n_embd 32 is not divisible by n_head 5") &&
                 tu_count_lines(msg) == 1 && u.count == 0 && u.tensors == NULL,
             "a bad shape: refused in one line, the table empty");
    char why[256];
    const gpt_shape huge = {64, 16, GPT_MAX_LAYERS + 1, 4, 32};
    TU_CHECK(gpt_shape_check(huge, why, sizeof why) != 0 && strstr(why, "too large") &&
                 gpt_shape_check(s, why, sizeof why) == 0,
             "gpt_shape_check: too many layers refused (%s), the good shape taken", why);
    gpt_free(&whole);
    gpt_free(&shard);
    gpt_free(&stage);
}

int main(void)
{
    basics();
    model_tables();
    return tu_finish();
}
