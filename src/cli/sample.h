/* sample — text generation from a saved model (`gentrain sample`).
 *
 * Loads a model file (or the newest model in a run folder), encodes the prompt with
 * the model's tokenizer (the /tokenizer.json that train copied into the model file from
 * its data, io/h5/h5tok.h; --tokenizer names another; bytes when there is none), and
 * generates `tokens` tokens one at a time from the model's distribution over
 * the last block_size tokens, with temperature and top-k. Deterministic for a seed and
 * thread count. Prints prompt + continuation (decoded by the tokenizer) to stdout. */
#ifndef GT_SAMPLE_H
#define GT_SAMPLE_H

#include <stdint.h>

#include "config.h"

typedef struct sample_options {
    char checkpoint[GT_PATH_MAX]; /* model file or run folder (required) */
    char prompt[GT_PATH_MAX];     /* default "\n" */
    char tokenizer[GT_PATH_MAX];  /* "" = the model file's (else bytes); a tokenizer.json
                                   * or an HDF5 file holding one (io/h5/h5tok.h) */
    int tokens;                   /* default 256 */
    double temperature;           /* > 0, default 1.0 */
    int top_k;                    /* 0 = no cut, default 0 */
    uint64_t seed;                /* default 1337 */
    int threads;                  /* 0 = OMP_NUM_THREADS, else all cores */
} sample_options;

void sample_defaults(sample_options *o);
/* Generates and prints; 0 or -1 (reported). */
int sample_run(const sample_options *o);

#endif
