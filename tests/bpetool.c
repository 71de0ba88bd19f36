/* bpetool — the BPE tokenizer from the command line, for the tests (not installed):
 *
 *   bpetool encode TOKENIZER.json TEXT [THREADS]   ids, one line, space-separated;
 *                                                  "encode: B bytes, N ids, S s, R MB/s"
 *                                                  on stderr
 *   bpetool decode TOKENIZER.json IDS              the bytes of the ids (as encode prints)
 *   bpetool roundtrip TOKENIZER.json TEXT          exit 0 when decode(encode(x)) == x
 *   bpetool pretok TEXT                            the GPT-2 split, one piece a line
 *                                                  (JSON strings)
 *   bpetool dump DATA.h5 DATASET                   the ids of a token dataset, one line
 *   bpetool check TOKENIZER.json                   exit 0 when it loads, else the error
 *   bpetool train N TEXT OUT.json                  trains a tokenizer of N tokens
 * Exit status 0 on success, 1 on failure (message on stderr), 2 on a usage error. */
#define GT_TOKENIZER_MODULE /* may include bpe_internal.h */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"
#include "bpe_internal.h"
#include "bpe_train.h"
#include "h5data.h"
#include "util.h"

static bpe *load(const char *path)
{
    char *text, err[300];
    size_t len;
    if (bpe_read_file(path, &text, &len, err, sizeof err) != 0) {
        fprintf(stderr, "bpetool: %s: %s\n", path, err);
        return NULL;
    }
    bpe *t = bpe_load(text, len, err, sizeof err);
    free(text);
    if (!t) fprintf(stderr, "bpetool: %s: %s\n", path, err);
    return t;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t r; buf && (r = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += r;
        if (n == cap) {
            char *g = realloc(buf, cap *= 2);
            if (!g) free(buf);
            buf = g;
        }
    }
    fclose(f);
    if (!buf) fprintf(stderr, "bpetool: out of memory\n");
    *len = n;
    return buf;
}

static int encode_text(const bpe *t, const char *text, size_t len, int threads, bpe_ids *ids)
{
    bpe_encoder *enc[64];
    int ok = 1;
    for (int k = 0; k < threads; k++) ok &= (enc[k] = bpe_encoder_new(t)) != NULL;
    double t0 = gt_now();
    if (ok) ok = bpe_encode_parallel(enc, threads, text, len, 1, ids) == 0;
    double dt = gt_now() - t0;
    for (int k = 0; k < threads; k++) bpe_encoder_free(enc[k]);
    if (ok)
        fprintf(stderr, "encode: %zu bytes, %zu ids, %.3f s, %.1f MB/s (%d thread%s)\n", len,
                ids->n, dt, dt > 0 ? (double)len / dt / 1e6 : 0.0, threads,
                threads == 1 ? "" : "s");
    return ok ? 0 : -1;
}

static int cmd_encode(int argc, char **argv)
{
    int threads = argc > 4 ? atoi(argv[4]) : 1;
    if (threads < 1 || threads > 64) return 2;
    bpe *t = load(argv[2]);
    size_t len;
    char *text = t ? slurp(argv[3], &len) : NULL;
    bpe_ids ids = {0};
    int rc = 1;
    if (text && encode_text(t, text, len, threads, &ids) == 0) {
        for (size_t i = 0; i < ids.n; i++) printf(i ? " %d" : "%d", ids.v[i]);
        printf("\n");
        rc = fflush(stdout) == 0 ? 0 : 1;
    }
    bpe_ids_free(&ids);
    free(text);
    bpe_free(t);
    return rc;
}

static int cmd_decode(const char *tok, const char *idfile)
{
    bpe *t = load(tok);
    FILE *f = t ? fopen(idfile, "r") : NULL;
    long id;
    int rc = t && f ? 0 : 1;
    while (f && fscanf(f, "%ld", &id) == 1) {
        size_t n;
        const unsigned char *b = bpe_token_bytes(t, (int32_t)id, &n);
        if (!b) {
            fprintf(stderr, "bpetool: id %ld is not a token\n", id);
            rc = 1;
            break;
        }
        fwrite(b, 1, n, stdout);
    }
    if (f) fclose(f);
    bpe_free(t);
    return rc;
}

static int cmd_roundtrip(const char *tok, const char *path)
{
    bpe *t = load(tok);
    size_t len, o = 0;
    char *text = t ? slurp(path, &len) : NULL;
    bpe_ids ids = {0};
    int rc = 1;
    if (text && encode_text(t, text, len, 2, &ids) == 0) {
        rc = 0;
        for (size_t i = 0; i < ids.n && rc == 0; i++) {
            size_t n;
            const unsigned char *b = bpe_token_bytes(t, ids.v[i], &n);
            if (!b || o + n > len || memcmp(text + o, b, n) != 0) rc = 1;
            o += n;
        }
        if (rc != 0 || o != len) {
            fprintf(stderr, "bpetool: decode(encode(x)) differs from x near byte %zu\n", o);
            rc = 1;
        }
    }
    bpe_ids_free(&ids);
    free(text);
    bpe_free(t);
    return rc;
}

static int cmd_pretok(const char *path)
{
    size_t len;
    char *text = slurp(path, &len);
    if (!text) return 1;
    const unsigned char *s = (const unsigned char *)text;
    for (size_t pos = 0; pos < len;) {
        size_t end = bpe_pretok_next(s, len, pos);
        putchar('"');
        for (size_t i = pos; i < end; i++) {
            if (s[i] == '"' || s[i] == '\\') printf("\\%c", s[i]);
            else if (s[i] < 0x20) printf("\\u%04x", s[i]);
            else putchar(s[i]);
        }
        printf("\"\n");
        pos = end;
    }
    free(text);
    return 0;
}

static int cmd_dump(const char *path, const char *dataset)
{
    h5data *d = h5data_open(path, dataset);
    if (!d) return 1;
    int64_t n = h5data_row_len(d) * h5data_rows(d);
    int32_t *buf = malloc((size_t)(n > 0 ? n : 1) * sizeof *buf);
    int rc = 1;
    if (buf && h5data_rank(d) == 1 && h5data_read(d, 0, 0, n, buf, 0) == 0) {
        for (int64_t i = 0; i < n; i++) printf(i ? " %d" : "%d", buf[i]);
        printf("\n");
        rc = 0;
    }
    free(buf);
    h5data_close(d);
    return rc;
}

static int cmd_train(const char *n, const char *path, const char *out)
{
    size_t len, jlen = 0;
    char *text = slurp(path, &len), err[200];
    bpe_counter *c = bpe_counter_new();
    double t0 = gt_now();
    int rc = text && c && bpe_counter_add(c, text, len) == 0 ? 0 : 1;
    double t1 = gt_now();
    char *json = rc == 0 ? bpe_train_json(c, atoll(n), 1, &jlen, err, sizeof err) : NULL;
    double t2 = gt_now();
    FILE *f = json ? fopen(out, "wb") : NULL;
    if (!json) fprintf(stderr, "bpetool: %s\n", rc ? "cannot count" : err);
    if (!f || fwrite(json, 1, jlen, f) != jlen) rc = 1;
    if (f && fclose(f) != 0) rc = 1;
    fprintf(stderr, "train: %lld words counted in %.3f s, trained in %.3f s\n",
            c ? (long long)bpe_counter_words(c) : 0LL, t1 - t0, t2 - t1);
    free(json);
    free(text);
    bpe_counter_free(c);
    return rc;
}

int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : "";
    if (strcmp(cmd, "encode") == 0 && (argc == 4 || argc == 5)) return cmd_encode(argc, argv);
    if (strcmp(cmd, "decode") == 0 && argc == 4) return cmd_decode(argv[2], argv[3]);
    if (strcmp(cmd, "roundtrip") == 0 && argc == 4) return cmd_roundtrip(argv[2], argv[3]);
    if (strcmp(cmd, "pretok") == 0 && argc == 3) return cmd_pretok(argv[2]);
    if (strcmp(cmd, "dump") == 0 && argc == 4) return cmd_dump(argv[2], argv[3]);
    if (strcmp(cmd, "train") == 0 && argc == 5) return cmd_train(argv[2], argv[3], argv[4]);
    if (strcmp(cmd, "check") == 0 && argc == 3) {
        bpe *t = load(argv[2]);
        bpe_free(t);
        return t ? 0 : 1;
    }
    fprintf(stderr, "usage: bpetool encode|decode|roundtrip|pretok|dump|check ... "
                    "(see tests/bpetool.c)\n");
    return 2;
}
