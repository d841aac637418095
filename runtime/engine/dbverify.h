/* dbverify.h - a scrub of a task's RocksDB (docs/reliability.md, A corrupted store): every
 * entry of every column family read back from the files a slice at a time, with the block
 * checksums RocksDB keeps checked, so that a damaged SST file (a bad disk, a stray write) is
 * found before a promotion or a query needs it. A standby runner scrubs its replicas in the
 * background (replica/standby.c). @locality the thread that holds the DB */
#ifndef BK_DBVERIFY_H
#define BK_DBVERIFY_H

#include <stddef.h>

#include "engine/store.h"

typedef struct bk_dbverify_s bk_dbverify_t;

/* A cursor at the start of a DB. NULL out of memory. */
bk_dbverify_t *bk_dbverify_new(void);
void bk_dbverify_free(bk_dbverify_t *v);

/* Reads up to `max` entries on from the cursor, past the block cache: 0 there is more, 1 a
 * pass over the whole DB ended (the cursor starts again), -1 a read failed (errstr has
 * RocksDB's word: "Corruption: block checksum mismatch ..." for a damaged file). */
int bk_dbverify_step(bk_dbverify_t *v, bk_db_t *db, int max, char *errstr, size_t errstr_size);

/* True when a RocksDB error message says that data on disk is damaged. */
int bk_dbverify_is_corruption(const char *msg);

#endif
