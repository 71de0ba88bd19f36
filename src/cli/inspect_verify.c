/* inspect_verify — see inspect_verify.h. */
#include "inspect_verify.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"    /* CKPT_FORMAT_NAME, ckpt_verify_file */
#include "h5model.h" /* h5model_format_of, h5model_read_meta, h5model_load_params */
#include "layout.h"  /* gpt_shape_tensor_table */
#include "util.h"

/* A model file: its tensors loaded as `sample` loads them (every one checked against
 * the checksum and for finite values) into a buffer of the file's own shape. */
static int verify_model(const char *path, FILE *out)
{
    gpt_shape shape;
    int64_t step;
    if (h5model_read_meta(path, &shape, &step, NULL) != 0) return -1;
    gt_tensor_table tab;
    if (gpt_shape_tensor_table(shape, &tab) != 0) return -1;
    float *params = gt_malloc(tab.total * sizeof *params, "model parameters");
    const int rc = params ? h5model_load_params(path, shape, &tab, params) : -1;
    if (rc == 0) {
        char n[32];
        gt_group_digits((int64_t)tab.total, n, sizeof n);
        fprintf(out, "verify: the model of step %" PRId64 " verifies: its %s parameters "
                     "match its checksum and are finite\n", step, n);
    }
    free(params);
    gt_tensor_table_free(&tab);
    return rc;
}

int inspect_verify_file(const char *path, FILE *out)
{
    char fmt[64] = "", shown[72];
    const int has = h5model_format_of(path, fmt, sizeof fmt);
    if (has < 0) return -1;
    if (has == 1 && strcmp(fmt, H5MODEL_FORMAT_NAME) == 0) return verify_model(path, out);
    if (has == 1 && strcmp(fmt, CKPT_FORMAT_NAME) == 0) {
        ckpt_meta meta;
        if (ckpt_verify_file(path, &meta) != 0) return -1;
        fprintf(out, "verify: the checkpoint of step %" PRId64 " verifies: its parameters, "
                     "optimizer state and metadata match its checksum\n", meta.step);
        ckpt_meta_free(&meta);
        return 0;
    }
    gt_error("inspect: --verify checks gentrain models and checkpoints; %s is neither "
             "(%s%s%s)", gt_printable(path, shown),
             has == 1 ? "format = \"" : "no format attribute", has == 1 ? fmt : "",
             has == 1 ? "\"" : "");
    return -1;
}
