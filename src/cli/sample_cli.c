/* sample_cli — see sample_cli.h. */
#include "sample_cli.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli_args.h"
#include "cli_names.h" /* cli_canonical */
#include "sample.h"    /* sample_options, sample_defaults, sample_run */
#include "util.h"

static const char sample_help[] =
    "usage: gentrain sample --model PATH [options]\n"
    "\n"
    "Generates text with a trained model and prints prompt + continuation.\n"
    "The same seed and thread count give the same text.\n"
    "\n"
    "options:\n"
    "  --model PATH           a model file, or a run folder (its newest model) (required;\n"
    "                         --checkpoint still works)\n"
    "  --prompt TEXT          text to continue (default: a newline)\n"
    "  --tokens N             tokens to generate, >= 1 (default 256)\n"
    "  --temperature T        > 0; lower is more conservative (default 1.0)\n"
    "  --top-k K              sample only from the K likeliest tokens; 0 = all (default 0)\n"
    "  --seed S               random seed (default 1337)\n"
    "  --threads N            OpenMP threads; 0 = OMP_NUM_THREADS, else all cores\n"
    "  --tokenizer FILE       encode the prompt and decode with this tokenizer.json, or the\n"
    "                         one an HDF5 data or model file holds (default: the model's,\n"
    "                         which train copies from its data; bytes when none)\n"
    "\n"
    "example:\n"
    "  gentrain sample --model runs/shakespeare --prompt 'ROMEO:' --tokens 200\n";

void sample_print_help(FILE *f) { fputs(sample_help, f); }

int sample_command(int argc, char **argv)
{
    if (cli_wants_help(argc, argv, 2)) {
        sample_print_help(stdout);
        return EXIT_OK;
    }
    sample_options o;
    sample_defaults(&o);
    int have_checkpoint = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        char name[64], shown[72];
        if (strncmp(a, "--", 2) != 0) {
            gt_error("sample: unexpected argument '%s'; see 'gentrain sample --help'",
                     gt_printable(a, shown));
            return EXIT_USAGE;
        }
        /* --top_k == --top-k; the old --checkpoint is --model (with a note) */
        cli_canonical("sample", a, name, sizeof name);
        char given[64];
        const char *v = cli_opt_value("sample", argc, argv, &i, given, sizeof given);
        if (!v) return EXIT_USAGE;
        int rc = 0;
        if (strcmp(name, "--model") == 0 || strcmp(name, "--prompt") == 0) {
            int is_ckpt = name[2] == 'm';
            char *dst = is_ckpt ? o.checkpoint : o.prompt;
            size_t cap = is_ckpt ? sizeof o.checkpoint : sizeof o.prompt;
            if (gt_strlcpy(dst, v, cap) != 0) {
                gt_error("sample: %s is too long (at most %zu bytes)", name, cap - 1);
                return EXIT_USAGE;
            }
            if (is_ckpt) have_checkpoint = dst[0] != '\0';
        } else if (strcmp(name, "--tokenizer") == 0) {
            if (gt_strlcpy(o.tokenizer, v, sizeof o.tokenizer) != 0) {
                gt_error("sample: --tokenizer is too long (at most %zu bytes)",
                         sizeof o.tokenizer - 1);
                return EXIT_USAGE;
            }
        } else if (strcmp(name, "--tokens") == 0) {
            rc = cli_opt_int("sample", name, v, 1, INT_MAX, &o.tokens);
        } else if (strcmp(name, "--temperature") == 0) {
            rc = cli_opt_double("sample", name, v, &o.temperature);
            if (rc == 0 && !(o.temperature > 0)) {
                gt_error("sample: --temperature %s: must be > 0", v);
                rc = -1;
            }
        } else if (strcmp(name, "--top-k") == 0) {
            rc = cli_opt_int("sample", name, v, 0, INT_MAX, &o.top_k);
        } else if (strcmp(name, "--seed") == 0) {
            rc = cli_opt_u64("sample", name, v, &o.seed);
        } else if (strcmp(name, "--threads") == 0) {
            rc = cli_opt_int("sample", name, v, 0, GT_MAX_THREADS, &o.threads);
        } else {
            gt_error("sample: unknown option '%s'; see 'gentrain sample --help'",
                     gt_printable(name, shown));
            return EXIT_USAGE;
        }
        if (rc != 0) return EXIT_USAGE;
    }
    if (!have_checkpoint) {
        gt_error("sample: no model given; use --model FILE.h5 or a run folder");
        return EXIT_USAGE;
    }
    if (cli_check_readable(o.checkpoint, "model", 1) != 0) return EXIT_FAIL;
    return sample_run(&o) == 0 ? EXIT_OK : EXIT_FAIL;
}
