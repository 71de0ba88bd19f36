/* main — the `gentrain` command: `gentrain VERB [options]` with the verbs prepare,
 * train, sample, inspect and help.
 *
 * Exit status: 0 success, 1 the work failed (bad data, I/O, ...), 2 the command line
 * or the config was wrong. Every failure is one "gentrain: error: ..." line on stderr,
 * printed by whoever found it; usage errors end with where to find help. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5util.h"  /* h5io_unusable */
#include "inspect.h" /* inspect_file */
#include "bpe.h"     /* BPE_MAX_VOCAB */
#include "bpe_train.h" /* BPE_TRAIN_MIN_VOCAB */
#include "prepare.h" /* prepare_bytes, prepare_bpe */
#include "blas_core.h"     /* blas_core_fixup */
#include "cli_names.h"     /* cli_canonical: one option name per thing in every verb */
#include "config.h"        /* gt_config, config_* */
#include "env_check.h"     /* env_check: the GENTRAIN_* variables, once */
#include "parallel.h"      /* par_init, par_finalize, par_all_ok, par_is_root */
#include "plan_cli.h"      /* plan_command */
#include "probe.h"         /* probe_run */
#include "train_probe.h"   /* train_probe_inputs */
#include "sample.h"        /* sample_options, sample_defaults, sample_run */
#include "export.h"
#include "signals.h"       /* GT_EXIT_REQUEUE */
#include "train.h"         /* train_run, TRAIN_STOPPED */
#include "util.h"          /* gt_error, gt_mute_reports */

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "0.1"
#endif

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

static const char main_help[] =
    "gentrain " PACKAGE_VERSION " - trains GPT-style language models on CPU clusters\n"
    "\n"
    "usage: gentrain VERB [options]\n"
    "\n"
    "verbs:\n"
    "  prepare   turn text files into a token dataset (HDF5): bytes or BPE\n"
    "  train     train a model on an HDF5 token dataset\n"
    "  sample    generate text with a trained model\n"
    "  inspect   show what an HDF5 file (dataset or model) holds\n"
    "  plan      project which dp x pp x tp grid trains a config fastest\n"
    "  export    write a trained model for other tools (Hugging Face GPT-2)\n"
    "  help      show the help of a verb: gentrain help train\n"
    "\n"
    "'gentrain VERB --help' lists the options of a verb; 'gentrain --version' prints\n"
    "the version.\n"
    "\n"
    "example:\n"
    "  gentrain prepare data/tinyshakespeare.txt -o shakespeare.h5\n"
    "  gentrain train --data shakespeare.h5 --steps 500 --out runs/shakespeare\n"
    "  gentrain sample --model runs/shakespeare --prompt 'ROMEO:'\n"
    "\n"
    "Every verb names the same thing the same way: --model PATH for the trained model\n"
    "it reads (a model file or a run folder), -o/--out PATH for what it writes;\n"
    "'-' and '_' are alike in option names, and --name=VALUE works everywhere.\n";

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

static const char train_usage[] =
    "usage: gentrain train [--config FILE] [--KEY VALUE | --KEY=VALUE]...\n"
    "\n"
    "Trains a GPT model on an HDF5 token dataset and saves it as <out>/model.h5.\n"
    "Settings: the built-in defaults, then the --config FILE (applied first wherever it\n"
    "is on the line), then each --KEY VALUE in order; the last one wins. The effective\n"
    "config is printed before training starts, in the config-file format. '-' and '_'\n"
    "are alike in keys (--n-layer = --n_layer); -o DIR is --out DIR, as in every verb.\n"
    "Started by mpirun or srun with N ranks, it trains one model data-parallel: each\n"
    "rank takes batch_size sequences of a global batch of batch_size x N per step\n"
    "(or of global_batch_size, by accumulating gradients over micro-steps).\n"
    "\n";

static const char train_examples[] =
    "\n"
    "examples:\n"
    "  gentrain prepare data/tinyshakespeare.txt -o shakespeare.h5\n"
    "  gentrain train --data shakespeare.h5 --steps 500 --out runs/shakespeare\n"
    "  gentrain train --config my.cfg --lr=3e-4 --threads 8\n";

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

static const char inspect_help[] =
    "usage: gentrain inspect FILE.h5\n"
    "\n"
    "Prints every group, dataset (shape, type) and attribute of an HDF5 file, and for a\n"
    "gentrain model its config, step and parameter count.\n"
    "\n"
    "example:\n"
    "  gentrain inspect runs/shakespeare/model.h5\n";

static void print_train_help(FILE *f)
{
    fputs(train_usage, f);
    config_print_help(f);
    fputs(train_examples, f);
}


static int wants_help(int argc, char **argv, int first)
{
    for (int i = first; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) break;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return 1;
    }
    return 0;
}

/* Fails unless path names something that can be opened for reading (not a folder
 * unless folder_ok). what: "data file", "input file", ... */
static int check_readable(const char *path, const char *what, int folder_ok)
{
    int fd = gt_open_regular(path, what, folder_ok, NULL);
    if (fd < 0) return -1;
    close(fd);
    return 0;
}

/* The end of a verb that may have written HDF5 files under MPI. After a failed write,
 * HDF5 1.10's own clean-up (at MPI_Finalize and at exit) crashes on the half-closed
 * file (exit 139 after the right error line), so the process ends here instead: the
 * error is reported, the partial file removed. */
static int finish_verb(int rc)
{
    if (h5io_unusable()) {
        fflush(NULL);
        _exit(rc != EXIT_OK ? rc : EXIT_FAIL);
    }
    par_finalize();
    return rc;
}

/* ---------------------------------------------------------------- option values */

static int opt_int(const char *verb, const char *opt, const char *text, long long lo,
                   long long hi, int *out)
{
    char shown[72];
    const char *t = gt_printable(text, shown);
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (!*text || end == text || *end != '\0' || isspace((unsigned char)text[0])) {
        gt_error("%s: %s '%s': not an integer; see 'gentrain %s --help'", verb, opt,
                 t, verb);
        return -1;
    }
    if (errno == ERANGE || v < lo || v > hi) {
        gt_error("%s: %s %s: must be >= %lld and <= %lld", verb, opt, t, lo, hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int opt_u64(const char *verb, const char *opt, const char *text, uint64_t *out)
{
    char shown[72];
    const char *t = gt_printable(text, shown);
    /* Digits only: strtoull would accept "-1" (and wrap it) or leading spaces. */
    int digits = text[0] >= '0' && text[0] <= '9';
    char *end = NULL;
    errno = 0;
    unsigned long long v = digits ? strtoull(text, &end, 10) : 0;
    if (!digits || *end != '\0') {
        gt_error("%s: %s '%s': not a non-negative integer", verb, opt, t);
        return -1;
    }
    if (errno == ERANGE) {
        gt_error("%s: %s %s: too large (at most %" PRIu64 ")", verb, opt, t,
                 UINT64_MAX);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

static int opt_double(const char *verb, const char *opt, const char *text, double *out)
{
    char shown[72];
    const char *t = gt_printable(text, shown);
    char *end = NULL;
    errno = 0;
    double v = gt_strtod_decimal(text, &end);
    if (!*text || end == text || *end != '\0' || isspace((unsigned char)text[0])) {
        gt_error("%s: %s '%s': not a number; see 'gentrain %s --help'", verb, opt,
                 t, verb);
        return -1;
    }
    if (!isfinite(v)) {
        gt_error("%s: %s %s: must be a finite number", verb, opt, t);
        return -1;
    }
    *out = v;
    return 0;
}

/* Splits argv[*i] = "--name=value" or "--name value" (advancing *i). Returns the value,
 * or NULL after reporting that it is missing. name receives the option name. */
static const char *opt_value(const char *verb, int argc, char **argv, int *i, char *name,
                             size_t cap)
{
    const char *a = argv[*i];
    const char *eq = strchr(a, '=');
    size_t n = eq ? (size_t)(eq - a) : strlen(a);
    if (n >= cap) n = cap - 1;
    memcpy(name, a, n);
    name[n] = '\0';
    if (eq) return eq + 1;
    if (*i + 1 >= argc) {
        gt_error("%s: %s needs a value; see 'gentrain %s --help'", verb, name, verb);
        return NULL;
    }
    return argv[++*i];
}

/* ---------------------------------------------------------------- verbs */

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
    const char *v = opt_value("prepare", argc, argv, i, name, sizeof name);
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
        if (opt_double("prepare", "--val-fraction", v, &p->val_fraction) != 0) return -1;
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
        if (opt_int("prepare", "--train-tokenizer", v, BPE_TRAIN_MIN_VOCAB, BPE_MAX_VOCAB,
                    &small) != 0)
            return -1;
        big = small;
        p->bpe.train_vocab = big;
        return 0;
    default: return opt_int("prepare", "--threads", v, 0, GT_MAX_THREADS, &p->bpe.threads);
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
            if (v && opt_int("prepare", "--compress", v, 1, 9, &p->compress) != 0)
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

static int cmd_prepare(int argc, char **argv)
{
    if (wants_help(argc, argv, 2)) {
        fputs(prepare_help, stdout);
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
        if (check_readable(p.inputs[i], "input file", 0) != 0) rc = EXIT_FAIL;
    if (rc == EXIT_OK && p.bpe.tokenizer && check_readable(p.bpe.tokenizer, "tokenizer", 0) != 0)
        rc = EXIT_FAIL;
    if (rc == EXIT_OK) {
        const int bpe = p.bpe.tokenizer || p.bpe.train_vocab;
        prepare_set_compress(p.compress);
        if ((bpe ? prepare_bpe(p.inputs, p.n_inputs, p.out, p.val_fraction, &p.bpe)
                 : prepare_bytes(p.inputs, p.n_inputs, p.out, p.val_fraction)) != 0) {
            free(p.inputs);
            return finish_verb(EXIT_FAIL);
        }
    }
    free(p.inputs);
    return rc;
}

/* The train config from the command line (and the files it names), checked: EXIT_OK,
 * EXIT_USAGE or EXIT_FAIL (reported). */
static int read_train_config(gt_config *c, int argc, char **argv)
{
    config_defaults(c);
    if (config_parse_args(c, argc, argv, 2) != 0 || config_validate(c) != 0)
        return EXIT_USAGE;
    if (!strpbrk(c->data, ",*?[") && check_readable(c->data, "data file", 1) != 0)
        return EXIT_FAIL; /* a file or folder; a set's files are checked as it opens them */
    return EXIT_OK;
}

/* The train verb after --help: parse, check, train. Under MPI every rank runs it; a rank
 * that fails before training tells the others (par_all_ok), so none waits alone. */
static int train_verb(int argc, char **argv)
{
    gt_config c;
    /* Every rank reads the same command line (and, mostly, the same files): rank 0 says
     * what is wrong with them, once, not once per rank (hundreds of the same line). A
     * rank that fails where rank 0 did not (its own config file or data path) reads
     * them again to say its own. Warnings too: the config comparison that follows
     * names any difference between the ranks. */
    gt_mute_reports(!par_is_root());
    int rc = read_train_config(&c, argc, argv);
    gt_mute_reports(0);
    if (!par_all_ok(rc == EXIT_OK)) {
        const int root_ok = par_all_ok(!par_is_root() || rc == EXIT_OK);
        if (root_ok && rc != EXIT_OK) (void)read_train_config(&c, argc, argv);
        return rc != EXIT_OK ? rc : EXIT_FAIL;
    }
    if (par_is_root()) {
        printf("gentrain train: effective config\n");
        config_print(&c, stdout);
        fflush(stdout);
    }
    const int trc = train_run(&c);
    return trc == 0 ? EXIT_OK : trc == TRAIN_STOPPED ? GT_EXIT_REQUEUE : EXIT_FAIL;
}

static int cmd_train(int argc, char **argv)
{
    if (wants_help(argc, argv, 2)) {
        print_train_help(stdout);
        return EXIT_OK;
    }
    /* Damaged HDF5 files can crash or hang the library: read them once in a child
     * first, while there is no MPI to take down (train_probe.h). */
    if (train_probe_inputs(argc, argv) != 0) return EXIT_FAIL;
    /* MPI only when a launcher started us: a plain `gentrain train` stays MPI-free. */
    par_init(&argc, &argv);
    return finish_verb(train_verb(argc, argv));
}

static const char plan_help[] =
    "usage: gentrain plan [--config FILE] [--KEY VALUE]... (--measure | MACHINE)\n"
    "                     [--noise-scale TOKENS | --from-log LOG.jsonl] [--json]\n"
    "\n"
    "Projects, for the model and batch of a training config, every grid of dp replicas\n"
    "x pp pipeline stages x tp tensor-parallel shards that fits the machine: step time\n"
    "(compute, pipeline bubble, tensor- and pipeline-parallel communication, exposed\n"
    "data-parallel all-reduce, optimizer), memory per rank, and, with the gradient\n"
    "noise scale, the steps and time to reach what the config's `steps` reach with one\n"
    "replica's batch: S(B) = S_min (1 + B_noise / B). Prints them fastest first and\n"
    "recommends one.\n"
    "\n"
    "options:\n"
    "  --measure             time the parts on this machine with gentrain's kernels;\n"
    "                        under mpirun -np 2+ also the MPI links\n"
    "  --nodes N             nodes (default 1)\n"
    "  --cores-per-node C    CPU cores a node gives (default: this machine's)\n"
    "  --core-gflops F       a described CPU core's peak GFLOP/s (instead of --measure)\n"
    "  --gpus-per-node G     a GPU cluster instead: one rank per GPU\n"
    "  --gpu-tflops F        a GPU's peak TFLOP/s (FP16 dense)\n"
    "  --efficiency E        share of the peak kernels reach (default 0.5)\n"
    "  --intra-gbs X         link GB/s inside a node (default 10; measured with --measure)\n"
    "  --inter-gbs X         link GB/s between nodes (default 1)\n"
    "  --latency-us L        per-message latency (default 5)\n"
    "  --pcie-gbs X          GPUs: GB/s between a GPU and its host (default 25)\n"
    "  --tp-host             GPUs: the shards' all-reduces through host memory (a build\n"
    "                        without NCCL, GENTRAIN_NCCL=0) instead of over NCCL\n"
    "  --noise-scale TOKENS  gradient noise scale (the trainer logs it); default: none\n"
    "  --from-log LOG.jsonl  the noise scale a past run logged: the mean of its\n"
    "                        estimates over the run's tokens (docs/adaptive-batch.md)\n"
    "  --reps N              timing repetitions with --measure (default 5)\n"
    "  --json                one JSON object per grid instead of the table\n"
    "\n"
    "examples:\n"
    "  mpirun -np 2 gentrain plan --config my.cfg --measure --noise-scale 5000\n"
    "  gentrain plan --config my.cfg --measure --from-log runs/my/log.jsonl\n"
    "  gentrain plan --n_layer 12 --n_head 12 --n_embd 768 --block_size 1024 \\\n"
    "      --vocab_size 50304 --batch_size 8 --nodes 64 --gpus-per-node 4 \\\n"
    "      --gpu-tflops 312 --intra-gbs 300 --inter-gbs 25 --noise-scale 2e6\n";

static int cmd_plan(int argc, char **argv)
{
    if (wants_help(argc, argv, 2)) {
        fputs(plan_help, stdout);
        return EXIT_OK;
    }
    par_init(&argc, &argv); /* --measure under mpirun times the links */
    return finish_verb(plan_command(argc, argv, 2));
}

static int cmd_sample(int argc, char **argv)
{
    if (wants_help(argc, argv, 2)) {
        fputs(sample_help, stdout);
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
        const char *v = opt_value("sample", argc, argv, &i, given, sizeof given);
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
            rc = opt_int("sample", name, v, 1, INT_MAX, &o.tokens);
        } else if (strcmp(name, "--temperature") == 0) {
            rc = opt_double("sample", name, v, &o.temperature);
            if (rc == 0 && !(o.temperature > 0)) {
                gt_error("sample: --temperature %s: must be > 0", v);
                rc = -1;
            }
        } else if (strcmp(name, "--top-k") == 0) {
            rc = opt_int("sample", name, v, 0, INT_MAX, &o.top_k);
        } else if (strcmp(name, "--seed") == 0) {
            rc = opt_u64("sample", name, v, &o.seed);
        } else if (strcmp(name, "--threads") == 0) {
            rc = opt_int("sample", name, v, 0, GT_MAX_THREADS, &o.threads);
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
    if (check_readable(o.checkpoint, "model", 1) != 0) return EXIT_FAIL;
    return sample_run(&o) == 0 ? EXIT_OK : EXIT_FAIL;
}

/* What `inspect` runs in its child (probe.h): metadata only, seconds even for the
 * largest files. */
#define INSPECT_SECONDS 60
typedef struct {
    const char *path;
} inspect_job;

static int run_inspect(void *arg)
{
    const inspect_job *j = arg;
    return inspect_file(j->path, stdout);
}

static int cmd_inspect(int argc, char **argv)
{
    if (wants_help(argc, argv, 2)) {
        fputs(inspect_help, stdout);
        return EXIT_OK;
    }
    const char *path = NULL;
    char shown[72], shown2[72];
    for (int i = 2; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1] != '\0') {
            gt_error("inspect: unknown option '%s'; see 'gentrain inspect --help'",
                     gt_printable(argv[i], shown));
            return EXIT_USAGE;
        }
        if (path) {
            gt_error("inspect: one file at a time (got '%s' and '%s')",
                     gt_printable(path, shown), gt_printable(argv[i], shown2));
            return EXIT_USAGE;
        }
        path = argv[i];
    }
    if (!path) {
        gt_error("inspect: no file given (usage: gentrain inspect FILE.h5)");
        return EXIT_USAGE;
    }
    if (check_readable(path, "file", 0) != 0) return EXIT_FAIL;
    /* the whole inspection in a child: a damaged file that crashes or hangs HDF5 then
     * costs one error line (probe.h) */
    inspect_job job = {path};
    return probe_run("file", path, run_inspect, &job, INSPECT_SECONDS) == 0 ? EXIT_OK
                                                                            : EXIT_FAIL;
}

static int print_verb_help(const char *verb)
{
    if (strcmp(verb, "prepare") == 0)
        fputs(prepare_help, stdout);
    else if (strcmp(verb, "train") == 0)
        print_train_help(stdout);
    else if (strcmp(verb, "sample") == 0)
        fputs(sample_help, stdout);
    else if (strcmp(verb, "inspect") == 0)
        fputs(inspect_help, stdout);
    else if (strcmp(verb, "plan") == 0)
        fputs(plan_help, stdout);
    else if (strcmp(verb, "export") == 0) {
        char *args[] = {(char *)"gentrain", (char *)"export", (char *)"--help", NULL};
        return export_command(3, args, 2);
    }
    else if (strcmp(verb, "help") == 0)
        fputs(main_help, stdout);
    else {
        char shown[72];
        gt_error("help: unknown verb '%s'; see 'gentrain --help'", gt_printable(verb, shown));
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* The verb's exit status, made a failure when what it wrote to standard output did not
 * all arrive: `gentrain ... > file` on a full disk or quota must not exit 0 with the
 * step lines, a sample's text or an inspect report cut short. The files the verb saved
 * stay as they are; only the status and one error line tell. A verb that failed has
 * said why already. */
static int stdout_checked(int rc)
{
    const int flushed = fflush(stdout) == 0;
    const int e = errno;
    if ((flushed && !ferror(stdout)) || rc != EXIT_OK) return rc;
    if (!flushed)
        gt_error("cannot write standard output: %s", strerror(e));
    else
        gt_error("some of the standard output was not written (a write to it failed)");
    return EXIT_FAIL;
}

static int run_verb(int argc, char **argv)
{
    if (argc < 2) {
        gt_error("no verb given (prepare, train, sample, inspect, plan, export, help); "
                 "see 'gentrain --help'");
        return EXIT_USAGE;
    }
    const char *verb = argv[1];
    if (strcmp(verb, "--help") == 0 || strcmp(verb, "-h") == 0) {
        fputs(main_help, stdout);
        return EXIT_OK;
    }
    if (strcmp(verb, "--version") == 0 || strcmp(verb, "-V") == 0) {
        printf("gentrain %s\n", PACKAGE_VERSION);
        return EXIT_OK;
    }
    if (strcmp(verb, "help") != 0 && env_check() != 0) return EXIT_USAGE;
    if (strcmp(verb, "prepare") == 0) return cmd_prepare(argc, argv);
    /* The verbs that compute: make sure OpenBLAS runs kernels this CPU is built for
     * (may restart the process, before MPI exists) */
    if (strcmp(verb, "train") == 0 || strcmp(verb, "sample") == 0 ||
        strcmp(verb, "plan") == 0)
        blas_core_fixup(argv);
    if (strcmp(verb, "train") == 0) return cmd_train(argc, argv);
    if (strcmp(verb, "sample") == 0) return cmd_sample(argc, argv);
    if (strcmp(verb, "inspect") == 0) return cmd_inspect(argc, argv);
    if (strcmp(verb, "plan") == 0) return cmd_plan(argc, argv);
    if (strcmp(verb, "export") == 0) return finish_verb(export_command(argc, argv, 2));
    if (strcmp(verb, "help") == 0) {
        if (argc > 3) {
            gt_error("help: one verb at a time; see 'gentrain --help'");
            return EXIT_USAGE;
        }
        if (argc == 3) return print_verb_help(argv[2]);
        fputs(main_help, stdout);
        return EXIT_OK;
    }
    char shown[72];
    if (verb[0] == '-')
        gt_error("unknown option '%s'; see 'gentrain --help'", gt_printable(verb, shown));
    else
        gt_error("unknown verb '%s'; see 'gentrain --help'", gt_printable(verb, shown));
    return EXIT_USAGE;
}

int main(int argc, char **argv)
{
    return stdout_checked(run_verb(argc, argv));
}
