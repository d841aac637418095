/* dbread.c - reads of a task's committed state from any thread (dbread.h). */
#include "engine/dbread.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rocksdb/c.h>

#include "base/keys.h"
#include "engine/store_internal.h"

int bk_dbread_store(bk_db_t *db, const char *name)
{
    for (int i = 0; i < db->nstores; i++) {
        if (strcmp(db->stores[i].name, name) == 0) {
            return i;
        }
    }
    return -1;
}

/* The key on disk ([group][key]) in stack, or malloc'd when it does not fit; NULL without
 * memory. The owner's st->kbuf is the owner's: each call has its own. */
static char *disk_key(const bk_store_t *st, const char *key, size_t klen, char *stack, size_t size)
{
    char *k = klen + KG_BYTES <= size ? stack : malloc(klen + KG_BYTES);
    int g = bk_store_group_of(st, key, klen);
    if (k) {
        k[0] = (char)(g >> 8);
        k[1] = (char)(g & 0xff);
        memcpy(k + KG_BYTES, key, klen);
    }
    return k;
}

int bk_dbread_get_pinned(bk_db_t *db, int store, const char *key, size_t klen, const char **value,
                         size_t *vlen, bk_dbread_pin_t **pin, char *errstr, size_t errstr_size)
{
    bk_store_t *st = &db->stores[store];
    char stack[256], *k = disk_key(st, key, klen, stack, sizeof(stack));
    char *err = NULL;
    rocksdb_pinnableslice_t *p;

    *pin = NULL;
    *value = NULL;
    *vlen = 0;
    if (!k) {
        snprintf(errstr, errstr_size, "out of memory");
        return -1;
    }
    p = rocksdb_get_pinned_cf(db->rdb, db->ropts, st->cf, k, klen + KG_BYTES, &err);
    if (k != stack) {
        free(k);
    }
    if (err) {
        snprintf(errstr, errstr_size, "store %s: %s", st->name, err);
        rocksdb_free(err);
        return -1;
    }
    if (!p) {
        return 0;
    }
    *value = bk_ttl_live(st, rocksdb_pinnableslice_value(p, vlen), vlen, bk_ttl_now(st, 1));
    if (!*value) { /* expired */
        rocksdb_pinnableslice_destroy(p);
        *vlen = 0;
        return 0;
    }
    *pin = (bk_dbread_pin_t *)p;
    return 1;
}

void bk_dbread_unpin(bk_dbread_pin_t *pin)
{
    if (pin) {
        rocksdb_pinnableslice_destroy((rocksdb_pinnableslice_t *)pin);
    }
}

bk_store_iter_t *bk_dbread_iter(bk_db_t *db, int store, int mode, const char *a, size_t alen,
                                const char *b, size_t blen)
{
    return bk_store_iter_open(&db->stores[store], mode, a, alen, b, blen, 1);
}

int64_t bk_dbread_property(bk_db_t *db, int store, const char *name)
{
    uint64_t v = 0;
    int rc = store < 0 ? rocksdb_property_int(db->rdb, name, &v)
                       : rocksdb_property_int_cf(db->rdb, db->stores[store].cf, name, &v);
    return rc == 0 ? (int64_t)v : -1;
}

/* -- A page: the best `limit` keys over every group ----------------------------------------- */

typedef struct {
    char *k, *v;
    size_t kl, vl;
} pent_t;

static int ucmp(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

/* A max-heap of pent_t on the key: the page's largest at the top, to be dropped first. */
static void heap_down(pent_t *h, int n, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        pent_t t;
        if (l < n && ucmp(h[l].k, h[l].kl, h[m].k, h[m].kl) > 0) {
            m = l;
        }
        if (r < n && ucmp(h[r].k, h[r].kl, h[m].k, h[m].kl) > 0) {
            m = r;
        }
        if (m == i) {
            return;
        }
        t = h[i], h[i] = h[m], h[m] = t;
        i = m;
    }
}

static void heap_up(pent_t *h, int i)
{
    while (i > 0) {
        int p = (i - 1) / 2;
        pent_t t;
        if (ucmp(h[i].k, h[i].kl, h[p].k, h[p].kl) <= 0) {
            return;
        }
        t = h[i], h[i] = h[p], h[p] = t;
        i = p;
    }
}

static int by_key(const void *a, const void *b)
{
    const pent_t *x = a, *y = b;
    return ucmp(x->k, x->kl, y->k, y->kl);
}

static int set_ent(pent_t *e, const char *k, size_t kl, const char *v, size_t vl)
{
    char *nk = malloc(kl + 1), *nv = malloc(vl + 1);
    if (!nk || !nv) {
        free(nk);
        free(nv);
        return -1;
    }
    memcpy(nk, k, kl);
    memcpy(nv, v, vl);
    free(e->k);
    free(e->v);
    e->k = nk, e->kl = kl, e->v = nv, e->vl = vl;
    return 0;
}

int bk_dbread_page(bk_db_t *db, int store, const char *lo, size_t lolen, const char *hi,
                   size_t hilen, const char *prefix, size_t plen, const char *after,
                   size_t afterlen, int limit, bk_dbread_emit_fn emit, void *opaque)
{
    bk_store_t *st = &db->stores[store];
    const rocksdb_snapshot_t *snap = rocksdb_create_snapshot(db->rdb);
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    rocksdb_iterator_t *it;
    pent_t *heap = calloc((size_t)limit + 1, sizeof(*heap));
    const char *start = after                                                  ? after
                        : prefix && (!lo || ucmp(prefix, plen, lo, lolen) > 0) ? prefix
                                                                               : lo;
    size_t startlen = after ? afterlen : start == prefix ? plen : lolen;
    int64_t now = bk_ttl_now(st, 1);
    char *seek = malloc(KG_BYTES + startlen + 1);
    int n = 0, more = 0, rc = 0, g = 0;

    rocksdb_readoptions_set_snapshot(ro, snap);
    it = rocksdb_create_iterator_cf(db->rdb, ro, st->cf);
    if (!heap || !seek) {
        rc = -1;
        goto out;
    }
    if (startlen) {
        memcpy(seek + KG_BYTES, start, startlen);
    }
    while (g < 65536 && rc == 0) {
        seek[0] = (char)(g >> 8);
        seek[1] = (char)(g & 0xff);
        rocksdb_iter_seek(it, seek, KG_BYTES + startlen);
        if (!rocksdb_iter_valid(it)) {
            break;
        }
        {
            size_t kl;
            const unsigned char *k = (const unsigned char *)rocksdb_iter_key(it, &kl);
            int kg = kl >= KG_BYTES ? k[0] << 8 | k[1] : g;
            if (kg != g) {
                g = kg; /* the next group that holds keys: seek there with the bound */
                continue;
            }
        }
        /* this group's keys in range, while they could still make the page */
        for (; rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
            size_t kl, vl;
            const char *k = rocksdb_iter_key(it, &kl), *v;
            if (kl < KG_BYTES || (((unsigned char)k[0] << 8) | (unsigned char)k[1]) != g) {
                break;
            }
            k += KG_BYTES;
            kl -= KG_BYTES;
            if (after && ucmp(k, kl, after, afterlen) <= 0) {
                continue;
            }
            if ((hi && ucmp(k, kl, hi, hilen) > 0) ||
                (prefix && (kl < plen || memcmp(k, prefix, plen) != 0))) {
                break;
            }
            vl = 0;
            v = bk_ttl_live(st, rocksdb_iter_value(it, &vl), &vl, now);
            if (!v) {
                continue; /* expired: never a page of its own */
            }
            if (n == limit && ucmp(k, kl, heap[0].k, heap[0].kl) >= 0) {
                more = 1; /* in range, past the page: the rest of this group is larger */
                break;
            }
            if (n < limit) {
                heap[n].k = heap[n].v = NULL;
                if (set_ent(&heap[n], k, kl, v, vl) != 0) {
                    rc = -1;
                    break;
                }
                heap_up(heap, n++);
            } else {
                more = 1; /* the largest goes */
                if (set_ent(&heap[0], k, kl, v, vl) != 0) {
                    rc = -1;
                    break;
                }
                heap_down(heap, n, 0);
            }
        }
        g++;
    }
    if (rc == 0) {
        qsort(heap, (size_t)n, sizeof(*heap), by_key);
        for (int i = 0; i < n && rc == 0; i++) {
            rc = emit(opaque, heap[i].k, heap[i].kl, heap[i].v, heap[i].vl);
        }
    }
out:
    for (int i = 0; heap && i < n; i++) {
        free(heap[i].k);
        free(heap[i].v);
    }
    free(heap);
    free(seek);
    rocksdb_iter_destroy(it);
    rocksdb_readoptions_destroy(ro);
    rocksdb_release_snapshot(db->rdb, snap);
    return rc < 0 ? -1 : more;
}
