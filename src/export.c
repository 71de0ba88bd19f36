/* export — see export.h. */
#include "export.h"

#include <stdio.h>
#include <string.h>

#include "../io/h5model.h"
#include "../io/hf_gpt2.h"
#include "backend.h"
#include "config.h"
#include "model.h"
#include "probe.h"
#include "tensors.h"
#include "util.h"

#define EXPORT_PROBE_SECONDS 600

static const char export_help[] =
    "usage: gentrain export --format hf [--model PATH] OUT_DIR\n"
    "\n"
    "Writes the model of PATH (a model file, or a run folder: its newest model.h5;\n"
    "default runs/gentrain) to OUT_DIR in another tool's format:\n"
    "  hf   a Hugging Face GPT-2 folder, config.json and model.safetensors (FP32),\n"
    "       that transformers.GPT2LMHeadModel.from_pretrained(OUT_DIR) loads as it is\n"
    "       (tokenizer files are not written: add the tokenizer the data was made with)\n";

/* Loads the whole model of path into m (created here). 0, or -1 (reported). */
static int load(const char *path, gpt_model *m, gt_tensor_table *tab, int64_t *step)
{
    gpt_shape shape;
    memset(m, 0, sizeof *m);
    memset(tab, 0, sizeof *tab);
    if (h5model_read_meta(path, &shape, step, NULL) != 0 ||
        gpt_create(m, shape, &backend_cpu, 1) != 0)
        return -1;
    if (gpt_tensor_table(m, tab) != 0) return -1;
    return h5model_load_params(path, shape, tab, m->params);
}

typedef struct export_job {
    const char *model, *out;
} export_job;

/* The whole export, run in a child first (probe.h): a model file on which HDF5
 * crashes costs one error line. */
static int run_export(void *arg)
{
    const export_job *j = arg;
    gpt_model m;
    gt_tensor_table tab;
    int64_t step = 0;
    int rc = load(j->model, &m, &tab, &step);
    if (rc == 0) rc = hf_gpt2_export(j->out, m.shape, &tab, m.params, step);
    if (rc == 0)
        printf("exported %s (step %lld) to %s: config.json, model.safetensors\n", j->model,
               (long long)step, j->out);
    gt_tensor_table_free(&tab);
    gpt_free(&m);
    return rc;
}

int export_command(int argc, char **argv, int first)
{
    const char *format = NULL, *model = "runs/gentrain", *out = NULL;
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(export_help, stdout);
            return 0;
        }
        if ((strcmp(a, "--format") == 0 || strcmp(a, "--model") == 0) && i + 1 < argc) {
            *(a[2] == 'f' ? &format : &model) = argv[++i];
        } else if (strncmp(a, "--", 2) == 0 || out) {
            char shown[72];
            gt_error("export: unexpected argument '%s'; see 'gentrain export --help'",
                     gt_printable(a, shown));
            return 2;
        } else {
            out = a;
        }
    }
    if (!format || strcmp(format, "hf") != 0 || !out) {
        gt_error("export: %s; see 'gentrain export --help'",
                 !format ? "say --format hf" : strcmp(format, "hf") != 0
                                                   ? "the only format is hf"
                                                   : "give the output folder");
        return 2;
    }
    char path[GT_PATH_MAX];
    if (h5model_find_newest(model, path, sizeof path) != 0) return 1;
    export_job job = {path, out};
    return probe_run("model", path, run_export, &job, EXPORT_PROBE_SECONDS) == 0 ? 0 : 1;
}
