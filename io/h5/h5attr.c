/* h5attr — see h5util.h: reading and writing a file's or an object's attributes,
 * checked: one value of the type asked for, or a reason. */
#include "h5util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_why(char *why, size_t cap, const char *s)
{
    if (why && cap) snprintf(why, cap, "%s", s);
}

/* Opens attribute name of obj with its type and element count. 1, 0 (absent), -1. */
static int attr_open(hid_t obj, const char *name, hid_t *attr, hid_t *type,
                     hssize_t *npoints, char *why, size_t cap)
{
    *attr = *type = -1;
    htri_t e = H5Aexists(obj, name);
    if (e < 0) {
        set_why(why, cap, "cannot read the attributes");
        return -1;
    }
    if (e == 0) return 0;
    hid_t space = -1;
    if ((*attr = H5Aopen(obj, name, H5P_DEFAULT)) < 0 ||
        (*type = H5Aget_type(*attr)) < 0 || (space = H5Aget_space(*attr)) < 0) {
        set_why(why, cap, "cannot read the attribute");
        goto fail;
    }
    *npoints = H5Sget_simple_extent_npoints(space);
    H5Sclose(space);
    return 1;
fail:
    if (space >= 0) H5Sclose(space);
    if (*type >= 0) H5Tclose(*type);
    if (*attr >= 0) H5Aclose(*attr);
    *attr = *type = -1;
    return -1;
}

/* Whether an opened attribute holds one value of class cls (noun: "integer", with its
 * article: "an integer"); 0, or -1 with why */
static int attr_is_one(hid_t type, hssize_t np, H5T_class_t cls, const char *article_noun,
                       const char *noun, char *why, size_t cap)
{
    if (H5Tget_class(type) != cls) {
        char tn[64];
        h5io_type_name(type, tn, sizeof tn);
        snprintf(why, cap, "has type %s; it must be %s", tn, article_noun);
        return -1;
    }
    if (np != 1) {
        snprintf(why, cap, "holds %lld values; it must hold one %s", (long long)np, noun);
        return -1;
    }
    return 0;
}

int h5io_attr_int(hid_t obj, const char *name, int64_t *out, char *why, size_t cap)
{
    hid_t attr, type;
    hssize_t np = 0;
    int rc = attr_open(obj, name, &attr, &type, &np, why, cap);
    if (rc <= 0) return rc;
    rc = -1;
    if (attr_is_one(type, np, H5T_INTEGER, "an integer", "integer", why, cap) != 0) goto done;
    if (H5Tget_sign(type) == H5T_SGN_NONE && H5Tget_size(type) >= 8) {
        uint64_t u = 0;
        if (H5Aread(attr, H5T_NATIVE_UINT64, &u) < 0) {
            set_why(why, cap, "cannot read the attribute");
            goto done;
        }
        if (u > (uint64_t)INT64_MAX) {
            snprintf(why, cap, "is %llu, too large", (unsigned long long)u);
            goto done;
        }
        *out = (int64_t)u;
    } else {
        int64_t v = 0;
        if (H5Aread(attr, H5T_NATIVE_INT64, &v) < 0) {
            set_why(why, cap, "cannot read the attribute");
            goto done;
        }
        *out = v;
    }
    rc = 1;
done:
    H5Tclose(type);
    H5Aclose(attr);
    return rc;
}

int h5io_attr_str(hid_t obj, const char *name, char **out, char *why, size_t cap)
{
    hid_t attr, type, mem = -1;
    hssize_t np = 0;
    *out = NULL;
    int rc = attr_open(obj, name, &attr, &type, &np, why, cap);
    if (rc <= 0) return rc;
    rc = -1;
    if (attr_is_one(type, np, H5T_STRING, "a string", "string", why, cap) != 0) goto done;
    if ((mem = H5Tcopy(H5T_C_S1)) < 0) goto read_fail;
    if (H5Tis_variable_str(type) > 0) {
        char *s = NULL;
        if (H5Tset_size(mem, H5T_VARIABLE) < 0 || H5Tset_cset(mem, H5Tget_cset(type)) < 0 ||
            H5Aread(attr, mem, &s) < 0)
            goto read_fail;
        *out = strdup(s ? s : "");
        if (s) H5free_memory(s);
    } else {
        size_t n = H5Tget_size(type);
        char *s = malloc(n + 1);
        if (!s) goto read_fail;
        if (H5Tset_size(mem, n + 1) < 0 || H5Tset_strpad(mem, H5T_STR_NULLTERM) < 0 ||
            H5Tset_cset(mem, H5Tget_cset(type)) < 0 || H5Aread(attr, mem, s) < 0) {
            free(s);
            goto read_fail;
        }
        s[n] = '\0';
        *out = s;
    }
    if (!*out) goto read_fail;
    rc = 1;
    goto done;
read_fail:
    set_why(why, cap, "cannot read the attribute");
done:
    if (mem >= 0) H5Tclose(mem);
    H5Tclose(type);
    H5Aclose(attr);
    return rc;
}

/* Creates attribute name (replacing one of that name) and writes one value. */
static int write_attr(hid_t obj, const char *name, hid_t file_type, hid_t mem_type,
                      const void *value)
{
    int rc = -1;
    hid_t space = -1, attr = -1;
    htri_t e = H5Aexists(obj, name);
    if (e < 0 || (e > 0 && H5Adelete(obj, name) < 0)) return -1;
    if ((space = H5Screate(H5S_SCALAR)) < 0) goto done;
    if ((attr = H5Acreate2(obj, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT)) < 0)
        goto done;
    if (H5Awrite(attr, mem_type, value) < 0) goto done;
    rc = 0;
done:
    if (attr >= 0 && H5Aclose(attr) < 0) rc = -1;
    if (space >= 0) H5Sclose(space);
    return rc;
}

int h5io_write_attr_int(hid_t obj, const char *name, int64_t v)
{
    return write_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
}

int h5io_write_attr_str(hid_t obj, const char *name, const char *s)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0) return -1;
    int rc = -1;
    if (H5Tset_size(t, H5T_VARIABLE) >= 0 && H5Tset_cset(t, H5T_CSET_UTF8) >= 0)
        rc = write_attr(obj, name, t, t, &s);
    H5Tclose(t);
    return rc;
}
