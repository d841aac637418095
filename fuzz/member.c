/* member.c - fuzz target: control-topic records folded into a view (cluster/member_view.c,
 * member_record.c), as a member applies them. The input is a sequence of records, each
 * [u8 timestamp step][u16 length, little-endian][bytes]; offsets count from 0. Nothing may
 * crash, whatever the records say. */
#include <stdint.h>
#include <stdlib.h>

#include "base/ffi_spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bk_member_spec_t *s = bk_ffi_member_observer_new(10000);
    int64_t ts = 1000, offset = 0;
    char *state = NULL;
    size_t state_len = 0;

    if (!s) {
        return 0;
    }
    while (size >= 3) {
        size_t n = (size_t)data[1] | (size_t)data[2] << 8;
        ts += (int64_t)data[0] * 100;
        data += 3;
        size -= 3;
        if (n > size) {
            n = size;
        }
        bk_ffi_member_feed(s, (const char *)data, n, offset++, ts);
        data += n;
        size -= n;
    }
    /* whatever the view became, a checkpoint of it encodes */
    if (bk_ffi_member_state(s, &state, &state_len) != 0) {
        abort();
    }
    bk_ffi_assigncodec_buf_free(state);
    bk_ffi_member_observer_free(s);
    return 0;
}
