/* export — see export.h. */
#include "export.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"       /* bpe_load, bpe_token_id */
#include "bpe_train.h" /* BPE_SPECIAL_TOKEN */
#include "h5model.h"
#include "h5tok.h"     /* h5tok_read_path */
#include "hf_gpt2.h"
#include "backend.h"
#include "cli_names.h" /* cli_canonical, cli_note_old */
#include "config.h"
#include "model.h"
#include "probe.h"
#include "tensors.h"
#include "util.h"

#define EXPORT_PROBE_SECONDS 600

static const char export_help[] =
    "usage: gentrain export --format hf [--model PATH] -o|--out OUT_DIR\n"
    "\n"
    "Writes the model of PATH (a model file, or a run folder: its newest model.h5;\n"
    "default runs/gentrain) to OUT_DIR in another tool's format (OUT_DIR given alone,\n"
    "without -o, and --checkpoint for --model, still work):\n"
    "  hf   a Hugging Face GPT-2 folder, config.json and model.safetensors (FP32),\n"
    "       that transformers.GPT2LMHeadModel.from_pretrained(OUT_DIR) loads as it is\n"
    "       (tokenizer files are not written: add the tokenizer the data was made with);\n"
    "       bos_token_id and eos_token_id are the id of the model's <|endoftext|>, or\n"
    "       null for a vocabulary without one (bytes)\n";

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

/* The id of the end-of-text token of the model's tokenizer (the one train copied
 * from its data), or -1 when it has none: byte-level data, or a tokenizer without
 * <|endoftext|>. -2 when the tokenizer cannot be read (reported). */
static int64_t end_of_text_id(const char *path)
{
    char *json = NULL, err[300];
    size_t len = 0;
    const int got = h5tok_read_path(path, &json, &len);
    if (got <= 0) return got < 0 ? -2 : -1;
    bpe *t = bpe_load(json, len, err, sizeof err);
    free(json);
    if (!t) {
        gt_error("the tokenizer of %s: %s", path, err);
        return -2;
    }
    const int32_t id = bpe_token_id(t, BPE_SPECIAL_TOKEN, strlen(BPE_SPECIAL_TOKEN));
    bpe_free(t);
    return id >= 0 ? id : -1;
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
    int64_t eos = rc == 0 ? end_of_text_id(j->model) : -1;
    if (eos >= m.shape.vocab_size) eos = -1; /* past the rows exported: not there */
    if (eos < -1) rc = -1;
    if (rc == 0) rc = hf_gpt2_export(j->out, m.shape, &tab, m.params, step, eos);
    if (rc == 0 && eos >= 0)
        printf("exported %s (step %lld) to %s: config.json (bos and eos: %s, id %lld), "
               "model.safetensors\n", j->model, (long long)step, j->out, BPE_SPECIAL_TOKEN,
               (long long)eos);
    else if (rc == 0)
        printf("exported %s (step %lld) to %s: config.json (no end-of-text token in the "
               "vocabulary: bos and eos null), model.safetensors\n", j->model,
               (long long)step, j->out);
    gt_tensor_table_free(&tab);
    gpt_free(&m);
    return rc;
}

int export_command(int argc, char **argv, int first)
{
    const char *format = NULL, *model = "runs/gentrain", *out = NULL;
    for (int i = first; i < argc; i++) {
        const char *a = argv[i], *eq = strchr(a, '=');
        char name[64], shown[72];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(export_help, stdout);
            return 0;
        }
        /* --name VALUE or --name=VALUE; the old --checkpoint is --model (a note) */
        cli_canonical("export", a, name, sizeof name);
        if (a[0] != '-') eq = NULL;
        const char **dst = strcmp(name, "--format") == 0  ? &format
                           : strcmp(name, "--model") == 0 ? &model
                           : strcmp(name, "--out") == 0 || strcmp(name, "-o") == 0 ? &out
                                                                                   : NULL;
        if (dst == &out && out) {
            gt_error("export: the output folder is given twice; see 'gentrain export --help'");
            return 2;
        } else if (dst && (eq || i + 1 < argc)) {
            *dst = eq ? eq + 1 : argv[++i];
        } else if (dst) {
            gt_error("export: %s needs a value; see 'gentrain export --help'", name);
            return 2;
        } else if (a[0] == '-' || out) {
            gt_error("export: unexpected argument '%s'; see 'gentrain export --help'",
                     gt_printable(a, shown));
            return 2;
        } else {
            cli_note_old("export", "the output folder given alone", "-o DIR or --out DIR");
            out = a;
        }
    }
    if (!model[0]) { /* an unset shell variable: "cannot open :" named nothing */
        gt_error("export: --model is empty; give a model file or a run folder");
        return 2;
    }
    if (!format || strcmp(format, "hf") != 0 || !out || !out[0]) {
        gt_error("export: %s; see 'gentrain export --help'",
                 !format ? "say --format hf" : strcmp(format, "hf") != 0
                                                   ? "the only format is hf"
                                                   : "give the output folder: -o DIR");
        return 2;
    }
    char path[GT_PATH_MAX];
    if (h5model_find_newest(model, path, sizeof path) != 0) return 1;
    export_job job = {path, out};
    return probe_run("model", path, run_export, &job, EXPORT_PROBE_SECONDS) == 0 ? 0 : 1;
}
