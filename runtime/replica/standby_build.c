/* standby_build.c - a later generation's standby replicas built here from the changelogs of
 * the generations before it, filtered by key group (engine/build.h), while the runner tails
 * the rest (standby_internal.h). */
#include "replica/standby_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/events.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/task.h"
#include "engine/build.h"
#include "engine/changelog.h"
#include "engine/db.h"
#include "engine/dbverify.h"
#include "engine/drained.h"
#include "engine/fetchkick.h"
#include "engine/kafka.h"
#include "engine/store.h"
#include "engine/taskdb.h"

/* What a build reports while it reads: the records it has left, and its own changelogs'. */
typedef struct {
    bk_standby_t *sb;
    int t;
    int64_t total; /* records in the changelogs the build reads */
    int64_t own;   /* ... and in the task's own, tailed after it */
} build_progress_t;

static void build_progress(void *opaque, const bk_restore_progress_t *p)
{
    build_progress_t *bp = opaque;
    bk_standby_t *sb = bp->sb;
    int64_t left = bp->total > p->records ? bp->total - p->records : 0;
    if (sb->cb) {
        sb->cb(sb->opaque, sb->ids[bp->t], -1, left + bp->own + 1);
    }
    bk_taskdb_set_lag(sb->pool, sb->tasks[bp->t], left + bp->own + 1);
}

/* The records of n changelog partitions (their ends less their starts), or -1 with sb->err. */
static int64_t records_in(bk_standby_t *sb, const char **topics, const int32_t *parts, int n)
{
    int64_t *lo = calloc((size_t)n + 1, sizeof(*lo)), *hi = calloc((size_t)n + 1, sizeof(*hi));
    int64_t sum = 0;
    rd_kafka_resp_err_t err =
        lo && hi ? bk_kafka_watermarks(sb->consumer, topics, parts, n, lo, hi, 60000, &sb->stop)
                 : RD_KAFKA_RESP_ERR__FAIL;
    if (err) {
        snprintf(sb->err, sizeof(sb->err),
                 "standby: cannot read the offsets of %d changelog "
                 "partition(s): %s",
                 n, rd_kafka_err2str(err));
        sb->retriable = bk_kafka_retriable(err);
        sum = -1;
    }
    for (int i = 0; !err && i < n; i++) {
        sum += hi[i] > lo[i] ? hi[i] - lo[i] : 0;
    }
    free(lo);
    free(hi);
    return sum;
}

/* Builds a later generation's replica as its active was built (engine/build.h): the keys of
 * its key groups from the changelogs of the generations before, which have drained, into its
 * empty stores; its own changelog is then tailed from its start (assign). A sealed
 * generation's own changelogs hold its whole state: nothing to read before them. The task's
 * directory says BUILT once durable, so that a promotion here replays only the tail of its
 * own changelog. 0, or -1 with sb->err (a stop is not a failure: the next runner builds it
 * anew). */
int bk_standby_build_task(bk_standby_t *sb, int t)
{
    const bk_plan_t *plan = sb->plan;
    const bk_task_id_t task = sb->tasks[t];
    bk_store_t **store_of = calloc((size_t)plan->cap_stores + 1, sizeof(*store_of));
    int n = 0, rc = -1, nsrc = bk_build_sources(plan, task, NULL, NULL, NULL, 0);
    int max = sb->nitems + (nsrc > 0 ? nsrc : 0); /* its own changelogs, then the sources */
    const char **topics = calloc((size_t)max + 1, sizeof(*topics));
    int32_t *parts = calloc((size_t)max + 1, sizeof(*parts));
    char dir[4096], text[1024];
    int64_t applied = 0, t0 = bk_clock_mono_ms();
    const char *name = BK_TASK_NAME(task);
    build_progress_t bp = {sb, t, 0, 0};

    if (!store_of || !topics || !parts) {
        snprintf(sb->err, sizeof(sb->err), "out of memory");
        goto done;
    }
    bk_plan_task_dir(plan, sb->conf, task, dir, sizeof(dir));
    for (int i = 0; i < sb->nitems; i++) {
        if (sb->items[i].task == t) {
            store_of[sb->items[i].store] = sb->items[i].st;
            topics[n] = sb->items[i].topic;
            parts[n++] = sb->items[i].partition;
        }
    }
    if (bk_plan_sealed(plan, task.sub)) {
        snprintf(text, sizeof(text), "sealed: restored from its own changelogs\n");
    } else {
        int ns = bk_build_sources(plan, task, NULL, topics + n, parts + n, max - n);
        bk_build_in_t in = {plan, sb->consumer, task,           store_of, NULL,
                            name, &sb->stop,    build_progress, &bp};
        if (ns < 0) {
            snprintf(sb->err, sizeof(sb->err), "standby %s: too many changelogs to build from",
                     name);
            goto done;
        }
        if ((bp.own = records_in(sb, topics, parts, n)) < 0 ||
            (bp.total = records_in(sb, topics + n, parts + n, ns)) < 0) {
            goto done;
        }
        bk_log_info("standby %s: building from the changelogs of the generations before it: "
                    "%lld record(s) in %d partition(s)",
                    name, (long long)bp.total, ns);
        build_progress(&bp, &(bk_restore_progress_t){0});
        if (bk_build_replay(&in, text, sizeof(text), &applied, sb->err, sizeof(sb->err)) != 0) {
            if (sb->stop) {
                rc = 0; /* stopped: not built, the next runner starts it over */
                sb->err[0] = '\0';
            }
            goto done;
        }
        snprintf(text + strlen(text), sizeof(text) - strlen(text),
                 "; %lld changelog record(s) replayed, by a standby", (long long)applied);
    }
    /* durable before it says so: a crash before BUILT builds again from the start */
    if (bk_db_checkpoint(sb->dbs[t], sb->err, sizeof(sb->err)) != 0 ||
        bk_drained_mark_built(dir, text, sb->err, sizeof(sb->err)) != 0) {
        sb->corrupt[t] = (char)bk_dbverify_is_corruption(sb->err);
        goto done;
    }
    sb->unbuilt[t] = 0;
    sb->build[t] = 0;
    sb->boot_lag[t] = -1;
    bk_log_info("standby %s: built: %s, in %lld ms; its own changelog follows", name, text,
                (long long)(bk_clock_mono_ms() - t0));
    bk_events_emit("standby_built", "\"task\":\"%s\",\"ms\":%lld", name,
                   (long long)(bk_clock_mono_ms() - t0));
    rc = 0;
done:
    free(store_of);
    free(topics);
    free(parts);
    return rc;
}

/* Forgets the items whose stores are not open (fresh tasks bk_standby_assign() would have opened).
 */
void bk_standby_drop_unopened(bk_standby_t *sb)
{
    int w = 0;
    for (int i = 0; i < sb->nitems; i++) {
        if (sb->items[i].st) {
            sb->items[w++] = sb->items[i];
        }
    }
    sb->nitems = w;
}

/* Builds every replica that needs it, one after the other (the others are tailed once all
 * are built). A stopped runner leaves the rest unbuilt. */
int bk_standby_build_all(bk_standby_t *sb)
{
    for (int t = 0; t < sb->ntasks && !sb->stop; t++) {
        if (!sb->build[t] || !sb->dbs[t]) {
            continue;
        }
        bk_standby_life(sb, t, BK_LIFE_BUILDING);
        if (bk_standby_build_task(sb, t) != 0) {
            return -1;
        }
    }
    return 0;
}
