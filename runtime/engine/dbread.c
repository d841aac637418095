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

int bk_dbread_window(bk_db_t *db, int store)
{
    return db->stores[store].window;
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

int bk_dbread_get(bk_db_t *db, int store, const char *key, size_t klen, char **value, size_t *vlen,
                  char *errstr, size_t errstr_size)
{
    bk_store_t *st = &db->stores[store];
    char stack[256], *k = disk_key(st, key, klen, stack, sizeof(stack));
    char *err = NULL;

    *value = NULL;
    if (!k) {
        snprintf(errstr, errstr_size, "out of memory");
        return -1;
    }
    *value = rocksdb_get_cf(db->rdb, db->ropts, st->cf, k, klen + KG_BYTES, vlen, &err);
    if (k != stack) {
        free(k);
    }
    if (err) {
        snprintf(errstr, errstr_size, "store %s: %s", st->name, err);
        rocksdb_free(err);
        return -1;
    }
    return *value != NULL;
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
    *value = rocksdb_pinnableslice_value(p, vlen);
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
