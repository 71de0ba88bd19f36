/* main — the `gentrain` command: `gentrain VERB [options]` with the verbs prepare,
 * train, sample, inspect, plan, export and help: the help texts, the dispatch, and the
 * verbs' command lines but for those with files of their own (prepare_cli.c,
 * sample_cli.c, plan_cli.c, export.c; what they share: cli_args.h).
 *
 * Exit status: 0 success, 1 the work failed (bad data, I/O, ...), 2 the command line
 * or the config was wrong. Every failure is one "gentrain: error: ..." line on stderr,
 * printed by whoever found it; usage errors end with where to find help. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "inspect.h"       /* inspect_file */
#include "inspect_run.h"   /* inspect_run_folder */
#include "inspect_verify.h" /* inspect_verify_file */
#include "blas_core.h"     /* blas_core_fixup */
#include "build_info.h"    /* build_info_print */
#include "cli_args.h"      /* exit statuses, --help, input checks, a verb's end */
#include "cli_names.h"     /* cli_canonical */
#include "config.h"        /* gt_config, config_* */
#include "env_check.h"     /* env_check: the GENTRAIN_* variables, once */
#include "parallel.h"      /* par_init, par_all_ok, par_is_root */
#include "plan_cli.h"      /* plan_command */
#include "prepare_cli.h"   /* prepare_command */
#include "probe.h"         /* probe_run */
#include "train_probe.h"   /* train_probe_inputs */
#include "sample_cli.h"    /* sample_command */
#include "export.h"
#include "signals.h"       /* GT_EXIT_REQUEUE */
#include "train.h"         /* train_run, train_dry_run, TRAIN_STOPPED */
#include "util.h"          /* gt_error, gt_mute_reports */

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "0.1"
#endif

static const char main_help[] =
    "gentrain " PACKAGE_VERSION " - trains GPT-style language models on CPU clusters\n"
    "\n"
    "usage: gentrain VERB [options]\n"
    "\n"
    "verbs:\n"
    "  prepare   turn text files into a token dataset (HDF5): bytes or BPE\n"
    "  train     train a model on an HDF5 token dataset\n"
    "  sample    generate text with a trained model\n"
    "  inspect   show what an HDF5 file (dataset or model) holds, or where a run stands\n"
    "  plan      project which dp x pp x tp grid trains a config fastest\n"
    "  export    write a trained model for other tools (Hugging Face GPT-2)\n"
    "  help      show the help of a verb: gentrain help train\n"
    "\n"
    "'gentrain VERB --help' lists the options of a verb; 'gentrain --version' prints\n"
    "the version, 'gentrain --build-info' what this gentrain was built with (compiler,\n"
    "MPI, HDF5, BLAS, CUDA) and the GPUs, CPU and kernels it finds here.\n"
    "\n"
    "example:\n"
    "  gentrain prepare data/tinyshakespeare.txt -o shakespeare.h5\n"
    "  gentrain train --data shakespeare.h5 --steps 500 --out runs/shakespeare\n"
    "  gentrain sample --model runs/shakespeare --prompt 'ROMEO:'\n"
    "\n"
    "Every verb names the same thing the same way: --model PATH for the trained model\n"
    "it reads (a model file or a run folder), -o/--out PATH for what it writes;\n"
    "'-' and '_' are alike in option names, and --name=VALUE works everywhere.\n";

static const char train_usage[] =
    "usage: gentrain train [--config FILE] [--KEY VALUE | --KEY=VALUE]... [--dry-run]\n"
    "\n"
    "Trains a GPT model on an HDF5 token dataset and saves it as <out>/model.h5.\n"
    "Settings: the built-in defaults, then the --config FILE (applied first wherever it\n"
    "is on the line), then each --KEY VALUE in order; the last one wins. The effective\n"
    "config is printed before training starts, in the config-file format. '-' and '_'\n"
    "are alike in keys (--n-layer = --n_layer); -o DIR is --out DIR, as in every verb.\n"
    "Started by mpirun or srun with N ranks, it trains one model data-parallel: each\n"
    "rank takes batch_size sequences of a global batch of batch_size x N per step\n"
    "(or of global_batch_size, by accumulating gradients over micro-steps).\n"
    "--dry-run sets the run up as it would start (the grid, the data, the run folder,\n"
    "the checkpoint to resume, the model and its buffers), says what it would train,\n"
    "and stops before the first step: no checkpoint, model file or log line written.\n"
    "\n";

static const char train_examples[] =
    "\n"
    "examples:\n"
    "  gentrain prepare data/tinyshakespeare.txt -o shakespeare.h5\n"
    "  gentrain train --data shakespeare.h5 --steps 500 --out runs/shakespeare\n"
    "  gentrain train --config my.cfg --lr=3e-4 --threads 8\n";

static const char inspect_help[] =
    "usage: gentrain inspect [--verify] FILE.h5\n"
    "       gentrain inspect [--verify] RUN_FOLDER\n"
    "\n"
    "Prints every group, dataset (shape, type) and attribute of an HDF5 file, and for a\n"
    "gentrain model its config, step and parameter count.\n"
    "\n"
    "Given a run folder (the config key out), says where that run stands: whether a run\n"
    "is writing it now (which process, on which host), its checkpoints and the one\n"
    "resume = auto would take, the log's last step and validation loss, the time left\n"
    "of a run in progress, and the model file. It only reads: a run writing the folder\n"
    "is not disturbed. Exit 1 when something there is damaged (named on stderr).\n"
    "\n"
    "  --verify   a model or checkpoint file: read it whole and check it against its\n"
    "             checksum, as sample and a resume do (a copy between clusters, a file\n"
    "             on scratch). A run folder: read its checkpoints whole so (else\n"
    "             their metadata alone, unchecked: quick on any file system)\n"
    "\n"
    "examples:\n"
    "  gentrain inspect runs/shakespeare/model.h5\n"
    "  gentrain inspect runs/shakespeare\n";

static void print_train_help(FILE *f)
{
    fputs(train_usage, f);
    config_print_help(f);
    fputs(train_examples, f);
}

/* ---------------------------------------------------------------- verbs */

/* The train config from the command line (and the files it names), checked: EXIT_OK,
 * EXIT_USAGE or EXIT_FAIL (reported). */
static int read_train_config(gt_config *c, int argc, char **argv)
{
    config_defaults(c);
    if (config_parse_args(c, argc, argv, 2) != 0 || config_validate(c) != 0)
        return EXIT_USAGE;
    if (!strpbrk(c->data, ",*?[") && cli_check_readable(c->data, "data file", 1) != 0)
        return EXIT_FAIL; /* a file or folder; a set's files are checked as it opens them */
    return EXIT_OK;
}

/* Takes train's --dry-run (or --dry_run) out of argv[2..*argc), so that the config
 * parser sees only keys: 1 when it was there, 0 when not, -1 when it was given a value
 * (reported). */
static int take_dry_run(int *argc, char **argv)
{
    int found = 0, out = 2;
    for (int i = 2; i < *argc; i++) {
        char name[64];
        cli_canonical("train", argv[i], name, sizeof name);
        if (strcmp(name, "--dry-run") != 0) {
            argv[out++] = argv[i];
            continue;
        }
        if (strchr(argv[i], '=')) {
            gt_error("train: --dry-run takes no value; see 'gentrain train --help'");
            return -1;
        }
        found = 1;
    }
    *argc = out;
    argv[out] = NULL;
    return found;
}

/* The train verb after --help: parse, check, train (or with dry_run set up, report and
 * stop). Under MPI every rank runs it; a rank that fails before training tells the
 * others (par_all_ok), so none waits alone. */
static int train_verb(int argc, char **argv, int dry_run)
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
    const int trc = dry_run ? train_dry_run(&c) : train_run(&c);
    return trc == 0 ? EXIT_OK : trc == TRAIN_STOPPED ? GT_EXIT_REQUEUE : EXIT_FAIL;
}

static int cmd_train(int argc, char **argv)
{
    if (cli_wants_help(argc, argv, 2)) {
        print_train_help(stdout);
        return EXIT_OK;
    }
    const int dry_run = take_dry_run(&argc, argv);
    if (dry_run < 0) return EXIT_USAGE;
    /* Damaged HDF5 files can crash or hang the library: read them once in a child
     * first, while there is no MPI to take down (train_probe.h). */
    if (train_probe_inputs(argc, argv) != 0) return EXIT_FAIL;
    /* MPI only when a launcher started us: a plain `gentrain train` stays MPI-free. */
    par_init(&argc, &argv);
    return cli_finish_verb(train_verb(argc, argv, dry_run));
}

static int cmd_plan(int argc, char **argv)
{
    if (cli_wants_help(argc, argv, 2)) {
        plan_print_help(stdout);
        return EXIT_OK;
    }
    par_init(&argc, &argv); /* --measure under mpirun times the links */
    return cli_finish_verb(plan_command(argc, argv, 2));
}

/* What `inspect` runs in its child (probe.h): a file's metadata only, seconds even for
 * the largest files; with --verify (a file, or a run folder's checkpoints) every byte,
 * as a resume reads them (minutes for the largest on a slow file system). */
#define INSPECT_SECONDS 60
#define INSPECT_VERIFY_SECONDS 900
typedef struct {
    const char *path;
    int is_dir, verify;
} inspect_job;

static int run_inspect(void *arg)
{
    const inspect_job *j = arg;
    if (j->is_dir) return inspect_run_folder(j->path, j->verify, stdout);
    const int listed = inspect_file(j->path, stdout);
    if (!j->verify || listed != 0) return listed; /* a file that does not list: one error */
    fflush(stdout); /* the listing before a verification's error line */
    return inspect_verify_file(j->path, stdout);
}

static int cmd_inspect(int argc, char **argv)
{
    if (cli_wants_help(argc, argv, 2)) {
        fputs(inspect_help, stdout);
        return EXIT_OK;
    }
    const char *path = NULL;
    char shown[72], shown2[72];
    int verify = 0;
    for (int i = 2; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1] != '\0') {
            char name[32];
            if (strcmp(cli_canonical("inspect", argv[i], name, sizeof name), "--verify") == 0) {
                if (strchr(argv[i], '=')) {
                    gt_error("inspect: --verify takes no value (got '%s')",
                             gt_printable(argv[i], shown));
                    return EXIT_USAGE;
                }
                verify = 1;
                continue;
            }
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
        gt_error("inspect: no file given (usage: gentrain inspect FILE.h5 | RUN_FOLDER)");
        return EXIT_USAGE;
    }
    int is_dir = 0;
    const int fd = gt_open_regular(path, "file", 1, &is_dir);
    if (fd < 0) return EXIT_FAIL;
    close(fd);
    /* the whole inspection in a child: a damaged file that crashes or hangs HDF5 then
     * costs one error line (probe.h) */
    inspect_job job = {path, is_dir, verify};
    return probe_run(is_dir ? "run folder" : "file", path, run_inspect, &job,
                     verify ? INSPECT_VERIFY_SECONDS : INSPECT_SECONDS) == 0
               ? EXIT_OK
               : EXIT_FAIL;
}

static int print_verb_help(const char *verb)
{
    if (strcmp(verb, "prepare") == 0)
        prepare_print_help(stdout);
    else if (strcmp(verb, "train") == 0)
        print_train_help(stdout);
    else if (strcmp(verb, "sample") == 0)
        sample_print_help(stdout);
    else if (strcmp(verb, "inspect") == 0)
        fputs(inspect_help, stdout);
    else if (strcmp(verb, "plan") == 0)
        plan_print_help(stdout);
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
    if (strcmp(verb, "--build-info") == 0) {
        if (argc > 2) {
            gt_error("--build-info takes no arguments; see 'gentrain --help'");
            return EXIT_USAGE;
        }
        build_info_print(stdout, PACKAGE_VERSION);
        return EXIT_OK; /* run_verb's caller checks that standard output arrived */
    }
    if (strcmp(verb, "help") != 0 && env_check() != 0) return EXIT_USAGE;
    if (strcmp(verb, "prepare") == 0) return prepare_command(argc, argv);
    /* The verbs that compute: make sure OpenBLAS runs kernels this CPU is built for
     * (may restart the process, before MPI exists) */
    if (strcmp(verb, "train") == 0 || strcmp(verb, "sample") == 0 ||
        strcmp(verb, "plan") == 0)
        blas_core_fixup(argv);
    if (strcmp(verb, "train") == 0) return cmd_train(argc, argv);
    if (strcmp(verb, "sample") == 0) return sample_command(argc, argv);
    if (strcmp(verb, "inspect") == 0) return cmd_inspect(argc, argv);
    if (strcmp(verb, "plan") == 0) return cmd_plan(argc, argv);
    if (strcmp(verb, "export") == 0) return cli_finish_verb(export_command(argc, argv, 2));
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
