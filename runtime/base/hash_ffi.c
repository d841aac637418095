/* hash_ffi.c - key-group ownership as specs ask it through FFI (base/ffi_spec.h). Built into
 * bin/beck-spec only, not the shipped binary. */
#include "base/hash.h"

#include "base/ffi_spec.h"

int32_t bk_ffi_hash_group_owner(int32_t group, int32_t ntasks)
{
    return bk_hash_group_owner(group, ntasks);
}
