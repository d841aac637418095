/* changelog.c - a store's changelog read back: restore and standby apply its records,
 * commit and abort markers settle them, and a takeover repairs the keys of records it
 * dropped (store.h; docs/state.md, Markers). */
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
#include "base/keys.h"
#include "base/log.h"
#include "engine/changelog.h"
#include "engine/store_internal.h"

#define RESTORE_BATCH 1000

/* -- Restore -------------------------------------------------------------- */

/* "beck-commit 1 <n> <o>..." or "beck-abort 1 <n> <o>...": 1 commit, 0 abort, -1 not a
 * marker. Offsets into offs[BK_STORE_MAX_INPUTS], their count into *n. */
static int parse_marker(const void *value, size_t vlen, int64_t *offs, int *n)
{
    char buf[512], *p, *end;
    int kind;
    long long cnt;
    if (vlen < 12 || vlen >= sizeof(buf) || memcmp(value, "beck-", 5) != 0) {
        return -1;
    }
    memcpy(buf, value, vlen);
    buf[vlen] = '\0';
    if (strncmp(buf, "beck-commit 1 ", 14) == 0) {
        kind = 1;
        p = buf + 14;
    } else if (strncmp(buf, "beck-abort 1 ", 13) == 0) {
        kind = 0;
        p = buf + 13;
    } else {
        return -1;
    }
    cnt = strtoll(p, &end, 10);
    if (end == p || cnt < 0 || cnt > BK_STORE_MAX_INPUTS) {
        return -1;
    }
    for (int i = 0; i < cnt; i++) {
        p = end;
        offs[i] = strtoll(p, &end, 10);
        if (end == p) {
            return -1;
        }
    }
    *n = (int)cnt;
    return kind;
}

/* A changelog record into a write batch: a put, or a delete for a tombstone. */
static void batch_write(rocksdb_writebatch_t *b, bk_store_t *st, const char *pk, size_t plen,
                        const void *value, size_t vlen)
{
    if (value) {
        rocksdb_writebatch_put_cf(b, st->cf, pk, plen, value, vlen);
    } else {
        rocksdb_writebatch_delete_cf(b, st->cf, pk, plen);
    }
}

static int write_pending(bk_store_t *st, char *errstr, size_t errstr_size)
{
    char *err = NULL;
    if (!st->pending || st->npending == 0) {
        return 0;
    }
    rocksdb_write(st->db->rdb, st->db->wopts, st->pending, &err);
    st->db->unsynced = 1;
    if (err) {
        snprintf(errstr, errstr_size, "cannot write the state store in %s: %s", st->db->dir, err);
        free(err);
        return -1;
    }
    rocksdb_writebatch_clear(st->pending);
    st->npending = 0;
    st->pkeys_len = 0;
    return 0;
}

/* The dedup table's record waiting for its marker: into the table (a commit, or a takeover
 * that keeps what came after the last marker), or dropped. */
static void settle_src(bk_store_t *st, int keep)
{
    if (!st->src_pending) {
        return;
    }
    if (keep && bk_store_dedup(st)) {
        bk_dedup_parse(st->src, st->src_pending, st->src_pending_len);
    }
    free(st->src_pending);
    st->src_pending = NULL;
    st->src_pending_len = 0;
}

static void drop_pending(bk_store_t *st)
{
    if (st->pending) {
        rocksdb_writebatch_clear(st->pending);
    }
    st->npending = 0;
    st->pkeys_len = 0;
}

static void remember_key(bk_store_t *st, const void *key, size_t klen)
{
    uint32_t len = (uint32_t)klen;
    if (st->pkeys_len + sizeof(len) + klen > st->pkeys_cap) {
        st->pkeys_cap = (st->pkeys_len + sizeof(len) + klen) * 2 + 256;
        st->pkeys = realloc(st->pkeys, st->pkeys_cap);
    }
    memcpy(st->pkeys + st->pkeys_len, &len, sizeof(len));
    memcpy(st->pkeys + st->pkeys_len + sizeof(len), key, klen);
    st->pkeys_len += sizeof(len) + klen;
}

int bk_changelog_apply(bk_store_t *st, const void *key, size_t klen, const void *value, size_t vlen,
                       int64_t offset, int64_t timestamp, char *errstr, size_t errstr_size)
{
    size_t plen;
    const char *pk;
    int64_t offs[BK_STORE_MAX_INPUTS];
    int n = 0, kind;

    if (bk_keys_is_marker(key, klen) && value &&
        (kind = parse_marker(value, vlen, offs, &n)) >= 0) {
        /* what came before a marker is settled: legacy direct writes go first */
        if (bk_changelog_flush(st, errstr, errstr_size) != 0) {
            return -1;
        }
        if (kind == 1 && write_pending(st, errstr, errstr_size) != 0) {
            return -1;
        }
        settle_src(st, kind == 1);
        drop_pending(st);
        st->marked = 1;
        st->ninput = n;
        memcpy(st->input, offs, (size_t)n * sizeof(*offs));
        st->next = offset + 1;
        return 0;
    }
    if (!key) {
        return 0; /* a record without a key is none of ours */
    }
    if (bk_keys_is_src(key, klen)) {
        /* the dedup table as of its commit: like a write, it waits for its marker */
        char *copy;
        if (!value) {
            return 0;
        }
        if (!(copy = malloc(vlen + 1))) {
            snprintf(errstr, errstr_size, "store %s: out of memory", st->name);
            return -1;
        }
        memcpy(copy, value, vlen);
        copy[vlen] = '\0';
        free(st->src_pending);
        st->src_pending = copy;
        st->src_pending_len = vlen;
        if (!(st->marked || st->ninput > 0)) {
            settle_src(st, 1); /* no marker to wait for */
            st->next = offset + 1;
        }
        return 0;
    }
    if (timestamp > 0) {
        bk_ttl_saw(st, timestamp);
    }
    if (st->ttl_ms > 0 && value) {
        /* on disk as the active wrote it: its write time first (store_internal.h, TTL) */
        value = bk_ttl_wrap(st, timestamp, value, vlen, &vlen);
        if (!value) {
            snprintf(errstr, errstr_size, "store %s: out of memory", st->name);
            return -1;
        }
    }
    pk = bk_store_prefixed(st, key, klen, &plen);
    if (st->marked || st->ninput > 0) {
        /* wait for the commit marker that says these records' input was committed */
        if (!st->pending) {
            st->pending = rocksdb_writebatch_create();
        }
        batch_write(st->pending, st, pk, plen, value, vlen);
        st->npending++;
        remember_key(st, key, klen);
        return 0;
    }
    /* a changelog written before markers existed: every record counts */
    if (!st->restore_batch) {
        st->restore_batch = rocksdb_writebatch_create();
    }
    batch_write(st->restore_batch, st, pk, plen, value, vlen);
    st->next = offset + 1;
    if (rocksdb_writebatch_count(st->restore_batch) >= RESTORE_BATCH) {
        return bk_changelog_flush(st, errstr, errstr_size);
    }
    return 0;
}

void bk_changelog_rebase(bk_store_t *st)
{
    drop_pending(st);
    free(st->src_pending);
    st->src_pending = NULL;
    st->src_pending_len = 0;
    st->marked = 0;
    st->ninput = 0;
    st->next = -1;
}

int64_t bk_changelog_pending(const bk_store_t *st)
{
    return st->npending + (st->src_pending != NULL); /* the dedup table's record counts */
}

int bk_changelog_resolve(bk_store_t *st, const int64_t *committed, int n, char *errstr,
                         size_t errstr_size)
{
    int ahead = 0;
    if (st->npending == 0 && !st->src_pending) {
        return 0;
    }
    if (st->ninput != n) {
        ahead = 1; /* cannot compare: keep what was written, as before markers */
    } else {
        for (int i = 0; i < n; i++) {
            ahead |= committed[i] > st->input[i];
        }
    }
    if (!ahead) {
        size_t keys = st->pkeys_len;
        drop_pending(st);
        /* a compacted changelog must not keep the dropped table as its newest record:
         * bk_changelog_repair writes the committed one again */
        st->src_dropped = st->src_pending != NULL;
        settle_src(st, 0);
        st->pkeys_len = keys; /* kept for bk_changelog_repair */
        st->repair = 1;
        return 0;
    }
    if (write_pending(st, errstr, errstr_size) != 0) {
        return -1;
    }
    settle_src(st, 1);
    st->ninput = n;
    memcpy(st->input, committed, (size_t)n * sizeof(*committed));
    return 1;
}

int bk_changelog_write_marker(bk_store_t *st, int commit, const int64_t *offsets, int n)
{
    char buf[512];
    int len;
    if (!st->logged || !st->changelog || n > BK_STORE_MAX_INPUTS) {
        return BK_FFI_OK;
    }
    len = snprintf(buf, sizeof(buf), "%s 1 %d", commit ? "beck-commit" : "beck-abort", n);
    for (int i = 0; i < n; i++) {
        len += snprintf(buf + len, sizeof(buf) - (size_t)len, " %lld", (long long)offsets[i]);
    }
    return bk_store_log_write(st, BK_KEYS_MARKER, sizeof(BK_KEYS_MARKER) - 1, buf, (size_t)len, 0);
}

/* The dedup table's record: its text (dedup.h) under BK_KEYS_SRC. */
static int write_src(bk_store_t *st)
{
    size_t len;
    char *text = bk_dedup_text(st->src, &len);
    int rc;
    if (!text) {
        snprintf(st->err, sizeof(st->err), "store %s: out of memory", st->name);
        return BK_FFI_ERR;
    }
    rc = bk_store_log_write(st, BK_KEYS_SRC, sizeof(BK_KEYS_SRC) - 1, text, len, 0);
    free(text);
    if (rc == BK_FFI_OK) {
        bk_dedup_clean(st->src);
        st->src_dropped = 0;
    }
    return rc;
}

int bk_changelog_write_dedup(bk_store_t *st)
{
    if (!st->src || !st->logged || !st->changelog ||
        !(bk_dedup_dirty(st->src) || st->src_dropped)) {
        return BK_FFI_OK;
    }
    return write_src(st);
}

int bk_changelog_repair(bk_store_t *st, int64_t *written)
{
    size_t off = 0;
    *written = 0;
    if (st->src_dropped && bk_store_dedup(st) && write_src(st) != BK_FFI_OK) {
        return BK_FFI_ERR; /* its committed table over the dropped one */
    }
    if (!st->repair) {
        return BK_FFI_OK;
    }
    while (off < st->pkeys_len) {
        uint32_t klen;
        const char *key, *pk;
        char *v, *err = NULL;
        size_t plen, vlen = 0;
        int rc;
        memcpy(&klen, st->pkeys + off, sizeof(klen));
        key = st->pkeys + off + sizeof(klen);
        off += sizeof(klen) + klen;
        pk = bk_store_prefixed(st, key, klen, &plen);
        v = rocksdb_get_cf(st->db->rdb, st->db->ropts, st->cf, pk, plen, &vlen, &err);
        if (err) {
            snprintf(st->err, sizeof(st->err), "store %s: get failed: %s", st->name, err);
            free(err);
            return BK_FFI_ERR;
        }
        if (v && st->ttl_ms > 0 && vlen >= BK_TTL_BYTES) {
            /* the value as written, at its write time */
            rc = bk_store_log_write(st, key, klen, v + BK_TTL_BYTES, vlen - BK_TTL_BYTES,
                                    bk_ttl_time(v));
        } else {
            rc = bk_store_log_write(st, key, klen, v, v ? vlen : 0, 0);
        }
        free(v);
        if (rc != BK_FFI_OK) {
            return rc;
        }
        (*written)++;
    }
    st->pkeys_len = 0;
    st->repair = 0;
    return BK_FFI_OK;
}

int bk_changelog_flush(bk_store_t *st, char *errstr, size_t errstr_size)
{
    char *err = NULL;
    if (!st->restore_batch || rocksdb_writebatch_count(st->restore_batch) == 0) {
        return 0;
    }
    rocksdb_write(st->db->rdb, st->db->wopts, st->restore_batch, &err);
    st->db->unsynced = 1;
    if (err) {
        snprintf(errstr, errstr_size, "cannot write the state store in %s: %s", st->db->dir, err);
        free(err);
        return -1;
    }
    rocksdb_writebatch_clear(st->restore_batch);
    return 0;
}

int bk_changelog_write_base(bk_store_t *st, char **cursor, size_t *curlen, int max,
                            int64_t *written, int *done)
{
    rocksdb_iterator_t *it;
    int n = 0, rc = BK_FFI_OK;
    char *err = NULL;

    *done = 0;
    if (!st->logged || !st->changelog) {
        *done = 1;
        return BK_FFI_OK;
    }
    it = rocksdb_create_iterator_cf(st->db->rdb, st->db->ropts, st->cf);
    if (*cursor) {
        size_t kl;
        const char *k;
        rocksdb_iter_seek(it, *cursor, *curlen);
        if (rocksdb_iter_valid(it) && (k = rocksdb_iter_key(it, &kl)) && kl == *curlen &&
            memcmp(k, *cursor, kl) == 0) {
            rocksdb_iter_next(it); /* written in the slice before */
        }
    } else {
        rocksdb_iter_seek_to_first(it);
    }
    for (; rocksdb_iter_valid(it) && n < max; rocksdb_iter_next(it), n++) {
        size_t kl, vl;
        const char *k = rocksdb_iter_key(it, &kl), *v = rocksdb_iter_value(it, &vl);
        if (kl <= KG_BYTES) {
            continue;
        }
        /* the record the store wrote: its key without the group, a TTL value at its time */
        rc = st->ttl_ms > 0 && vl >= BK_TTL_BYTES
                 ? bk_store_log_write(st, k + KG_BYTES, kl - KG_BYTES, v + BK_TTL_BYTES,
                                      vl - BK_TTL_BYTES, bk_ttl_time(v))
                 : bk_store_log_write(st, k + KG_BYTES, kl - KG_BYTES, v, vl, 0);
        if (rc != BK_FFI_OK) {
            break;
        }
        (*written)++;
        if (kl > *curlen || !*cursor) {
            char *c = realloc(*cursor, kl);
            if (!c) {
                snprintf(st->err, sizeof(st->err), "store %s: out of memory", st->name);
                rc = BK_FFI_ERR;
                break;
            }
            *cursor = c;
        }
        memcpy(*cursor, k, kl);
        *curlen = kl;
    }
    if (rc == BK_FFI_OK) {
        rocksdb_iter_get_error(it, &err);
        if (err) {
            snprintf(st->err, sizeof(st->err), "store %s: reading it: %s", st->name, err);
            free(err);
            rc = BK_FFI_ERR;
        } else if (!rocksdb_iter_valid(it)) {
            *done = 1;
            free(*cursor);
            *cursor = NULL;
            *curlen = 0;
        }
    }
    rocksdb_iter_destroy(it);
    return rc;
}
