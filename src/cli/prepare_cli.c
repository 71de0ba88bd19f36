/* prepare_cli — see prepare_cli.h. */
#include "prepare_cli.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"       /* BPE_MAX_VOCAB */
#include "bpe_train.h" /* BPE_TRAIN_MIN_VOCAB */
#include "cli_args.h"
#include "cli_names.h" /* cli_canonical */
#include "prepare.h"   /* prepare_bytes, prepare_bpe */
#include "util.h"

static const char prepare_help[] =
    "usage: gentrain prepare INPUT.txt... -o|--out OUT.h5 [--val-fraction F]\n"
    "                        [--tokenizer FILE | --train-tokenizer N] [--save-tokenizer PATH]\n"
    "                        [--compress [LEVEL]]\n"
    "\n"
    "Reads the input files as one byte stream, in order, and writes a token dataset: the\n"
    "first (1 - F) of the bytes to /train/tokens, the rest to /val/tokens. Without a\n"
    "tokenizer the tokens are the bytes (vocab_size 256); with one, byte-level BPE ids\n"
    "(uint16 up to 65536 tokens, else int32), and the tokenizer is stored in the file\n"
    "(/tokenizer.json) for train and sample. Inputs of any size are fine; the output\n"
    "appears only when complete.\n"
    "\n"
    "options:\n"
    "  -o, --out OUT.h5       the HDF5 file to write (required; --output still works)\n"
    "  --val-fraction F       share of the bytes kept for validation, 0 <= F < 1\n"
    "                         (default 0.1; 0 = no validation set)\n"
    "  --tokenizer FILE       encode with this Hugging Face tokenizer.json (a byte-level\n"
    "                         BPE of the GPT-2 kind)\n"
    "  --train-tokenizer N    train a byte-level BPE of N tokens (>= 257, <= 16777216) on\n"
    "                         the inputs first, then encode with it\n"
    "  --save-tokenizer PATH  also write the tokenizer used as a tokenizer.json\n"
    "  --threads N            encoding threads; 0 = OMP_NUM_THREADS, else all cores\n"
    "  --compress [LEVEL]     deflate (level 1-9, default 4) with the shuffle filter, in\n"
    "                         chunks of 16384 tokens, as h5py users write them\n"
    "\n"
    "examples:\n"
    "  gentrain prepare data/tinyshakespeare.txt -o shakespeare.h5\n"
    "  gentrain prepare data/tinyshakespeare.txt -o bpe.h5 --train-tokenizer 2000 \\\n"
    "      --save-tokenizer bpe.json\n"
    "  gentrain prepare corpus.txt -o gpt2.h5 --tokenizer gpt2/tokenizer.json\n";

void prepare_print_help(FILE *f) { fputs(prepare_help, f); }

/* What the prepare command line says. */
typedef struct {
    const char **inputs;
    int n_inputs;
    const char *out;
    double val_fraction;
    int compress; /* deflate level, 0 = none */
    prepare_options bpe;
} prepare_args;

/* One --name[=value] option of prepare: 0 taken, -1 bad (reported), 1 not known. */
static int prepare_option(prepare_args *p, int argc, char **argv, int *i)
{
    char name[64], canon[64];
    static const char *const known[] = {"-o",          "--out",           "--val-fraction",
                                        "--tokenizer", "--train-tokenizer", "--save-tokenizer",
                                        "--threads"};
    enum { N_KNOWN = sizeof known / sizeof known[0] };
    cli_canonical("prepare", argv[*i], canon, sizeof canon);
    int k = 0;
    while (k < N_KNOWN && strcmp(canon, known[k]) != 0) k++;
    if (k == N_KNOWN) return 1;
    const char *v = cli_opt_value("prepare", argc, argv, i, name, sizeof name);
    if (!v) return -1;
    int64_t big = 0;
    int small = 0;
    switch (k) {
    case 0: case 1: /* two outputs: which one was meant is not ours to guess */
        if (p->out) {
            gt_error("prepare: the output file is given twice (%s and %s)", p->out, v);
            return -1;
        }
        p->out = v;
        return 0;
    case 2:
        if (cli_opt_double("prepare", "--val-fraction", v, &p->val_fraction) != 0) return -1;
        if (!(p->val_fraction >= 0 && p->val_fraction < 1)) {
            gt_error("prepare: --val-fraction %s: must be >= 0 and < 1", v);
            return -1;
        }
        return 0;
    case 3:
    case 5:
        /* an empty name (an unset shell variable) failed after minutes of training,
         * naming no file */
        if (!v[0]) {
            gt_error("prepare: %s is empty; give a file name", name);
            return -1;
        }
        *(k == 3 ? &p->bpe.tokenizer : &p->bpe.save_tokenizer) = v;
        return 0;
    case 4:
        if (cli_opt_int("prepare", "--train-tokenizer", v, BPE_TRAIN_MIN_VOCAB, BPE_MAX_VOCAB,
                    &small) != 0)
            return -1;
        big = small;
        p->bpe.train_vocab = big;
        return 0;
    default: return cli_opt_int("prepare", "--threads", v, 0, GT_MAX_THREADS, &p->bpe.threads);
    }
}

/* Parses the prepare command line; EXIT_OK or EXIT_USAGE (reported). */
static int parse_prepare(prepare_args *p, int argc, char **argv)
{
    int only_files = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        char shown[72];
        if (only_files || a[0] != '-' || a[1] == '\0') {
            p->inputs[p->n_inputs++] = a;
        } else if (strcmp(a, "--") == 0) {
            only_files = 1;
        } else if (strncmp(a, "--compress", 10) == 0 && (a[10] == '\0' || a[10] == '=')) {
            /* an optional level: --compress, --compress=L or --compress L (one digit) */
            const char *v = a[10] == '=' ? a + 11 : NULL;
            if (!v && i + 1 < argc && argv[i + 1][0] >= '0' && argv[i + 1][0] <= '9' &&
                argv[i + 1][1] == '\0')
                v = argv[++i];
            p->compress = 4;
            if (v && cli_opt_int("prepare", "--compress", v, 1, 9, &p->compress) != 0)
                return EXIT_USAGE;
        } else {
            int r = prepare_option(p, argc, argv, &i);
            if (r < 0) return EXIT_USAGE;
            if (r > 0) {
                gt_error("prepare: unknown option '%s'; see 'gentrain prepare --help'",
                         gt_printable(a, shown));
                return EXIT_USAGE;
            }
        }
    }
    if (p->n_inputs == 0) {
        gt_error("prepare: no input files (usage: gentrain prepare INPUT.txt... -o OUT.h5)");
        return EXIT_USAGE;
    }
    if (!p->out || !p->out[0]) {
        gt_error("prepare: no output file; give -o OUT.h5 (or --out OUT.h5)");
        return EXIT_USAGE;
    }
    if (p->bpe.tokenizer && p->bpe.train_vocab) {
        gt_error("prepare: give --tokenizer FILE or --train-tokenizer N, not both");
        return EXIT_USAGE;
    }
    if (p->bpe.save_tokenizer && !p->bpe.tokenizer && !p->bpe.train_vocab) {
        gt_error("prepare: --save-tokenizer needs --tokenizer or --train-tokenizer");
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

int prepare_command(int argc, char **argv)
{
    if (cli_wants_help(argc, argv, 2)) {
        prepare_print_help(stdout);
        return EXIT_OK;
    }
    prepare_args p;
    memset(&p, 0, sizeof p);
    p.val_fraction = 0.1;
    if (!(p.inputs = calloc((size_t)argc, sizeof *p.inputs))) {
        gt_error("out of memory");
        return EXIT_FAIL;
    }
    int rc = parse_prepare(&p, argc, argv);
    for (int i = 0; rc == EXIT_OK && i < p.n_inputs; i++)
        if (cli_check_readable(p.inputs[i], "input file", 0) != 0) rc = EXIT_FAIL;
    if (rc == EXIT_OK && p.bpe.tokenizer && cli_check_readable(p.bpe.tokenizer, "tokenizer", 0) != 0)
        rc = EXIT_FAIL;
    if (rc == EXIT_OK) {
        const int bpe = p.bpe.tokenizer || p.bpe.train_vocab;
        prepare_set_compress(p.compress);
        if ((bpe ? prepare_bpe(p.inputs, p.n_inputs, p.out, p.val_fraction, &p.bpe)
                 : prepare_bytes(p.inputs, p.n_inputs, p.out, p.val_fraction)) != 0) {
            free(p.inputs);
            return cli_finish_verb(EXIT_FAIL);
        }
    }
    free(p.inputs);
    return rc;
}
