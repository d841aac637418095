/* dbformat.c - each store's on-disk format, recorded and checked at open (dbformat.h). */
#include "engine/dbformat.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <rocksdb/c.h>

#include "base/clock.h"
#include "base/keys.h"
#include "base/log.h"
#include "engine/db.h"
#include "engine/store_internal.h"

#define RECORD_PREFIX "beck-format:"

const char *bk_dbformat_of(const bk_store_spec_t *spec)
{
    if (spec->window) {
        return "window";
    }
    return spec->ttl_ms > 0 ? "kv-ttl" : "kv";
}

static int record_key(const bk_store_t *st, char *buf, size_t size)
{
    return snprintf(buf, size, "%s%s", RECORD_PREFIX, st->name);
}

/* The entry k (a disk key: group + store key) and v of a store in format `from`, in format
 * `to`, put in b (the old key deleted when the new one differs). */
static void convert_one(rocksdb_writebatch_t *b, bk_store_t *st, const char *from,
                        const char *to, const char *k, size_t kl, const char *v, size_t vl,
                        int64_t now)
{
    char nk[4096], tv[8];
    const char *key = k, *val = v;
    size_t nkl = kl, nvl = vl;
    int was_window = strcmp(from, "window") == 0, is_window = strcmp(to, "window") == 0;
    int was_ttl = strcmp(from, "kv-ttl") == 0, is_ttl = strcmp(to, "kv-ttl") == 0;
    if (kl < KG_BYTES) {
        return;
    }
    if (was_window != is_window && kl <= sizeof(nk)) {
        int g = bk_keys_group(k + KG_BYTES, kl - KG_BYTES, is_window);
        nk[0] = (char)(g >> 8);
        nk[1] = (char)(g & 0xff);
        memcpy(nk + KG_BYTES, k + KG_BYTES, kl - KG_BYTES);
        key = nk;
    }
    if (was_ttl && !is_ttl) {
        val = vl >= 8 ? v + 8 : v;
        nvl = vl >= 8 ? vl - 8 : vl;
    }
    if (is_ttl && !was_ttl) {
        const char *parts[2] = {tv, v};
        size_t sizes[2] = {8, vl};
        for (int i = 0; i < 8; i++) {
            tv[i] = (char)((uint64_t)now >> (8 * (7 - i)));
        }
        rocksdb_writebatch_putv_cf(b, st->cf, 1, &key, &nkl, 2, parts, sizes);
    } else {
        rocksdb_writebatch_put_cf(b, st->cf, key, nkl, val, nvl);
    }
    if (key != k) {
        rocksdb_writebatch_delete_cf(b, st->cf, k, kl);
    }
}

/* A store without a changelog: every entry rewritten in format `to`, with the record, in one
 * batch. */
static int convert(bk_db_t *db, bk_store_t *st, const char *from, const char *to,
                   rocksdb_writebatch_t *b)
{
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(db->rdb, db->ropts, st->cf);
    int64_t now = bk_clock_wall_ms(), n = 0;
    char *err = NULL;
    for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
        size_t kl, vl;
        const char *k = rocksdb_iter_key(it, &kl), *v = rocksdb_iter_value(it, &vl);
        convert_one(b, st, from, to, k, kl, v, vl, now);
        n++;
    }
    rocksdb_iter_get_error(it, &err);
    rocksdb_iter_destroy(it);
    if (err) {
        bk_log_error("%s: store %s: reading it to convert it failed: %s", db->dir, st->name,
                     err);
        free(err);
        return -1;
    }
    bk_log_warn("%s: store %s was written as \"%s\" and its settings now make it \"%s\"; it "
                "has no changelog to rebuild it from: its %lld entries are rewritten in the "
                "new layout%s",
                db->dir, st->name, from, to, (long long)n,
                strcmp(to, "kv-ttl") == 0 ? " (their time to live counts from now)" : "");
    return 0;
}

int bk_dbformat_settle(bk_db_t *db, const bk_store_spec_t *specs, int nspecs, char *errstr,
                       size_t errstr_size)
{
    for (int i = 0; i < nspecs && i < db->nstores; i++) {
        bk_store_t *st = &db->stores[i];
        const char *want = bk_dbformat_of(&specs[i]);
        char key[600], *err = NULL, *had;
        size_t hadlen = 0;
        int kl = record_key(st, key, sizeof(key));
        rocksdb_writebatch_t *b;

        had = rocksdb_get_cf(db->rdb, db->ropts, db->cfs[0], key, (size_t)kl, &hadlen, &err);
        if (err) {
            snprintf(errstr, errstr_size, "cannot read the format of store %s in %s: %s",
                     st->name, db->dir, err);
            free(err);
            return -1;
        }
        if (had && hadlen == strlen(want) && memcmp(had, want, hadlen) == 0) {
            free(had);
            continue;
        }
        b = rocksdb_writebatch_create();
        if (had) {
            char from[32];
            snprintf(from, sizeof(from), "%.*s", (int)(hadlen < 31 ? hadlen : 31), had);
            if (st->logged) {
                /* its checkpoint line goes first: a crash before the batch finds the old
                 * record and drops the store again; one after, an empty store replayed whole */
                bk_log_warn("%s: store %s was written as \"%s\" and its settings now make it "
                            "\"%s\" (its ttl, or its kind, changed): its local data is dropped "
                            "and replayed from its changelog",
                            db->dir, st->name, from, want);
                st->next = -1;
                st->ninput = 0;
                if (bk_db_checkpoint(db, errstr, errstr_size) != 0) {
                    free(had);
                    rocksdb_writebatch_destroy(b);
                    return -1;
                }
                rocksdb_writebatch_delete_range_cf(b, st->cf, "", 0, "\xff\xff\xff", 3);
            } else if (convert(db, st, from, want, b) != 0) {
                snprintf(errstr, errstr_size, "cannot convert store %s in %s to its new format",
                         st->name, db->dir);
                free(had);
                rocksdb_writebatch_destroy(b);
                return -1;
            }
            free(had);
        }
        rocksdb_writebatch_put_cf(b, db->cfs[0], key, (size_t)kl, want, strlen(want));
        rocksdb_write(db->rdb, db->wopts_sync, b, &err);
        rocksdb_writebatch_destroy(b);
        if (err) {
            snprintf(errstr, errstr_size, "cannot record the format of store %s in %s: %s",
                     st->name, db->dir, err);
            free(err);
            return -1;
        }
    }
    return 0;
}
