/* util — see util.h. */
#include "util.h"

#include <cblas.h>

#include "cpu_features.h" /* defines: cpu_available_count */
#ifdef _OPENMP
#include <omp.h>
#endif

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if defined(__SSE2__)
#include <emmintrin.h> /* gt_zero_streamed */
#endif

static int report_rank = -1;
static int reports_muted = 0;

void gt_set_report_rank(int rank) { report_rank = rank; }
void gt_mute_reports(int on) { reports_muted = on; }

static void vreport(const char *kind, const char *fmt, va_list ap)
{
    if (reports_muted) return;
    /* One write per line so lines from several ranks/threads do not interleave. */
    char raw[2048], line[2048];
    int n = report_rank >= 0
                ? snprintf(line, sizeof line, "gentrain: %s: rank %d: ", kind, report_rank)
                : snprintf(line, sizeof line, "gentrain: %s: ", kind);
    if (n < 0 || (size_t)n >= sizeof line) n = 0;
    if (vsnprintf(raw, sizeof raw, fmt, ap) < 0) raw[0] = '\0';
    /* Whatever the message echoes (a config key, a path, a file's attribute) is shown
     * escaped: the report stays one line and cannot steer the terminal. */
    const unsigned char *p = (const unsigned char *)raw;
    const size_t rn = strlen(raw);
    size_t len = (size_t)n;
    for (size_t i = 0; i < rn;) {
        char unit[8];
        size_t used = 0, w = gt_escape_unit(p + i, rn - i, unit, &used);
        if (len + w > sizeof line - 1) break;
        memcpy(line + len, unit, w);
        len += w;
        i += used;
    }
    line[len] = '\n';
    fwrite(line, 1, len + 1, stderr);
    fflush(stderr);
}

void gt_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport("error", fmt, ap);
    va_end(ap);
}

void gt_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport("warning", fmt, ap);
    va_end(ap);
}

void gt_note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport("note", fmt, ap);
    va_end(ap);
}

/* From this size on an allocation starts on a 2 MB boundary and asks Linux for huge
 * pages (MADV_HUGEPAGE: transparent huge pages where the system leaves them to the
 * program, as Debian's default "madvise" does). The step reads its big arrays in strides
 * of a row (a tile's 16 rows of C or A, one 4 KB page apart each), so with 4 KB pages
 * nearly every row of a tile is a page walk of its own. */
#define HUGE_FROM ((size_t)8 << 20)
#define HUGE_PAGE ((size_t)2 << 20)

void *gt_malloc(size_t nbytes, const char *what)
{
    void *p = NULL;
    if (nbytes == 0) nbytes = 1;
    const int huge = nbytes >= HUGE_FROM;
    int rc = posix_memalign(&p, huge ? HUGE_PAGE : 64, nbytes);
    if (rc != 0 || !p) {
        gt_error("out of memory allocating %s (%zu bytes)", what, nbytes);
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    /* advice only: where the system says no (THP "never", no huge page free), the
     * memory is the same, in 4 KB pages */
    if (huge) (void)madvise(p, nbytes & ~(HUGE_PAGE - 1), MADV_HUGEPAGE);
#endif
    return p;
}

void gt_zero_streamed(float *x, size_t n)
{
#if defined(__SSE2__)
    size_t i = 0;
    for (; i < n && ((uintptr_t)(x + i) & 15) != 0; i++) x[i] = 0.0f;
    const __m128 zero = _mm_setzero_ps();
    for (; i + 4 <= n; i += 4) _mm_stream_ps(x + i, zero);
    for (; i < n; i++) x[i] = 0.0f;
    _mm_sfence(); /* streamed stores are weakly ordered: they land before what follows */
#else
    memset(x, 0, n * sizeof *x);
#endif
}

void *gt_calloc(size_t nbytes, const char *what)
{
    void *p = gt_malloc(nbytes, what);
    if (p) memset(p, 0, nbytes);
    return p;
}

int64_t gt_physical_memory(void)
{
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0 || pages > INT64_MAX / page) return 0;
    return (int64_t)pages * page;
}

double gt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double gt_strtod_decimal(const char *s, char **end)
{
    const char *p = s;
    while (isspace((unsigned char)*p)) p++;
    if (*p == '+' || *p == '-') p++;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        *end = (char *)s;
        return 0.0;
    }
    return strtod(s, end);
}

int gt_strlcpy(char *dst, const char *src, size_t cap)
{
    size_t n = strlen(src);
    if (n >= cap) return -1;
    memcpy(dst, src, n + 1);
    return 0;
}

size_t gt_utf8_printable(const unsigned char *s, size_t n)
{
    size_t len = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;
    if (len == 0 || s[0] > 0xf4 || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (len == 2 && s[0] == 0xc2 && s[1] < 0xa0) return 0;     /* C1 controls */
    if (len == 3 && s[0] == 0xe0 && s[1] < 0xa0) return 0;     /* overlong */
    if (len == 3 && s[0] == 0xed && s[1] >= 0xa0) return 0;    /* surrogates */
    if (len == 4 && s[0] == 0xf0 && s[1] < 0x90) return 0;     /* overlong */
    if (len == 4 && s[0] == 0xf4 && s[1] >= 0x90) return 0;    /* past U+10FFFF */
    return len;
}

size_t gt_escape_unit(const unsigned char *s, size_t n, char out[8], size_t *used)
{
    size_t u = s[0] >= 0x80 ? gt_utf8_printable(s, n) : 0;
    if (u || (s[0] >= 0x20 && s[0] < 0x7f)) {
        if (!u) u = 1;
        memcpy(out, s, u);
        *used = u;
        return u;
    }
    if (s[0] == '\t')
        memcpy(out, "\\t", 2);
    else
        snprintf(out, 8, "\\x%02x", s[0]);
    *used = 1;
    return s[0] == '\t' ? 2 : 4;
}

void gt_group_digits(int64_t v, char *buf, size_t cap)
{
    char raw[32];
    snprintf(raw, sizeof raw, "%lld", (long long)v);
    const size_t n = strlen(raw), lead = raw[0] == '-';
    size_t j = 0;
    for (size_t i = 0; i < n && j + 2 < cap; i++) {
        if (i > lead && (n - i) % 3 == 0) buf[j++] = ',';
        buf[j++] = raw[i];
    }
    if (cap) buf[j < cap ? j : cap - 1] = '\0';
}

void gt_human_bytes(double bytes, char *buf, size_t cap)
{
    static const char *unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024 && u < 4) {
        bytes /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%.0f bytes", bytes);
    else
        snprintf(buf, cap, "%.1f %s", bytes, unit[u]);
}

int gt_word_index(const char *choices, const char *word)
{
    const size_t n = strlen(word);
    int i = 0;
    for (const char *p = choices; *p; i++) {
        const char *bar = strchr(p, '|');
        const size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, word, n) == 0) return i;
        if (!bar) break;
        p = bar + 1;
    }
    return -1;
}

const char *gt_printable(const char *s, char buf[72])
{
    return gt_printable_cap(s, buf, 72);
}

const char *gt_printable_cap(const char *s, char *buf, size_t cap)
{
    /* room for cap - 4 bytes of text and "..." when it is cut */
    const unsigned char *p = (const unsigned char *)s;
    const size_t n = strlen(s);
    size_t in = 0, out = 0;
    while (in < n) {
        char unit[8];
        size_t used = 0, w = gt_escape_unit(p + in, n - in, unit, &used);
        if (out + w > cap - 4) {
            memcpy(buf + out, "...", 3);
            out += 3;
            break;
        }
        memcpy(buf + out, unit, w);
        out += w;
        in += used;
    }
    buf[out] = '\0';
    return buf;
}

static const char *kind_of(mode_t m)
{
    if (S_ISFIFO(m)) return "a named pipe (FIFO)";
    if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISDIR(m)) return "a folder";
    return S_ISREG(m) ? NULL : "not a regular file";
}

const char *gt_special_kind(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) return NULL;
    return kind_of(st.st_mode);
}

int gt_open_regular(const char *path, const char *what, int folder_ok, int *is_dir)
{
    if (is_dir) *is_dir = 0;
    /* O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a
     * writer; fstat on the open descriptor then says what it really is */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        gt_error("cannot open %s %s: %s", what, path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        gt_error("cannot open %s %s: %s", what, path, strerror(errno));
        close(fd);
        return -1;
    }
    if (S_ISDIR(st.st_mode) && folder_ok) {
        if (is_dir) *is_dir = 1;
        return fd;
    }
    const char *kind = kind_of(st.st_mode);
    if (kind) {
        gt_error("%s %s is %s, not a regular file%s", what, path, kind,
                 S_ISDIR(st.st_mode) ? "" : " (only regular files are read)");
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        gt_error("cannot open %s %s: %s", what, path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

int gt_mkdirs(const char *path)
{
    char buf[4096];
    if (gt_strlcpy(buf, path, sizeof buf) != 0) {
        gt_error("path too long: %.64s...", path);
        return -1;
    }
    for (char *p = buf + 1;; p++) {
        char c = *p;
        if (c == '/' || c == '\0') {
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
                gt_error("cannot create directory %s: %s", buf, strerror(errno));
                return -1;
            }
            *p = c;
            if (c == '\0') break;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        gt_error("%s exists and is not a directory", path);
        return -1;
    }
    return 0;
}

int gt_resolve_threads(int requested)
{
    int n = requested;
    const char *env = getenv("OMP_NUM_THREADS");
    if (n <= 0 && env && *env) {
        char *end;
        errno = 0;
        const long v = strtol(env, &end, 10);
        while (*end == ' ' || *end == '\t') end++;
        if (end == env || errno != 0 || v < 1 || v > GT_MAX_THREADS ||
            (*end != '\0' && *end != ',')) {
            char shown[72];
            gt_error("OMP_NUM_THREADS=%s: want a thread count from 1 to %d (or unset it, or "
                     "set threads)", gt_printable(env, shown), GT_MAX_THREADS);
            return -1;
        }
        n = (int)v;
    }
    if (n <= 0) n = cpu_available_count();
    if (n > GT_MAX_THREADS) n = GT_MAX_THREADS;
    const int applied = gt_set_threads(n);
    if (applied < n)
        gt_warn("%d threads asked for, but OMP_THREAD_LIMIT allows %d: using %d", n, applied,
                applied);
    return applied;
}

/* 0 until gt_set_threads: then the products are cut for OpenMP's current maximum */
static int product_parts;

int gt_set_team_threads(int n)
{
    if (n < 1) n = 1;
    /* OpenBLAS's own threads would cut C where their count says, and its AVX2 cores
     * give an element other bits in another cut: gentrain cuts the products itself and
     * runs each piece on one thread (sgemm_parts.h). First: OpenBLAS's OpenMP build
     * passes its count on to omp_set_num_threads (and follows OpenMP's count again at
     * its next call made outside a parallel region, which sgemm_parts never makes with
     * more than one thread). */
    openblas_set_num_threads(1);
#ifdef _OPENMP
    /* Every team must have exactly n threads: the products' pieces are dealt out
     * statically, for the team asked for. */
    omp_set_dynamic(0);
    const int limit = omp_get_thread_limit();
    if (limit > 0 && n > limit) n = limit;
    omp_set_num_threads(n);
#endif
    return n;
}

int gt_set_threads(int n)
{
    n = gt_set_team_threads(n);
    product_parts = n;
    return n;
}

int gt_product_parts(void)
{
#ifdef _OPENMP
    if (product_parts < 1) return omp_get_max_threads();
#endif
    return product_parts > 0 ? product_parts : 1;
}

uint64_t gt_fnv1a(uint64_t h, const void *bytes, size_t n)
{
    const unsigned char *p = bytes;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * GT_FNV_PRIME;
    return h;
}

uint64_t gt_hash64(const void *bytes, size_t n) { return gt_fnv1a(GT_FNV_OFFSET, bytes, n); }

uint64_t gt_fnv1a_floats(uint64_t h, const float *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &f[i], 4);
        for (int b = 0; b < 4; b++) h = (h ^ ((u >> (8 * b)) & 0xffu)) * GT_FNV_PRIME;
    }
    return h;
}

int gt_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) {
        if (c > SIZE_MAX / 2) return -1;
        c *= 2;
    }
    if (elem && c > SIZE_MAX / elem) return -1;
    void *q = realloc(*p, c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

int gt_folder_of(const char *path, char *buf, size_t cap)
{
    const char *slash = strrchr(path, '/');
    const size_t n = !slash ? 1 : slash == path ? 1 : (size_t)(slash - path);
    if (n >= cap) return -1;
    memcpy(buf, slash ? path : ".", n); /* "/x": n = 1 keeps the root's '/' */
    buf[n] = '\0';
    return 0;
}
