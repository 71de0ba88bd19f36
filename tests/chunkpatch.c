/* chunkpatch — damages the record of one chunk of a chunked dataset, for the shell tests
 * of what gentrain does with a chunk index that lies.
 *
 *   chunkpatch FILE.h5 DATASET INDEX size|address VALUE
 *
 * Asks HDF5 for chunk INDEX's record (H5Dget_chunk_info: its offset in the dataset, its
 * address and stored size), then finds that record in the file's bytes and writes VALUE
 * into its size or address field. Only the version 1 B-tree chunk index is handled (the
 * index HDF5 writes by default, with no checksum to notice the change). Its leaf
 * nodes hold, per chunk, a key followed by the chunk's address:
 *
 *     uint32 size | uint32 filter mask | uint64 offset[rank + 1] | uint64 address
 *
 * (little-endian; the last offset is the element's byte offset, always 0), so the
 * record is found by that byte pattern, which must occur exactly once. Prints the old
 * and new value. Exit status: 0 done, 1 failure (said on stderr), 2 usage. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#define MAX_KEY (8 + 8 * (H5S_MAX_RANK + 1) + 8)

typedef struct {
    hsize_t offset[H5S_MAX_RANK];
    int rank;
    unsigned mask;
    haddr_t addr;
    hsize_t size;
} chunk_rec;

static void put_le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* The record of chunk `index` as HDF5 reports it. */
static int get_record(const char *path, const char *name, hsize_t index, chunk_rec *r)
{
    int rc = -1;
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), d = -1, s = -1;
    if (f >= 0 && (d = H5Dopen2(f, name, H5P_DEFAULT)) >= 0 &&
        (s = H5Dget_space(d)) >= 0 && (r->rank = H5Sget_simple_extent_ndims(s)) > 0 &&
        H5Dget_chunk_info(d, s, index, r->offset, &r->mask, &r->addr, &r->size) >= 0)
        rc = 0;
    else
        fprintf(stderr, "chunkpatch: no chunk %llu in %s:%s\n", (unsigned long long)index,
                path, name);
    if (s >= 0) H5Sclose(s);
    if (d >= 0) H5Dclose(d);
    if (f >= 0) H5Fclose(f);
    return rc;
}

/* The whole file in memory (test files are small). */
static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n)) && fread(buf, 1, (size_t)n, f) == (size_t)n) {
        *len = (size_t)n;
    } else {
        fprintf(stderr, "chunkpatch: cannot read %s (%s)\n", path, strerror(errno));
        free(buf);
        buf = NULL;
    }
    if (f) fclose(f);
    return buf;
}

int main(int argc, char **argv)
{
    const int is_size = argc == 6 && strcmp(argv[4], "size") == 0;
    if (argc != 6 || (!is_size && strcmp(argv[4], "address") != 0)) {
        fprintf(stderr, "usage: chunkpatch FILE.h5 DATASET INDEX size|address VALUE\n");
        return 2;
    }
    char *end1, *end2;
    unsigned long long index = strtoull(argv[3], &end1, 10);
    unsigned long long value = strtoull(argv[5], &end2, 10);
    if (*end1 || *end2 || (is_size && value > UINT32_MAX)) {
        fprintf(stderr, "chunkpatch: INDEX and VALUE (a size < 2^32) must be integers\n");
        return 2;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    chunk_rec r;
    if (get_record(argv[1], argv[2], (hsize_t)index, &r) != 0) return 1;
    unsigned char key[MAX_KEY];
    size_t klen = 8;
    put_le(key, r.size, 4);
    put_le(key + 4, r.mask, 4);
    for (int i = 0; i <= r.rank; i++, klen += 8)
        put_le(key + klen, i < r.rank ? r.offset[i] : 0, 8);
    put_le(key + klen, r.addr, 8);
    klen += 8;
    size_t len = 0, at = 0, hits = 0;
    unsigned char *buf = slurp(argv[1], &len);
    if (!buf) return 1;
    for (size_t i = 0; i + klen <= len; i++) {
        if (buf[i] == key[0] && memcmp(buf + i, key, klen) == 0) {
            hits++;
            at = i;
        }
    }
    free(buf);
    if (hits != 1) {
        fprintf(stderr, "chunkpatch: the record of chunk %llu occurs %zu times in %s (a v1 "
                "B-tree chunk index holds it once)\n", index, hits, argv[1]);
        return 1;
    }
    /* the size is the key's first field, the address follows the key */
    unsigned char field[8];
    const int width = is_size ? 4 : 8;
    const size_t where = is_size ? at : at + klen - 8;
    put_le(field, value, width);
    FILE *f = fopen(argv[1], "r+b");
    int ok = f && fseek(f, (long)where, SEEK_SET) == 0 &&
             fwrite(field, 1, (size_t)width, f) == (size_t)width;
    if ((f && fclose(f) != 0) || !ok) {
        fprintf(stderr, "chunkpatch: cannot write %s (%s)\n", argv[1], strerror(errno));
        return 1;
    }
    printf("chunk %llu of %s:%s (%llu bytes at byte %llu): %s -> %llu (record at byte "
           "%zu)\n", index, argv[1], argv[2], (unsigned long long)r.size,
           (unsigned long long)r.addr, argv[4], value, at);
    return 0;
}
