/* hf_gpt2 — see hf_gpt2.h. */
#include "hf_gpt2.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"
#include "file_commit.h"
#include "json.h"
#include "safetensors.h"

enum { CONFIG_MAX_BYTES = 1 << 20 };

/* Whether gentrain's [out, in] weight is stored transposed by transformers' Conv1D. */
static int is_conv1d(const char *name)
{
    static const char *const suffix[] = {".attn.c_attn.weight", ".attn.c_proj.weight",
                                         ".mlp.c_fc.weight", ".mlp.c_proj.weight"};
    const size_t n = strlen(name);
    for (size_t k = 0; k < sizeof suffix / sizeof suffix[0]; k++) {
        const size_t m = strlen(suffix[k]);
        if (n > m && strcmp(name + n - m, suffix[k]) == 0) return 1;
    }
    return 0;
}

/* DIR/NAME into buf; -1 (reported) when it does not fit. */
static int join(char *buf, size_t cap, const char *dir, const char *name)
{
    int n = snprintf(buf, cap, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= cap) {
        gt_error("%s/%s: path too long", dir, name);
        return -1;
    }
    return 0;
}

/* The whole of a small regular file, NUL-terminated (malloc'd). NULL (reported). */
static char *read_small(const char *path, size_t *len)
{
    int fd = gt_open_regular(path, "config file", 0, NULL);
    if (fd < 0) return NULL;
    char *buf = gt_malloc(CONFIG_MAX_BYTES + 1, "config.json");
    size_t used = 0;
    ssize_t got = 1;
    while (buf && used <= CONFIG_MAX_BYTES &&
           (got = read(fd, buf + used, CONFIG_MAX_BYTES + 1 - used)) > 0)
        used += (size_t)got;
    close(fd);
    if (buf && (got < 0 || used > CONFIG_MAX_BYTES)) {
        gt_error("cannot read %s: %s", path,
                 got < 0 ? file_errno_reason(errno) : "larger than 1 MiB");
        free(buf);
        return NULL;
    }
    if (buf) buf[used] = '\0';
    *len = used;
    return buf;
}

/* An integer member of the config in [1, hi]; -1 (reported) when missing or wrong. */
static int get_int(const json_value *root, const char *key, const char *alt, int64_t hi,
                   const char *path, int *out)
{
    const json_value *v = json_get(root, key);
    if (!v && alt) v = json_get(root, alt);
    int64_t x;
    if (!v || !json_int(v, 1, hi, &x)) {
        gt_error("%s: %s is %s; it must be an integer from 1 to %lld", path, key,
                 v ? "not one" : "missing", (long long)hi);
        return -1;
    }
    *out = (int)x;
    return 0;
}

/* The architecture keys gentrain's model has no switch for: refused when they ask for
 * something else (an activation, an epsilon, an MLP width, an untied head). */
static int check_architecture(const json_value *root, const hf_gpt2_config *c,
                              const char *path)
{
    const json_value *type = json_get(root, "model_type");
    if (type && (type->type != JSON_STRING || strcmp(type->u.str, "gpt2") != 0)) {
        gt_error("%s: model_type is not \"gpt2\"; gentrain reads GPT-2 models", path);
        return -1;
    }
    const json_value *act = json_get(root, "activation_function");
    if (act && (act->type != JSON_STRING || (strcmp(act->u.str, "gelu_new") != 0 &&
                                             strcmp(act->u.str, "gelu_pytorch_tanh") != 0))) {
        gt_error("%s: activation_function must be gelu_new (gentrain's GELU is the tanh "
                 "form)", path);
        return -1;
    }
    const json_value *eps = json_get(root, "layer_norm_epsilon");
    if (eps && (eps->type != JSON_NUMBER || fabs(eps->u.number - 1e-5) > 1e-12)) {
        gt_error("%s: layer_norm_epsilon must be 1e-05 (gentrain's LayerNorm)", path);
        return -1;
    }
    const json_value *inner = json_get(root, "n_inner");
    int64_t ni;
    if (inner && inner->type != JSON_NULL &&
        (!json_int(inner, 1, INT32_MAX, &ni) || ni != 4 * (int64_t)c->n_embd)) {
        gt_error("%s: n_inner must be null or 4 x n_embd (gentrain's MLP)", path);
        return -1;
    }
    const json_value *sw = json_get(root, "scale_attn_weights"),
                     *by_layer = json_get(root, "scale_attn_by_inverse_layer_idx");
    if ((sw && (sw->type != JSON_BOOL || !sw->u.boolean)) ||
        (by_layer && (by_layer->type != JSON_BOOL || by_layer->u.boolean))) {
        gt_error("%s: attention scaled otherwise than by 1/sqrt(head size) "
                 "(scale_attn_weights, scale_attn_by_inverse_layer_idx): not gentrain's",
                 path);
        return -1;
    }
    const json_value *tie = json_get(root, "tie_word_embeddings");
    if (tie && (tie->type != JSON_BOOL || !tie->u.boolean)) {
        gt_error("%s: tie_word_embeddings must be true (gentrain's head is tied)", path);
        return -1;
    }
    return 0;
}

int hf_gpt2_read_config(const char *dir, hf_gpt2_config *cfg)
{
    char path[4200];
    if (join(path, sizeof path, dir, "config.json") != 0) return -1;
    size_t len = 0;
    char *text = read_small(path, &len);
    if (!text) return -1;
    json_doc doc;
    char err[160];
    int rc = -1;
    if (json_parse(text, len, &doc, err, sizeof err) != 0) {
        gt_error("%s: %s", path, err);
    } else if (doc.root.type != JSON_OBJECT) {
        gt_error("%s: not a JSON object", path);
    } else if (get_int(&doc.root, "n_layer", NULL, GPT_MAX_LAYERS, path, &cfg->n_layer) == 0 &&
               get_int(&doc.root, "n_head", NULL, GPT_MAX_HEADS, path, &cfg->n_head) == 0 &&
               get_int(&doc.root, "n_embd", NULL, GPT_MAX_EMBD, path, &cfg->n_embd) == 0 &&
               get_int(&doc.root, "n_positions", "n_ctx", GPT_MAX_BLOCK, path,
                       &cfg->n_positions) == 0 &&
               get_int(&doc.root, "vocab_size", NULL, GPT_MAX_VOCAB, path,
                       &cfg->vocab_size) == 0) {
        if (cfg->n_embd % cfg->n_head != 0)
            gt_error("%s: n_embd %d is not a multiple of n_head %d", path, cfg->n_embd,
                     cfg->n_head);
        else
            rc = check_architecture(&doc.root, cfg, path);
    }
    json_free(&doc);
    free(text);
    return rc;
}

/* The index of the tensor the file stores `name` under: as it is, or (a file saved from
 * GPT2Model) without the "transformer." prefix. -1 when it has neither. */
static int stored_index(const st_file *f, const char *name)
{
    const int i = st_index(f, name);
    if (i >= 0) return i;
    const char *prefix = "transformer.";
    const size_t n = strlen(prefix);
    return strncmp(name, prefix, n) == 0 ? st_index(f, name + n) : -1;
}

/* The stored name of `name` (stored_index), or NULL. */
static const char *stored_name(const st_file *f, const char *name)
{
    const int i = stored_index(f, name);
    return i < 0 ? NULL : st_name(f, i);
}

/* Copies the stored [rows_in, cols] (or, transposed, [cols, rows]) tensor `src` into
 * gentrain's [rows, cols] dst: rows = min(rows, rows_in) of them. */
static void place(float *dst, const float *src, int64_t rows, int64_t rows_in, int64_t cols,
                  int transposed)
{
    const int64_t r = rows < rows_in ? rows : rows_in;
    if (!transposed) {
        memcpy(dst, src, (size_t)(r * cols) * sizeof(float));
        return;
    }
    for (int64_t i = 0; i < rows; i++) /* src is [cols][rows]: src[j][i] */
        for (int64_t j = 0; j < cols; j++) dst[i * cols + j] = src[j * rows + i];
}

/* Loads one tensor of the table from the file, marking the stored one in used[]. */
static int load_tensor(st_file *f, const gt_tensor *t, float *dst, int64_t *rows_in,
                       unsigned char *used, const char *path)
{
    const int at = stored_index(f, t->name);
    if (at < 0) {
        gt_error("%s has no tensor %s", path, t->name);
        return -1;
    }
    used[at] = 1;
    const char *name = st_name(f, at);
    int ndim;
    int64_t dims[ST_MAX_DIMS];
    st_find(f, name, &ndim, dims, NULL);
    const int conv = is_conv1d(t->name);
    const int grows = strstr(t->name, ".wte.") || strstr(t->name, ".wpe.");
    /* The shape transformers stores: the transpose for Conv1D; wte and wpe may have
     * other row counts (the vocabulary, n_positions). */
    const int64_t want0 = conv ? t->dims[1] : t->dims[0], want1 = conv ? t->dims[0] : t->dims[1];
    const int ok = ndim == t->ndim && (grows || dims[0] == want0) && (ndim < 2 || dims[1] == want1);
    if (!ok) {
        gt_error("%s: tensor %s has shape [%lld%s%lld], gentrain's model expects [%lld%s%lld]",
                 path, name, (long long)dims[0], ndim > 1 ? ", " : "",
                 ndim > 1 ? (long long)dims[1] : 0LL, (long long)want0, t->ndim > 1 ? ", " : "",
                 t->ndim > 1 ? (long long)want1 : 0LL);
        return -1;
    }
    size_t n = 1;
    for (int k = 0; k < ndim; k++) n *= (size_t)dims[k];
    float *buf = gt_malloc(n ? n * sizeof(float) : 1, "imported tensor");
    if (!buf) return -1;
    int rc = st_read_float(f, name, buf, n);
    if (rc == 0) {
        *rows_in = dims[0];
        place(dst, buf, t->dims[0], dims[0], ndim > 1 ? t->dims[1] : 1, conv);
        for (size_t i = 0; i < n && rc == 0; i++)
            if (!isfinite(buf[i])) {
                gt_error("%s: tensor %s holds a non-finite value", path, name);
                rc = -1;
            }
    }
    free(buf);
    return rc;
}

/* A stored tensor that is not one of the table's: the attention-mask buffers are
 * skipped, a tied lm_head.weight must equal wte; anything else is refused. */
static int check_extra(st_file *f, const char *name, const char *path)
{
    const size_t n = strlen(name);
    if ((n > 10 && strcmp(name + n - 10, ".attn.bias") == 0) ||
        (n > 17 && strcmp(name + n - 17, ".attn.masked_bias") == 0))
        return 0;
    if (strcmp(name, "lm_head.weight") == 0) {
        /* Tied: the same values as the stored wte. */
        const char *wte = stored_name(f, "transformer.wte.weight");
        int na, nb;
        int64_t a[ST_MAX_DIMS], b[ST_MAX_DIMS];
        int same = 0;
        if (wte && st_find(f, name, &na, a, NULL) && st_find(f, wte, &nb, b, NULL) &&
            na == 2 && nb == 2 && a[0] == b[0] && a[1] == b[1]) {
            const size_t n = (size_t)(a[0] * a[1]);
            float *x = gt_malloc(2 * n * sizeof(float) + 1, "lm_head.weight");
            same = x && st_read_float(f, name, x, n) == 0 &&
                   st_read_float(f, wte, x + n, n) == 0 &&
                   memcmp(x, x + n, n * sizeof(float)) == 0;
            free(x);
        }
        if (same) return 0;
        gt_error("%s: lm_head.weight is not wte: gentrain's head is tied to the embedding",
                 path);
        return -1;
    }
    char shown[72];
    gt_error("%s: tensor %s is not part of a GPT-2 model", path, gt_printable(name, shown));
    return -1;
}

int hf_gpt2_load(const char *dir, gpt_shape shape, const gt_tensor_table *tab, float *params,
                 hf_gpt2_config *found)
{
    hf_gpt2_config cfg;
    if (hf_gpt2_read_config(dir, &cfg) != 0) return -1;
    if (cfg.n_layer != shape.n_layer || cfg.n_head != shape.n_head ||
        cfg.n_embd != shape.n_embd || shape.block_size > cfg.n_positions) {
        gt_error("init_from %s is n_layer %d, n_head %d, n_embd %d with %d positions; the "
                 "run has n_layer %d, n_head %d, n_embd %d, block_size %d: set n_layer = %d, "
                 "n_head = %d, n_embd = %d and block_size <= %d", dir, cfg.n_layer,
                 cfg.n_head, cfg.n_embd, cfg.n_positions, shape.n_layer, shape.n_head,
                 shape.n_embd, shape.block_size, cfg.n_layer, cfg.n_head, cfg.n_embd,
                 cfg.n_positions);
        return -1;
    }
    char path[4200];
    if (join(path, sizeof path, dir, "model.safetensors") != 0) return -1;
    st_file *f = st_open(path);
    if (!f) return -1;
    unsigned char *used = gt_calloc((size_t)st_count(f) + 1, "tensor marks");
    int rc = used ? 0 : -1;
    int64_t vocab_in = 0, rows = 0;
    for (int i = 0; i < tab->count && rc == 0; i++) {
        const gt_tensor *t = &tab->tensors[i];
        rc = load_tensor(f, t, params + t->offset, &rows, used, path);
        if (strstr(t->name, ".wte.")) vocab_in = rows;
    }
    /* Every stored tensor must have been one of the table's (or a known extra). */
    for (int i = 0; i < st_count(f) && rc == 0; i++)
        if (!used[i]) rc = check_extra(f, st_name(f, i), path);
    free(used);
    st_close(f);
    cfg.vocab_size = (int)vocab_in; /* what the weights hold */
    if (found) *found = cfg;
    return rc;
}

/* config.json of the whole model `shape`: what GPT2Config needs, dropout off (gentrain
 * trains without it, so a fine-tuning in transformers continues the same network).
 * Written to <path>.tmp (its name into tmp), not yet put in place: 0, or -1 (reported,
 * no .tmp left). */
static int write_config_tmp(const char *path, gpt_shape shape, int64_t step, int64_t eos_id,
                            char *tmp, size_t cap)
{
    char special[24] = "null";
    if (eos_id >= 0 && eos_id < shape.vocab_size)
        snprintf(special, sizeof special, "%lld", (long long)eos_id);
    FILE *f = file_begin(path, "config file", tmp, cap);
    if (!f) return -1;
    fprintf(f,
            "{\n"
            "  \"architectures\": [\"GPT2LMHeadModel\"],\n"
            "  \"model_type\": \"gpt2\",\n"
            "  \"vocab_size\": %d,\n"
            "  \"n_positions\": %d,\n"
            "  \"n_ctx\": %d,\n"
            "  \"n_embd\": %d,\n"
            "  \"n_layer\": %d,\n"
            "  \"n_head\": %d,\n"
            "  \"n_inner\": null,\n"
            "  \"activation_function\": \"gelu_new\",\n"
            "  \"layer_norm_epsilon\": 1e-05,\n"
            "  \"resid_pdrop\": 0.0,\n"
            "  \"embd_pdrop\": 0.0,\n"
            "  \"attn_pdrop\": 0.0,\n"
            "  \"initializer_range\": 0.02,\n"
            "  \"tie_word_embeddings\": true,\n"
            "  \"bos_token_id\": %s,\n"
            "  \"eos_token_id\": %s,\n"
            "  \"torch_dtype\": \"float32\",\n"
            "  \"gentrain_step\": %lld\n"
            "}\n",
            shape.vocab_size, shape.block_size, shape.block_size, shape.n_embd, shape.n_layer,
            shape.n_head, special, special, (long long)step);
    return file_close_tmp(f, tmp, path, "config file");
}

/* Puts the written model.safetensors and config.json (tmp[i] -> path[i]) in place. Both
 * destinations are checked before either is renamed: one that cannot be replaced (a
 * folder, a FIFO) would otherwise fail only after the other had been, and an earlier
 * export would be left with a new model.safetensors beside its old config.json, a
 * pair that does not load (or loads as another shape). 0, or -1 (reported; no .tmp
 * left). */
static int commit_pair(char *const path[2], char *const tmp[2])
{
    char why[200];
    int done = 0, rc = -1;
    for (int i = 0; i < 2; i++) {
        const char *kind = gt_special_kind(path[i]);
        if (kind) {
            gt_error("cannot export to %s: it is %s; only a regular file is replaced "
                     "(nothing in the folder was changed)", path[i], kind);
            goto done;
        }
    }
    for (; done < 2; done++)
        if (file_commit(tmp[done], path[done], why, sizeof why) != 0) {
            gt_error("cannot put %s in place: %s%s", path[done], why,
                     done ? " (model.safetensors was already replaced)" : "");
            goto done;
        }
    rc = 0;
done:
    for (int i = done; i < 2; i++) (void)unlink(tmp[i]);
    return rc;
}

int hf_gpt2_export(const char *dir, gpt_shape shape, const gt_tensor_table *tab,
                   const float *params, int64_t step, int64_t eos_id)
{
    if (gt_mkdirs(dir) != 0) return -1;
    st_tensor *out = gt_calloc((size_t)tab->count * sizeof *out + 1, "export table");
    float **copies = gt_calloc((size_t)tab->count * sizeof *copies + 1, "export table");
    int rc = out && copies ? 0 : -1;
    for (int i = 0; i < tab->count && rc == 0; i++) {
        const gt_tensor *t = &tab->tensors[i];
        st_tensor *o = &out[i];
        o->name = t->name;
        o->ndim = t->ndim;
        for (int k = 0; k < t->ndim; k++) o->dims[k] = t->dims[k];
        o->data = params + t->offset;
        if (!is_conv1d(t->name)) continue;
        /* [out, in] -> transformers' [in, out] */
        const int64_t rows = t->dims[0], cols = t->dims[1];
        if (!(copies[i] = gt_malloc(t->numel * sizeof(float), "transposed weight"))) {
            rc = -1;
            break;
        }
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) copies[i][c * rows + r] = o->data[r * cols + c];
        o->dims[0] = cols;
        o->dims[1] = rows;
        o->data = copies[i];
    }
    /* both files whole in their .tmp first, then both put in place (commit_pair) */
    char st_path[4200], cfg_path[4200], st_tmp[4300], cfg_tmp[4300];
    char *const paths[2] = {st_path, cfg_path}, *const tmps[2] = {st_tmp, cfg_tmp};
    if (rc == 0 && (join(st_path, sizeof st_path, dir, "model.safetensors") != 0 ||
                    join(cfg_path, sizeof cfg_path, dir, "config.json") != 0))
        rc = -1;
    if (rc == 0 && st_write_tmp(st_path, out, tab->count, st_tmp, sizeof st_tmp) != 0)
        rc = -1;
    if (rc == 0 &&
        write_config_tmp(cfg_path, shape, step, eos_id, cfg_tmp, sizeof cfg_tmp) != 0) {
        (void)unlink(st_tmp);
        rc = -1;
    }
    if (rc == 0) rc = commit_pair(paths, tmps);
    for (int i = 0; copies && i < tab->count; i++) free(copies[i]);
    free(copies);
    free(out);
    return rc;
}
