/* checkpoint.c - fuzz target: a checkpoint record of the membership view
 * (cluster/member_checkpoint.c), as a starting member loads it. A checkpoint that loads
 * must encode to bytes that load again to the same state. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/ffi_spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bk_member_spec_t *a = bk_ffi_member_observer_new(10000), *b = NULL;
    char *s1 = NULL, *s2 = NULL, *rec = NULL;
    size_t n1 = 0, n2 = 0, nrec = 0;
    int64_t last;
    const char *err;

    if (!a) {
        return 0;
    }
    if (bk_ffi_member_load(a, (const char *)data, size, &last, &err) == 0) {
        if (bk_ffi_member_state(a, &s1, &n1) != 0 ||
            bk_ffi_member_rec_checkpoint(a, "fuzz", 1, &rec, &nrec) != 0) {
            abort();
        }
        b = bk_ffi_member_observer_new(10000);
        if (!b || bk_ffi_member_load(b, rec, nrec, &last, &err) != 0 ||
            bk_ffi_member_state(b, &s2, &n2) != 0 || n1 != n2 || memcmp(s1, s2, n1) != 0) {
            abort();
        }
    }
    bk_ffi_assigncodec_buf_free(s1);
    bk_ffi_assigncodec_buf_free(s2);
    bk_ffi_assigncodec_buf_free(rec);
    bk_ffi_member_observer_free(b);
    bk_ffi_member_observer_free(a);
    return 0;
}
