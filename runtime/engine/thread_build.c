/* thread_build.c - the state a later generation's task starts from (docs/repartitioning.md,
 * Moving a generation): the keys of its key groups, read from the changelogs of the tasks
 * of every generation before whose ranges overlap its own, oldest first; those of the one
 * just before have drained (the node opens the task only then). Done once in its directory
 * (a BUILT file says so); its own changelog is then replayed on top, as any task's is. On
 * the opening job's thread. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/hash.h"
#include "base/log.h"
#include "base/task.h"
#include "engine/changelog.h"
#include "engine/db.h"
#include "engine/restore.h"
#include "engine/thread_internal.h"

#define BUILT_FILE "BUILT"

/* The store of subtopology `sub` that copies (or is) the store `root`, -1: none. */
static int store_in(const bk_plan_t *plan, int sub, int root)
{
    int nstores = plan->nstores;
    for (int i = 0; i < nstores; i++) {
        if (plan->stores[i].sub == sub && (i == root || plan->stores[i].of_store == root)) {
            return i;
        }
    }
    return -1;
}

static int write_built(const char *dir, const char *text, char *err, size_t errsz)
{
    char path[4200];
    int fd;
    ssize_t len = (ssize_t)strlen(text);
    snprintf(path, sizeof(path), "%s/%s", dir, BUILT_FILE);
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

/* Replays into slot s's stores the keys of groups [lo, hi) from the changelogs of
 * generation g's tasks whose ranges overlap it, one task at a time (a store settles its
 * records by the markers of one changelog partition, changelog.h). Names them in text. */
static int replay_generation(bk_thread_job_t *job, rd_kafka_t *consumer, int s, const char *name,
                             int gsub, int lo, int hi, bk_restore_item_t *items, char *text,
                             size_t size, size_t *tlen, int *used)
{
    bk_thread_t *thr = job->thr;
    const bk_plan_t *plan = thr->plan;
    int np = plan->subs[gsub].partitions;
    for (int p = 0; p < np; p++) {
        int plo, phi, n = 0;
        bk_hash_group_range(p, np, &plo, &phi);
        if (phi <= lo || plo >= hi) {
            continue;
        }
        for (int i = 0; i < plan->nstores; i++) {
            bk_store_t *st = thr->store_of[s][i];
            int root = plan->stores[i].of_store >= 0 ? plan->stores[i].of_store : i, from;
            if (!st || !plan->stores[i].logged || (from = store_in(plan, gsub, root)) < 0) {
                continue;
            }
            items[n++] = (bk_restore_item_t){st, plan->stores[from].changelog, p, name, lo, hi};
        }
        if (bk_restore_run(consumer, items, n, NULL, NULL, &job->stop, job->err,
                           sizeof(job->err)) != 0) {
            return -1;
        }
        for (int i = 0; i < n; i++) {
            bk_changelog_rebase(items[i].st);
        }
        (*used)++;
        if (*tlen < size) {
            *tlen += (size_t)snprintf(text + *tlen, size - *tlen, " %d_%d", gsub, p);
        }
    }
    return 0;
}

int bk_thread_build_slot(bk_thread_job_t *job, rd_kafka_t *consumer, int k, const char *name)
{
    bk_thread_t *thr = job->thr;
    const bk_plan_t *plan = thr->plan;
    int s = job->slots[k];
    const bk_task_id_t task = thr->tasks[s];
    const bk_plan_sub_t *sub = &plan->subs[task.sub];
    bk_restore_item_t *items = NULL;
    int lo, hi, used = 0, rc = -1;
    char dir[4096], path[4200], text[512];
    size_t tlen = 0;

    if (sub->passthrough || sub->generation < 2 || !thr->dbs[s]) {
        return 0;
    }
    bk_plan_task_dir(plan, thr->conf, task, dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/%s", dir, BUILT_FILE);
    if (access(path, F_OK) == 0) {
        return 0; /* built before: its own changelog holds the rest */
    }
    bk_hash_group_range(task.partition, sub->partitions, &lo, &hi);
    items = calloc((size_t)plan->nstores + 1, sizeof(*items));
    if (!items) {
        snprintf(job->err, sizeof(job->err), "out of memory");
        return -1;
    }
    tlen = (size_t)snprintf(text, sizeof(text), "generation %d of subtopology %d, key groups "
                                                "[%d, %d), from the changelogs of",
                            sub->generation, sub->of, lo, hi);
    /* every generation before, oldest first: a later one's changelog holds only what its
     * tasks wrote after they were built, and each key's writes of one generation all come
     * before the next one's (its tasks start once the ones before drained) */
    for (int g = 1; g < sub->generation; g++) {
        int gsub = bk_plan_generation_sub(plan, sub->of, g);
        if (gsub < 0) {
            snprintf(job->err, sizeof(job->err), "task %s: subtopology %d has no generation %d",
                     name, sub->of, g);
            goto done;
        }
        if (replay_generation(job, consumer, s, name, gsub, lo, hi, items, text, sizeof(text),
                              &tlen, &used) != 0) {
            goto done;
        }
    }
    /* durable before it says so: a crash before BUILT builds again (the same records give
     * the same state: nothing of its own generation was applied yet) */
    if (bk_db_checkpoint(thr->dbs[s], job->err, sizeof(job->err)) != 0 ||
        write_built(dir, text, job->err, sizeof(job->err)) != 0) {
        goto done;
    }
    bk_log_info("task %s: built: %s (%d changelog partition(s))", name, text, used);
    rc = 0;
done:
    free(items);
    return rc;
}
