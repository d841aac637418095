/* changelog.h - a store's changelog read back and kept exact: restore and standbys apply
 * its records, commit and abort markers settle them, and a takeover repairs what it
 * dropped (docs/state.md, Markers). @locality the thread that holds the store's DB. */
#ifndef BK_CHANGELOG_H
#define BK_CHANGELOG_H

#include <stddef.h>
#include <stdint.h>

#include "engine/store.h"

/* Restore and standbys: applies one changelog record at `offset` (value NULL: delete).
 *
 * Markers. After each commit of its input offsets an active writes a commit marker (key
 * BK_KEYS_MARKER, value "beck-commit 1 <n> <input offsets>") to each changelog of the
 * task, and when
 * it takes a task over, one marker that settles what the previous owner left after its
 * last one: commit (that input was committed after all) or abort ("beck-abort 1 ...").
 * A reader holds the records after the last marker as pending, writes them when a commit
 * marker comes and drops them at an abort, so a replica never holds the writes of input
 * that was not committed and a kill -9 costs no double counts (docs/state.md). Records of
 * a changelog without markers are written at once, as they were before markers. */
int bk_changelog_apply(bk_store_t *st, const void *key, size_t klen, const void *value, size_t vlen,
                       int64_t offset, int64_t timestamp, char *errstr, size_t errstr_size);
int bk_changelog_flush(bk_store_t *st, char *errstr, size_t errstr_size);

/* Markers are keyed BK_KEYS_MARKER (base/keys.h); bk_keys_is_marker tells them. */

/* A later generation's store, built from the changelogs of the generation before
 * (docs/repartitioning.md): forgets their position, input offsets and anything pending,
 * so that its own changelog is replayed from its start on top of what was built. */
void bk_changelog_rebase(bk_store_t *st);

/* Sealing a later generation's task (docs/repartitioning.md, Cleanup): the store's whole
 * state written to its changelog, a slice at a time, each entry as the record the store
 * wrote for it (its key without the group, a TTL value at its write time), so that the
 * changelog alone holds the state the task was built from. From after *cursor (a disk key,
 * *curlen bytes; NULL: the start), at most max entries; *cursor is then the last one
 * written (malloc'd), or NULL with *done = 1 at the end. Read from the DB: call it when
 * the store has no write pending (right after a commit). *written counts the records.
 * BK_FFI_OK, or BK_FFI_ERR with the message in the store's error. */
int bk_changelog_write_base(bk_store_t *st, char **cursor, size_t *curlen, int max,
                            int64_t *written, int *done);

/* Records read after the last marker, not applied yet. */
int64_t bk_changelog_pending(const bk_store_t *st);
/* At the end of a takeover's restore: the pending records are the previous owner's writes
 * after its last marker. If `committed` (the task's committed input offsets, -1: none) is
 * past the input of that marker, their input was committed: they are written and 1 is
 * returned; else they are dropped (0). -1 on a write error. */
int bk_changelog_resolve(bk_store_t *st, const int64_t *committed, int n, char *errstr,
                         size_t errstr_size);
/* After bk_changelog_resolve dropped records: writes each of their keys to the
 * changelog again with its value in the store (a tombstone when it has none), so that the
 * newest record of every key in the changelog is committed state again. The caller
 * follows them with a commit marker. Their count into *written; BK_FFI_OK or BK_FFI_ERR
 * with the message in the store's error. */
int bk_changelog_repair(bk_store_t *st, int64_t *written);
/* Produces a marker (commit, or abort with commit = 0) naming `offsets` to the store's
 * changelog. BK_FFI_OK, or BK_FFI_ERR with the message in the store's error. */
int bk_changelog_write_marker(bk_store_t *st, int commit, const int64_t *offsets, int n);
/* Writes the store's dedup table (bk_store_dedup) to its changelog when it changed since it
 * was last written, before the commit's marker. BK_FFI_OK or BK_FFI_ERR (bk_ffi_store_error
 * says why). */
int bk_changelog_write_dedup(bk_store_t *st);

#endif
