/* regroup.h - a task's state built from the state of other tasks by key-group ranges: the
 * state move of repartitioning (docs/repartitioning.md). Every key on disk starts with its
 * key group (base/keys.h), so the keys of groups [lo, hi) are one contiguous key range in
 * every column family, and a new task's state is the union of that range over the old
 * tasks. Nothing is replayed from a changelog: the old task that covers the most of the
 * range is taken whole (its SST files hard-linked, as a RocksDB checkpoint does) and what
 * lies outside the range is dropped (whole files, then a range delete); the others' keys in
 * the range are copied in key order into SST files and ingested. Any thread; it touches
 * only the directories it is given. */
#ifndef BK_REGROUP_H
#define BK_REGROUP_H

#include <stddef.h>
#include <stdint.h>

/* What a build did. */
typedef struct bk_regroup_stats_s {
    int32_t primary;        /* the source taken whole (index into srcs), -1: none */
    int64_t linked_bytes;   /* SST bytes hard-linked from it */
    int64_t copied_keys;    /* keys copied from the other sources */
    int64_t copied_bytes;   /* their key and value bytes */
    int64_t dropped_files;  /* the primary's SST files wholly outside the range */
    int32_t sources_used;   /* sources that had keys in the range */
    int64_t elapsed_ms;
} bk_regroup_stats_t;

/* Builds in dst (which must not exist) a RocksDB holding exactly the keys of key groups
 * [lo, hi) (0 <= lo < hi <= BK_HASH_KEY_GROUPS) that the nsrc sources hold. Each source is
 * the directory of a RocksDB without a WAL to replay, closed (a RocksDB checkpoint:
 * bk_db_checkpoint_to); groups[2k], groups[2k + 1] bound the groups source k may hold
 * ([lo, hi) of a range-owned task; 0, BK_HASH_KEY_GROUPS for one that holds groups by
 * input partition). Two sources must never hold the same key: each key group lives in one
 * task of a generation. Column families are the primary source's; the others' are read by
 * name. dst gets no beck checkpoint file (the caller writes one). 0, or -1 with errstr
 * (dst removed). */
int bk_regroup_build(const char *dst, const char *const *srcs, const int32_t *groups, int nsrc,
                     int32_t lo, int32_t hi, bk_regroup_stats_t *stats, char *errstr,
                     size_t errstr_size);

/* Whether every key of every column family of the RocksDB in dir (closed) lies in key
 * groups [lo, hi): 1 yes, 0 no (*first_bad: the first key group outside), -1 error. Counts
 * the keys into *nkeys when not NULL. For specs and `beck dump`. */
int bk_regroup_check(const char *dir, int32_t lo, int32_t hi, int32_t *first_bad, int64_t *nkeys,
                     char *errstr, size_t errstr_size);

#endif
