/* thread_build.c - the state a later generation's task starts from (docs/repartitioning.md,
 * Building a task): the keys of its key groups as the tasks of the generation before held
 * them when they drained; those have all drained (the node opens the task only then).
 *   1. Before its DB opens (bk_thread_build_prepare): the drained checkpoints of the
 *      overlapping tasks of the generation before that this node holds (drained.h) are
 *      cut to its groups and joined (regroup.h: SST files linked, the rest copied); their
 *      partitions are listed in BUILT-FROM.
 *   2. Its DB open (bk_thread_build_slot): the groups of the overlapping tasks whose
 *      checkpoints are elsewhere are read from the changelogs of every generation before,
 *      oldest first, filtered by key group (engine/build.h, which a standby replica of the
 *      task uses too).
 * Done once in its directory (a BUILT file says so); its own changelog is then replayed on
 * top, as any task's is. On the opening job's thread. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/events.h"
#include "base/fs.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/task.h"
#include "engine/build.h"
#include "engine/db.h"
#include "engine/drained.h"
#include "engine/regroup.h"
#include "engine/restore.h"
#include "engine/taskdb.h"
#include "engine/thread_internal.h"

#define FROM_FILE "BUILT-FROM" /* "<p> <p> ...": the partitions step 1 took */

static int write_file(const char *dir, const char *name, const char *text, char *err, size_t errsz)
{
    char path[4200];
    int fd;
    ssize_t len = (ssize_t)strlen(text);
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, text, (size_t)len) != len || fsync(fd) != 0) {
        snprintf(err, errsz, "cannot write %.900s: %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    close(fd);
    return 0;
}

/* Whether the task needs a build: a later generation's task with no BUILT file in dir. */
static int needs_build(bk_thread_job_t *job, int k, char *dir, size_t size)
{
    bk_thread_t *thr = job->thr;
    const bk_task_id_t task = thr->tasks[job->slots[k]];
    if (bk_plan_prev_generation(thr->plan, task.sub) < 0) {
        return 0;
    }
    bk_plan_task_dir(thr->plan, thr->conf, task, dir, size);
    return !bk_drained_built(dir); /* built before: its own changelog holds the rest */
}

int bk_thread_build_prepare(bk_thread_job_t *job, int k, const char *name)
{
    bk_thread_t *thr = job->thr;
    const bk_plan_t *plan = thr->plan;
    const bk_task_id_t task = thr->tasks[job->slots[k]];
    const bk_plan_sub_t *sub = &plan->subs[task.sub];
    int lo, hi, prev, np, nsrc = 0, rc = -1;
    char dir[4096], rdb[4200], from[1024], **srcs = NULL;
    int32_t *groups = NULL;
    size_t flen = 0;
    bk_regroup_stats_t st;

    if (!needs_build(job, k, dir, sizeof(dir))) {
        return 0;
    }
    /* what an earlier attempt left is not trusted: built anew */
    bk_taskdb_pool_close(thr->pool, task);
    if (access(dir, F_OK) == 0 && bk_fs_rm_tree(dir) != 0) {
        snprintf(job->err, sizeof(job->err),
                 "task %s: cannot remove %.900s, built only in part: %s", name, dir,
                 strerror(errno));
        return -1;
    }
    prev = bk_plan_prev_generation(plan, task.sub);
    if (prev < 0 || bk_plan_sealed(plan, task.sub)) {
        return 0; /* bk_thread_build_slot says what is wrong, or that it is sealed */
    }
    np = plan->subs[prev].partitions;
    bk_hash_group_range(task.partition, sub->partitions, &lo, &hi);
    srcs = calloc((size_t)np + 1, sizeof(*srcs));
    groups = calloc(2 * (size_t)np + 2, sizeof(*groups));
    if (!srcs || !groups) {
        snprintf(job->err, sizeof(job->err), "out of memory");
        goto done;
    }
    from[0] = '\0';
    for (int p = 0; p < np; p++) {
        int plo, phi;
        char src[4096];
        bk_plan_task_groups(plan, prev, p, &plo, &phi);
        if (phi <= lo || plo >= hi ||
            !bk_drained_find(plan, thr->conf, (bk_task_id_t){prev, p}, src, sizeof(src))) {
            continue;
        }
        srcs[nsrc] = strdup(src);
        groups[2 * nsrc] = plo;
        groups[2 * nsrc + 1] = phi;
        nsrc++;
        flen += (size_t)snprintf(from + flen, flen < sizeof(from) ? sizeof(from) - flen : 0, "%s%d",
                                 flen ? " " : "", p);
    }
    if (nsrc == 0) {
        rc = 0; /* every part from the changelogs */
        goto done;
    }
    if (flen >= sizeof(from)) {
        nsrc = 0; /* too many to list: the changelogs, all of them */
        rc = 0;
        goto done;
    }
    if (bk_fs_mkdirs(dir) != 0) {
        snprintf(job->err, sizeof(job->err), "task %s: cannot create %.900s: %s", name, dir,
                 strerror(errno));
        goto done;
    }
    snprintf(rdb, sizeof(rdb), "%s/" BK_DB_ROCKSDB_DIR, dir);
    if (bk_regroup_build(rdb, (const char *const *)srcs, groups, nsrc, lo, hi, &st, job->err,
                         sizeof(job->err)) != 0 ||
        write_file(dir, FROM_FILE, from, job->err, sizeof(job->err)) != 0) {
        goto done;
    }
    bk_log_info("task %s: key groups [%d, %d) of %d drained checkpoint(s) on this node (%d_%s): "
                "%lld byte(s) of SST files linked, %lld key(s) copied, in %lld ms",
                name, lo, hi, nsrc, prev, from, (long long)st.linked_bytes,
                (long long)st.copied_keys, (long long)st.elapsed_ms);
    bk_events_emit("built_from_checkpoints",
                   "\"task\":\"%s\",\"checkpoints\":%d,\"linked_bytes\":%lld,"
                   "\"copied_keys\":%lld,\"ms\":%lld",
                   name, nsrc, (long long)st.linked_bytes, (long long)st.copied_keys,
                   (long long)st.elapsed_ms);
    rc = 0;
done:
    for (int i = 0; srcs && i < nsrc; i++) {
        free(srcs[i]);
    }
    free(srcs);
    free(groups);
    return rc;
}

/* The partitions of the generation before that step 1 took (BUILT-FROM), as a mask of np. */
static void read_from(const char *dir, uint8_t *taken, int np)
{
    char path[4200], err[256], *text = NULL, *p, *end;
    size_t len;
    snprintf(path, sizeof(path), "%s/%s", dir, FROM_FILE);
    if (bk_fs_read_all(path, 65536, &text, &len, err, sizeof(err)) != 0) {
        return;
    }
    for (p = text;; p = end) {
        long v = strtol(p, &end, 10);
        if (end == p) {
            break;
        }
        if (v >= 0 && v < np) {
            taken[v] = 1;
        }
    }
    free(text);
}

int bk_thread_build_slot(bk_thread_job_t *job, rd_kafka_t *consumer, int k, const char *name)
{
    bk_thread_t *thr = job->thr;
    const bk_plan_t *plan = thr->plan;
    int s = job->slots[k];
    const bk_task_id_t task = thr->tasks[s];
    const bk_plan_sub_t *sub = &plan->subs[task.sub];
    uint8_t *taken = NULL;
    int prev, np, rc = -1;
    int64_t applied = 0, t0 = bk_clock_mono_ms();
    char dir[4096], text[1024];
    size_t tlen = 0;

    if (!thr->dbs[s] || !needs_build(job, k, dir, sizeof(dir))) {
        return 0;
    }
    if (bk_plan_sealed(plan, task.sub)) {
        /* every task of its generation wrote its whole state to its changelogs: those
         * alone restore it (any part built from checkpoints above is overwritten by them) */
        if (bk_drained_mark_built(dir, "sealed: restored from its own changelogs\n", job->err,
                                  sizeof(job->err)) != 0) {
            return -1;
        }
        bk_log_info("task %s: generation %d of subtopology %d is sealed: restored from its own "
                    "changelogs, not built",
                    name, sub->generation, sub->of);
        bk_events_emit("restored_sealed", "\"task\":\"%s\",\"subtopology\":%d,\"generation\":%d",
                       name, sub->of, sub->generation);
        return 0;
    }
    prev = bk_plan_prev_generation(plan, task.sub);
    if (prev < 0) {
        snprintf(job->err, sizeof(job->err), "task %s: subtopology %d has no generation %d", name,
                 sub->of, sub->generation - 1);
        return -1;
    }
    np = plan->subs[prev].partitions;
    taken = calloc((size_t)np + 1, 1);
    if (!taken) {
        snprintf(job->err, sizeof(job->err), "out of memory");
        goto done;
    }
    read_from(dir, taken, np);
    {
        bk_build_in_t in = {plan,       consumer, task, thr->store_of[s], taken, name,
                            &job->stop, NULL,     NULL};
        if (bk_build_replay(&in, text, sizeof(text), &applied, job->err, sizeof(job->err)) != 0) {
            goto done;
        }
        tlen = strlen(text);
    }
    if (tlen < sizeof(text)) {
        int taken_n = 0;
        for (int p = 0; p < np; p++) {
            taken_n += taken[p];
        }
        tlen += (size_t)snprintf(text + tlen, sizeof(text) - tlen,
                                 "; %d drained checkpoint(s), %lld changelog record(s) replayed",
                                 taken_n, (long long)applied);
    }
    /* durable before it says so: a crash before BUILT builds again from the start */
    if (bk_db_checkpoint(thr->dbs[s], job->err, sizeof(job->err)) != 0 ||
        bk_drained_mark_built(dir, text, job->err, sizeof(job->err)) != 0) {
        goto done;
    }
    {
        int lo, hi, taken_n = 0;
        for (int p = 0; p < np; p++) {
            taken_n += taken[p];
        }
        bk_hash_group_range(task.partition, sub->partitions, &lo, &hi);
        bk_events_emit("built",
                       "\"task\":\"%s\",\"subtopology\":%d,\"generation\":%d,"
                       "\"groups\":[%d,%d],\"checkpoints\":%d,\"replayed\":%lld,\"ms\":%lld",
                       name, sub->of, sub->generation, lo, hi, taken_n, (long long)applied,
                       (long long)(bk_clock_mono_ms() - t0));
    }
    bk_log_info("task %s: built: %s, in %lld ms", name, text, (long long)(bk_clock_mono_ms() - t0));
    rc = 0;
done:
    free(taken);
    return rc;
}
