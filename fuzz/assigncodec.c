/* assigncodec.c - fuzz target: an assignment message from the control topic, full or delta
 * (cluster/assigncodec.c). What decodes must validate, encode, and decode to an equal
 * assignment; a delta is applied to a small fixed assignment. */
#include <stdint.h>
#include <stdlib.h>

#include "cluster/assigncodec.h"

static bk_assigncodec_t *base(void)
{
    static bk_assigncodec_t *b;
    char err[256];
    if (!b) {
        b = bk_assigncodec_new(3, 8, 1, 5, 4);
        bk_assigncodec_set_node(b, 0, "a", "r1", "h:1", err, sizeof(err));
        bk_assigncodec_set_node(b, 1, "b", "r2", "h:2", err, sizeof(err));
        bk_assigncodec_set_node(b, 2, "c", "r3", "h:3", err, sizeof(err));
        for (int32_t t = 0; t < 8; t++) {
            b->active[t] = t % 3;
            b->standby[t] = (t + 1) % 3;
        }
    }
    return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    int kind;
    uint64_t epoch, base_epoch;
    bk_assigncodec_t *ac, *again;
    uint8_t *buf = NULL;
    size_t len = 0;

    if (bk_assigncodec_peek(data, size, &kind, &epoch, &base_epoch, err, sizeof(err)) != 0) {
        return 0;
    }
    ac = kind == BK_ASSIGNCODEC_DELTA ? bk_assigncodec_apply(base(), data, size, err, sizeof(err))
                                      : bk_assigncodec_decode(data, size, err, sizeof(err));
    if (!ac) {
        return 0;
    }
    if (bk_assigncodec_validate(ac, err, sizeof(err)) != 0) {
        abort(); /* a decoder returns only valid assignments */
    }
    if (bk_assigncodec_encode(ac, &buf, &len, err, sizeof(err)) != 0) {
        abort();
    }
    again = bk_assigncodec_decode(buf, len, err, sizeof(err));
    if (!again || !bk_assigncodec_equal(ac, again)) {
        abort(); /* what was accepted encodes to itself */
    }
    bk_assigncodec_destroy(again);
    bk_assigncodec_destroy(ac);
    free(buf);
    return 0;
}
