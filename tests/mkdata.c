/* mkdata — makes user-style HDF5 token files for the shell tests (good and bad ones).
 * One dataset per run; --append adds it to an existing file. Tokens follow a fixed
 * pattern, so a test can predict every value:
 *     token at flat index i = (7*i + i/11) mod (M+1)
 * Writes in blocks, so large files need little memory. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#define BLOCK ((int64_t)1 << 20)

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mkdata OUT.h5 --dataset PATH --dtype uint8|uint16|int32|int64|float32\n"
            "              --rank 1|2 --len N [--rows R] [--vocab V] [--root-vocab V]\n"
            "              [--max-token M] [--bad-index I --bad-value X] [--append]\n"
            "              [--chunk C] [--gzip L]\n"
            "  --dataset PATH   dataset to write (groups on the way are created)\n"
            "  --dtype          stored type (also int8, int16, uint32, uint64, float64,\n"
            "                   and string: fixed 8-byte strings, for bad-input tests)\n"
            "  --rank           1: shape [N]; 2: shape [R, N] (R from --rows, default 1);\n"
            "                   also 0 (a scalar) and 3 ([R, N, 2]) for bad-input tests\n"
            "  --len N          tokens per row (0 makes an empty dataset)\n"
            "  --vocab V        vocab_size attribute on the dataset (0 = none)\n"
            "  --root-vocab V   vocab_size attribute on the root group (0 = none)\n"
            "  --max-token M    tokens are (7*i + i/11) mod (M+1) at flat index i; default\n"
            "                   vocab-1 (dataset, else root), else 255\n"
            "  --bad-index I --bad-value X   plant value X at flat index I\n"
            "  --append         add to an existing OUT.h5 instead of replacing it\n"
            "  --chunk C        chunked storage, C elements per chunk along the rows\n"
            "                   (default: contiguous)\n"
            "  --gzip L         deflate level L (0-9; implies --chunk 4096 if not given)\n"
            "  --note TEXT      a string attribute 'note' on the dataset, bytes as given\n"
            "  --external FILE  store the tokens in the raw file FILE (HDF5 external storage)\n"
            "  --virtual SRC    a virtual dataset mapping the same dataset of SRC.h5 whole\n"
            "                   (nothing written here)\n"
            "  --written N      write only the first N elements (with --chunk: the chunks\n"
            "                   past them are never allocated), for bad-input tests\n"
            "                   (for the tests of what inspect prints)\n");
}

static int parse_i64(const char *opt, const char *s, int64_t *v)
{
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || end == s || *end) {
        fprintf(stderr, "mkdata: %s needs an integer, got '%s'\n", opt, s);
        return -1;
    }
    *v = x;
    return 0;
}

typedef struct {
    const char *name;
    hid_t file_type; /* stored type */
    int is_float, is_string;
    double lo, hi; /* value range */
} dtype_info;

static int find_dtype(const char *s, dtype_info *t)
{
    static const struct {
        const char *name;
        int kind; /* 0 int, 1 float, 2 string */
        double lo, hi;
    } tab[] = {
        {"uint8", 0, 0, 255},
        {"int8", 0, -128, 127},
        {"uint16", 0, 0, 65535},
        {"int16", 0, -32768, 32767},
        {"uint32", 0, 0, 4294967295.0},
        {"int32", 0, -2147483648.0, 2147483647.0},
        {"uint64", 0, 0, 9.2e18},
        {"int64", 0, -9.2e18, 9.2e18},
        {"float32", 1, -1e30, 1e30},
        {"float64", 1, -1e300, 1e300},
        {"string", 2, -1e300, 1e300},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
        if (strcmp(s, tab[i].name) != 0) continue;
        t->name = tab[i].name;
        t->is_float = tab[i].kind == 1;
        t->is_string = tab[i].kind == 2;
        t->lo = tab[i].lo;
        t->hi = tab[i].hi;
        hid_t types[] = {H5T_STD_U8LE,  H5T_STD_I8LE,  H5T_STD_U16LE,   H5T_STD_I16LE,
                         H5T_STD_U32LE, H5T_STD_I32LE, H5T_STD_U64LE,   H5T_STD_I64LE,
                         H5T_IEEE_F32LE, H5T_IEEE_F64LE, H5T_C_S1};
        t->file_type = types[i];
        return 0;
    }
    return -1;
}

static int write_note(hid_t obj, const char *text)
{
    hid_t sp = H5Screate(H5S_SCALAR), ty = H5Tcopy(H5T_C_S1), a = -1;
    int rc = -1;
    if (sp >= 0 && ty >= 0 && H5Tset_size(ty, strlen(text) + 1) >= 0 &&
        (a = H5Acreate2(obj, "note", ty, sp, H5P_DEFAULT, H5P_DEFAULT)) >= 0 &&
        H5Awrite(a, ty, text) >= 0)
        rc = 0;
    if (a >= 0) H5Aclose(a);
    if (ty >= 0) H5Tclose(ty);
    if (sp >= 0) H5Sclose(sp);
    return rc;
}

static int write_vocab(hid_t obj, int64_t v)
{
    hid_t sp = H5Screate(H5S_SCALAR), a = -1;
    int rc = -1;
    if (H5Aexists(obj, "vocab_size") > 0) H5Adelete(obj, "vocab_size");
    if (sp >= 0 &&
        (a = H5Acreate2(obj, "vocab_size", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT)) >= 0 &&
        H5Awrite(a, H5T_NATIVE_INT64, &v) >= 0)
        rc = 0;
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
    return rc;
}

int main(int argc, char **argv)
{
    const char *out = NULL, *dataset = NULL, *dtype = NULL, *note = NULL, *external = NULL,
               *virt = NULL;
    int64_t rank = -1, len = -1, rows = 1, vocab = 0, root_vocab = 0, max_token = -1;
    int64_t bad_index = -1, bad_value = 0, chunk = 0, gzip = -1, written = -1;
    int have_bad_value = 0, append = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(a, "--append") == 0) {
            append = 1;
            continue;
        }
        if (a[0] != '-') {
            if (out) {
                fprintf(stderr, "mkdata: more than one output file ('%s', '%s')\n", out, a);
                usage(stderr);
                return 2;
            }
            out = a;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "mkdata: %s needs a value\n", a);
            usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        int rc = 0;
        if (strcmp(a, "--dataset") == 0) dataset = v;
        else if (strcmp(a, "--note") == 0) note = v;
        else if (strcmp(a, "--external") == 0) external = v;
        else if (strcmp(a, "--virtual") == 0) virt = v;
        else if (strcmp(a, "--written") == 0) rc = parse_i64(a, v, &written);
        else if (strcmp(a, "--dtype") == 0) dtype = v;
        else if (strcmp(a, "--rank") == 0) rc = parse_i64(a, v, &rank);
        else if (strcmp(a, "--len") == 0) rc = parse_i64(a, v, &len);
        else if (strcmp(a, "--rows") == 0) rc = parse_i64(a, v, &rows);
        else if (strcmp(a, "--vocab") == 0) rc = parse_i64(a, v, &vocab);
        else if (strcmp(a, "--root-vocab") == 0) rc = parse_i64(a, v, &root_vocab);
        else if (strcmp(a, "--max-token") == 0) rc = parse_i64(a, v, &max_token);
        else if (strcmp(a, "--bad-index") == 0) rc = parse_i64(a, v, &bad_index);
        else if (strcmp(a, "--bad-value") == 0) rc = parse_i64(a, v, &bad_value), have_bad_value = 1;
        else if (strcmp(a, "--chunk") == 0) rc = parse_i64(a, v, &chunk);
        else if (strcmp(a, "--gzip") == 0) rc = parse_i64(a, v, &gzip);
        else {
            fprintf(stderr, "mkdata: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
        if (rc) {
            usage(stderr);
            return 2;
        }
    }
    dtype_info t;
    const char *problem = NULL;
    if (!out) problem = "no output file given";
    else if (!dataset) problem = "--dataset is required";
    else if (!dtype) problem = "--dtype is required";
    else if (find_dtype(dtype, &t) != 0) problem = "unknown --dtype";
    else if (rank < 0 || rank > 3) problem = "--rank must be 1 or 2 (0 and 3 for bad-input tests)";
    else if (len < 0) problem = "--len N (>= 0) is required";
    else if (rows < 0) problem = "--rows must be >= 0";
    else if (vocab < 0 || root_vocab < 0) problem = "--vocab and --root-vocab must be >= 0";
    else if ((bad_index >= 0) != have_bad_value) problem = "--bad-index and --bad-value go together";
    else if (chunk < 0 || gzip > 9 || gzip < -1) problem = "--chunk must be >= 0, --gzip 0-9";
    if (problem) {
        fprintf(stderr, "mkdata: %s\n", problem);
        usage(stderr);
        return 2;
    }
    if (max_token < 0) max_token = vocab > 0 ? vocab - 1 : root_vocab > 0 ? root_vocab - 1 : 255;
    if ((double)max_token > t.hi) {
        fprintf(stderr, "mkdata: --max-token %lld does not fit in %s\n", (long long)max_token,
                t.name);
        return 2;
    }
    if (have_bad_value && ((double)bad_value < t.lo || (double)bad_value > t.hi)) {
        fprintf(stderr, "mkdata: --bad-value %lld does not fit in %s\n", (long long)bad_value,
                t.name);
        return 2;
    }

    hsize_t dims[3] = {0, 0, 0}, maxdims[3], cdims[3];
    int r = (int)rank;
    if (r == 1) dims[0] = (hsize_t)len;
    if (r == 2) dims[0] = (hsize_t)rows, dims[1] = (hsize_t)len;
    if (r == 3) dims[0] = (hsize_t)rows, dims[1] = (hsize_t)len, dims[2] = 2;
    int64_t total = r == 0 ? 1 : r == 1 ? len : r == 2 ? rows * len : rows * len * 2;
    if (bad_index >= total) {
        fprintf(stderr, "mkdata: --bad-index %lld is past the end (%lld elements)\n",
                (long long)bad_index, (long long)total);
        return 2;
    }
    if (gzip >= 0 && chunk == 0) chunk = 4096;

    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    int status = 1;
    hid_t file = -1, space = -1, dcpl = -1, lcpl = -1, dset = -1, ftype = -1, mem = -1;
    char *sbuf = NULL;
    int64_t *ibuf = NULL;
    double *dbuf = NULL;
    if (append) file = H5Fopen(out, H5F_ACC_RDWR, H5P_DEFAULT);
    else file = H5Fcreate(out, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0) {
        fprintf(stderr, "mkdata: cannot %s %s\n", append ? "open" : "create", out);
        goto done;
    }
    for (int i = 0; i < r; i++) maxdims[i] = chunk > 0 ? H5S_UNLIMITED : dims[i];
    space = r == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(r, dims, maxdims);
    dcpl = H5Pcreate(H5P_DATASET_CREATE);
    lcpl = H5Pcreate(H5P_LINK_CREATE);
    if (space < 0 || dcpl < 0 || lcpl < 0 || H5Pset_create_intermediate_group(lcpl, 1) < 0)
        goto hdf5_fail;
    if (chunk > 0 && r > 0) {
        for (int i = 0; i < r; i++) cdims[i] = 1;
        cdims[r == 1 ? 0 : 1] = (hsize_t)chunk;
        if (H5Pset_chunk(dcpl, r, cdims) < 0) goto hdf5_fail;
        if (gzip >= 0 && H5Pset_deflate(dcpl, (unsigned)gzip) < 0) goto hdf5_fail;
    }
    if (external && H5Pset_external(dcpl, external, 0, (hsize_t)total * H5Tget_size(t.file_type)) < 0)
        goto hdf5_fail;
    if (virt) {
        hid_t vs = H5Screate_simple(r, dims, NULL);
        if (vs < 0 || H5Pset_virtual(dcpl, space, virt, dataset, vs) < 0) goto hdf5_fail;
        H5Sclose(vs);
    }
    ftype = H5Tcopy(t.file_type);
    if (ftype < 0 || (t.is_string && H5Tset_size(ftype, 8) < 0)) goto hdf5_fail;
    dset = H5Dcreate2(file, dataset, ftype, space, lcpl, dcpl, H5P_DEFAULT);
    if (dset < 0) {
        fprintf(stderr, "mkdata: cannot create dataset %s in %s (does it exist already?)\n",
                dataset, out);
        goto done;
    }
    if (vocab > 0 && write_vocab(dset, vocab) != 0) goto hdf5_fail;
    if (note && write_note(dset, note) != 0) goto hdf5_fail;
    if (root_vocab > 0 && write_vocab(file, root_vocab) != 0) goto hdf5_fail;

    /* Values in blocks of flat indices: whole rows (rank >= 2) when a row fits a block. */
    int64_t inner = r >= 2 ? (int64_t)dims[1] * (r == 3 ? 2 : 1) : 1; /* elements per row */
    int64_t per = r <= 1 ? BLOCK : (inner > 0 && inner <= BLOCK ? BLOCK / inner * inner : 0);
    if (r >= 2 && per == 0 && total > 0) {
        fprintf(stderr, "mkdata: rows longer than %lld elements are not supported\n",
                (long long)BLOCK);
        goto done;
    }
    ibuf = malloc((size_t)BLOCK * sizeof *ibuf);
    dbuf = malloc((size_t)BLOCK * sizeof *dbuf);
    sbuf = malloc((size_t)BLOCK * 8);
    if (!ibuf || !dbuf || !sbuf) {
        fprintf(stderr, "mkdata: out of memory\n");
        goto done;
    }
    if (t.is_string && (mem = H5Tcopy(H5T_C_S1)) >= 0) H5Tset_size(mem, 8);
    const int64_t write_end = virt ? 0 : written >= 0 && written < total ? written : total;
    for (int64_t start = 0; start < write_end; start += per) {
        int64_t n = write_end - start < per ? write_end - start : per;
        for (int64_t k = 0; k < n; k++) {
            int64_t i = start + k;
            int64_t v = (7 * i + i / 11) % (max_token + 1);
            if (i == bad_index) v = bad_value;
            ibuf[k] = v;
            dbuf[k] = (double)v;
            snprintf(sbuf + 8 * k, 8, "%lld", (long long)v);
        }
        hid_t fsel = H5Dget_space(dset), msel = -1;
        hsize_t nn = (hsize_t)n;
        herr_t w = -1;
        if (fsel >= 0 && r >= 1) {
            hsize_t st[3] = {0, 0, 0}, ct[3];
            for (int i = 0; i < r; i++) ct[i] = dims[i];
            if (r == 1) st[0] = (hsize_t)start, ct[0] = (hsize_t)n;
            else st[0] = (hsize_t)(start / inner), ct[0] = (hsize_t)(n / inner);
            if (H5Sselect_hyperslab(fsel, H5S_SELECT_SET, st, NULL, ct, NULL) < 0) goto hdf5_fail;
        }
        msel = r == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &nn, NULL);
        if (fsel >= 0 && msel >= 0) {
            if (t.is_string) w = H5Dwrite(dset, mem, msel, fsel, H5P_DEFAULT, sbuf);
            else if (t.is_float) w = H5Dwrite(dset, H5T_NATIVE_DOUBLE, msel, fsel, H5P_DEFAULT, dbuf);
            else w = H5Dwrite(dset, H5T_NATIVE_INT64, msel, fsel, H5P_DEFAULT, ibuf);
        }
        if (msel >= 0) H5Sclose(msel);
        if (fsel >= 0) H5Sclose(fsel);
        if (w < 0) goto hdf5_fail;
    }
    status = 0;
    goto done;
hdf5_fail:
    fprintf(stderr, "mkdata: HDF5 failed writing %s in %s\n", dataset, out);
done:
    if (mem >= 0) H5Tclose(mem);
    if (ftype >= 0) H5Tclose(ftype);
    if (dset >= 0 && H5Dclose(dset) < 0) status = 1;
    if (lcpl >= 0) H5Pclose(lcpl);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (space >= 0) H5Sclose(space);
    if (file >= 0 && H5Fclose(file) < 0) status = 1;
    free(ibuf);
    free(dbuf);
    free(sbuf);
    return status;
}
