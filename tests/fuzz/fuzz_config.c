/* fuzz_config — the config parser (src/config/config.c) on arbitrary text: load, validate,
 * print the effective config and parse that print again, which must succeed and give
 * the same text (a round trip of whatever was accepted). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_setup();
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    gt_config c;
    config_defaults(&c);
    if (config_load_text(&c, text, "fuzz") == 0 && config_validate(&c) == 0) {
        char *out = config_to_text(&c);
        if (out) {
            gt_config again;
            config_defaults(&again);
            if (config_load_text(&again, out, "round trip") != 0) abort();
            char *out2 = config_to_text(&again);
            if (!out2 || strcmp(out, out2) != 0) abort();
            free(out2);
            free(out);
        }
    }
    free(text);
    return 0;
}
