/* db.h - a task's RocksDB (store.h has its stores): open and close, the commit that makes
 * an interval's writes durable, and the checkpoint file that records the changelog and
 * input offsets the DB reflects. @locality the thread that holds the DB (taskdb.h). */
#ifndef BK_DB_H
#define BK_DB_H

#include <stddef.h>
#include <stdint.h>

#include "engine/store.h"

/* The block cache every DB of the process shares (block_cache_bytes): set before the first
 * bk_db_open, or the default holds. */
#define BK_DB_CACHE_DEFAULT ((size_t)64 << 20)
void bk_db_set_cache_bytes(size_t bytes);
/* The memtable of each store (write_buffer_bytes): set before the DBs open. */
#define BK_DB_WRITE_BUFFER_DEFAULT ((size_t)8 << 20)
void bk_db_set_write_buffer_bytes(size_t bytes);
/* Starts RocksDB's background threads (flushes, compactions) from the calling thread, before
 * any DB opens: they would start in the first thread that needs one, maybe a task's opening
 * job, which runs at a lower priority (thread_tasks.c) that they would keep. */
void bk_db_start_background(void);
/* A task's directory holds its checkpoint file and, in this subdirectory, its RocksDB. */
#define BK_DB_ROCKSDB_DIR "rocksdb"
/* Opens (creating as needed) the DB in dir (its RocksDB in dir/BK_DB_ROCKSDB_DIR) with a
 * column family per spec and reads dir's checkpoint file. NULL with errstr on failure (state directory
 * unwritable, locked by another process, ...). */
bk_db_t *bk_db_open(const char *dir, const bk_store_spec_t *specs, int nspecs, char *errstr,
                    size_t errstr_size);
void bk_db_close(bk_db_t *db);
int bk_db_store_count(const bk_db_t *db);
bk_store_t *bk_db_store(bk_db_t *db, int i);

/* Makes the interval's writes durable: the batch is written with a synced
 * WAL and cleared. Call only after the producer has flushed. */
int bk_db_commit(bk_db_t *db, char *errstr, size_t errstr_size);
/* The same, the WAL synced or not (sync 0: exactly-once between checkpoints, where the
 * committed changelog, not the DB, is what a crash recovers from: docs/state.md). */
int bk_db_commit_sync(bk_db_t *db, int sync, char *errstr, size_t errstr_size);
/* Writes the checkpoint file atomically (tmp, fsync, rename, fsync dir):
 * the next changelog offset of every logged store. */
int bk_db_checkpoint(bk_db_t *db, char *errstr, size_t errstr_size);
/* Makes a RocksDB checkpoint of the db in dir (which must not exist; RocksDB creates it):
 * memtables flushed first, SST files hard-linked, no WAL. Refused while the db holds
 * uncommitted writes (call between commits). For snapshots (snapshot.h). */
int bk_db_checkpoint_to(bk_db_t *db, const char *dir, char *errstr, size_t errstr_size);

/* One line of a task's checkpoint file: "<store> <next> [<ninputs> <input>...]". */
typedef struct bk_checkpoint_line_s {
    const char *store;
    int64_t next;
    int ninputs; /* 0..BK_STORE_MAX_INPUTS */
    const int64_t *inputs;
    const struct bk_dedup_s *src; /* the store's dedup table (engine/dedup.h), NULL: none */
} bk_checkpoint_line_t;
/* Writes dir/checkpoint with these lines atomically (tmp, fsync, rename, fsync dir):
 * bk_db_checkpoint's writer, also used to install a snapshot. */
int bk_db_checkpoint_file_write(const char *dir, const bk_checkpoint_line_t *lines, int n,
                                char *errstr, size_t errstr_size);

#endif
