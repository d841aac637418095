/* assigncodec.c - encode, decode and diff published assignments (assigncodec.h). */
#include "cluster/assigncodec.h"

#include "base/wire.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void seterr(char *errstr, size_t errstr_size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errstr, errstr_size, fmt, ap);
    va_end(ap);
}

static char *dupmem(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* -- The in-memory form ------------------------------------------------------------------- */

/* Gives ac room for ntasks unassigned tasks of k standby slots (what it had is freed). */
static int alloc_tasks(bk_assigncodec_t *ac, int32_t ntasks, int32_t k)
{
    size_t cells = (size_t)ntasks * (size_t)k;
    int32_t *active = malloc(((size_t)ntasks + 1) * sizeof(*active));
    int32_t *standby = malloc((cells + 1) * sizeof(*standby));
    if (!active || !standby) {
        free(active);
        free(standby);
        return -1;
    }
    memset(active, 0xff, (size_t)ntasks * sizeof(*active)); /* -1 */
    memset(standby, 0xff, cells * sizeof(*standby));
    free(ac->active);
    free(ac->standby);
    ac->active = active;
    ac->standby = standby;
    ac->ntasks = ntasks;
    ac->k = k;
    return 0;
}

bk_assigncodec_t *bk_assigncodec_new(int32_t nnodes, int32_t ntasks, int32_t k, uint64_t epoch,
                                     uint64_t base_epoch)
{
    bk_assigncodec_t *ac;
    if (nnodes < 0 || nnodes > BK_ASSIGNCODEC_MAX_NODES || ntasks < 0 ||
        ntasks > BK_ASSIGNCODEC_MAX_TASKS || k < 0 || k > BK_ASSIGNCODEC_MAX_K) {
        return NULL;
    }
    ac = calloc(1, sizeof(*ac));
    if (!ac) {
        return NULL;
    }
    ac->epoch = epoch;
    ac->base_epoch = base_epoch;
    ac->nnodes = nnodes;
    ac->nodes = calloc((size_t)nnodes + 1, sizeof(*ac->nodes));
    if (!ac->nodes || alloc_tasks(ac, ntasks, k) != 0) {
        goto fail;
    }
    for (int32_t i = 0; i < nnodes; i++) {
        bk_assigncodec_node_t *n = &ac->nodes[i];
        n->id = dupmem("", 0);
        n->rack = dupmem("", 0);
        n->endpoint = dupmem("", 0);
        if (!n->id || !n->rack || !n->endpoint) {
            goto fail;
        }
    }
    return ac;
fail:
    bk_assigncodec_destroy(ac);
    return NULL;
}

void bk_assigncodec_destroy(bk_assigncodec_t *ac)
{
    if (!ac) {
        return;
    }
    for (int32_t i = 0; ac->nodes && i < ac->nnodes; i++) {
        free(ac->nodes[i].id);
        free(ac->nodes[i].rack);
        free(ac->nodes[i].endpoint);
    }
    free(ac->nodes);
    free(ac->active);
    free(ac->standby);
    free(ac);
}

/* Sets a slot from strings of known lengths; an empty id empties the slot. */
static int set_node(bk_assigncodec_node_t *n, const char *id, size_t idlen, const char *rack,
                    size_t racklen, const char *ep, size_t eplen)
{
    char *a, *b, *c;
    if (idlen == 0) {
        racklen = eplen = 0;
    }
    a = dupmem(id, idlen);
    b = dupmem(rack, racklen);
    c = dupmem(ep, eplen);
    if (!a || !b || !c) {
        free(a);
        free(b);
        free(c);
        return -1;
    }
    free(n->id);
    free(n->rack);
    free(n->endpoint);
    n->id = a;
    n->rack = b;
    n->endpoint = c;
    return 0;
}

int bk_assigncodec_set_node(bk_assigncodec_t *ac, int32_t slot, const char *id, const char *rack,
                            const char *endpoint, char *errstr, size_t errstr_size)
{
    id = id ? id : "";
    rack = rack ? rack : "";
    endpoint = endpoint ? endpoint : "";
    if (slot < 0 || slot >= ac->nnodes) {
        seterr(errstr, errstr_size, "slot %d out of range (%d)", (int)slot, (int)ac->nnodes);
        return -1;
    }
    if (strlen(id) > BK_ASSIGNCODEC_MAX_STR || strlen(rack) > BK_ASSIGNCODEC_MAX_STR ||
        strlen(endpoint) > BK_ASSIGNCODEC_MAX_STR) {
        seterr(errstr, errstr_size, "slot %d: a string is longer than %d bytes", (int)slot,
               BK_ASSIGNCODEC_MAX_STR);
        return -1;
    }
    if (set_node(&ac->nodes[slot], id, strlen(id), rack, strlen(rack), endpoint,
                 strlen(endpoint)) != 0) {
        seterr(errstr, errstr_size, "out of memory");
        return -1;
    }
    return 0;
}

static int strp_cmp(const void *pa, const void *pb)
{
    return strcmp(*(char *const *)pa, *(char *const *)pb);
}

int bk_assigncodec_validate(const bk_assigncodec_t *ac, char *errstr, size_t errstr_size)
{
    char **ids = NULL;
    int32_t nids = 0;
    int rc = -1;

    if (ac->epoch <= ac->base_epoch) {
        seterr(errstr, errstr_size, "epoch %llu is not after its base epoch %llu",
               (unsigned long long)ac->epoch, (unsigned long long)ac->base_epoch);
        return -1;
    }
    if (ac->nnodes < 0 || ac->nnodes > BK_ASSIGNCODEC_MAX_NODES || ac->ntasks < 0 ||
        ac->ntasks > BK_ASSIGNCODEC_MAX_TASKS || ac->k < 0 || ac->k > BK_ASSIGNCODEC_MAX_K) {
        seterr(errstr, errstr_size, "counts out of limits");
        return -1;
    }
    if (ac->nnodes > 0 && !ac->nodes[ac->nnodes - 1].id[0]) {
        seterr(errstr, errstr_size, "the last node slot is empty (not trimmed)");
        return -1;
    }
    ids = malloc(((size_t)ac->nnodes + 1) * sizeof(*ids));
    if (!ids) {
        seterr(errstr, errstr_size, "out of memory");
        return -1;
    }
    for (int32_t i = 0; i < ac->nnodes; i++) {
        const bk_assigncodec_node_t *n = &ac->nodes[i];
        if (strlen(n->id) > BK_ASSIGNCODEC_MAX_STR || strlen(n->rack) > BK_ASSIGNCODEC_MAX_STR ||
            strlen(n->endpoint) > BK_ASSIGNCODEC_MAX_STR) {
            seterr(errstr, errstr_size, "node slot %d: string too long", (int)i);
            goto fail;
        }
        if (!n->id[0] && (n->rack[0] || n->endpoint[0])) {
            seterr(errstr, errstr_size, "empty node slot %d has a rack or an endpoint", (int)i);
            goto fail;
        }
        if (n->id[0]) {
            ids[nids++] = n->id;
        }
    }
    qsort(ids, (size_t)nids, sizeof(*ids), strp_cmp);
    for (int32_t i = 1; i < nids; i++) {
        if (strcmp(ids[i - 1], ids[i]) == 0) {
            seterr(errstr, errstr_size, "node id %s is in two slots", ids[i]);
            goto fail;
        }
    }
    for (int32_t t = 0; t < ac->ntasks; t++) {
        const int32_t *row = &ac->standby[(size_t)t * (size_t)ac->k];
        for (int32_t j = -1; j < ac->k; j++) {
            int32_t s = j < 0 ? ac->active[t] : row[j];
            if (s < -1 || s >= ac->nnodes || (s >= 0 && !ac->nodes[s].id[0])) {
                seterr(errstr, errstr_size, "task %d: slot %d is not a node", (int)t, (int)s);
                goto fail;
            }
            if (j < 0 || s < 0) {
                continue;
            }
            if (j > 0 && row[j - 1] < 0) {
                seterr(errstr, errstr_size, "task %d: a standby after an empty one", (int)t);
                goto fail;
            }
            for (int32_t i = -1; i < j; i++) {
                if ((i < 0 ? ac->active[t] : row[i]) == s) {
                    seterr(errstr, errstr_size, "task %d: slot %d holds two replicas", (int)t,
                           (int)s);
                    goto fail;
                }
            }
        }
    }
    rc = 0;
fail:
    free(ids);
    return rc;
}

int bk_assigncodec_equal(const bk_assigncodec_t *a, const bk_assigncodec_t *b)
{
    if (a->epoch != b->epoch || a->base_epoch != b->base_epoch || a->nnodes != b->nnodes ||
        a->ntasks != b->ntasks || a->k != b->k) {
        return 0;
    }
    for (int32_t i = 0; i < a->nnodes; i++) {
        if (strcmp(a->nodes[i].id, b->nodes[i].id) != 0 ||
            strcmp(a->nodes[i].rack, b->nodes[i].rack) != 0 ||
            strcmp(a->nodes[i].endpoint, b->nodes[i].endpoint) != 0) {
            return 0;
        }
    }
    return memcmp(a->active, b->active, (size_t)a->ntasks * sizeof(int32_t)) == 0 &&
           memcmp(a->standby, b->standby, (size_t)a->ntasks * (size_t)a->k * sizeof(int32_t)) == 0;
}

/* -- Writing ------------------------------------------------------------------------------ */

/* A slot index as index + 1, so that -1 (none) is 0. */
static void put_slot(bk_wire_buf_t *w, int32_t slot)
{
    bk_wire_put_uv(w, (uint64_t)((int64_t)slot + 1));
}

static void put_header(bk_wire_buf_t *w, int kind, const bk_assigncodec_t *ac)
{
    uint8_t h[2] = {BK_ASSIGNCODEC_VERSION, (uint8_t)kind};
    bk_wire_put(w, h, 2);
    bk_wire_put_uv(w, ac->epoch);
    bk_wire_put_uv(w, ac->base_epoch);
}

/* Version 2's front coding: the length of the prefix s shares with prev, then the rest as
 * a string. Node ids and endpoints of a cluster share most of their bytes with the slot
 * before ("node-017", "node-018"; "10.0.0.17:8080", "10.0.0.18:8080"). */
static void put_fc(bk_wire_buf_t *w, const char *prev, const char *s)
{
    size_t n = 0;
    while (prev[n] && prev[n] == s[n]) {
        n++;
    }
    bk_wire_put_uv(w, (uint64_t)n);
    bk_wire_put_str(w, s + n);
}

/* Bits for a slot + 1 of nnodes slots (1 at least). */
static int slot_bits(int32_t nnodes)
{
    int b = 1;
    while (b < 31 && ((int64_t)1 << b) <= (int64_t)nnodes) {
        b++;
    }
    return b;
}

/* Version 2's task rows in a full message: every slot + 1 in slot_bits(nnodes) bits, low
 * bits first, row after row, the last byte padded with zeros. 400 nodes take 9 bits a slot
 * instead of a varint's 16. */
static void put_packed_rows(bk_wire_buf_t *w, const bk_assigncodec_t *ac)
{
    int bits = slot_bits(ac->nnodes), have = 0;
    uint64_t acc = 0;
    size_t n = (size_t)ac->ntasks * (size_t)(ac->k + 1);
    for (size_t i = 0; i < n; i++) {
        int32_t t = (int32_t)(i / (size_t)(ac->k + 1)), j = (int32_t)(i % (size_t)(ac->k + 1));
        int32_t slot = j == 0 ? ac->active[t] : ac->standby[(size_t)t * (size_t)ac->k + j - 1];
        acc |= (uint64_t)(slot + 1) << have;
        have += bits;
        while (have >= 8) {
            bk_wire_put_u8(w, (uint8_t)acc);
            acc >>= 8;
            have -= 8;
        }
    }
    if (have > 0) {
        bk_wire_put_u8(w, (uint8_t)acc);
    }
}

static void put_row(bk_wire_buf_t *w, const bk_assigncodec_t *ac, int32_t t)
{
    put_slot(w, ac->active[t]);
    for (int32_t j = 0; j < ac->k; j++) {
        put_slot(w, ac->standby[(size_t)t * (size_t)ac->k + (size_t)j]);
    }
}

static int finish(bk_wire_buf_t *w, uint8_t **buf, size_t *len, char *errstr, size_t errstr_size)
{
    if (w->oom) {
        free(w->p);
        seterr(errstr, errstr_size, "out of memory");
        return -1;
    }
    *buf = w->p;
    *len = w->len;
    return 0;
}

int bk_assigncodec_encode(const bk_assigncodec_t *ac, uint8_t **buf, size_t *len, char *errstr,
                          size_t errstr_size)
{
    bk_wire_buf_t w = {0};
    int32_t *rack_of = NULL, nracks = 0;

    if (bk_assigncodec_validate(ac, errstr, errstr_size) != 0) {
        return -1;
    }
    /* The rack table: each distinct rack once, in order of first use; nodes refer to it. */
    rack_of = malloc(((size_t)ac->nnodes + 1) * sizeof(*rack_of));
    if (!rack_of) {
        seterr(errstr, errstr_size, "out of memory");
        return -1;
    }
    for (int32_t i = 0; i < ac->nnodes; i++) {
        rack_of[i] = -1;
        for (int32_t j = 0; j < i && ac->nodes[i].id[0]; j++) {
            if (ac->nodes[j].id[0] && strcmp(ac->nodes[j].rack, ac->nodes[i].rack) == 0) {
                rack_of[i] = rack_of[j];
                break;
            }
        }
        if (ac->nodes[i].id[0] && rack_of[i] < 0) {
            rack_of[i] = nracks++;
        }
    }
    put_header(&w, BK_ASSIGNCODEC_FULL, ac);
    bk_wire_put_uv(&w, (uint64_t)nracks);
    for (int32_t i = 0, next = 0; i < ac->nnodes; i++) {
        if (rack_of[i] == next) {
            bk_wire_put_str(&w, ac->nodes[i].rack);
            next++;
        }
    }
    bk_wire_put_uv(&w, (uint64_t)ac->nnodes);
    {
        const char *prev_id = "", *prev_ep = "";
        for (int32_t i = 0; i < ac->nnodes; i++) {
            if (!ac->nodes[i].id[0]) {
                bk_wire_put_uv(&w, 0); /* an empty slot: nothing shared, nothing more */
                bk_wire_put_str(&w, "");
                continue;
            }
            put_fc(&w, prev_id, ac->nodes[i].id);
            bk_wire_put_uv(&w, (uint64_t)rack_of[i]);
            put_fc(&w, prev_ep, ac->nodes[i].endpoint);
            prev_id = ac->nodes[i].id;
            prev_ep = ac->nodes[i].endpoint;
        }
    }
    bk_wire_put_uv(&w, (uint64_t)ac->ntasks);
    bk_wire_put_uv(&w, (uint64_t)ac->k);
    put_packed_rows(&w, ac);
    free(rack_of);
    return finish(&w, buf, len, errstr, errstr_size);
}

/* Task t's row as a delta's receiver rebuilds it before any change: prev's row cut or
 * padded to next's k; nothing for a task prev did not have. */
static int row_from_prev(const bk_assigncodec_t *prev, int32_t t, int32_t j)
{
    if (t >= prev->ntasks) {
        return -1;
    }
    if (j < 0) {
        return prev->active[t];
    }
    return j < prev->k ? prev->standby[(size_t)t * (size_t)prev->k + (size_t)j] : -1;
}

static int task_changed(const bk_assigncodec_t *prev, const bk_assigncodec_t *next, int32_t t)
{
    if (t >= prev->ntasks) {
        return 1; /* new tasks are always listed: it bounds what a delta makes a reader build */
    }
    for (int32_t j = -1; j < next->k; j++) {
        int32_t s = j < 0 ? next->active[t] : next->standby[(size_t)t * (size_t)next->k + j];
        if (s != row_from_prev(prev, t, j)) {
            return 1;
        }
    }
    return 0;
}

static int node_changed(const bk_assigncodec_t *prev, const bk_assigncodec_t *next, int32_t i)
{
    const bk_assigncodec_node_t *a, *b = &next->nodes[i];
    if (i >= prev->nnodes) {
        return b->id[0] != '\0';
    }
    a = &prev->nodes[i];
    return strcmp(a->id, b->id) != 0 || strcmp(a->rack, b->rack) != 0 ||
           strcmp(a->endpoint, b->endpoint) != 0;
}

int bk_assigncodec_delta(const bk_assigncodec_t *prev, const bk_assigncodec_t *next, uint8_t **buf,
                         size_t *len, char *errstr, size_t errstr_size)
{
    bk_wire_buf_t w = {0};
    int32_t n = 0, last = -1;

    if (bk_assigncodec_validate(next, errstr, errstr_size) != 0) {
        return -1;
    }
    if (next->base_epoch != prev->epoch) {
        seterr(errstr, errstr_size, "epoch %llu is based on %llu, not on %llu",
               (unsigned long long)next->epoch, (unsigned long long)next->base_epoch,
               (unsigned long long)prev->epoch);
        return -1;
    }
    put_header(&w, BK_ASSIGNCODEC_DELTA, next);
    bk_wire_put_uv(&w, (uint64_t)next->nnodes);
    for (int32_t i = 0; i < next->nnodes; i++) {
        n += node_changed(prev, next, i);
    }
    bk_wire_put_uv(&w, (uint64_t)n);
    for (int32_t i = 0; i < next->nnodes; i++) {
        const bk_assigncodec_node_t *nd = &next->nodes[i];
        if (!node_changed(prev, next, i)) {
            continue;
        }
        bk_wire_put_uv(&w, (uint64_t)(i - last - 1)); /* gaps: small numbers, small varints */
        last = i;
        bk_wire_put_str(&w, nd->id);
        if (nd->id[0]) {
            bk_wire_put_str(&w, nd->rack);
            bk_wire_put_str(&w, nd->endpoint);
        }
    }
    bk_wire_put_uv(&w, (uint64_t)next->ntasks);
    bk_wire_put_uv(&w, (uint64_t)next->k);
    n = 0;
    for (int32_t t = 0; t < next->ntasks; t++) {
        n += task_changed(prev, next, t);
    }
    bk_wire_put_uv(&w, (uint64_t)n);
    last = -1;
    for (int32_t t = 0; t < next->ntasks; t++) {
        if (task_changed(prev, next, t)) {
            bk_wire_put_uv(&w, (uint64_t)(t - last - 1));
            last = t;
            put_row(&w, next, t);
        }
    }
    return finish(&w, buf, len, errstr, errstr_size);
}

/* -- Reading ------------------------------------------------------------------------------ */

static int32_t get_slot(bk_wire_reader_t *r, int32_t nnodes)
{
    return (int32_t)bk_wire_get_uvmax(r, (uint64_t)nnodes, "slot index out of range") - 1;
}

/* Reads the header; *version (may be NULL) is 1 or 2: a node reads what a node of the
 * version before publishes, so that a rolling upgrade works. */
static int get_header(bk_wire_reader_t *r, int *kind, uint64_t *epoch, uint64_t *base, int *version)
{
    if (r->left < 2) {
        r->fault = "truncated header";
        return -1;
    }
    if (r->p[0] != 1 && r->p[0] != BK_ASSIGNCODEC_VERSION) {
        r->fault = "unknown version";
        return -1;
    }
    if (version) {
        *version = r->p[0];
    }
    if (r->p[1] != BK_ASSIGNCODEC_FULL && r->p[1] != BK_ASSIGNCODEC_DELTA) {
        r->fault = "unknown kind";
        return -1;
    }
    *kind = r->p[1];
    r->p += 2;
    r->left -= 2;
    *epoch = bk_wire_get_uv(r);
    *base = bk_wire_get_uv(r);
    return r->fault ? -1 : 0;
}

int bk_assigncodec_peek(const uint8_t *buf, size_t len, int *kind, uint64_t *epoch,
                        uint64_t *base_epoch, char *errstr, size_t errstr_size)
{
    bk_wire_reader_t r = {buf, len, NULL};
    if (get_header(&r, kind, epoch, base_epoch, NULL) != 0) {
        seterr(errstr, errstr_size, "assignment: %s", r.fault);
        return -1;
    }
    return 0;
}

/* Reads a task row into ac; the semantic checks come with validate(). */
static void get_row(bk_wire_reader_t *r, bk_assigncodec_t *ac, int32_t t)
{
    ac->active[t] = get_slot(r, ac->nnodes);
    for (int32_t j = 0; j < ac->k; j++) {
        ac->standby[(size_t)t * (size_t)ac->k + (size_t)j] = get_slot(r, ac->nnodes);
    }
}

/* A front-coded string (put_fc) into buf (room for BK_ASSIGNCODEC_MAX_STR + 1); prev is
 * the last node's (NULL: none). Its length goes to *n. */
static const char *get_fc(bk_wire_reader_t *r, const char *prev, size_t prevlen, char *buf,
                          size_t *n)
{
    uint64_t shared = bk_wire_get_uvmax(r, prev ? prevlen : 0,
                                        "shared prefix longer than the "
                                        "string before");
    size_t restlen = 0;
    const char *rest = bk_wire_get_str(r, BK_ASSIGNCODEC_MAX_STR, &restlen);
    *n = 0;
    buf[0] = '\0';
    if (r->fault) {
        return buf;
    }
    if (shared + restlen > BK_ASSIGNCODEC_MAX_STR) {
        r->fault = "string over the limit";
        return buf;
    }
    if (shared > 0) {
        memcpy(buf, prev, (size_t)shared);
    }
    memcpy(buf + shared, rest, restlen);
    *n = (size_t)shared + restlen;
    buf[*n] = '\0';
    return buf;
}

/* Version 2's packed rows (put_packed_rows); the caller checked that the bytes are there. */
static void get_packed_rows(bk_wire_reader_t *r, bk_assigncodec_t *ac)
{
    int bits = slot_bits(ac->nnodes), have = 0;
    uint64_t acc = 0, mask = ((uint64_t)1 << bits) - 1;
    size_t n = (size_t)ac->ntasks * (size_t)(ac->k + 1);
    for (size_t i = 0; i < n && !r->fault; i++) {
        int32_t t = (int32_t)(i / (size_t)(ac->k + 1)), j = (int32_t)(i % (size_t)(ac->k + 1));
        uint64_t v;
        while (have < bits) {
            acc |= (uint64_t)bk_wire_get_u8(r) << have;
            have += 8;
        }
        v = acc & mask;
        acc >>= bits;
        have -= bits;
        if (v > (uint64_t)ac->nnodes) {
            r->fault = "slot index out of range";
            return;
        }
        if (j == 0) {
            ac->active[t] = (int32_t)v - 1;
        } else {
            ac->standby[(size_t)t * (size_t)ac->k + j - 1] = (int32_t)v - 1;
        }
    }
    if (!r->fault && acc != 0) {
        r->fault = "padding bits set"; /* one assignment, one encoding */
    }
}

/* Ends a decode: a fault, trailing bytes or an invalid result make it NULL. */
static bk_assigncodec_t *decoded(bk_wire_reader_t *r, bk_assigncodec_t *ac, char *errstr,
                                 size_t errstr_size)
{
    char why[200];
    if (!r->fault && r->left) {
        r->fault = "trailing bytes";
    }
    if (r->fault) {
        seterr(errstr, errstr_size, "assignment: %s", r->fault);
        bk_assigncodec_destroy(ac);
        return NULL;
    }
    if (bk_assigncodec_validate(ac, why, sizeof(why)) != 0) {
        seterr(errstr, errstr_size, "assignment: %s", why);
        bk_assigncodec_destroy(ac);
        return NULL;
    }
    return ac;
}

bk_assigncodec_t *bk_assigncodec_decode(const uint8_t *buf, size_t len, char *errstr,
                                        size_t errstr_size)
{
    bk_wire_reader_t r = {buf, len, NULL};
    bk_assigncodec_t *ac = NULL;
    const char **racks = NULL;
    size_t *racklen = NULL;
    uint64_t epoch, base, nracks, nnodes, ntasks, k;
    int kind, version;
    char *prev_id = NULL, *prev_ep = NULL; /* version 2: what the next node's strings share */
    size_t prev_idlen = 0, prev_eplen = 0;

    if (get_header(&r, &kind, &epoch, &base, &version) != 0) {
        goto fail;
    }
    if (kind != BK_ASSIGNCODEC_FULL) {
        r.fault = "a delta (apply it to its base epoch)";
        goto fail;
    }
    /* A count is never more than the bytes left (each item takes one at least): nothing
     * is allocated on the word of a few bytes. */
    nracks = bk_wire_get_uvmax(&r, r.left, "rack count exceeds the message");
    racks = malloc((nracks + 1) * sizeof(*racks));
    racklen = malloc((nracks + 1) * sizeof(*racklen));
    if (!racks || !racklen) {
        r.fault = "out of memory";
        goto fail;
    }
    for (uint64_t i = 0; i < nracks && !r.fault; i++) {
        racks[i] = bk_wire_get_str(&r, BK_ASSIGNCODEC_MAX_STR, &racklen[i]);
    }
    nnodes =
        bk_wire_get_uvmax(&r, r.left < BK_ASSIGNCODEC_MAX_NODES ? r.left : BK_ASSIGNCODEC_MAX_NODES,
                          "node count exceeds the message or the limit");
    if (r.fault) {
        goto fail;
    }
    ac = bk_assigncodec_new((int32_t)nnodes, 0, 0, epoch, base);
    if (!ac) {
        r.fault = "out of memory";
        goto fail;
    }
    for (int32_t i = 0; i < ac->nnodes && !r.fault; i++) {
        char idbuf[BK_ASSIGNCODEC_MAX_STR + 1], epbuf[BK_ASSIGNCODEC_MAX_STR + 1];
        size_t idlen, eplen = 0, rlen = 0;
        const char *id, *ep = "", *rack = "";
        if (version == 1) {
            id = bk_wire_get_str(&r, BK_ASSIGNCODEC_MAX_STR, &idlen);
        } else {
            id = get_fc(&r, prev_id, prev_idlen, idbuf, &idlen);
        }
        if (idlen > 0) {
            uint64_t rk = bk_wire_get_uvmax(&r, nracks ? nracks - 1 : 0, "rack index out of range");
            if (!r.fault && nracks == 0) {
                r.fault = "rack index without a rack table";
            }
            if (!r.fault) {
                rack = racks[rk];
                rlen = racklen[rk];
            }
            if (version == 1) {
                ep = bk_wire_get_str(&r, BK_ASSIGNCODEC_MAX_STR, &eplen);
            } else {
                ep = get_fc(&r, prev_ep, prev_eplen, epbuf, &eplen);
            }
        }
        if (!r.fault && set_node(&ac->nodes[i], id, idlen, rack, rlen, ep, eplen) != 0) {
            r.fault = "out of memory";
        }
        if (!r.fault && idlen > 0) {
            prev_id = ac->nodes[i].id;
            prev_idlen = idlen;
            prev_ep = ac->nodes[i].endpoint;
            prev_eplen = eplen;
        }
    }
    ntasks = bk_wire_get_uvmax(&r, BK_ASSIGNCODEC_MAX_TASKS, "task count over the limit");
    k = bk_wire_get_uvmax(&r, BK_ASSIGNCODEC_MAX_K, "standby count over the limit");
    if (!r.fault) {
        /* a row takes a byte at least (version 1), or (k + 1) slots of its bits (2) */
        uint64_t need = version == 1 ? ntasks * (k + 1)
                                     : (ntasks * (k + 1) * (uint64_t)slot_bits(ac->nnodes) + 7) / 8;
        if (need > r.left) {
            r.fault = "task count exceeds the message";
        }
    }
    if (!r.fault && alloc_tasks(ac, (int32_t)ntasks, (int32_t)k) != 0) {
        r.fault = "out of memory";
    }
    if (version == 1) {
        for (int32_t t = 0; t < ac->ntasks && !r.fault; t++) {
            get_row(&r, ac, t);
        }
    } else if (!r.fault) {
        get_packed_rows(&r, ac);
    }
fail:
    free(racks);
    free(racklen);
    if (!r.fault && !ac) {
        r.fault = "internal";
    }
    return decoded(&r, ac, errstr, errstr_size);
}

bk_assigncodec_t *bk_assigncodec_apply(const bk_assigncodec_t *prev, const uint8_t *buf, size_t len,
                                       char *errstr, size_t errstr_size)
{
    bk_wire_reader_t r = {buf, len, NULL};
    bk_assigncodec_t *ac = NULL;
    uint64_t epoch, base, nnodes, nchanged, ntasks, k, fresh = 0;
    int64_t last = -1;
    int kind;

    if (get_header(&r, &kind, &epoch, &base, NULL) != 0) {
        goto fail;
    }
    if (kind != BK_ASSIGNCODEC_DELTA) {
        r.fault = "not a delta";
        goto fail;
    }
    if (base != prev->epoch) {
        r.fault = "not based on the current epoch";
        goto fail;
    }
    nnodes = bk_wire_get_uvmax(&r, BK_ASSIGNCODEC_MAX_NODES, "node count over the limit");
    nchanged =
        bk_wire_get_uvmax(&r, nnodes < r.left ? nnodes : r.left, "node changes exceed the count");
    if (r.fault) {
        goto fail;
    }
    /* Nodes: prev's slots, cut or extended with empty ones, then the listed changes. */
    ac = bk_assigncodec_new((int32_t)nnodes, 0, 0, epoch, base);
    if (!ac) {
        r.fault = "out of memory";
        goto fail;
    }
    for (int32_t i = 0; i < ac->nnodes && i < prev->nnodes; i++) {
        const bk_assigncodec_node_t *n = &prev->nodes[i];
        if (set_node(&ac->nodes[i], n->id, strlen(n->id), n->rack, strlen(n->rack), n->endpoint,
                     strlen(n->endpoint)) != 0) {
            r.fault = "out of memory";
            goto fail;
        }
    }
    for (uint64_t c = 0; c < nchanged && !r.fault; c++) {
        size_t idlen, racklen = 0, eplen = 0;
        const char *id, *rack = "", *ep = "";
        uint64_t gap = bk_wire_get_uvmax(&r, nnodes, "node slot out of range");
        int64_t slot = last + 1 + (int64_t)gap;
        id = bk_wire_get_str(&r, BK_ASSIGNCODEC_MAX_STR, &idlen);
        if (idlen > 0) {
            rack = bk_wire_get_str(&r, BK_ASSIGNCODEC_MAX_STR, &racklen);
            ep = bk_wire_get_str(&r, BK_ASSIGNCODEC_MAX_STR, &eplen);
        }
        if (!r.fault && slot >= (int64_t)nnodes) {
            r.fault = "node slot out of range";
        }
        if (!r.fault && set_node(&ac->nodes[slot], id, idlen, rack, racklen, ep, eplen) != 0) {
            r.fault = "out of memory";
        }
        last = slot;
    }
    ntasks = bk_wire_get_uvmax(&r, BK_ASSIGNCODEC_MAX_TASKS, "task count over the limit");
    k = bk_wire_get_uvmax(&r, BK_ASSIGNCODEC_MAX_K, "standby count over the limit");
    nchanged = bk_wire_get_uvmax(&r, ntasks, "task changes exceed the task count");
    /* New tasks are all listed, and each listed one takes k + 2 bytes at least: the new table
     * is bounded by prev's and by the message. */
    if (!r.fault && (nchanged * (k + 2) > r.left ||
                     (ntasks > (uint64_t)prev->ntasks && ntasks - prev->ntasks > nchanged))) {
        r.fault = "task changes exceed the message";
    }
    if (!r.fault && alloc_tasks(ac, (int32_t)ntasks, (int32_t)k) != 0) {
        r.fault = "out of memory";
    }
    if (r.fault) {
        goto fail;
    }
    for (int32_t t = 0; t < ac->ntasks; t++) {
        for (int32_t j = -1; j < ac->k; j++) {
            int32_t s = row_from_prev(prev, t, j);
            if (j < 0) {
                ac->active[t] = s;
            } else {
                ac->standby[(size_t)t * (size_t)ac->k + (size_t)j] = s;
            }
        }
    }
    last = -1;
    for (uint64_t c = 0; c < nchanged && !r.fault; c++) {
        uint64_t gap = bk_wire_get_uvmax(&r, ntasks, "task index out of range");
        int64_t t = last + 1 + (int64_t)gap;
        if (!r.fault && t >= (int64_t)ntasks) {
            r.fault = "task index out of range";
        }
        if (!r.fault) {
            get_row(&r, ac, (int32_t)t);
        }
        fresh += t >= prev->ntasks;
        last = t;
    }
    /* Indices rise strictly, so counting the listed new tasks tells whether all are. */
    if (!r.fault && ntasks > (uint64_t)prev->ntasks && fresh != ntasks - prev->ntasks) {
        r.fault = "a new task is not listed";
    }
fail:
    if (!r.fault && !ac) {
        r.fault = "internal";
    }
    return decoded(&r, ac, errstr, errstr_size);
}
