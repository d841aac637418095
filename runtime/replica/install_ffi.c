/* install_ffi.c - a fetched snapshot installed, and an interrupted install recovered, as
 * specs drive them through FFI (base/ffi_spec.h). Built into bin/beck-spec only, not the
 * shipped binary. */
#include "replica/install.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/ffi_spec.h"
#include "base/fs.h"
#include "engine/manifest.h"


static __thread char ffi_err[1024];

int bk_ffi_install_recover(const char *app_dir)
{
    return bk_install_recover(app_dir);
}

int bk_ffi_snapshot_install(const char *fetched_dir, const char *task_dir, const char **err)
{
    char path[4096], *text;
    size_t len;
    bk_manifest_t m;
    int rc;

    *err = ffi_err;
    snprintf(path, sizeof(path), "%s/%s", fetched_dir, BK_MANIFEST_NAME);
    if (bk_fs_read_all(path, BK_MANIFEST_MAX_BYTES, &text, &len, ffi_err, sizeof(ffi_err)) != 0) {
        return BK_FFI_ERR;
    }
    rc = bk_manifest_parse(text, len, &m, ffi_err, sizeof(ffi_err));
    free(text);
    if (rc != 0) {
        return BK_FFI_ERR;
    }
    rc = bk_install_snapshot(&m, fetched_dir, task_dir, ffi_err, sizeof(ffi_err));
    bk_manifest_free(&m);
    return rc == 0 ? BK_FFI_OK : BK_FFI_ERR;
}
