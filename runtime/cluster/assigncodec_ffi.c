/* assigncodec_ffi.c - the published assignment (assigncodec.h) as specs drive it through
 * FFI (base/ffi_spec.h): build, encode, decode, diff and apply. Any thread; nothing here is
 * on a record path. */
#include "cluster/assigncodec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ffi_spec.h"

/* -- FFI (ffi.h): what the specs drive ----------------------------------------------------
 * Errors come back as text in a thread-local buffer, valid until the next call. */

static _Thread_local char ffi_err[256];

bk_assigncodec_t *bk_ffi_assigncodec_new(int32_t nnodes, int32_t ntasks, int32_t k, uint64_t epoch,
                                         uint64_t base_epoch)
{
    return bk_assigncodec_new(nnodes, ntasks, k, epoch, base_epoch);
}

int bk_ffi_assigncodec_set_node(bk_assigncodec_t *ac, int32_t slot, const char *id,
                                const char *rack, const char *endpoint, const char **err)
{
    *err = ffi_err;
    return bk_assigncodec_set_node(ac, slot, id, rack, endpoint, ffi_err, sizeof(ffi_err)) == 0
               ? BK_FFI_OK
               : BK_FFI_ERR;
}

/* Sets task's active and first n standbys (the rest -1); checked when encoded. */
int bk_ffi_assigncodec_set_task(bk_assigncodec_t *ac, int32_t task, int32_t active,
                                const int32_t *standby, int32_t n)
{
    if (task < 0 || task >= ac->ntasks || n < 0 || n > ac->k) {
        return BK_FFI_ERR;
    }
    ac->active[task] = active;
    for (int32_t j = 0; j < ac->k; j++) {
        ac->standby[(size_t)task * (size_t)ac->k + (size_t)j] = j < n ? standby[j] : -1;
    }
    return BK_FFI_OK;
}

int bk_ffi_assigncodec_validate(const bk_assigncodec_t *ac, const char **err)
{
    *err = ffi_err;
    return bk_assigncodec_validate(ac, ffi_err, sizeof(ffi_err)) == 0 ? BK_FFI_OK : BK_FFI_ERR;
}

int bk_ffi_assigncodec_encode(const bk_assigncodec_t *ac, char **buf, size_t *len, const char **err)
{
    *err = ffi_err;
    return bk_assigncodec_encode(ac, (uint8_t **)buf, len, ffi_err, sizeof(ffi_err)) == 0
               ? BK_FFI_OK
               : BK_FFI_ERR;
}

int bk_ffi_assigncodec_delta(const bk_assigncodec_t *prev, const bk_assigncodec_t *next, char **buf,
                             size_t *len, const char **err)
{
    *err = ffi_err;
    return bk_assigncodec_delta(prev, next, (uint8_t **)buf, len, ffi_err, sizeof(ffi_err)) == 0
               ? BK_FFI_OK
               : BK_FFI_ERR;
}

void bk_ffi_assigncodec_buf_free(char *buf)
{
    free(buf);
}

int bk_ffi_assigncodec_peek(const char *buf, size_t len, int32_t *kind, uint64_t *epoch,
                            uint64_t *base_epoch, const char **err)
{
    int k = 0;
    *err = ffi_err;
    if (bk_assigncodec_peek((const uint8_t *)buf, len, &k, epoch, base_epoch, ffi_err,
                            sizeof(ffi_err)) != 0) {
        return BK_FFI_ERR;
    }
    *kind = k;
    return BK_FFI_OK;
}

bk_assigncodec_t *bk_ffi_assigncodec_decode(const char *buf, size_t len, const char **err)
{
    *err = ffi_err;
    return bk_assigncodec_decode((const uint8_t *)buf, len, ffi_err, sizeof(ffi_err));
}

bk_assigncodec_t *bk_ffi_assigncodec_apply(const bk_assigncodec_t *prev, const char *buf,
                                           size_t len, const char **err)
{
    *err = ffi_err;
    return bk_assigncodec_apply(prev, (const uint8_t *)buf, len, ffi_err, sizeof(ffi_err));
}

int bk_ffi_assigncodec_equal(const bk_assigncodec_t *a, const bk_assigncodec_t *b)
{
    return bk_assigncodec_equal(a, b);
}

void bk_ffi_assigncodec_info(const bk_assigncodec_t *ac, int32_t *nnodes, int32_t *ntasks,
                             int32_t *k, uint64_t *epoch, uint64_t *base_epoch)
{
    *nnodes = ac->nnodes;
    *ntasks = ac->ntasks;
    *k = ac->k;
    *epoch = ac->epoch;
    *base_epoch = ac->base_epoch;
}

/* Slot's id ("" for an empty slot, NULL out of range), rack and endpoint. */
const char *bk_ffi_assigncodec_node(const bk_assigncodec_t *ac, int32_t slot, const char **rack,
                                    const char **endpoint)
{
    if (slot < 0 || slot >= ac->nnodes) {
        return NULL;
    }
    *rack = ac->nodes[slot].rack;
    *endpoint = ac->nodes[slot].endpoint;
    return ac->nodes[slot].id;
}

/* Task's active slot (-2 out of range), its k standby slots into standby[]. */
int32_t bk_ffi_assigncodec_task(const bk_assigncodec_t *ac, int32_t task, int32_t *standby)
{
    if (task < 0 || task >= ac->ntasks) {
        return -2;
    }
    for (int32_t j = 0; j < ac->k; j++) {
        standby[j] = ac->standby[(size_t)task * (size_t)ac->k + (size_t)j];
    }
    return ac->active[task];
}

/* The published form of builder b's last result (bk_assigncodec_from_result). */
bk_assigncodec_t *bk_ffi_assigncodec_from_assign(const bk_assigncodec_t *prev,
                                                 bk_assign_builder_t *b, uint64_t epoch,
                                                 const char **err)
{
    const bk_assign_result_t *res = bk_assign_builder_result(b);
    *err = ffi_err;
    if (!res) {
        snprintf(ffi_err, sizeof(ffi_err), "the builder has no result");
        return NULL;
    }
    return bk_assigncodec_from_result(prev, bk_assign_builder_input(b), res, epoch, ffi_err,
                                      sizeof(ffi_err));
}

/* Sets builder b's previous placement of every task from ac, by node id. */
int bk_ffi_assigncodec_to_prev(const bk_assigncodec_t *ac, bk_assign_builder_t *b)
{
    const bk_assign_input_t *in = bk_assign_builder_input(b);
    size_t T = (size_t)in->ntasks, W = (size_t)ac->k;
    int32_t *act = malloc((T + 1) * sizeof(*act)), *sb = malloc((T * W + 1) * sizeof(*sb));
    int rc = BK_FFI_ERR;
    if (!act || !sb ||
        bk_assigncodec_to_prev(ac, in->members, in->nmembers, in->ntasks, act, sb, ac->k) != 0) {
        goto fail;
    }
    for (size_t t = 0; t < T; t++) {
        if (bk_ffi_assign_set_prev(b, (int32_t)t, act[t], sb + t * W, ac->k) != BK_FFI_OK) {
            goto fail;
        }
    }
    rc = BK_FFI_OK;
fail:
    free(act);
    free(sb);
    return rc;
}

void bk_ffi_assigncodec_free(bk_assigncodec_t *ac)
{
    bk_assigncodec_destroy(ac);
}
