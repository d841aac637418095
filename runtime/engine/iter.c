/* iter.c - scans of a store (all keys, a range, a prefix) in key order, merged across the
 * key groups the keys are spread over (store.h, bk_ffi_store_iter_*). */
#include "engine/store.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rocksdb/c.h>

#include "base/ffi.h"
#include "base/fs.h"
#include "base/log.h"
#include "engine/store_internal.h"

/* -- FFI: iterators --------------------------------------------------------
 * Keys are ordered by key group first, so a scan in user-key order merges
 * one cursor per key group present (a binary heap on the current user key).
 * Each cursor reads the batch over the DB, so uncommitted writes show; a committed
 * scan (bk_store_iter_open, for queries from other threads) reads the DB alone and
 * touches nothing of the owner's. */

typedef struct {
    rocksdb_iterator_t *it;
    unsigned char group[KG_BYTES];
} cursor_t;

struct bk_store_iter_s {
    bk_store_t *st;
    int mode;
    char *lo, *hi; /* user keys; range: [lo, hi], prefix: lo */
    size_t lolen, hilen;
    cursor_t *cur;
    int ncur;
    int *heap, nheap;
    int last; /* cursor returned last, advanced on the next call */
    int closed;
    int committed; /* reads the DB without the owner's batch, from any thread */
    int64_t now;   /* a TTL store's clock when the scan began: expired entries are skipped */
    /* committed: every cursor reads one snapshot, so that a commit between two cursors'
     * creation cannot show half of itself */
    rocksdb_readoptions_t *snap_ropts;
    const rocksdb_snapshot_t *snap;
    bk_store_iter_t *live_prev, *live_next; /* st->live_iters (the owner's scans) */
};

static rocksdb_iterator_t *new_iter(bk_store_iter_t *it)
{
    bk_store_t *st = it->st;
    rocksdb_iterator_t *base = rocksdb_create_iterator_cf(
        st->db->rdb, it->snap_ropts ? it->snap_ropts : st->db->ropts, st->cf);
    if (it->committed) {
        return base;
    }
    /* takes over base */
    return rocksdb_writebatch_wi_create_iterator_with_base_cf(st->db->batch, base, st->cf);
}

/* Is the cursor on a key of its group that the scan wants? */
static int cursor_ok(bk_store_iter_t *it, cursor_t *c)
{
    size_t klen;
    const char *k;
    if (!rocksdb_iter_valid(c->it)) {
        return 0;
    }
    k = rocksdb_iter_key(c->it, &klen);
    if (klen < KG_BYTES || memcmp(k, c->group, KG_BYTES) != 0) {
        return 0;
    }
    k += KG_BYTES;
    klen -= KG_BYTES;
    if (it->mode == BK_FFI_ITER_PREFIX) {
        return klen >= it->lolen && memcmp(k, it->lo, it->lolen) == 0;
    }
    if (it->mode == BK_FFI_ITER_RANGE && it->hi) {
        size_t m = klen < it->hilen ? klen : it->hilen;
        int c2 = memcmp(k, it->hi, m);
        return c2 < 0 || (c2 == 0 && klen <= it->hilen);
    }
    return 1;
}

static int key_less(cursor_t *a, cursor_t *b)
{
    size_t la, lb, m;
    const char *ka = rocksdb_iter_key(a->it, &la) + KG_BYTES;
    const char *kb = rocksdb_iter_key(b->it, &lb) + KG_BYTES;
    int c;
    la -= KG_BYTES;
    lb -= KG_BYTES;
    m = la < lb ? la : lb;
    c = memcmp(ka, kb, m);
    return c < 0 || (c == 0 && la < lb);
}

static void sift_down(bk_store_iter_t *it, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i, t;
        if (l < it->nheap && key_less(&it->cur[it->heap[l]], &it->cur[it->heap[m]])) {
            m = l;
        }
        if (r < it->nheap && key_less(&it->cur[it->heap[r]], &it->cur[it->heap[m]])) {
            m = r;
        }
        if (m == i) {
            return;
        }
        t = it->heap[i];
        it->heap[i] = it->heap[m];
        it->heap[m] = t;
        i = m;
    }
}

static void seek_start(bk_store_iter_t *it, cursor_t *c)
{
    size_t n = KG_BYTES + (it->mode == BK_FFI_ITER_ALL ? 0 : it->lolen);
    char *k = malloc(n + 1);
    memcpy(k, c->group, KG_BYTES);
    if (n > KG_BYTES) {
        memcpy(k + KG_BYTES, it->lo, it->lolen);
    }
    rocksdb_iter_seek(c->it, k, n);
    free(k);
}

/* Does the scan stay within one record key of a window store? For a prefix,
 * when it holds a whole [length][key]; for a range, when both bounds hold
 * the same one. */
static int single_group(const bk_store_iter_t *it)
{
    size_t la, lb;
    const char *ka, *kb;
    if (it->mode == BK_FFI_ITER_ALL || !it->lo ||
        !(ka = bk_keys_window_record(it->lo, it->lolen, &la))) {
        return 0;
    }
    if (it->mode == BK_FFI_ITER_PREFIX) {
        return 1;
    }
    if (!it->hi || !(kb = bk_keys_window_record(it->hi, it->hilen, &lb))) {
        return 0;
    }
    return la == lb && ka - it->lo == kb - it->hi &&
           memcmp(it->lo, it->hi, (size_t)(ka - it->lo) + la) == 0;
}

bk_store_iter_t *bk_ffi_store_iter_new(bk_store_t *st, int mode, const char *a, size_t alen,
                                       const char *b, size_t blen)
{
    return bk_store_iter_open(st, mode, a, alen, b, blen, 0);
}

bk_store_iter_t *bk_store_iter_open(bk_store_t *st, int mode, const char *a, size_t alen,
                                    const char *b, size_t blen, int committed)
{
    bk_store_iter_t *it = calloc(1, sizeof(*it));
    int cap = 16;

    it->st = st;
    it->committed = committed;
    if (committed) {
        it->snap = rocksdb_create_snapshot(st->db->rdb);
        it->snap_ropts = rocksdb_readoptions_create();
        rocksdb_readoptions_set_snapshot(it->snap_ropts, it->snap);
    }
    it->mode = mode;
    it->last = -1;
    if (a) {
        it->lo = malloc(alen + 1);
        memcpy(it->lo, a, alen);
        it->lolen = alen;
    }
    if (b) {
        it->hi = malloc(blen + 1);
        memcpy(it->hi, b, blen);
        it->hilen = blen;
    }
    if (mode != BK_FFI_ITER_ALL && !it->lo) {
        it->lo = calloc(1, 1); /* range from the first key */
    }
    it->now = bk_ttl_now(st, committed);
    it->cur = calloc((size_t)cap, sizeof(cursor_t));
    if (st->window && single_group(it)) {
        /* one record key: its group is the only one to read */
        int g = bk_store_group_of(st, it->lo, it->lolen);
        it->cur[0].group[0] = (unsigned char)(g >> 8);
        it->cur[0].group[1] = (unsigned char)(g & 0xff);
        it->ncur = 1;
    } else {
        /* Find the groups present: jump from one to the next with seeks. */
        rocksdb_iterator_t *probe = new_iter(it);
        rocksdb_iter_seek_to_first(probe);
        while (rocksdb_iter_valid(probe)) {
            size_t klen;
            const unsigned char *k = (const unsigned char *)rocksdb_iter_key(probe, &klen);
            int g;
            unsigned char next[KG_BYTES];
            if (klen < KG_BYTES) {
                rocksdb_iter_next(probe);
                continue;
            }
            g = k[0] << 8 | k[1];
            if (it->ncur == cap) {
                cap *= 2;
                it->cur = realloc(it->cur, (size_t)cap * sizeof(cursor_t));
            }
            it->cur[it->ncur].group[0] = k[0];
            it->cur[it->ncur].group[1] = k[1];
            it->cur[it->ncur].it = NULL;
            it->ncur++;
            if (g + 1 >= 65536) {
                break;
            }
            next[0] = (unsigned char)((g + 1) >> 8);
            next[1] = (unsigned char)((g + 1) & 0xff);
            rocksdb_iter_seek(probe, (const char *)next, KG_BYTES);
        }
        rocksdb_iter_destroy(probe);
    }
    it->heap = calloc((size_t)(it->ncur ? it->ncur : 1), sizeof(int));
    for (int i = 0; i < it->ncur; i++) {
        cursor_t *c = &it->cur[i];
        c->it = new_iter(it);
        seek_start(it, c);
        if (cursor_ok(it, c)) {
            it->heap[it->nheap++] = i;
        }
    }
    for (int i = it->nheap / 2 - 1; i >= 0; i--) {
        sift_down(it, i);
    }
    if (!committed) {
        st->open_iters++;
        it->live_next = st->live_iters;
        if (st->live_iters) {
            st->live_iters->live_prev = it;
        }
        st->live_iters = it;
    }
    return it;
}

int bk_ffi_store_iter_next(bk_store_iter_t *it, const char **key, size_t *klen, const char **value,
                           size_t *vlen)
{
    cursor_t *c;
    if (it->closed) {
        return 0;
    }
    for (;;) {
        if (it->last >= 0) {
            c = &it->cur[it->last];
            rocksdb_iter_next(c->it);
            if (!cursor_ok(it, c)) {
                it->heap[0] = it->heap[--it->nheap];
            }
            sift_down(it, 0);
            it->last = -1;
        }
        if (it->nheap == 0) {
            it->closed = 1;
            it->st->open_iters -= !it->committed;
            return 0;
        }
        c = &it->cur[it->heap[0]];
        it->last = it->heap[0];
        *value = bk_ttl_live(it->st, rocksdb_iter_value(c->it, vlen), vlen, it->now);
        if (*value) { /* else expired: the next one */
            *key = rocksdb_iter_key(c->it, klen) + KG_BYTES;
            *klen -= KG_BYTES;
            return 1;
        }
    }
}

/* Lets go of the RocksDB cursors and snapshot; the scan reads as ended. */
static void release(bk_store_iter_t *it)
{
    for (int i = 0; i < it->ncur; i++) {
        if (it->cur[i].it) {
            rocksdb_iter_destroy(it->cur[i].it);
            it->cur[i].it = NULL;
        }
    }
    it->ncur = it->nheap = 0;
    it->last = -1;
    if (it->snap_ropts) {
        rocksdb_readoptions_destroy(it->snap_ropts);
        rocksdb_release_snapshot(it->st->db->rdb, it->snap);
        it->snap_ropts = NULL;
    }
}

static void unlink_live(bk_store_iter_t *it)
{
    if (it->committed || !it->st) {
        return;
    }
    if (it->live_prev) {
        it->live_prev->live_next = it->live_next;
    } else {
        it->st->live_iters = it->live_next;
    }
    if (it->live_next) {
        it->live_next->live_prev = it->live_prev;
    }
}

void bk_store_iters_detach(bk_store_t *st)
{
    bk_store_iter_t *it = st->live_iters, *next;
    for (; it; it = next) {
        next = it->live_next;
        release(it);
        if (!it->closed) {
            it->closed = 1;
            st->open_iters--;
        }
        it->st = NULL;
    }
    st->live_iters = NULL;
}

void bk_ffi_store_iter_free(bk_store_iter_t *it)
{
    if (!it) {
        return;
    }
    if (it->st) { /* else detached: its DB closed, its cursors are gone */
        if (!it->closed) {
            it->st->open_iters -= !it->committed;
        }
        unlink_live(it);
        release(it);
    }
    free(it->cur);
    free(it->heap);
    free(it->lo);
    free(it->hi);
    free(it);
}
