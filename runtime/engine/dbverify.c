/* dbverify.c - the scrub of a task's RocksDB (dbverify.h). */
#include "engine/dbverify.h"

#include <rocksdb/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/store_internal.h"

struct bk_dbverify_s {
    int cf;     /* the column family being read */
    char *key;  /* the last key read in it, NULL: from its start */
    size_t klen;
    rocksdb_readoptions_t *ropts;
};

bk_dbverify_t *bk_dbverify_new(void)
{
    bk_dbverify_t *v = calloc(1, sizeof(*v));
    if (!v || !(v->ropts = rocksdb_readoptions_create())) {
        free(v);
        return NULL;
    }
    /* from the files, checked: a cached block was checked when it was read */
    rocksdb_readoptions_set_verify_checksums(v->ropts, 1);
    rocksdb_readoptions_set_fill_cache(v->ropts, 0);
    return v;
}

void bk_dbverify_free(bk_dbverify_t *v)
{
    if (v) {
        free(v->key);
        rocksdb_readoptions_destroy(v->ropts);
        free(v);
    }
}

int bk_dbverify_is_corruption(const char *msg)
{
    return msg && strstr(msg, "Corruption") != NULL;
}

int bk_dbverify_step(bk_dbverify_t *v, bk_db_t *db, int max, char *errstr, size_t errstr_size)
{
    rocksdb_iterator_t *it;
    char *err = NULL;
    int n = 0;

    if (v->cf >= db->ncfs) {
        v->cf = 0;
    }
    it = rocksdb_create_iterator_cf(db->rdb, v->ropts, db->cfs[v->cf]);
    if (v->key) {
        rocksdb_iter_seek(it, v->key, v->klen);
        if (rocksdb_iter_valid(it)) {
            size_t kl;
            const char *k = rocksdb_iter_key(it, &kl);
            if (kl == v->klen && memcmp(k, v->key, kl) == 0) {
                rocksdb_iter_next(it);
            }
        }
    } else {
        rocksdb_iter_seek_to_first(it);
    }
    for (; n < max && rocksdb_iter_valid(it); n++) {
        rocksdb_iter_next(it);
    }
    if (rocksdb_iter_valid(it)) {
        size_t kl;
        const char *k = rocksdb_iter_key(it, &kl);
        char *copy = malloc(kl + 1);
        if (copy) {
            memcpy(copy, k, kl);
            free(v->key);
            v->key = copy;
            v->klen = kl;
        }
        rocksdb_iter_destroy(it);
        return 0;
    }
    rocksdb_iter_get_error(it, &err);
    rocksdb_iter_destroy(it);
    if (err) {
        snprintf(errstr, errstr_size, "%s: column family %d: %s", db->dir, v->cf, err);
        rocksdb_free(err);
        return -1;
    }
    free(v->key);
    v->key = NULL;
    if (++v->cf < db->ncfs) {
        return 0;
    }
    v->cf = 0;
    return 1;
}
