/* dbread.h - a task's committed state, read from any thread: what queries (query/) see.
 *
 * A DB's owner (a stream thread, or the standby runner) writes through its own batch and
 * commits it; these calls read the DB itself, so they see the last commit of an active, or
 * the last commit marker a standby applied, never half an interval. RocksDB serves reads
 * from any thread while another writes. The DB must stay open for the call and for an
 * iterator's life: take it with bk_taskdb_read_begin (taskdb.h).
 * @locality any thread */
#ifndef BK_DBREAD_H
#define BK_DBREAD_H

#include <stddef.h>
#include <stdint.h>

#include "base/ffi.h"
#include "engine/store.h"

/* The index (bk_db_store) of the DB's store `name`, -1: the task has no such store. */
int bk_dbread_store(bk_db_t *db, const char *name);
/* The committed value of `key` in store `store`, without a copy: *value points into
 * RocksDB's block (or a copy it owns) until bk_dbread_unpin(*pin). 1 found, 0 not (nothing
 * to unpin), -1 with errstr. */
typedef struct bk_dbread_pin_s bk_dbread_pin_t;
int bk_dbread_get_pinned(bk_db_t *db, int store, const char *key, size_t klen,
                         const char **value, size_t *vlen, bk_dbread_pin_t **pin, char *errstr,
                         size_t errstr_size);
void bk_dbread_unpin(bk_dbread_pin_t *pin);
/* A scan of the committed state in key order, as bk_ffi_store_iter_new's modes (range
 * [a, b], b NULL: to the end; prefix a; all); read with bk_ffi_store_iter_next, free with
 * bk_ffi_store_iter_free. NULL without memory. */
bk_store_iter_t *bk_dbread_iter(bk_db_t *db, int store, int mode, const char *a, size_t alen,
                                const char *b, size_t blen);

/* One page of a scan of the committed state, in key order: the first `limit` keys after
 * `after` (exclusive; NULL: from `lo`, inclusive) up to `hi` (inclusive; NULL: no bound),
 * and with `prefix` (NULL: any). emit gets them in order (0 to go on, -1 to stop with an
 * error). Returns 1 when keys past the page remain, 0 when not, -1 on an error.
 * Cheaper than an iterator for a page: one RocksDB iterator seeks each key group once and
 * keeps the best `limit` keys, instead of a cursor per group (4,096 of them in a big store). */
typedef int (*bk_dbread_emit_fn)(void *opaque, const char *k, size_t kl, const char *v,
                                 size_t vl);
int bk_dbread_page(bk_db_t *db, int store, const char *lo, size_t lolen, const char *hi,
                   size_t hilen, const char *prefix, size_t plen, const char *after,
                   size_t afterlen, int limit, bk_dbread_emit_fn emit, void *opaque);
/* A RocksDB integer property (e.g. "rocksdb.live-sst-files-size") of the DB (store -1) or
 * of one store's column family; -1 when RocksDB has no such figure. */
int64_t bk_dbread_property(bk_db_t *db, int store, const char *name);

#endif
