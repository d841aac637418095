/* regroup.c - scripts/bench/repartition's driver: the state move of a repartitioning
 * (runtime/engine/regroup.c) on the state directories a real app left behind.
 *
 *   regroup APP_DIR NOLD NNEW STORE OUT_DIR
 *
 * APP_DIR holds the closed task directories 0_0 .. 0_<NOLD-1> of a subtopology 0 that
 * owned key groups by range over NOLD tasks (the `tasks` setting), with one key-value
 * store STORE. For each old task: its DB is opened, a RocksDB checkpoint made into
 * OUT_DIR/old-T (what a draining task makes) and closed, timed. Then each of the NNEW
 * tasks of the next generation is built into OUT_DIR/new-Q from those checkpoints by its
 * key-group range (bk_regroup_build), timed, and checked to hold only its groups
 * (bk_regroup_check). Prints `key value` lines: checkpoint_ms_max and _total,
 * build_ms_max and _total, linked_mb, copied_keys, links_only (new tasks built without
 * copying a key), keys (in the new tasks), keys_old (in the checkpoints). Exit 1 on any
 * error or on a key outside its task's groups. */
#define _GNU_SOURCE

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/hash.h"
#include "engine/db.h"
#include "engine/regroup.h"
#include "engine/store.h"

#define MAX_TASKS 4096

int main(int argc, char **argv)
{
    char err[1024], path[4096];
    int nold, nnew;
    int64_t ck_max = 0, ck_total = 0, b_max = 0, b_total = 0, linked = 0, copied = 0;
    int64_t keys = 0, keys_old = 0;
    int links_only = 0;
    char **srcs;
    int32_t *groups;

    if (argc != 6 || (nold = atoi(argv[2])) < 1 || nold > MAX_TASKS ||
        (nnew = atoi(argv[3])) < 1 || nnew > MAX_TASKS) {
        fprintf(stderr, "usage: regroup APP_DIR NOLD NNEW STORE OUT_DIR\n");
        return 2;
    }
    srcs = calloc((size_t)nold, sizeof(*srcs));
    groups = calloc((size_t)nold * 2, sizeof(*groups));
    for (int t = 0; t < nold; t++) {
        bk_store_spec_t spec = {.name = argv[4], .logged = 1};
        bk_db_t *db;
        double t0 = bk_clock_mono_s();
        int64_t ms, n = 0;
        snprintf(path, sizeof(path), "%s/0_%d", argv[1], t);
        if (!(db = bk_db_open(path, &spec, 1, err, sizeof(err)))) {
            fprintf(stderr, "regroup: %s: %s\n", path, err);
            return 1;
        }
        if (asprintf(&srcs[t], "%s/old-%d", argv[5], t) < 0 ||
            bk_db_checkpoint_to(db, srcs[t], err, sizeof(err)) != 0) {
            fprintf(stderr, "regroup: checkpoint of %s: %s\n", path, err);
            return 1;
        }
        bk_db_close(db);
        ms = (int64_t)((bk_clock_mono_s() - t0) * 1000);
        ck_max = ms > ck_max ? ms : ck_max;
        ck_total += ms;
        bk_hash_group_range(t, nold, &groups[2 * t], &groups[2 * t + 1]);
        if (bk_regroup_check(srcs[t], groups[2 * t], groups[2 * t + 1], NULL, &n, err,
                             sizeof(err)) != 1) {
            fprintf(stderr, "regroup: old task %d holds keys outside its groups\n", t);
            return 1;
        }
        keys_old += n;
    }
    for (int q = 0; q < nnew; q++) {
        int32_t lo, hi, bad = -1;
        int64_t n = 0;
        bk_regroup_stats_t st;
        bk_hash_group_range(q, nnew, &lo, &hi);
        snprintf(path, sizeof(path), "%s/new-%d", argv[5], q);
        if (bk_regroup_build(path, (const char *const *)srcs, groups, nold, lo, hi, &st, err,
                             sizeof(err)) != 0) {
            fprintf(stderr, "regroup: building new task %d: %s\n", q, err);
            return 1;
        }
        b_max = st.elapsed_ms > b_max ? st.elapsed_ms : b_max;
        b_total += st.elapsed_ms;
        linked += st.linked_bytes;
        copied += st.copied_keys;
        links_only += st.copied_keys == 0;
        if (bk_regroup_check(path, lo, hi, &bad, &n, err, sizeof(err)) != 1) {
            fprintf(stderr, "regroup: new task %d holds key group %d, outside [%d, %d)%s%s\n", q,
                    (int)bad, (int)lo, (int)hi, bad < 0 ? ": " : "", bad < 0 ? err : "");
            return 1;
        }
        keys += n;
    }
    printf("checkpoint_ms_max %lld\ncheckpoint_ms_total %lld\nbuild_ms_max %lld\n"
           "build_ms_total %lld\nlinked_mb %.1f\ncopied_keys %lld\nlinks_only %d\nkeys %lld\n"
           "keys_old %lld\n",
           (long long)ck_max, (long long)ck_total, (long long)b_max, (long long)b_total,
           (double)linked / 1e6, (long long)copied, links_only, (long long)keys,
           (long long)keys_old);
    return keys == keys_old ? 0 : 1;
}
