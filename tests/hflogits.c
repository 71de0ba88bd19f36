/* hflogits — test tool: the logits gentrain computes for a token sequence, from a
 * Hugging Face GPT-2 folder (io/hf/hf_gpt2.h: config.json + model.safetensors) or a
 * gentrain model file, for tests/test_hf.sh to compare with transformers'.
 *
 * usage: hflogits MODEL TOKENS.txt OUT.bin
 *   MODEL    a folder with config.json (imported as `init_from` does), or a model.h5
 *   TOKENS   whitespace-separated token ids (at most the model's context)
 *   OUT.bin  the logits [T, V] as little-endian float32
 * Exit 0, or 1 after an error line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "h5model.h"
#include "hf_gpt2.h"
#include "backend.h"
#include "model.h"
#include "tensors.h"

static int read_tokens(const char *path, int32_t *ids, int cap, int vocab)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0, v;
    while (n < cap && fscanf(f, "%d", &v) == 1) {
        if (v < 0 || v >= vocab) {
            fclose(f);
            return -1;
        }
        ids[n++] = v;
    }
    fclose(f);
    return n;
}

/* The model of `path` into m (created here). */
static int load(const char *path, gpt_model *m)
{
    struct stat st;
    gt_tensor_table tab = {0};
    gpt_shape s;
    int rc = -1;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        hf_gpt2_config c;
        if (hf_gpt2_read_config(path, &c) != 0) return -1;
        s = (gpt_shape){c.vocab_size, c.n_positions, c.n_layer, c.n_head, c.n_embd};
        if (gpt_create(m, s, &backend_cpu, 1) == 0 && gpt_tensor_table(m, &tab) == 0)
            rc = hf_gpt2_load(path, s, &tab, m->params, NULL);
    } else if (h5model_read_meta(path, &s, NULL, NULL) == 0 &&
               gpt_create(m, s, &backend_cpu, 1) == 0 && gpt_tensor_table(m, &tab) == 0) {
        rc = h5model_load_params(path, s, &tab, m->params);
    }
    gt_tensor_table_free(&tab);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: hflogits MODEL TOKENS.txt OUT.bin\n");
        return 2;
    }
    gpt_model m;
    memset(&m, 0, sizeof m);
    if (load(argv[1], &m) != 0) return 1;
    const int T = m.shape.block_size, V = m.shape.vocab_size;
    int32_t *ids = malloc((size_t)T * sizeof *ids);
    int n = ids ? read_tokens(argv[2], ids, T, V) : -1;
    int rc = 1;
    if (n <= 0) {
        fprintf(stderr, "hflogits: cannot read token ids below %d from %s\n", V, argv[2]);
    } else if (gpt_alloc_acts(&m, 1, n) == 0) {
        gpt_forward(&m, ids, NULL, 1, n, 0);
        FILE *f = fopen(argv[3], "wb");
        if (f && fwrite(gpt_logits(&m), sizeof(float), (size_t)n * V, f) == (size_t)n * V &&
            fclose(f) == 0)
            rc = 0;
        else
            fprintf(stderr, "hflogits: cannot write %s\n", argv[3]);
    }
    free(ids);
    gpt_free(&m);
    return rc;
}
