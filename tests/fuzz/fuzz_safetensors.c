/* fuzz_safetensors — the Hugging Face GPT-2 import (io/hf/hf_gpt2.c over io/hf/safetensors.c
 * and io/tokenizer/json.c) on arbitrary model.safetensors bytes, next to a fixed config.json of
 * the seed shape (vocab 256, 8 positions, 1 layer, 1 head, n_embd 8: scripts/fuzz.sh
 * exports the seed model). Every header entry, offset and tensor is checked before it
 * is used; nothing may read out of bounds, allocate without bound, or crash. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hf_gpt2.h"
#include "backend.h"
#include "model.h"
#include "fuzz_common.h"

static char config[4200], weights[4200];

/* The folder (fuzz_folder) with the config, once. */
static void make_folder(void)
{
    const char *dir = fuzz_folder("fuzz_hf");
    snprintf(config, sizeof config, "%s/config.json", dir);
    snprintf(weights, sizeof weights, "%s/model.safetensors", dir);
    FILE *f = fopen(config, "w");
    if (!f) abort();
    fputs("{\"model_type\": \"gpt2\", \"vocab_size\": 256, \"n_positions\": 8, "
          "\"n_embd\": 8, \"n_layer\": 1, \"n_head\": 1, \"activation_function\": "
          "\"gelu_new\", \"layer_norm_epsilon\": 1e-05, \"tie_word_embeddings\": true}\n", f);
    if (fclose(f) != 0) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_setup();
    static gpt_model m;
    static gt_tensor_table tab;
    static int ready;
    if (!ready) {
        const gpt_shape s = {256, 8, 1, 1, 8};
        if (gpt_create(&m, s, &backend_cpu, 1) != 0 || gpt_tensor_table(&m, &tab) != 0)
            abort();
        make_folder();
        ready = 1;
    }
    FILE *f = fopen(weights, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    if (fclose(f) != 0) abort();
    (void)hf_gpt2_load(fuzz_folder_path, m.shape, &tab, m.params, NULL);
    return 0;
}
