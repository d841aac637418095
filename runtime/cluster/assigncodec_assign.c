/* assigncodec_assign.c - an assignment from and to the assignor's form (assigncodec.h):
 * a result made into the next published assignment, keeping its nodes' slots, and a
 * published one as the assignor's previous assignment. */
#include "cluster/assigncodec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct idslot {
    const char *id;
    int32_t slot;
} idslot_t;

static int idslot_cmp(const void *pa, const void *pb)
{
    const idslot_t *a = pa, *b = pb;
    int c = strcmp(a->id, b->id);
    return c ? c : (a->slot > b->slot) - (a->slot < b->slot);
}

/* The slots of ac's non-empty nodes sorted by id, for bsearch; *n entries. */
static idslot_t *index_ids(const bk_assigncodec_t *ac, int32_t *n)
{
    idslot_t *ix = malloc(((size_t)(ac ? ac->nnodes : 0) + 1) * sizeof(*ix));
    *n = 0;
    if (!ix) {
        return NULL;
    }
    for (int32_t i = 0; ac && i < ac->nnodes; i++) {
        if (ac->nodes[i].id[0]) {
            ix[(*n)++] = (idslot_t){ac->nodes[i].id, i};
        }
    }
    qsort(ix, (size_t)*n, sizeof(*ix), idslot_cmp);
    return ix;
}

static int32_t find_id(const idslot_t *ix, int32_t n, const char *id)
{
    int32_t lo = 0, hi = n;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        int c = strcmp(ix[mid].id, id);
        if (c == 0) {
            return ix[mid].slot;
        }
        if (c < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return -1;
}

bk_assigncodec_t *bk_assigncodec_from_result(const bk_assigncodec_t *prev,
                                             const bk_assign_input_t *in,
                                             const bk_assign_result_t *res, uint64_t epoch,
                                             char *errstr, size_t errstr_size)
{
    bk_assigncodec_t *ac = NULL;
    idslot_t *ix = NULL, *fresh = NULL;
    int32_t *slot_of = NULL, nix, nfresh = 0, nslots = 0, cursor = 0;
    uint8_t *taken = NULL;
    size_t room = (size_t)(prev ? prev->nnodes : 0) + (size_t)in->nmembers + 1;

    if (prev && epoch <= prev->epoch) {
        snprintf(errstr, errstr_size, "epoch %llu is not after %llu", (unsigned long long)epoch,
                 (unsigned long long)prev->epoch);
        return NULL;
    }
    ix = index_ids(prev, &nix);
    fresh = malloc(((size_t)in->nmembers + 1) * sizeof(*fresh));
    slot_of = malloc(((size_t)in->nmembers + 1) * sizeof(*slot_of));
    taken = calloc(room, 1);
    if (!ix || !fresh || !slot_of || !taken) {
        snprintf(errstr, errstr_size, "out of memory");
        goto fail;
    }
    for (int32_t m = 0; m < in->nmembers; m++) {
        slot_of[m] = find_id(ix, nix, in->members[m].id);
        if (slot_of[m] >= 0) {
            taken[slot_of[m]] = 1;
            nslots = slot_of[m] + 1 > nslots ? slot_of[m] + 1 : nslots;
        } else {
            fresh[nfresh++] = (idslot_t){in->members[m].id, m};
        }
    }
    /* Newcomers in id order into the lowest free slots: the same members give the same
     * table whatever their order in the input. */
    qsort(fresh, (size_t)nfresh, sizeof(*fresh), idslot_cmp);
    for (int32_t i = 0; i < nfresh; i++) {
        while (taken[cursor]) {
            cursor++;
        }
        taken[cursor] = 1;
        slot_of[fresh[i].slot] = cursor;
        nslots = cursor + 1 > nslots ? cursor + 1 : nslots;
    }
    ac = bk_assigncodec_new(nslots, res->ntasks, res->k, epoch, prev ? prev->epoch : 0);
    if (!ac) {
        snprintf(errstr, errstr_size, "assignment too large or out of memory");
        goto fail;
    }
    for (int32_t m = 0; m < in->nmembers; m++) {
        const bk_assign_member_t *mem = &in->members[m];
        if (bk_assigncodec_set_node(ac, slot_of[m], mem->id, mem->rack, mem->endpoint, errstr,
                                    errstr_size) != 0) {
            goto fail;
        }
    }
    for (int32_t t = 0; t < res->ntasks; t++) {
        ac->active[t] = slot_of[res->active[t]];
        for (int32_t j = 0; j < res->k; j++) {
            size_t s = (size_t)t * (size_t)res->k + (size_t)j;
            ac->standby[s] = res->standby[s] >= 0 ? slot_of[res->standby[s]] : -1;
        }
    }
    free(ix);
    free(fresh);
    free(slot_of);
    free(taken);
    return ac;
fail:
    bk_assigncodec_destroy(ac);
    free(ix);
    free(fresh);
    free(slot_of);
    free(taken);
    return NULL;
}

int bk_assigncodec_to_prev(const bk_assigncodec_t *ac, const bk_assign_member_t *members,
                           int32_t nmembers, int32_t ntasks, int32_t *prev_active,
                           int32_t *prev_standby, int32_t width)
{
    /* Slot -> member index, through the ids. */
    int32_t *member_of = malloc(((size_t)ac->nnodes + 1) * sizeof(*member_of)), nix;
    idslot_t *ix = index_ids(ac, &nix);
    if (!member_of || !ix) {
        free(member_of);
        free(ix);
        return -1;
    }
    for (int32_t i = 0; i < ac->nnodes; i++) {
        member_of[i] = -1;
    }
    for (int32_t m = 0; m < nmembers; m++) {
        int32_t slot = find_id(ix, nix, members[m].id);
        if (slot >= 0) {
            member_of[slot] = m;
        }
    }
    for (int32_t t = 0; t < ntasks; t++) {
        int32_t a = t < ac->ntasks ? ac->active[t] : -1;
        prev_active[t] = a >= 0 ? member_of[a] : -1;
        for (int32_t j = 0; j < width; j++) {
            int32_t s = t < ac->ntasks && j < ac->k ? ac->standby[(size_t)t * ac->k + j] : -1;
            prev_standby[(size_t)t * (size_t)width + (size_t)j] = s >= 0 ? member_of[s] : -1;
        }
    }
    free(member_of);
    free(ix);
    return 0;
}
