/* h5set — see h5set.h.
 *
 * Meta of a file, as int64 numbers (so that ranks can sum them in one allreduce where
 * each file's numbers come from the one rank that probed it):
 *   [0] rows  [1] row_len  [2] rank  [3] bytes per element  [4] signed  [5] big-endian
 *   [6] vocab_size attribute (0: none)  [7] file size in bytes  [8] sample hash
 * A file whose meta is still all zero has not been probed. */
#include "h5set.h"

#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

enum { M_ROWS, M_LEN, M_RANK, M_ESIZE, M_SIGNED, M_BIGEND, M_VOCAB, M_BYTES, M_HASH };

struct h5set {
    char *spec, *dataset;
    int mpi_io, max_open;
    int n, cap;
    char **names;
    int64_t (*meta)[H5SET_META];
    h5data **open;     /* [n]: the open handle of each file, or NULL */
    uint64_t *used;    /* [n]: tick of the last use */
    unsigned char *seen; /* [n]: 1 once this process has opened the file and found it as
                          * its meta says (probed it, or checked it at a first open) */
    uint64_t tick;
    int n_open, peak;
    int64_t opens;
    char type_name[48];
    int64_t total_rows, total_tokens;
};

static int add_name(h5set *s, const char *name)
{
    if (s->n == s->cap) {
        const int cap = s->cap ? 2 * s->cap : 16;
        char **names = realloc(s->names, (size_t)cap * sizeof *names);
        if (!names) {
            gt_error("out of memory listing the data files");
            return -1;
        }
        s->names = names;
        s->cap = cap;
    }
    if (!(s->names[s->n] = strdup(name))) {
        gt_error("out of memory listing the data files");
        return -1;
    }
    s->n++;
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ends_with_h5(const char *name)
{
    const size_t n = strlen(name);
    return n > 3 && strcmp(name + n - 3, ".h5") == 0;
}

/* A folder's *.h5 files, sorted by name. */
static int add_folder(h5set *s, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        gt_error("data: cannot list the folder %s: %s", dir, strerror(errno));
        return -1;
    }
    const int first = s->n;
    const size_t dl = strlen(dir);
    const char *sep = dl && dir[dl - 1] == '/' ? "" : "/";
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || !ends_with_h5(e->d_name)) continue;
        char *full = malloc(dl + strlen(e->d_name) + 2);
        if (!full) {
            gt_error("out of memory listing %s", dir);
            rc = -1;
            break;
        }
        sprintf(full, "%s%s%s", dir, sep, e->d_name);
        rc = add_name(s, full);
        free(full);
    }
    closedir(d);
    if (rc != 0) return -1;
    if (s->n == first) {
        gt_error("data: the folder %s holds no .h5 files", dir);
        return -1;
    }
    qsort(s->names + first, (size_t)(s->n - first), sizeof *s->names, cmp_names);
    return 0;
}

static int add_glob(h5set *s, const char *pattern)
{
    glob_t g;
    const int rc = glob(pattern, GLOB_ERR, NULL, &g);
    if (rc == GLOB_NOMATCH) {
        gt_error("data: %s matches no file", pattern);
        return -1;
    }
    if (rc != 0) {
        gt_error("data: cannot expand %s (%s)", pattern,
                 rc == GLOB_NOSPACE ? "out of memory" : "a folder could not be read");
        return -1;
    }
    const int first = s->n;
    int bad = 0;
    for (size_t i = 0; i < g.gl_pathc && !bad; i++) bad = add_name(s, g.gl_pathv[i]) != 0;
    globfree(&g);
    if (bad) return -1;
    qsort(s->names + first, (size_t)(s->n - first), sizeof *s->names, cmp_names);
    return 0;
}

static int add_item(h5set *s, const char *item)
{
    if (!item[0]) {
        gt_error("data: %s has an empty name in its list", s->spec);
        return -1;
    }
    if (strpbrk(item, "*?[")) return add_glob(s, item);
    struct stat st;
    if (stat(item, &st) == 0 && S_ISDIR(st.st_mode)) return add_folder(s, item);
    return add_name(s, item); /* opened (and any error named) when probed */
}

/* name spelt the one way: no "./" segments, no repeated slashes ("data//a.h5",
 * "./data/./a.h5" and "data/a.h5" are one file). Writes at most strlen(name) + 1 bytes. */
static void plain_spelling(const char *name, char *out)
{
    char *o = out;
    for (const char *p = name; *p;) {
        const int at_segment = p == name || p[-1] == '/';
        if (at_segment && p[0] == '.' && p[1] == '/') {
            p += 2;
        } else if (*p == '/' && o > out && o[-1] == '/') {
            p++;
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
}

typedef struct listed_name {
    char *plain;
    int index;
} listed_name;

static int cmp_listed(const void *a, const void *b)
{
    const listed_name *x = a, *y = b;
    const int c = strcmp(x->plain, y->plain);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* Each file once: a file listed twice (by name, or by a glob or folder and by name)
 * would be trained on twice as often as the others, silently. Names are compared as
 * spelt (after plain_spelling), without touching the file system, so that start-up
 * stays free of a stat per file on every rank; a link under another name is not seen.
 * 0, or -1 (reported). */
static int check_listed_once(h5set *s)
{
    if (s->n < 2) return 0;
    listed_name *l = calloc((size_t)s->n, sizeof *l);
    int rc = l ? 0 : -1;
    for (int i = 0; rc == 0 && i < s->n; i++) {
        if (!(l[i].plain = malloc(strlen(s->names[i]) + 1))) rc = -1;
        else {
            plain_spelling(s->names[i], l[i].plain);
            l[i].index = i;
        }
    }
    if (rc != 0) {
        gt_error("out of memory listing the data files");
    } else {
        qsort(l, (size_t)s->n, sizeof *l, cmp_listed);
        for (int i = 1; i < s->n; i++) {
            if (strcmp(l[i - 1].plain, l[i].plain) != 0) continue;
            char a[72], b[72], c[72];
            gt_error("data: %s is listed twice (as %s and %s; files %d and %d of %d); "
                     "list each file once", gt_printable(l[i].plain, a),
                     gt_printable(s->names[l[i - 1].index], b),
                     gt_printable(s->names[l[i].index], c),
                     l[i - 1].index + 1, l[i].index + 1, s->n);
            rc = -1;
            break;
        }
    }
    for (int i = 0; l && i < s->n; i++) free(l[i].plain);
    free(l);
    return rc;
}

static int resolve(h5set *s)
{
    char *list = strdup(s->spec);
    if (!list) {
        gt_error("out of memory listing the data files");
        return -1;
    }
    int rc = 0;
    for (char *p = list; rc == 0;) {
        char *comma = strchr(p, ',');
        if (comma) *comma = '\0';
        while (*p == ' ') p++;
        for (size_t n = strlen(p); n > 0 && p[n - 1] == ' ';) p[--n] = '\0';
        rc = add_item(s, p);
        if (!comma) break;
        p = comma + 1;
    }
    free(list);
    return rc == 0 ? check_listed_once(s) : rc;
}

h5set *h5set_create(const char *spec, const char *dataset, int mpi_io, int max_open)
{
    h5set *s = gt_calloc(sizeof *s, "data file set");
    if (!s) return NULL;
    s->mpi_io = mpi_io;
    s->max_open = max_open < 1 ? 1 : max_open;
    if (!(s->spec = strdup(spec)) || !(s->dataset = strdup(dataset))) {
        gt_error("out of memory opening %s", spec);
        h5set_close(s);
        return NULL;
    }
    if (resolve(s) != 0) {
        h5set_close(s);
        return NULL;
    }
    s->meta = calloc((size_t)s->n, sizeof *s->meta);
    s->open = calloc((size_t)s->n, sizeof *s->open);
    s->used = calloc((size_t)s->n, sizeof *s->used);
    s->seen = calloc((size_t)s->n, sizeof *s->seen);
    if (!s->meta || !s->open || !s->used || !s->seen) {
        gt_error("out of memory for %d data files", s->n);
        h5set_close(s);
        return NULL;
    }
    return s;
}

void h5set_close(h5set *s)
{
    if (!s) return;
    for (int i = 0; i < s->n; i++) {
        if (s->open) h5data_close(s->open[i]);
        free(s->names[i]);
    }
    free(s->names);
    free(s->meta);
    free(s->open);
    free(s->used);
    free(s->seen);
    free(s->spec);
    free(s->dataset);
    free(s);
}

int h5set_files(const h5set *s) { return s->n; }
const char *h5set_file(const h5set *s, int i) { return s->names[i]; }
const char *h5set_name(const h5set *s) { return s->dataset; }
const char *h5set_spec(const h5set *s) { return s->spec; }
int h5set_rank(const h5set *s) { return (int)s->meta[0][M_RANK]; }
const char *h5set_type_name(const h5set *s) { return s->type_name; }
int64_t h5set_vocab_attr(const h5set *s) { return s->meta[0][M_VOCAB]; }
int64_t h5set_rows(const h5set *s, int i) { return s->meta[i][M_ROWS]; }
int64_t h5set_row_len(const h5set *s, int i) { return s->meta[i][M_LEN]; }
int64_t h5set_total_rows(const h5set *s) { return s->total_rows; }
int64_t h5set_total_tokens(const h5set *s) { return s->total_tokens; }
int64_t h5set_opens(const h5set *s) { return s->opens; }
int h5set_peak_open(const h5set *s) { return s->peak; }

/* The meta of an open file. */
static void meta_of(h5data *d, int64_t m[H5SET_META])
{
    const char *tn = h5data_type_name(d);
    int esize = 0;
    sscanf(tn + (tn[0] == 'u'), "int%d", &esize);
    m[M_ROWS] = h5data_rows(d);
    m[M_LEN] = h5data_row_len(d);
    m[M_RANK] = h5data_rank(d);
    m[M_ESIZE] = esize / 8;
    m[M_SIGNED] = tn[0] != 'u';
    m[M_BIGEND] = strstr(tn, "big-endian") != NULL;
    m[M_VOCAB] = h5data_vocab_attr(d);
    m[M_BYTES] = h5data_file_bytes(d);
}

/* Whether file i, just reopened, is still what its meta says. */
static int same_as_probed(const h5set *s, int i, h5data *d)
{
    int64_t m[H5SET_META];
    meta_of(d, m);
    m[M_HASH] = s->meta[i][M_HASH];
    if (memcmp(m, s->meta[i], sizeof m) == 0) return 1;
    /* Meta another rank probed, differing at this rank's first open: most likely not a
     * change in time but another file at the same path (a node's own copy of the data,
     * staged to its local disk); saying "changed" sent users looking for a writer. */
    if (!s->seen[i])
        gt_error("%s:%s here is not the file another rank read at that path (here %lld "
                 "bytes, [%lld x %lld]; there %lld bytes, [%lld x %lld]): every rank must "
                 "read the same data", s->names[i], s->dataset, (long long)m[M_BYTES],
                 (long long)m[M_ROWS], (long long)m[M_LEN], (long long)s->meta[i][M_BYTES],
                 (long long)s->meta[i][M_ROWS], (long long)s->meta[i][M_LEN]);
    else
        gt_error("%s:%s changed since the run started (now %lld bytes, [%lld x %lld]; then "
                 "%lld bytes, [%lld x %lld]); restart on the files as they are", s->names[i],
                 s->dataset, (long long)m[M_BYTES], (long long)m[M_ROWS], (long long)m[M_LEN],
                 (long long)s->meta[i][M_BYTES], (long long)s->meta[i][M_ROWS],
                 (long long)s->meta[i][M_LEN]);
    return 0;
}

/* The open handle of file i: opened when needed, after closing the least recently
 * used file when max_open are open. */
static h5data *handle(h5set *s, int i)
{
    s->used[i] = ++s->tick;
    if (s->open[i]) return s->open[i];
    if (s->n_open >= s->max_open) {
        int lru = -1;
        for (int k = 0; k < s->n; k++)
            if (s->open[k] && (lru < 0 || s->used[k] < s->used[lru])) lru = k;
        h5data_close(s->open[lru]);
        s->open[lru] = NULL;
        s->n_open--;
    }
    h5data *d = s->mpi_io ? h5data_open_mpi(s->names[i], s->dataset)
                          : h5data_open(s->names[i], s->dataset);
    if (!d) return NULL;
    if (s->meta[i][M_RANK] != 0) {
        if (!same_as_probed(s, i, d)) {
            h5data_close(d);
            return NULL;
        }
        s->seen[i] = 1;
    }
    s->open[i] = d;
    s->opens++;
    if (++s->n_open > s->peak) s->peak = s->n_open;
    return d;
}

int h5set_probe(h5set *s, int i)
{
    /* never block on a named pipe or device given as a data file */
    const int fd = gt_open_regular(s->names[i], "data file", 0, NULL);
    if (fd < 0) return -1;
    close(fd);
    h5data *d = handle(s, i);
    if (!d) return -1;
    int64_t m[H5SET_META];
    meta_of(d, m);
    uint64_t h;
    if (h5data_sample_hash(d, &h) != 0) return -1;
    m[M_HASH] = (int64_t)h;
    memcpy(s->meta[i], m, sizeof m);
    s->seen[i] = 1;
    return 0;
}

void h5set_meta(const h5set *s, int i, int64_t m[H5SET_META])
{
    memcpy(m, s->meta[i], sizeof s->meta[i]);
}

void h5set_set_meta(h5set *s, int i, const int64_t m[H5SET_META])
{
    memcpy(s->meta[i], m, sizeof s->meta[i]);
}

static void type_name(const int64_t *m, char *buf, size_t cap)
{
    snprintf(buf, cap, "%sint%lld%s", m[M_SIGNED] ? "" : "u", (long long)(8 * m[M_ESIZE]),
             m[M_BIGEND] ? " big-endian" : "");
}

int h5set_settle(h5set *s)
{
    const int64_t *m0 = s->meta[0];
    type_name(m0, s->type_name, sizeof s->type_name);
    s->total_rows = s->total_tokens = 0;
    for (int i = 0; i < s->n; i++) {
        const int64_t *m = s->meta[i];
        char t0[48], t[48];
        type_name(m0, t0, sizeof t0);
        type_name(m, t, sizeof t);
        if (m[M_RANK] == 0) {
            gt_error("%s:%s was never opened (internal error)", s->names[i], s->dataset);
            return -1;
        }
        if (strcmp(t, t0) != 0 || m[M_RANK] != m0[M_RANK] || m[M_VOCAB] != m0[M_VOCAB]) {
            gt_error("%s:%s is %s, %lld-D, vocab_size %lld, but %s:%s is %s, %lld-D, "
                     "vocab_size %lld: the files of one dataset must agree", s->names[i],
                     s->dataset, t, (long long)m[M_RANK], (long long)m[M_VOCAB],
                     s->names[0], s->dataset, t0, (long long)m0[M_RANK],
                     (long long)m0[M_VOCAB]);
            return -1;
        }
        if (m[M_ROWS] > INT64_MAX / m[M_LEN] ||
            s->total_tokens > INT64_MAX - m[M_ROWS] * m[M_LEN]) {
            gt_error("%s: the files hold too many tokens to count", s->spec);
            return -1;
        }
        s->total_rows += m[M_ROWS];
        s->total_tokens += m[M_ROWS] * m[M_LEN];
    }
    return 0;
}

int h5set_check_range_part(h5set *s, int64_t vocab_size, int part, int parts)
{
    if (parts < 1 || part < 0 || part >= parts) {
        gt_error("%s: range check part %d of %d is invalid", s->spec, part, parts);
        return -1;
    }
    int64_t blocks = 0;
    for (int i = 0; i < s->n; i++) blocks += h5data_check_blocks(s->meta[i][M_ROWS],
                                                                 s->meta[i][M_LEN]);
    const int64_t base = blocks / parts, extra = blocks % parts;
    const int64_t lo = base * part + (part < extra ? part : extra);
    const int64_t hi = lo + base + (part < extra ? 1 : 0);
    int64_t at = 0; /* the first block of file i */
    for (int i = 0; i < s->n && at < hi; i++) {
        const int64_t nb = h5data_check_blocks(s->meta[i][M_ROWS], s->meta[i][M_LEN]);
        const int64_t a = lo > at ? lo - at : 0, b = hi - at < nb ? hi - at : nb;
        if (a < b) {
            h5data *d = handle(s, i);
            if (!d || h5data_check_block_range(d, vocab_size, a, b) != 0) return -1;
        }
        at += nb;
    }
    return 0;
}

int h5set_read(h5set *s, int file, int64_t row, int64_t col, int64_t count, int32_t *dst,
               int64_t vocab_size)
{
    if (file < 0 || file >= s->n) {
        gt_error("%s: read of file %d of %d", s->spec, file, s->n);
        return -1;
    }
    h5data *d = handle(s, file);
    return d ? h5data_read(d, row, col, count, dst, vocab_size) : -1;
}

int h5set_uses_mpi_io(h5set *s)
{
    for (int i = 0; i < s->n; i++)
        if (s->open[i]) return h5data_uses_mpi_io(s->open[i]);
    return s->mpi_io;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

void h5set_fingerprint(const h5set *s, char *buf, size_t cap)
{
    if (s->n == 1) {
        const int64_t *m = s->meta[0];
        snprintf(buf, cap, "bytes=%lld shape=[%lld x %lld] type=%s sample=fnv1a64:%016llx",
                 (long long)m[M_BYTES], (long long)m[M_ROWS], (long long)m[M_LEN],
                 s->type_name, (unsigned long long)m[M_HASH]);
        return;
    }
    uint64_t h = GT_FNV_OFFSET;
    int64_t bytes = 0;
    for (int i = 0; i < s->n; i++) {
        const char *b = base_name(s->names[i]);
        h = gt_fnv1a(h, b, strlen(b) + 1);
        const int64_t m[4] = {s->meta[i][M_BYTES], s->meta[i][M_ROWS], s->meta[i][M_LEN],
                              s->meta[i][M_HASH]};
        h = gt_fnv1a(h, m, sizeof m);
        bytes += s->meta[i][M_BYTES];
    }
    snprintf(buf, cap, "files=%d bytes=%lld tokens=%lld type=%s sample=fnv1a64:%016llx",
             s->n, (long long)bytes, (long long)s->total_tokens, s->type_name,
             (unsigned long long)h);
}

/* The fields are "key=value" separated by spaces, and a value may hold spaces
 * (shape=[R x L]): a field starts at a word that has '=' in it. */
static int is_field_start(const char *text, const char *p)
{
    return (p == text || p[-1] == ' ') && p[strcspn(p, "= ")] == '=';
}

/* The length of the field that starts at f in text: up to the space before the next
 * field, or to the end */
static int field_len(const char *text, const char *f)
{
    const char *e = f;
    if (!*e) return 0;
    do e += strcspn(e + 1, " ") + 1; /* the next space, or the end */
    while (*e && !is_field_start(text, e + 1));
    return (int)(e - f);
}

void h5set_fingerprint_diff(const char *then, const char *now, char *buf, size_t cap)
{
    const char *a = then, *b = now;
    while (*a && *a == *b) a++, b++;
    while (a > then && !is_field_start(then, a)) a--, b--;
    /* several files: one hash covers their names and order too, so renamed or
     * reordered shards differ there though no token does */
    const int names = strncmp(a, "sample=", 7) == 0 && strncmp(then, "files=", 6) == 0 &&
                      strncmp(now, "files=", 6) == 0;
    snprintf(buf, cap, "%.*s then, %.*s now%s", field_len(then, a), a, field_len(now, b), b,
             names ? "; the hash of several files covers their names without the folder "
                     "and their order too"
                   : "");
}

uint64_t h5set_names_hash(const h5set *s)
{
    uint64_t h = GT_FNV_OFFSET;
    for (int i = 0; i < s->n; i++) h = gt_fnv1a(h, s->names[i], strlen(s->names[i]) + 1);
    return h;
}
