/* regroup_ffi.c - the state move of repartitioning as specs drive it
 * through FFI (base/ffi_spec.h): spec/01-unit/34-regroup_spec.lua. Any thread. */
#include "engine/regroup.h"

#include "base/ffi_spec.h"

static __thread char ffi_err[1024];

int bk_ffi_regroup_build(const char *dst, const char *const *srcs, const int32_t *groups,
                         int32_t nsrc, int32_t lo, int32_t hi, int64_t *stats, const char **err)
{
    bk_regroup_stats_t st;
    int rc = bk_regroup_build(dst, srcs, groups, nsrc, lo, hi, &st, ffi_err, sizeof(ffi_err));
    stats[0] = st.primary;
    stats[1] = st.linked_bytes;
    stats[2] = st.copied_keys;
    stats[3] = st.copied_bytes;
    stats[4] = st.dropped_files;
    stats[5] = st.sources_used;
    stats[6] = st.elapsed_ms;
    *err = rc == 0 ? NULL : ffi_err;
    return rc == 0 ? BK_FFI_OK : BK_FFI_ERR;
}

int bk_ffi_regroup_check(const char *dir, int32_t lo, int32_t hi, int32_t *first_bad,
                         int64_t *nkeys, const char **err)
{
    int rc = bk_regroup_check(dir, lo, hi, first_bad, nkeys, ffi_err, sizeof(ffi_err));
    *err = rc < 0 ? ffi_err : NULL;
    return rc;
}
