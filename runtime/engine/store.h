/* store.h - a task's state: one RocksDB per task, one column family per store.
 *
 * Every key on disk is prefixed with its key group (2 bytes, big-endian;
 * hash.h) so that state can later be split and moved by ranges. Writes of a
 * commit interval collect in a write batch with index (reads see them) and
 * reach the DB only at commit, after the producer has flushed their
 * changelog records: so the DB never holds a write that its changelog lacks,
 * and a restore from the checkpoint's offsets rebuilds exactly the changelog's
 * state. Each write of a logged store is also produced to the store's
 * changelog topic (<app>-<store>-changelog, partition = the task's).
 * @locality the owning stream thread only. */
#ifndef BK_STORE_H
#define BK_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

typedef struct bk_db_s bk_db_t;       /* one task's RocksDB */
typedef struct bk_store_s bk_store_t; /* one store of one task */

typedef struct bk_store_spec_s {
    const char *name;
    int logged; /* has a changelog */
    int window; /* a window store: its keys have base/keys.h's window layout and sit
                 * under their record key's group */
} bk_store_spec_t;

/* Opens (creating as needed) the DB in dir with a column family per spec and
 * reads dir's checkpoint file. NULL with errstr on failure (state directory
 * unwritable, locked by another process, ...). */
bk_db_t *bk_db_open(const char *dir, const bk_store_spec_t *specs, int nspecs, char *errstr,
                    size_t errstr_size);
void bk_db_close(bk_db_t *db);
int bk_db_store_count(const bk_db_t *db);
bk_store_t *bk_db_store(bk_db_t *db, int i);

/* Makes the interval's writes durable: the batch is written with a synced
 * WAL and cleared. Call only after the producer has flushed. */
int bk_db_commit(bk_db_t *db, char *errstr, size_t errstr_size);
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
} bk_checkpoint_line_t;
/* Writes dir/checkpoint with these lines atomically (tmp, fsync, rename, fsync dir):
 * bk_db_checkpoint's writer, also used to install a snapshot. */
int bk_db_checkpoint_file_write(const char *dir, const bk_checkpoint_line_t *lines, int n,
                                char *errstr, size_t errstr_size);

const char *bk_store_name(const bk_store_t *st);
int bk_store_logged(const bk_store_t *st);
/* Where the changelog goes; producer and rkt are the thread's. */
void bk_store_set_changelog(bk_store_t *st, rd_kafka_t *producer, rd_kafka_topic_t *rkt,
                            int32_t partition);
/* Next changelog offset the DB reflects: from the checkpoint, restore and
 * acknowledged writes; -1 when unknown (no checkpoint yet). */
int64_t bk_store_changelog_next(const bk_store_t *st);
/* The changelog's topic (NULL: none set yet) and partition, as bk_store_set_changelog or
 * bk_store_set_changelog_topic set them. */
const char *bk_store_changelog_topic(const bk_store_t *st, int32_t *partition);
/* Names the changelog without a producer, for offline tools (beck snapshot); copied. */
void bk_store_set_changelog_topic(bk_store_t *st, const char *topic, int32_t partition);
/* The producer acknowledged a changelog record of this store at `offset`. */
void bk_store_acked(bk_store_t *st, int64_t offset);

/* Restore and standbys: applies one changelog record at `offset` (value NULL: delete).
 *
 * Markers. After each commit of its input offsets an active writes a commit marker (key
 * BK_STORE_MARKER_KEY, value "beck-commit 1 <n> <input offsets>") to each changelog of the
 * task, and when
 * it takes a task over, one marker that settles what the previous owner left after its
 * last one: commit (that input was committed after all) or abort ("beck-abort 1 ...").
 * A reader holds the records after the last marker as pending, writes them when a commit
 * marker comes and drops them at an abort, so a replica never holds the writes of input
 * that was not committed and a kill -9 costs no double counts (docs/state.md). Records of
 * a changelog without markers are written at once, as they were before markers. */
int bk_store_restore_apply(bk_store_t *st, const void *key, size_t klen, const void *value,
                           size_t vlen, int64_t offset, char *errstr, size_t errstr_size);
int bk_store_restore_flush(bk_store_t *st, char *errstr, size_t errstr_size);

#define BK_STORE_MAX_INPUTS 16 /* input partitions a task's markers can name */

/* The key of every marker. A compacted topic refuses records without a key, and the log
 * cleaner keeps the newest record of each key: so all markers of a changelog partition
 * share one key, and the newest marker, the one a reader needs, survives. 0xff is never
 * in UTF-8 text; a store refuses to write this key. Markers without a key (written
 * before) are still read. */
#define BK_STORE_MARKER_KEY "\xff" "beck-marker"

/* Whether a changelog record's key is a marker's (NULL: the old, keyless markers). */
int bk_store_is_marker(const void *key, size_t klen);

/* Records read after the last marker, not applied yet. */
int64_t bk_store_restore_pending(const bk_store_t *st);
/* At the end of a takeover's restore: the pending records are the previous owner's writes
 * after its last marker. If `committed` (the task's committed input offsets, -1: none) is
 * past the input of that marker, their input was committed: they are written and 1 is
 * returned; else they are dropped (0). -1 on a write error. */
int bk_store_restore_resolve(bk_store_t *st, const int64_t *committed, int n, char *errstr,
                             size_t errstr_size);
/* After bk_store_restore_resolve dropped records: writes each of their keys to the
 * changelog again with its value in the store (a tombstone when it has none), so that the
 * newest record of every key in the changelog is committed state again. The caller
 * follows them with a commit marker. Their count into *written; BK_FFI_OK or BK_FFI_ERR
 * with the message in the store's error. */
int bk_store_repair(bk_store_t *st, int64_t *written);
/* The input offsets the store's state corresponds to, for the next checkpoint. */
void bk_store_set_input(bk_store_t *st, const int64_t *offsets, int n);
/* Copies the input offsets the store's state corresponds to into offsets (room for
 * BK_STORE_MAX_INPUTS); returns their count, 0: unknown. */
int bk_store_input(const bk_store_t *st, int64_t *offsets);
/* Produces a marker (commit, or abort with commit = 0) naming `offsets` to the store's
 * changelog. BK_FFI_OK, or BK_FFI_ERR with the message in the store's error. */
int bk_store_write_marker(bk_store_t *st, int commit, const int64_t *offsets, int n);

#endif
