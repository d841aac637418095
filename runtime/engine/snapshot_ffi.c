/* snapshot_ffi.c - a snapshot's manifest, sweep and file hashes as specs drive them through
 * FFI (base/ffi_spec.h): spec/02-integration/12-snapshot_spec.lua. Built into bin/beck-spec
 * only, not the shipped binary. */
#include "engine/snapshot.h"

#include <stdlib.h>

#include "base/ffi_spec.h"
#include "base/fs.h"
#include "engine/manifest.h"

static __thread char ffi_err[1024];



int bk_ffi_snapshot_manifest_rewrite(const char *in_path, const char *out_path, const char **err)
{
    char *text;
    size_t len;
    bk_manifest_t m;
    int rc;

    *err = ffi_err;
    if (bk_fs_read_all(in_path, BK_MANIFEST_MAX_BYTES, &text, &len, ffi_err, sizeof(ffi_err)) !=
        0) {
        return BK_FFI_ERR;
    }
    rc = bk_manifest_parse(text, len, &m, ffi_err, sizeof(ffi_err));
    free(text);
    if (rc != 0) {
        return BK_FFI_ERR;
    }
    rc = out_path ? bk_manifest_write(&m, out_path, ffi_err, sizeof(ffi_err)) : 0;
    if (rc == 0) {
        rc = m.nfiles;
    }
    bk_manifest_free(&m);
    return rc < 0 ? BK_FFI_ERR : rc;
}



int bk_ffi_snapshot_sweep(const char *root, int64_t ttl_ms, int64_t now)
{
    return bk_snapshot_sweep(root, ttl_ms, now);
}

int bk_ffi_snapshot_file_xxh3(const char *path, uint64_t *xxh3, uint64_t *size, const char **err)
{
    *err = ffi_err;
    return bk_fs_file_xxh3(path, xxh3, size, ffi_err, sizeof(ffi_err)) == 0 ? BK_FFI_OK
                                                                            : BK_FFI_ERR;
}
