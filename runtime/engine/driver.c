/* driver.c - stores for the in-process test driver. */
#include "engine/driver.h"

#include <stdio.h>
#include <stdlib.h>

#include "engine/db.h"
#include "engine/regroup.h"
#include "engine/store.h"

struct bk_driver_s {
    int ntasks;
    bk_db_t **dbs;
    char err[1024];
};

bk_driver_t *bk_ffi_driver_new(int32_t ntasks)
{
    bk_driver_t *d = calloc(1, sizeof(*d));
    d->ntasks = ntasks;
    d->dbs = calloc((size_t)ntasks + 1, sizeof(*d->dbs));
    return d;
}

int bk_ffi_driver_open_task(bk_driver_t *d, int32_t task, const char *dir, const char *const *names,
                            const int32_t *flags, int32_t n)
{
    bk_store_spec_t *specs;
    if (task < 0 || task >= d->ntasks || d->dbs[task]) {
        snprintf(d->err, sizeof(d->err), "bad or already open task %d", (int)task);
        return BK_FFI_ERR;
    }
    specs = calloc((size_t)n + 1, sizeof(*specs));
    for (int i = 0; i < n; i++) {
        specs[i].name = names[i];
        specs[i].logged = (flags[i] & BK_FFI_STORE_LOGGED) != 0;
        specs[i].window = (flags[i] & BK_FFI_STORE_WINDOW) != 0;
    }
    d->dbs[task] = bk_db_open(dir, specs, n, d->err, sizeof(d->err));
    free(specs);
    return d->dbs[task] ? BK_FFI_OK : BK_FFI_ERR;
}

bk_store_t *bk_ffi_driver_store(bk_driver_t *d, int32_t task, int32_t i)
{
    if (task < 0 || task >= d->ntasks || !d->dbs[task] || i < 0 ||
        i >= bk_db_store_count(d->dbs[task])) {
        return NULL;
    }
    return bk_db_store(d->dbs[task], i);
}

int bk_ffi_driver_commit(bk_driver_t *d)
{
    for (int t = 0; t < d->ntasks; t++) {
        if (d->dbs[t] && bk_db_commit(d->dbs[t], d->err, sizeof(d->err)) != 0) {
            return BK_FFI_ERR;
        }
    }
    return BK_FFI_OK;
}

const char *bk_ffi_driver_error(bk_driver_t *d)
{
    return d->err;
}

void bk_ffi_driver_free(bk_driver_t *d)
{
    if (!d) {
        return;
    }
    for (int t = 0; t < d->ntasks; t++) {
        bk_db_close(d->dbs[t]);
    }
    free(d->dbs);
    free(d);
}

int bk_ffi_driver_grow(bk_driver_t *d, int32_t ntasks)
{
    bk_db_t **dbs;
    if (ntasks <= d->ntasks) {
        return BK_FFI_OK;
    }
    if (!(dbs = realloc(d->dbs, ((size_t)ntasks + 1) * sizeof(*dbs)))) {
        snprintf(d->err, sizeof(d->err), "out of memory");
        return BK_FFI_ERR;
    }
    for (int32_t t = d->ntasks; t <= ntasks; t++) {
        dbs[t] = NULL;
    }
    d->dbs = dbs;
    d->ntasks = ntasks;
    return BK_FFI_OK;
}

int bk_ffi_driver_close_task(bk_driver_t *d, int32_t task)
{
    int rc;
    if (task < 0 || task >= d->ntasks || !d->dbs[task]) {
        snprintf(d->err, sizeof(d->err), "task %d is not open", (int)task);
        return BK_FFI_ERR;
    }
    rc = bk_db_commit(d->dbs[task], d->err, sizeof(d->err));
    bk_db_close(d->dbs[task]);
    d->dbs[task] = NULL;
    return rc == 0 ? BK_FFI_OK : BK_FFI_ERR;
}

int bk_ffi_driver_regroup(bk_driver_t *d, const char *dst, const char *const *srcs,
                          const int32_t *groups, int32_t nsrc, int32_t lo, int32_t hi)
{
    bk_regroup_stats_t st;
    return bk_regroup_build(dst, srcs, groups, nsrc, lo, hi, &st, d->err, sizeof(d->err)) == 0
               ? BK_FFI_OK
               : BK_FFI_ERR;
}
