/* prepare_bpe — text files to a BPE token dataset (prepare.h: prepare_bpe).
 *
 * Two passes over the inputs at most, each through one bounded buffer: with
 * --train-tokenizer the first counts words (bpe_train.h) and trains; the second
 * encodes. A buffer is cut at a point where encoding the parts gives the ids of the
 * whole (bpe_cut_point), so the ids equal those of encoding each split's text at once;
 * only a buffer without any such point (no newline nor " x" in 16 MiB) is cut at a
 * character boundary, with a warning. The ids are appended to extendable datasets. */
#include "prepare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "bpe.h"
#include "bpe_train.h"
#include "file_commit.h" /* file_begin, file_end */
#include "h5lock.h"
#include "h5tok.h"
#include "h5util.h"
#include "prepare_input.h"

#define BLOCK ((size_t)16 << 20)   /* bytes read at a time */
#define CHUNK ((int64_t)1 << 20)   /* tokens per dataset chunk */
#define MAX_THREADS 256

/* Everything one prepare needs. */
typedef struct {
    const char *const *inputs;
    int n_inputs;
    int64_t *sizes, total;
    const char *out;
    bpe *t;
    bpe_encoder *enc[MAX_THREADS];
    int n_enc;
    prep_set sets[2];
    int64_t lens[2];
    unsigned char *buf; /* 2 * BLOCK */
    bpe_ids ids;
    int warned_cut;
    int64_t done, next_report;
} job;

/* The bytes of the next block: moves to buf + *have up to `left` bytes. */
static int read_block(job *j, prep_stream *s, size_t *have, int64_t *left)
{
    size_t room = 2 * BLOCK - *have, take = BLOCK < room ? BLOCK : room;
    if ((int64_t)take > *left) take = (size_t)*left;
    if (prep_fill(s, j->buf + *have, (int64_t)take) != 0) return -1;
    *have += take;
    *left -= (int64_t)take;
    return 0;
}

/* Counts the words of every input and trains a tokenizer of vocab tokens. */
static char *train(job *j, int64_t vocab, size_t *len)
{
    prep_stream s = {j->inputs, j->sizes, j->n_inputs, 0, NULL, 0};
    bpe_counter *c = bpe_counter_new();
    size_t have = 0;
    int64_t left = j->total;
    char *json = NULL, err[200];
    double t0 = gt_now();
    if (!c) goto oom;
    printf("  training a tokenizer of %lld tokens: counting words\n", (long long)vocab);
    fflush(stdout);
    while (left > 0 || have > 0) {
        if (read_block(j, &s, &have, &left) != 0) goto done;
        size_t cut = left > 0 ? bpe_train_cut((char *)j->buf, have, 0, have - 1) : have;
        if (!cut) cut = have; /* counting only: a word cut in two is a small error */
        if (bpe_counter_add(c, (char *)j->buf, cut) != 0) goto oom;
        memmove(j->buf, j->buf + cut, have - cut);
        have -= cut;
    }
    printf("  %lld distinct words in %.1f s; merging\n", (long long)bpe_counter_words(c),
           gt_now() - t0);
    fflush(stdout);
    if (!(json = bpe_train_json(c, vocab, 1, len, err, sizeof err))) gt_error("%s", err);
    goto done;
oom:
    gt_error("out of memory counting the words of the inputs");
done:
    prep_stream_close(&s);
    bpe_counter_free(c);
    return json;
}

/* Writes text to path through path.tmp and a rename (file_commit.h: synced, the reason
 * of a failure said, no .tmp left); never over an input. */
static int save_text(job *j, const char *path, const char *text, size_t len)
{
    const char *kind = gt_special_kind(path);
    if (kind) {
        gt_error("cannot write %s: it is %s", path, kind);
        return -1;
    }
    if (prep_check_writable(j->inputs, j->n_inputs, path, "--save-tokenizer") != 0)
        return -1;
    const size_t n = strlen(path) + 5;
    char *tmp = malloc(n);
    if (!tmp) {
        gt_error("out of memory writing the tokenizer to %s", path);
        return -1;
    }
    FILE *f = file_begin(path, "tokenizer file", tmp, n);
    int rc = -1;
    if (f) {
        (void)fwrite(text, 1, len, f); /* a short write leaves ferror(f), which file_end says */
        rc = file_end(f, tmp, path, "tokenizer file");
    }
    free(tmp);
    return rc;
}

/* The tokenizer: read, or trained on the inputs; loaded into j->t. */
static char *get_tokenizer(job *j, const prepare_options *o, size_t *len)
{
    char err[300], *json = NULL;
    const char *from = o->tokenizer;
    if (o->train_vocab > 0) {
        json = train(j, o->train_vocab, len);
        from = "the trained tokenizer";
    } else if (bpe_read_file(o->tokenizer, &json, len, err, sizeof err) != 0) {
        gt_error("cannot read the tokenizer %s: %s", o->tokenizer, err);
        return NULL;
    }
    if (!json) return NULL;
    if (!(j->t = bpe_load(json, *len, err, sizeof err))) {
        gt_error("tokenizer %s: %s", from, err);
        free(json);
        return NULL;
    }
    if (!bpe_full_alphabet(j->t))
        gt_warn("tokenizer %s lacks tokens for some bytes: text holding them loses them "
                "(or gets its unk_token)", from);
    if (o->save_tokenizer && save_text(j, o->save_tokenizer, json, *len) != 0) {
        free(json);
        return NULL;
    }
    return json;
}

/* Encodes buf[0..n) (at_start: the split's first block) and appends the ids. */
static int encode_block(job *j, int which, size_t n, int at_start)
{
    j->ids.n = 0;
    if (bpe_encode_parallel(j->enc, j->n_enc, (char *)j->buf, n, at_start, &j->ids) != 0) {
        gt_error("out of memory encoding the text");
        return -1;
    }
    if (prep_append(&j->sets[which], &j->lens[which], (int64_t)j->ids.n, H5T_NATIVE_INT32,
                    j->ids.v) != 0) {
        gt_error("cannot write %s in %s.tmp (disk full?)", j->sets[which].name, j->out);
        return -1;
    }
    j->done += (int64_t)n;
    if (j->total >= ((int64_t)64 << 20) && j->done >= j->next_report && j->done < j->total) {
        printf("  %3.0f%% (%lld of %lld bytes)\n", 100.0 * (double)j->done / (double)j->total,
               (long long)j->done, (long long)j->total);
        fflush(stdout);
        j->next_report += j->total / 10;
    }
    return 0;
}

/* The next `bytes` bytes of the stream into dataset which. */
static int encode_part(job *j, prep_stream *s, int which, int64_t bytes)
{
    size_t have = 0;
    int64_t left = bytes;
    int first = 1;
    while (left > 0 || have > 0) {
        if (read_block(j, s, &have, &left) != 0) return -1;
        size_t cut = have;
        if (left > 0) {
            cut = bpe_cut_point(j->t, (char *)j->buf, have, 0, have - 1);
            if (!cut) {
                cut = have - 1;
                while (cut > 1 && (j->buf[cut] & 0xC0) == 0x80) cut--;
                if (!j->warned_cut++)
                    gt_warn("no point to cut the text at in %zu MiB (no newline, no space "
                            "before a letter): the ids there may differ from encoding it "
                            "whole", 2 * BLOCK >> 20);
            }
        }
        if (encode_block(j, which, cut, first) != 0) return -1;
        first = 0;
        memmove(j->buf, j->buf + cut, have - cut);
        have -= cut;
    }
    return 0;
}

/* Creates the datasets and attributes in the open file. */
static int make_sets(job *j, hid_t file, int64_t n_train, int64_t n_val, const char *json,
                     size_t len)
{
    const hid_t type = bpe_vocab_size(j->t) <= 65536 ? H5T_STD_U16LE : H5T_STD_I32LE;
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    int rc = -1;
    if (lcpl >= 0 && H5Pset_create_intermediate_group(lcpl, 1) >= 0 &&
        /* no more tokens than bytes: a split's bytes bound its chunk */
        prep_create_set(file, lcpl, j->sets[0].name, 0, type, n_train < CHUNK ? n_train : CHUNK,
                        &j->sets[0]) == 0 &&
        prep_create_set(file, lcpl, j->sets[1].name, 0, type, n_val < CHUNK ? n_val : CHUNK,
                        &j->sets[1]) == 0 &&
        h5io_write_attr_int(file, "vocab_size", bpe_vocab_size(j->t)) == 0 &&
        h5io_write_attr_str(file, "tokenizer", "bpe") == 0 && h5tok_write(file, json, len) == 0)
        rc = 0;
    if (lcpl >= 0 && H5Pclose(lcpl) < 0) rc = -1;
    return rc;
}

static void free_job(job *j)
{
    prep_close_set(&j->sets[0]);
    prep_close_set(&j->sets[1]);
    for (int k = 0; k < j->n_enc; k++) bpe_encoder_free(j->enc[k]);
    bpe_free(j->t);
    bpe_ids_free(&j->ids);
    free(j->buf);
    free(j->sizes);
}

/* Sets up the job: sizes and split, buffers, tokenizer, encoders. Returns the
 * tokenizer's text. */
static char *start(job *j, const prepare_options *o, double val_fraction, int64_t *n_train,
                   int64_t *n_val, size_t *len)
{
    j->sizes = calloc((size_t)j->n_inputs, sizeof *j->sizes);
    j->buf = malloc(2 * BLOCK);
    if (!j->sizes || !j->buf) {
        gt_error("out of memory preparing %s", j->out);
        return NULL;
    }
    if (prep_check_paths(j->inputs, j->n_inputs, j->out, j->sizes, &j->total) != 0) return NULL;
    /* the tokenizer's path too, before minutes of training (save_text checks it again) */
    if (o->save_tokenizer &&
        (prep_check_writable(j->inputs, j->n_inputs, o->save_tokenizer, "--save-tokenizer") != 0 ||
         prep_check_folder(o->save_tokenizer, "the tokenizer to") != 0))
        return NULL;
    /* The tokenizer read is an input too, and the one saved is written before the
     * output: -o naming either (or the .tmp written first) overwrote it, the saved one
     * silently, with exit 0. */
    if (o->tokenizer && prep_check_apart(o->tokenizer, "tokenizer", j->out, "output") != 0)
        return NULL;
    if (o->save_tokenizer &&
        prep_check_apart(o->save_tokenizer, "--save-tokenizer file", j->out, "output") != 0)
        return NULL;
    *n_val = (int64_t)llround((double)j->total * val_fraction);
    if (*n_val > j->total) *n_val = j->total;
    *n_train = j->total - *n_val;
    if (*n_train < 1) {
        gt_error("the inputs hold %lld bytes: too few for a training set", (long long)j->total);
        return NULL;
    }
    char *json = get_tokenizer(j, o, len);
    if (!json) return NULL;
    int threads = gt_resolve_threads(o->threads);
    if (threads < 0) {
        free(json);
        return NULL;
    }
    j->n_enc = threads < MAX_THREADS ? threads : MAX_THREADS;
    for (int k = 0; k < j->n_enc; k++)
        if (!(j->enc[k] = bpe_encoder_new(j->t))) {
            gt_error("out of memory making the encoders");
            free(json);
            return NULL;
        }
    return json;
}

int prepare_bpe(const char *const *inputs, int n_inputs, const char *out, double val_fraction,
                const prepare_options *o)
{
    job j;
    memset(&j, 0, sizeof j);
    j.inputs = inputs;
    j.n_inputs = n_inputs;
    j.out = out;
    j.sets[0] = (prep_set){-1, -1, "/train/tokens"};
    j.sets[1] = (prep_set){-1, -1, "/val/tokens"};
    int64_t n_train = 0, n_val = 0;
    size_t len = 0;
    char *json = start(&j, o, val_fraction, &n_train, &n_val, &len);
    prep_output out_file = {NULL, -1, 0};
    int rc = -1, locked = 0;
    prep_stream s = {inputs, j.sizes, n_inputs, 0, NULL, 0};
    if (!json) goto fail;
    h5lock_acquire();
    locked = 1;
    if (prep_output_create(&out_file, out) != 0) goto fail;
    if (make_sets(&j, out_file.file, n_train, n_val, json, len) != 0) {
        gt_error("cannot create the datasets in %s", out_file.tmp);
        goto fail;
    }
    double t0 = gt_now();
    j.next_report = j.total / 10;
    if (encode_part(&j, &s, 0, n_train) != 0 || encode_part(&j, &s, 1, n_val) != 0) goto fail;
    double dt = gt_now() - t0;
    int bad = prep_close_set(&j.sets[0]) | prep_close_set(&j.sets[1]);
    if (prep_output_commit(&out_file, bad, out) != 0) goto fail;
    printf("prepared %lld tokens (vocab %lld, %s): train %lld, val %lld, from %lld bytes "
           "(%.2f bytes a token), encoded at %.1f MB/s on %d thread%s -> %s\n",
           (long long)(j.lens[0] + j.lens[1]), (long long)bpe_vocab_size(j.t),
           bpe_vocab_size(j.t) <= 65536 ? "uint16" : "int32", (long long)j.lens[0],
           (long long)j.lens[1], (long long)j.total,
           (double)j.total / (double)(j.lens[0] + j.lens[1] > 0 ? j.lens[0] + j.lens[1] : 1),
           dt > 0 ? (double)j.total / dt / 1e6 : 0.0, j.n_enc, j.n_enc == 1 ? "" : "s", out);
    fflush(stdout);
    rc = 0;
fail:
    prep_stream_close(&s);
    free_job(&j);
    prep_output_abandon(&out_file);
    if (locked) h5lock_release();
    free(json);
    return rc;
}
