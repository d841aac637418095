/* dbformat.h - the on-disk format of each store of a task's DB, recorded beside it, and what
 * happens when the topology's settings no longer match it.
 *
 * A store's settings decide its bytes on disk: a key-value store with a time to live keeps 8
 * bytes of write time before each value (store_internal.h, TTL), a window store keys its
 * entries under their record key's group (base/keys.h). Adding or removing `ttl`, or turning
 * a key-value store into a window store, over an existing state directory would read the old
 * bytes with the new layout: values cut by 8 bytes, or 8 bytes of garbage in front, and no
 * error. So each store's format ("kv", "kv-ttl" or "window") is kept in the DB's default
 * column family under "beck-format:<store>" and checked at every open:
 *  - no record (a new store, or a DB from before this record existed): the current format is
 *    recorded;
 *  - the same: nothing;
 *  - another, for a store with a changelog: its local data is dropped and replayed from the
 *    changelog, which holds values without any local layout (its checkpoint line is removed
 *    first, so a crash half-way drops it again at the next open);
 *  - another, for a store without a changelog: its entries are rewritten in the new layout in
 *    one batch (a value given a time to live is stamped with the open's wall-clock time).
 * Either way the node says so in its log. Stream thread or opening job (db.h). */
#ifndef BK_DBFORMAT_H
#define BK_DBFORMAT_H

#include <stddef.h>

#include "engine/store.h"

/* The format a store spec writes: "kv", "kv-ttl" or "window". */
const char *bk_dbformat_of(const bk_store_spec_t *spec);

/* Checks (and settles, as above) the format of every store of db, just opened with specs;
 * its checkpoint file read. 0, or -1 with errstr (a RocksDB read or write failed). */
int bk_dbformat_settle(bk_db_t *db, const bk_store_spec_t *specs, int nspecs, char *errstr,
                       size_t errstr_size);

#endif
