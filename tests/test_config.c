/* test_config — the run configuration: defaults, config files, command line, every
 * range and cross check (with the error line it prints), and print -> load round trip.
 *
 * Error lines are captured by pointing stderr (fd 2) at a temporary file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "testutil.h"

static char tmpdir[512];
/* The first line of s, for a check's description. */
static const char *line1(const char *s)
{
    static char buf[512];
    size_t n = strcspn(s, "\n");
    if (n >= sizeof buf) n = sizeof buf - 1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return buf;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += (*s == '\n');
    return n;
}

/* Writes text to <tmpdir>/name and returns the path (static buffer per call site). */
static void write_file(char *path, size_t cap, const char *name, const char *text)
{
    snprintf(path, cap, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(99);
    }
    fputs(text, f);
    fclose(f);
}

/* config_set must fail with one error line containing all of the wanted pieces. */
static void expect_set_error(const char *key, const char *value, const char *want)
{
    gt_config c;
    config_defaults(&c);
    tu_capture_begin();
    int rc = config_set(&c, key, value, "command line");
    const char *e = tu_capture_end();
    TU_CHECK(rc == -1, "%s = %s is refused", key, value);
    TU_CHECK(strncmp(e, "gentrain: error: command line: ", 31) == 0 && count_lines(e) == 1,
             "  one error line from the command line: %s", line1(e));
    TU_CHECK(strstr(e, key) != NULL, "  it names the key %s", key);
    TU_CHECK(strstr(e, want) != NULL, "  it says '%s'", want);
}

static void expect_validate_error(gt_config *c, const char *want)
{
    tu_capture_begin();
    int rc = config_validate(c);
    const char *e = tu_capture_end();
    TU_CHECK(rc == -1 && count_lines(e) == 1 && strstr(e, want) != NULL,
             "validate fails with '%s': %s", want, line1(e));
}

static void test_defaults(void)
{
    gt_config c;
    config_defaults(&c);
    TU_CHECK(strcmp(c.data, "") == 0, "data defaults to empty");
    TU_CHECK(strcmp(c.train_dataset, "/train/tokens") == 0, "train_dataset default");
    TU_CHECK(strcmp(c.val_dataset, "/val/tokens") == 0, "val_dataset default");
    TU_CHECK(c.n_layer == 4 && c.n_head == 4 && c.n_embd == 128 && c.block_size == 64,
             "model defaults 4/4/128/64");
    TU_CHECK(c.vocab_size == 0 && c.batch_size == 12 && c.steps == 2000, "vocab/batch/steps");
    TU_CHECK(c.lr == 1e-3 && c.min_lr == 1e-4 && c.warmup_steps == 100, "lr schedule");
    TU_CHECK(c.beta1 == 0.9 && c.beta2 == 0.99 && c.weight_decay == 0.1 &&
                 c.grad_clip == 1.0,
             "AdamW defaults");
    TU_CHECK(c.eval_every == 250 && c.eval_batches == 20 && c.seed == 1337 &&
                 c.threads == 0,
             "eval/seed/threads defaults");
    TU_CHECK(strcmp(c.out, "runs/gentrain") == 0 && strcmp(c.log, "") == 0 &&
                 c.peak_gflops == 0,
             "out/log/peak_gflops defaults");
    TU_CHECK(c.bucket_mb == 25 && c.sync == SYNC_SYNC && c.staleness == 1 &&
                 c.grad_comm == GRAD_COMM_FP32,
             "data-parallel defaults: bucket_mb 25, sync, staleness 1, fp32");
    TU_CHECK(c.precision == PRECISION_FP32 && c.offload == OFFLOAD_ALL &&
                 c.data_io == DATA_IO_AUTO && c.sampling == SAMPLING_EPOCH &&
                 c.async_predict == PREDICT_ON,
             "enumerated defaults");
    /* Enumerated keys: parsed into their enum once, printed back as their word. */
    TU_CHECK(config_set(&c, "sync", "async", NULL) == 0 && c.sync == SYNC_ASYNC &&
                 config_set(&c, "offload", "required", NULL) == 0 &&
                 c.offload == OFFLOAD_REQUIRED &&
                 config_set(&c, "data_io", "mpi-io", NULL) == 0 &&
                 c.data_io == DATA_IO_MPI_IO,
             "enumerated keys parse into their enums");
    TU_CHECK(strcmp(config_enum_word("sync", c.sync), "async") == 0 &&
                 strcmp(config_enum_word("data_io", c.data_io), "mpi-io") == 0 &&
                 strcmp(config_enum_word("offload", 7), "?") == 0 &&
                 strcmp(config_enum_word("steps", 0), "?") == 0,
             "config_enum_word names values and refuses the rest");
    {
        char *text = config_to_text(&c);
        TU_CHECK(text && strstr(text, "= async\n") &&
                     strstr(text, "= required\n"),
                 "enumerated keys print as their words");
        gt_config back;
        config_defaults(&back);
        TU_CHECK(text && config_load_text(&back, text, "round trip") == 0 &&
                     memcmp(&back, &c, sizeof c) == 0,
                 "the config text round-trips, enums included");
        free(text);
    }
    config_defaults(&c);

    /* The defaults lack only the data file. */
    expect_validate_error(&c, "data");
    TU_CHECK(config_set(&c, "data", "x.h5", NULL) == 0, "data can be set");
    TU_CHECK(config_validate(&c) == 0, "defaults plus a data file validate");
}

static void test_file(void)
{
    char path[1024];
    write_file(path, sizeof path, "good.cfg",
               "# a comment line\n"
               "\n"
               "   \t\n"
               "data = corpus.h5\n"
               "  n_layer=2   \n"
               "n_head\t=\t2  # trailing comment\n"
               "n_embd = 64#not a comment for an int -> overwritten below\n");
    gt_config c;
    config_defaults(&c);
    tu_capture_begin();
    int rc = config_load_file(&c, path);
    const char *e = tu_capture_end();
    TU_CHECK(rc == -1 && strstr(e, "n_embd") && strstr(e, "good.cfg:7"),
             "'64#x' is not an integer, error names good.cfg:7: %s",
             line1(e));

    write_file(path, sizeof path, "good.cfg",
               "# a comment line\n"
               "\n"
               "   \t\n"
               "data = my corpus/#1.h5\n"
               "  n_layer=2   \n"
               "n_head\t=\t2  # trailing comment\n"
               "lr = 3e-4\r\n"
               "val_dataset = none\n"
               "log =\n"
               "seed = 18446744073709551615\n"
               "steps = 9223372036854775807");
    config_defaults(&c);
    rc = config_load_file(&c, path);
    TU_CHECK(rc == 0, "config file with comments, blanks, CRLF and no final newline");
    TU_CHECK(strcmp(c.data, "my corpus/#1.h5") == 0, "string with inner space and '#': '%s'",
             c.data);
    TU_CHECK(c.n_layer == 2 && c.n_head == 2, "whitespace trimmed around key and value");
    TU_CHECK(c.lr == 3e-4, "CR stripped: lr = %g", c.lr);
    TU_CHECK(strcmp(c.val_dataset, "none") == 0 && c.log[0] == '\0', "none and empty");
    TU_CHECK(c.seed == UINT64_MAX && c.steps == INT64_MAX, "largest seed and steps");

    /* Missing file. */
    tu_capture_begin();
    char missing[1024];
    snprintf(missing, sizeof missing, "%s/nope.cfg", tmpdir);
    rc = config_load_file(&c, missing);
    e = tu_capture_end();
    TU_CHECK(rc == -1 && strstr(e, "nope.cfg") && count_lines(e) == 1,
             "missing config file named: %s", line1(e));

    /* A line without '='. */
    write_file(path, sizeof path, "noeq.cfg", "lr = 1e-3\n\nn_layer 4\n");
    tu_capture_begin();
    rc = config_load_file(&c, path);
    e = tu_capture_end();
    TU_CHECK(rc == -1 && strstr(e, "noeq.cfg:3") && count_lines(e) == 1,
             "line without '=' names noeq.cfg:3: %s", line1(e));

    /* A value error names file:line, key and value. */
    write_file(path, sizeof path, "bad.cfg", "# x\nsteps = 10\nlr = -1\n");
    tu_capture_begin();
    rc = config_load_file(&c, path);
    e = tu_capture_end();
    TU_CHECK(rc == -1 && strstr(e, "bad.cfg:3: lr = -1: must be > 0"),
             "range error in a file: %s", line1(e));

    /* Unknown key with a suggestion. */
    write_file(path, sizeof path, "unknown.cfg", "\n\n\n\n\n\nlr_max = 3\n");
    tu_capture_begin();
    rc = config_load_file(&c, path);
    e = tu_capture_end();
    TU_CHECK(rc == -1 && strstr(e, "unknown.cfg:7: unknown key 'lr_max'") &&
                 strstr(e, "did you mean 'min_lr'?"),
             "unknown key with suggestion: %s", line1(e));

    /* config_load_text names its origin the same way. */
    config_defaults(&c);
    tu_capture_begin();
    rc = config_load_text(&c, "n_layer = 3\nblock_size = 0\n", "model.h5:config");
    e = tu_capture_end();
    TU_CHECK(rc == -1 && strstr(e, "model.h5:config:2: block_size = 0: must be >= 1"),
             "load_text error origin: %s", line1(e));

    /* A key set twice in one file: a warning, the later value wins. */
    config_defaults(&c);
    tu_capture_begin();
    rc = config_load_text(&c, "n_layer = 3\nn_layer = 5\n", "dup.cfg");
    e = tu_capture_end();
    TU_CHECK(rc == 0 && c.n_layer == 5 && strstr(e, "warning") && strstr(e, "line 1"),
             "duplicate key warns, later wins: %s", line1(e));
}

static void test_args(void)
{
    char path[1024];
    write_file(path, sizeof path, "args.cfg", "lr = 0.005\nn_layer = 6\nsteps = 50\n");
    char cfg_eq[1100];
    snprintf(cfg_eq, sizeof cfg_eq, "--config=%s", path);

    /* --config after the override: the command line still wins. */
    {
        char *argv[] = {"gentrain", "train", "--lr", "0.002", "--config", path, NULL};
        gt_config c;
        config_defaults(&c);
        int rc = config_parse_args(&c, 6, argv, 2);
        TU_CHECK(rc == 0 && c.lr == 0.002 && c.n_layer == 6,
                 "--lr before --config wins (lr %g, n_layer %d)", c.lr, c.n_layer);
    }
    {
        char *argv[] = {"gentrain", "train", cfg_eq, "--lr=0.002", "--n-layer", "2", NULL};
        gt_config c;
        config_defaults(&c);
        int rc = config_parse_args(&c, 6, argv, 2);
        TU_CHECK(rc == 0 && c.lr == 0.002 && c.n_layer == 2,
                 "--config=FILE, --key=value and --n-layer (lr %g, n_layer %d)", c.lr,
                 c.n_layer);
    }
    {
        char *argv[] = {"gentrain", "train", "--steps", "3", "--steps=4", NULL};
        gt_config c;
        config_defaults(&c);
        int rc = config_parse_args(&c, 5, argv, 2);
        TU_CHECK(rc == 0 && c.steps == 4, "the last --steps wins");
        /* Derived defaults: warmup not given and larger than steps. */
        TU_CHECK(c.warmup_steps == 0, "warmup_steps not given, steps 4 -> %lld",
                 (long long)c.warmup_steps);
        TU_CHECK(strcmp(c.log, "runs/gentrain/log.jsonl") == 0, "log defaults into out: %s",
                 c.log);
        c.data[0] = 'x';
        TU_CHECK(config_validate(&c) == 0, "short run with derived defaults validates");
    }
    {
        char *argv[] = {"gentrain", "train", "--lr", "1e-5", "--out", "none", NULL};
        gt_config c;
        config_defaults(&c);
        int rc = config_parse_args(&c, 6, argv, 2);
        TU_CHECK(rc == 0 && c.min_lr == 1e-5 / 10, "min_lr not given, lr 1e-5 -> %g",
                 c.min_lr);
        TU_CHECK(c.log[0] == '\0', "no log when out is none");
    }
    {
        char *argv[] = {"gentrain", "train", "--log=", "--warmup_steps", "100", "--steps",
                        "10", NULL};
        gt_config c;
        config_defaults(&c);
        int rc = config_parse_args(&c, 7, argv, 2);
        TU_CHECK(rc == 0 && c.log[0] == '\0', "explicit empty log stays empty");
        c.data[0] = 'x';
        expect_validate_error(&c, "warmup_steps 100 is larger than steps 10");
    }
    /* Errors on the command line. */
    struct {
        int argc;
        char *argv[6];
        const char *want;
    } bad[] = {
        {3, {"g", "train", "stray"}, "unexpected argument 'stray'"},
        {3, {"g", "train", "--lr"}, "--lr needs a value"},
        {4, {"g", "train", "--lr", "--steps"}, "--lr needs a value"},
        {4, {"g", "train", "--n_layers", "2"}, "did you mean 'n_layer'?"},
        {4, {"g", "train", "--xyzzy", "2"}, "unknown key 'xyzzy'"},
        {3, {"g", "train", "--config"}, "--config needs a file name"},
        {3, {"g", "train", "--config=/nonexistent/dir/x.cfg"}, "x.cfg"},
        {3, {"g", "train", "--lr=abc"}, "command line: lr = 'abc': not a number"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gt_config c;
        config_defaults(&c);
        tu_capture_begin();
        int rc = config_parse_args(&c, bad[i].argc, bad[i].argv, 2);
        const char *e = tu_capture_end();
        TU_CHECK(rc == -1 && count_lines(e) == 1 && strstr(e, bad[i].want),
                 "command line error '%s': %s", bad[i].want, line1(e));
    }
}

static void test_ranges(void)
{
    expect_set_error("n_layer", "0", "must be >= 1");
    expect_set_error("bucket_mb", "0", "must be >= 0.001");
    expect_set_error("bucket_mb", "1e-320", "must be >= 0.001");
    expect_set_error("staleness", "9", "must be >= 1 and <= 8");
    expect_set_error("sync", "asynchronous", "must be one of: sync|async");
    expect_set_error("grad_comm", "bf16", "must be one of: fp32|fp16");
    expect_set_error("n_head", "-2", "must be >= 1");
    expect_set_error("n_embd", "0", "must be >= 1");
    expect_set_error("block_size", "0", "must be >= 1");
    expect_set_error("batch_size", "0", "must be >= 1");
    expect_set_error("steps", "0", "must be >= 1");
    expect_set_error("lr", "0", "must be > 0");
    expect_set_error("lr", "-1", "lr = -1: must be > 0");
    expect_set_error("min_lr", "-1e-9", "must be >= 0");
    expect_set_error("warmup_steps", "-1", "must be >= 0");
    expect_set_error("beta1", "1", "must be >= 0 and < 1");
    expect_set_error("beta2", "-0.1", "must be >= 0 and < 1");
    expect_set_error("weight_decay", "-0.5", "must be >= 0");
    expect_set_error("grad_clip", "-1", "must be >= 0");
    expect_set_error("eval_every", "-1", "must be >= 0");
    expect_set_error("eval_batches", "0", "must be >= 1");
    expect_set_error("threads", "-1", "must be >= 0");
    /* the model shape's limits (model.h GPT_MAX_*): past them sizes could overflow */
    expect_set_error("vocab_size", "-1", "must be >= 0 and <= 134217728");
    expect_set_error("vocab_size", "2147483648", "must be >= 0 and <= 134217728");
    expect_set_error("vocab_size", "134217729", "must be >= 0 and <= 134217728");
    expect_set_error("n_layer", "357913942", "at most 1024");
    expect_set_error("n_embd", "65537", "at most 65536");
    expect_set_error("n_head", "4097", "at most 4096");
    expect_set_error("block_size", "131073", "at most 131072");
    expect_set_error("peak_gflops", "-3", "must be >= 0");
    /* Overflow and malformed integers. */
    expect_set_error("n_layer", "2147483648", "too large");
    expect_set_error("steps", "9223372036854775808", "too large");
    expect_set_error("steps", "-9223372036854775809", "must be >= 1");
    expect_set_error("seed", "18446744073709551616", "too large");
    expect_set_error("seed", "-1", "not a non-negative integer");
    expect_set_error("steps", "1e4", "not an integer");
    expect_set_error("steps", "12 3", "not an integer");
    expect_set_error("steps", "", "not an integer");
    expect_set_error("n_layer", "0x10", "not an integer");
    /* Doubles. */
    expect_set_error("lr", "nan", "finite");
    expect_set_error("lr", "inf", "finite");
    expect_set_error("weight_decay", "1e400", "out of range");
    expect_set_error("lr", "1e-3x", "not a number");
    /* strtod reads hexadecimal; a person who types lr = 0x10 did not mean 16 */
    expect_set_error("lr", "0x10", "not a number");
    expect_set_error("weight_decay", "-0X1p-3", "not a number");
    /* Strings. */
    static char longpath[GT_PATH_MAX + 10];
    memset(longpath, 'a', sizeof longpath - 1);
    expect_set_error("data", longpath, "too long");
    expect_set_error("out", "a #b", "comment");
    expect_set_error("log", " lead", "spaces");
    expect_set_error("train_dataset", "a\tb", "control character");

    /* Accepted edge values. */
    gt_config c;
    config_defaults(&c);
    TU_CHECK(config_set(&c, "beta1", "0", NULL) == 0 && c.beta1 == 0, "beta1 = 0 is fine");
    TU_CHECK(config_set(&c, "grad_clip", "0", NULL) == 0 && c.grad_clip == 0,
             "grad_clip = 0 (off) is fine");
    TU_CHECK(config_set(&c, "vocab_size", "134217728", NULL) == 0, "vocab_size 2^27");
    TU_CHECK(config_set(&c, "n_layer", "1024", NULL) == 0, "n_layer 1024");
    TU_CHECK(config_set(&c, "steps", "+7", NULL) == 0 && c.steps == 7, "steps = +7");
    TU_CHECK(config_set(&c, "min_lr", "1e-320", NULL) == 0 && c.min_lr > 0,
             "subnormal min_lr kept");
}

static void test_cross_checks(void)
{
    gt_config c;
    config_defaults(&c);
    config_set(&c, "data", "x.h5", NULL);
    config_set(&c, "n_embd", "130", NULL);
    expect_validate_error(&c, "n_embd 130 is not divisible by n_head 4");

    config_defaults(&c);
    config_set(&c, "data", "x.h5", NULL);
    config_set(&c, "min_lr", "0.01", NULL);
    expect_validate_error(&c, "min_lr 0.01 is larger than lr 0.001");

    config_defaults(&c);
    config_set(&c, "data", "x.h5", NULL);
    config_set(&c, "steps", "50", NULL);
    expect_validate_error(&c, "warmup_steps 100 is larger than steps 50");

    config_defaults(&c);
    config_set(&c, "data", "x.h5", NULL);
    config_set(&c, "train_dataset", "", NULL);
    expect_validate_error(&c, "train_dataset");
    /* global_batch_size = auto and its keys */
    config_defaults(&c);
    config_set(&c, "data", "x.h5", NULL);
    config_set(&c, "global_batch_size", "auto", NULL);
    config_set(&c, "sync", "async", NULL);
    expect_validate_error(&c, "global_batch_size = auto needs sync = sync");
    config_set(&c, "sync", "sync", NULL);
    config_set(&c, "global_batch_min", "30", NULL);
    expect_validate_error(&c, "global_batch_min 30 is not a multiple of batch_size 12");
    config_set(&c, "global_batch_min", "24", NULL);
    config_set(&c, "global_batch_max", "60", NULL);
    expect_validate_error(&c, "global_batch_max 60 is not a multiple of global_batch_min 24");
    config_set(&c, "global_batch_max", "96", NULL);
    TU_CHECK(config_validate(&c) == 0, "auto with min 24, max 96: valid");
    expect_set_error("global_batch_size", "-1", "or auto");
    expect_set_error("lr_rule", "cubic", "adascale|sqrt|linear");
}

static void test_round_trip(void)
{
    gt_config a, b;
    config_defaults(&a);
    config_set(&a, "data", "dir with space/x#1.h5", NULL);
    config_set(&a, "val_dataset", "none", NULL);
    config_set(&a, "log", "", NULL);
    config_set(&a, "steps", "9223372036854775807", NULL);
    config_set(&a, "seed", "18446744073709551615", NULL);
    config_set(&a, "vocab_size", "50257", NULL);
    config_set(&a, "global_batch_size", "auto", NULL);
    config_set(&a, "lr_rule", "sqrt", NULL);
    a.lr = 0.1 + 0.2;              /* needs 17 digits */
    a.min_lr = 4.9406564584124654e-324; /* smallest subnormal */
    a.beta2 = 0.999;
    a.weight_decay = 1.0 / 3.0;
    a.peak_gflops = 1234567.891;
    char *text = config_to_text(&a);
    TU_CHECK(text != NULL, "config_to_text");
    if (!text) return;
    config_defaults(&b);
    int rc = config_load_text(&b, text, "round trip");
    TU_CHECK(rc == 0, "its text loads back");
    TU_CHECK(memcmp(&a, &b, sizeof a) == 0, "identical struct after print -> load");
    TU_CHECK(a.lr == b.lr && a.min_lr == b.min_lr && a.weight_decay == b.weight_decay &&
                 a.seed == b.seed && a.steps == b.steps && strcmp(a.data, b.data) == 0,
             "fields equal (lr %.17g, min_lr %g)", b.lr, b.min_lr);

    /* config_print writes the same text. */
    FILE *f = tmpfile();
    config_print(&a, f);
    long n = ftell(f);
    rewind(f);
    char *printed = calloc(1, (size_t)n + 1);
    size_t got = fread(printed, 1, (size_t)n, f);
    fclose(f);
    TU_CHECK(got == strlen(text) && strcmp(printed, text) == 0,
             "config_print output equals config_to_text");
    TU_CHECK(strstr(text, "lr                = 0.30000000000000004\n") != NULL,
             "aligned 'key = value' lines with shortest round-trip doubles");
    TU_CHECK(strstr(text, "\nlog               =\n") != NULL, "empty string printed as 'log ='");
    TU_CHECK(a.global_batch_size == GT_BATCH_AUTO &&
                 strstr(text, "\nglobal_batch_size = auto\n") != NULL,
             "global_batch_size = auto printed as the word, read back as GT_BATCH_AUTO");
    free(printed);
    free(text);

    /* Defaults print short. */
    config_defaults(&a);
    text = config_to_text(&a);
    TU_CHECK(text && strstr(text, "min_lr            = 0.0001\n"), "0.0001 printed as such");
    free(text);
}

/* Every key of the table (as config_to_text lists them) declares what changing it on
 * resume does; the policies io/ckpt/ckpt_compat.c enforces, key by key, for the keys whose reason
 * was once missing (precision, grad_comm) and a few of each kind. */
typedef struct policy_count {
    int keys, with_policy;
} policy_count;

static int count_policy(void *ctx, const char *key, const char *value)
{
    policy_count *n = ctx;
    (void)value;
    const int p = config_resume_policy(key);
    n->keys++;
    if (p == CONFIG_RESUME_MATH || p == CONFIG_RESUME_HARMLESS || p == CONFIG_RESUME_GRID ||
        p == CONFIG_RESUME_PLACE)
        n->with_policy++;
    else
        printf("     key %s: no resume policy (%d)\n", key, p);
    return 0;
}

static void test_resume_policy(void)
{
    gt_config c;
    config_defaults(&c);
    char *text = config_to_text(&c);
    policy_count n = {0, 0};
    TU_CHECK(text && config_text_each(text, count_policy, &n) == 0 && n.keys > 40 &&
                 n.with_policy == n.keys,
             "every key (%d) has a resume policy (%d)", n.keys, n.with_policy);
    free(text);
    static const struct {
        const char *key;
        int policy;
    } want[] = {
        {"precision", CONFIG_RESUME_MATH},    {"grad_comm", CONFIG_RESUME_MATH},
        {"lr", CONFIG_RESUME_MATH},           {"sync", CONFIG_RESUME_MATH},
        {"steps", CONFIG_RESUME_HARMLESS},    {"threads", CONFIG_RESUME_HARMLESS},
        {"offload", CONFIG_RESUME_HARMLESS},  {"tp", CONFIG_RESUME_GRID},
        {"pp", CONFIG_RESUME_GRID},           {"micro_batches", CONFIG_RESUME_GRID},
        {"batch_size", CONFIG_RESUME_GRID},   {"global_batch_size", CONFIG_RESUME_GRID},
        {"data", CONFIG_RESUME_PLACE},        {"train_dataset", CONFIG_RESUME_MATH},
        {"fancy_new_key", -1},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        TU_CHECK(config_resume_policy(want[i].key) == want[i].policy, "%s: resume policy %d",
                 want[i].key, want[i].policy);
    char v[64];
    TU_CHECK(config_text_value("a = 1\n# a = 3\nb=2 # two\na = 4\n", "a", v, sizeof v) == 1 &&
                 strcmp(v, "4") == 0 &&
                 config_text_value("b=2 # two\n", "b", v, sizeof v) == 1 &&
                 strcmp(v, "2") == 0 && config_text_value("no line\n", "c", v, sizeof v) == 0,
             "config_text_value: the last line wins, comments dropped, lines without '=' "
             "skipped");
}

int main(void)
{
    tu_make_tmpdir(tmpdir, sizeof tmpdir, "test_config");
    test_defaults();
    test_file();
    test_args();
    test_ranges();
    test_cross_checks();
    test_round_trip();
    test_resume_policy();

    const char *names[] = {"good.cfg", "noeq.cfg", "bad.cfg", "unknown.cfg", "args.cfg"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", tmpdir, names[i]);
        unlink(p);
    }
    rmdir(tmpdir);
    return tu_finish();
}
