/* standby.c - standby replicas: changelog tailing into the tasks' RocksDB (a later
 * generation's replicas are built first: standby_build.c). */
#include "replica/standby.h"
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

#define REPORT_MS 1000     /* progress to the callback */
#define LOG_EVERY_MS 10000 /* a line of lags in the log */
/* The scrub (engine/dbverify.h): this many entries of one replica read back from its files
 * every SCRUB_MS, replica after replica: 20,000 entries a second, a pass over a 10-million
 * entry replica in ~8 minutes */
#define SCRUB_MS 100
#define SCRUB_ENTRIES 2000

bk_standby_t *bk_standby_new(const bk_plan_t *plan, const bk_conf_t *conf,
                             const bk_task_id_t *tasks, const int32_t *ids, int ntasks,
                             bk_standby_progress_cb cb, void *opaque)
{
    bk_standby_t *sb = calloc(1, sizeof(*sb));
    sb->plan = plan;
    sb->conf = conf;
    sb->ntasks = ntasks;
    sb->tasks = calloc((size_t)ntasks + 1, sizeof(*sb->tasks));
    sb->ids = calloc((size_t)ntasks + 1, sizeof(*sb->ids));
    if (ntasks > 0) {
        memcpy(sb->tasks, tasks, (size_t)ntasks * sizeof(*tasks));
        memcpy(sb->ids, ids, (size_t)ntasks * sizeof(*ids));
    }
    sb->cb = cb;
    sb->opaque = opaque;
    sb->dbs = calloc((size_t)ntasks + 1, sizeof(*sb->dbs));
    sb->fresh = calloc((size_t)ntasks + 1, 1);
    sb->unbuilt = calloc((size_t)ntasks + 1, 1);
    sb->build = calloc((size_t)ntasks + 1, 1);
    sb->ready = calloc((size_t)ntasks + 1, 1);
    sb->corrupt = calloc((size_t)ntasks + 1, 1);
    sb->items = calloc((size_t)(ntasks * plan->nstores) + 1, sizeof(*sb->items));
    sb->applied = calloc((size_t)ntasks + 1, sizeof(int64_t));
    sb->applied_ms = calloc((size_t)ntasks + 1, sizeof(int64_t));
    sb->boot_mode = calloc((size_t)ntasks + 1, sizeof(int));
    sb->boot_lag = malloc(((size_t)ntasks + 1) * sizeof(int64_t));
    for (int t = 0; t < ntasks; t++) {
        sb->boot_lag[t] = -1;
    }
    {
        int cap = 0;
        for (int t = 0; t < ntasks; t++) {
            cap = ids[t] + 1 > cap ? ids[t] + 1 : cap;
        }
        bk_tasklife_init(&sb->life, cap, NULL, "standby");
        sb->life.standby = 1;
    }
    return sb;
}

void bk_standby_life(bk_standby_t *sb, int t, bk_life_t to)
{
    if (sb->life.state) {
        bk_tasklife_to(&sb->life, sb->ids[t], BK_TASK_NAME(sb->tasks[t]), to);
    }
}

/* Whether task t may go to cold bootstrap and has no directory yet: a fresh replica. Its
 * DB is opened only once bk_standby_assign() keeps it here: creating 32 empty DBs (their fsyncs)
 * only to close them again cost a fresh node's cold bootstrap ~400 ms (scripts/bench/bootstrap). A
 * pooled DB always has its directory, so it is never taken for fresh. */
static int is_fresh(const bk_standby_t *sb, int t)
{
    char dir[4096];
    struct stat st;
    if (!sb->boot_on || (sb->boot_mode[t] != BK_BOOTSTRAP_MODE_AUTO &&
                         sb->boot_mode[t] != BK_BOOTSTRAP_MODE_FORCE)) {
        return 0;
    }
    bk_plan_task_dir(sb->plan, sb->conf, sb->tasks[t], dir, sizeof(dir));
    return stat(dir, &st) != 0;
}

/* Opens the DB of task t and points its items at its stores. */
static int open_db(bk_standby_t *sb, int t, bk_store_t **store_of)
{
    int logged;
    sb->dbs[t] = bk_taskdb_open(sb->pool, sb->plan, sb->conf, sb->tasks[t], store_of, &logged,
                                sb->err, sizeof(sb->err));
    if (!sb->dbs[t]) {
        sb->corrupt[t] = (char)bk_dbverify_is_corruption(sb->err);
        return sb->err[0] ? -1 : 0;
    }
    for (int i = 0; i < sb->nitems; i++) {
        if (sb->items[i].task == t) {
            sb->items[i].st = store_of[sb->items[i].store];
        }
    }
    return 0;
}

/* A later generation's replica that waits for the generation before to drain: said once
 * per task and process. */
static void say_waiting(bk_task_id_t task)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static char said[256][BK_TASK_NAME_MAX];
    static int nsaid;
    const char *name = BK_TASK_NAME(task);
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nsaid; i++) {
        if (strcmp(said[i], name) == 0) {
            pthread_mutex_unlock(&lock);
            return;
        }
    }
    if (nsaid < 256) {
        snprintf(said[nsaid++], BK_TASK_NAME_MAX, "%s", name);
    }
    pthread_mutex_unlock(&lock);
    bk_log_info("standby %s: waits until the tasks of the generation before it have drained, "
                "then builds from their changelogs (beck status: not built)",
                name);
}

/* A later generation's replica this runner builds (build_task): what an earlier attempt
 * left is not trusted, so it starts from an empty directory. 0, or -1 with sb->err. */
static int clear_unbuilt(bk_standby_t *sb, int t)
{
    char dir[4096];
    bk_plan_task_dir(sb->plan, sb->conf, sb->tasks[t], dir, sizeof(dir));
    bk_taskdb_pool_close(sb->pool, sb->tasks[t]);
    if (access(dir, F_OK) == 0 && bk_fs_rm_tree(dir) != 0) {
        snprintf(sb->err, sizeof(sb->err), "standby %s: cannot remove %.900s, built only in part",
                 BK_TASK_NAME(sb->tasks[t]), dir);
        return -1;
    }
    return 0;
}

/* Opens the DB of every task that has a logged store (but fresh ones, see is_fresh) and
 * lists its changelogs. */
static int open_dbs(bk_standby_t *sb)
{
    const bk_plan_t *plan = sb->plan;
    bk_store_t **store_of = calloc((size_t)plan->cap_stores + 1, sizeof(*store_of));
    int rc = 0;

    for (int t = 0; t < sb->ntasks && rc == 0; t++) {
        int logged = 0;
        for (int s = 0; s < plan->nstores; s++) {
            logged += plan->stores[s].sub == sb->tasks[t].sub && plan->stores[s].logged;
        }
        if (logged == 0) {
            continue; /* stateless or unlogged: nothing to keep warm */
        }
        if (bk_plan_prev_generation(plan, sb->tasks[t].sub) >= 0) {
            /* a later generation's state starts from the generation before it, which its
             * own changelog does not hold (engine/thread_build.c): a replica is a snapshot
             * of its built active's (cold bootstrap), then tails the changelog; without
             * cold bootstrap none is kept, and a promotion builds it as any start does */
            char dir[4096];
            bk_plan_task_dir(plan, sb->conf, sb->tasks[t], dir, sizeof(dir));
            sb->unbuilt[t] = (char)!bk_drained_built(dir);
            if (sb->unbuilt[t] && sb->boot_on && sb->boot_mode[t] == BK_BOOTSTRAP_MODE_BUSY) {
                sb->boot_lag[t] = BK_STANDBY_UNBUILT_LAG; /* being built elsewhere */
                continue;
            }
            if (sb->unbuilt[t] && (!sb->boot_on || sb->boot_mode[t] == BK_BOOTSTRAP_MODE_NEVER)) {
                /* built here as its active is, from the changelogs of the generations
                 * before (build_task), once those have drained; then tailed */
                if (!sb->ready[t] && !bk_plan_sealed(plan, sb->tasks[t].sub)) {
                    say_waiting(sb->tasks[t]);
                    sb->boot_lag[t] = BK_STANDBY_UNBUILT_LAG;
                    continue;
                }
                if (clear_unbuilt(sb, t) != 0) {
                    rc = -1;
                    break;
                }
                sb->build[t] = 1;
            }
        }
        if (sb->boot_on && sb->boot_mode[t] == BK_BOOTSTRAP_MODE_BUSY) {
            sb->boot_lag[t] = BK_STANDBY_UNBUILT_LAG; /* being built elsewhere: far behind */
            continue;
        }
        for (int s = 0; s < plan->nstores; s++) {
            if (plan->stores[s].sub == sb->tasks[t].sub && plan->stores[s].logged) {
                sb->items[sb->nitems++] = (item_t){
                    NULL, s, plan->stores[s].changelog, sb->tasks[t].partition, t, 0, 0, -1};
            }
        }
        sb->fresh[t] = (char)(!sb->build[t] && (sb->unbuilt[t] || is_fresh(sb, t)));
        if (!sb->fresh[t]) {
            rc = open_db(sb, t, store_of);
        }
    }
    free(store_of);
    return rc;
}

/* Why task t should be built by cold bootstrap rather than from its changelogs, or NULL:
 * its changelog lost records it needs (a gap: replaying would leave it wrong), it has more
 * to replay than bootstrap_min_records, or the node asked. Fills why. */
static const char *boot_reason(bk_standby_t *sb, int t, char *why, size_t size)
{
    int64_t replay = 0;
    int mode = sb->boot_mode[t];
    if (!sb->boot_on || mode == BK_BOOTSTRAP_MODE_NEVER) {
        return NULL;
    }
    if (sb->unbuilt[t]) {
        snprintf(why, size,
                 "a later generation's task: its changelog does not hold the state "
                 "it was built from");
        return why;
    }
    for (int i = 0; i < sb->nitems; i++) {
        const item_t *it = &sb->items[i];
        int64_t next;
        if (it->task != t) {
            continue; /* (an earlier task's store may be closed already) */
        }
        next = it->st ? bk_store_changelog_next(it->st) : -1;
        if (next >= 0 && next < it->lo) {
            snprintf(why, size,
                     "changelog %s [%d] starts at offset %lld but the store needs "
                     "%lld",
                     it->topic, (int)it->partition, (long long)it->lo, (long long)next);
            return why;
        }
        replay += it->hi - (next < 0 ? it->lo : next);
    }
    if (sb->boot_mode[t] == BK_BOOTSTRAP_MODE_FORCE) {
        snprintf(why, size, "asked for");
        return why;
    }
    if (mode == BK_BOOTSTRAP_MODE_AUTO && sb->boot_min > 0 && replay > sb->boot_min) {
        snprintf(why, size, "%lld changelog record(s) to replay (bootstrap_min_records %lld)",
                 (long long)replay, (long long)sb->boot_min);
        return why;
    }
    return NULL;
}

void bk_standby_set_recover(bk_standby_t *sb, bk_thread_recover_cb cb, void *opaque)
{
    sb->recover = cb;
    sb->recover_opaque = opaque;
}

/* The recovery order's archive step for a standby whose changelog lost what its store needs
 * and that cold bootstrap did not take (docs/state.md): its DB closed, the newest archived
 * snapshot the changelog still covers installed, the DB opened again. A task the archive
 * cannot help keeps its DB: the tailing below says how much is lost. 0, or -1 with sb->err. */
static int recover_from_archive(bk_standby_t *sb, int t, bk_store_t **store_of)
{
    char *topics[BK_STORE_MAX_INPUTS * 4];
    int64_t lo[BK_STORE_MAX_INPUTS * 4];
    int n = 0, gap = 0, got;
    char dir[4096], name[BK_TASK_NAME_MAX], what[512], err[512];

    for (int i = 0; i < sb->nitems && n < (int)(sizeof(lo) / sizeof(lo[0])); i++) {
        const item_t *it = &sb->items[i];
        int64_t next;
        if (it->task != t || !it->st) {
            continue;
        }
        next = bk_store_changelog_next(it->st);
        /* a window changelog drops its head by design: not a loss */
        gap |= !sb->plan->stores[it->store].window &&
               ((next >= 0 && next < it->lo) || (next < 0 && it->lo > 0));
        topics[n] = (char *)it->topic;
        lo[n++] = it->lo;
    }
    if (!gap) {
        return 0;
    }
    bk_task_name(sb->tasks[t], name);
    bk_taskdb_release(sb->pool, sb->tasks[t], sb->dbs[t], 0); /* closed: replaced below */
    sb->dbs[t] = NULL;
    bk_plan_task_dir(sb->plan, sb->conf, sb->tasks[t], dir, sizeof(dir));
    got = sb->recover(sb->recover_opaque, name, dir, topics, lo, n, what, sizeof(what), err,
                      sizeof(err));
    if (got < 0) {
        bk_log_error("standby %s: the archive: %s", name, err);
    } else if (got == 0) {
        bk_log_warn("standby %s: its changelog lost what it needs, and %s", name, what);
    } else {
        bk_log_info("standby %s: restored from the %s; the changelogs' tails follow", name, what);
        {
            char from[600];
            bk_events_emit("standby_restored", "\"task\":\"%s\",\"from\":%s", name,
                           bk_events_str(from, sizeof(from), what));
        }
    }
    return open_db(sb, t, store_of);
}

/* Reads every changelog's offsets, hands the tasks cold bootstrap should build to the node
 * (their DBs closed: the bootstrap replaces their directories), and assigns the other
 * changelog partitions at the offset each store needs. */
int bk_standby_assign(bk_standby_t *sb)
{
    rd_kafka_topic_partition_list_t *list =
        rd_kafka_topic_partition_list_new(sb->nitems ? sb->nitems : 1);
    rd_kafka_resp_err_t err = 0;
    const char **topics = calloc((size_t)sb->nitems + 1, sizeof(*topics));
    int32_t *parts = calloc((size_t)sb->nitems + 1, sizeof(*parts));
    int64_t *los = calloc((size_t)sb->nitems + 1, sizeof(*los));
    int64_t *his = calloc((size_t)sb->nitems + 1, sizeof(*his));
    int w = 0;

    for (int i = 0; i < sb->nitems; i++) {
        topics[i] = sb->items[i].topic;
        parts[i] = sb->items[i].partition;
    }
    /* a broker down, a leader moving or a move's changelog not known yet pass: tried again */
    err = bk_kafka_watermarks(sb->consumer, topics, parts, sb->nitems, los, his, 60000, &sb->stop);
    if (err) {
        snprintf(sb->err, sizeof(sb->err),
                 "standby: cannot read the offsets of %d changelog "
                 "partition(s): %s",
                 sb->nitems, rd_kafka_err2str(err));
        sb->retriable = bk_kafka_retriable(err);
    }
    for (int i = 0; !err && i < sb->nitems; i++) {
        sb->items[i].lo = los[i];
        sb->items[i].hi = his[i];
    }
    for (int t = 0; !err && t < sb->ntasks; t++) {
        char why[512];
        int64_t lag = 0;
        if ((!sb->dbs[t] && !sb->fresh[t]) || !boot_reason(sb, t, why, sizeof(why))) {
            continue;
        }
        for (int i = 0; i < sb->nitems; i++) {
            if (sb->items[i].task == t) {
                lag += sb->items[i].hi - sb->items[i].lo;
            }
        }
        sb->boot_lag[t] = lag > 0 ? lag : 1;
        bk_log_info("standby %s: cold bootstrap: %s", BK_TASK_NAME(sb->tasks[t]), why);
        bk_taskdb_release(sb->pool, sb->tasks[t], sb->dbs[t], 0); /* closed, not pooled */
        sb->dbs[t] = NULL;
        sb->fresh[t] = 0;
        if (sb->boot_cb) {
            sb->boot_cb(sb->boot_opaque, sb->ids[t], why);
        }
    }
    /* fresh tasks kept here after all: their DBs now */
    if (!err) {
        bk_store_t **store_of = calloc((size_t)sb->plan->cap_stores + 1, sizeof(*store_of));
        for (int t = 0; t < sb->ntasks && !err; t++) {
            if (sb->fresh[t]) {
                sb->fresh[t] = 0;
                err = open_db(sb, t, store_of) != 0 ? RD_KAFKA_RESP_ERR__FAIL : 0;
            }
        }
        /* what cold bootstrap did not take, the archive may bring back */
        for (int t = 0; sb->recover && t < sb->ntasks && !err; t++) {
            if (sb->dbs[t] && recover_from_archive(sb, t, store_of) != 0) {
                err = RD_KAFKA_RESP_ERR__FAIL;
            }
        }
        free(store_of);
    }
    for (int i = 0; !err && i < sb->nitems; i++) {
        if (sb->dbs[sb->items[i].task]) {
            sb->items[w++] = sb->items[i];
        }
    }
    if (!err) {
        sb->nitems = w;
    }
    for (int i = 0; !err && i < sb->nitems; i++) {
        item_t *it = &sb->items[i];
        int64_t next = bk_store_changelog_next(it->st), start;
        const bk_task_id_t *task = &sb->tasks[it->task];
        start = next < 0 ? it->lo : next;
        if (next >= 0 && next < it->lo) {
            /* As in restore.c: the changelog lost what this replica needs and cold bootstrap
             * is off (or failed): say so loudly. */
            bk_log_error("standby %s: changelog %s [%d] starts at offset %lld but the store "
                         "needs %lld: %lld update(s) are lost to this replica",
                         BK_TASK_NAME(*task), it->topic, (int)it->partition, (long long)it->lo,
                         (long long)next, (long long)(it->lo - next));
            start = it->lo;
        }
        if (next < 0 && start >= it->hi && it->hi > 0) {
            bk_store_acked(it->st, it->hi - 1); /* empty from here: at the end */
        }
        it->goal = start < it->hi ? it->hi : -1;
        bk_log_info("standby %s store %s: tailing %s [%d] from offset %lld, %lld behind",
                    BK_TASK_NAME(*task), bk_store_name(it->st), it->topic, (int)it->partition,
                    (long long)start, (long long)(it->hi - start));
        bk_events_emit("standby_tailing",
                       "\"task\":\"%s\",\"store\":\"%s\",\"topic\":\"%s\",\"partition\":%d,"
                       "\"offset\":%lld,\"behind\":%lld",
                       BK_TASK_NAME(*task), bk_store_name(it->st), it->topic, (int)it->partition,
                       (long long)start, (long long)(it->hi - start));
        rd_kafka_topic_partition_list_add(list, it->topic, it->partition)->offset = start;
    }
    if (!err && sb->nitems > 0 && rd_kafka_assign(sb->consumer, list) != 0) {
        snprintf(sb->err, sizeof(sb->err), "standby: cannot assign the changelog partitions");
        err = RD_KAFKA_RESP_ERR__FAIL;
    }
    rd_kafka_topic_partition_list_destroy(list);
    free(topics);
    free(parts);
    free(los);
    free(his);
    return err ? -1 : 0;
}

static item_t *find(bk_standby_t *sb, const char *topic, int32_t partition, item_t *hint)
{
    if (hint && hint->partition == partition && strcmp(hint->topic, topic) == 0) {
        return hint;
    }
    for (int i = 0; i < sb->nitems; i++) {
        if (sb->items[i].partition == partition && strcmp(sb->items[i].topic, topic) == 0) {
            return &sb->items[i];
        }
    }
    return NULL;
}

/* Position of a store: the next offset it needs. */
static int64_t position(const item_t *it)
{
    int64_t next = bk_store_changelog_next(it->st);
    return next < 0 ? it->lo : next;
}

/* Reports every task's offset and lag; with `log_it`, also one line in the log. */
static void report(bk_standby_t *sb, int log_it)
{
    char line[2048];
    int len = 0;
    int64_t now = bk_clock_mono_ms();

    for (int i = 0; i < sb->nitems; i++) {
        int64_t lo, hi;
        if (rd_kafka_get_watermark_offsets(sb->consumer, sb->items[i].topic, sb->items[i].partition,
                                           &lo, &hi) == 0 &&
            hi >= 0) {
            sb->items[i].hi = hi;
        }
    }
    for (int t = 0; t < sb->ntasks; t++) {
        int64_t lag = 0, offset = -1;
        for (int i = 0; i < sb->nitems; i++) {
            const item_t *it = &sb->items[i];
            if (it->task == t) {
                int64_t pos = position(it);
                lag += it->hi > pos ? it->hi - pos : 0;
                if (offset < 0) {
                    offset = bk_store_changelog_next(it->st);
                }
            }
        }
        if (sb->boot_lag[t] >= 0) {
            lag = sb->boot_lag[t]; /* being built by cold bootstrap: not warm at all */
        }
        if (sb->cb) {
            sb->cb(sb->opaque, sb->ids[t], offset, lag);
        }
        bk_taskdb_set_lag(sb->pool, sb->tasks[t], lag);
        if (log_it && sb->dbs[t] && len < (int)sizeof(line) - 100) {
            if (sb->applied_ms[t]) {
                len += snprintf(line + len, sizeof(line) - (size_t)len,
                                "%s%s lag %lld (last applied %.1f s ago)", len ? ", " : "",
                                BK_TASK_NAME(sb->tasks[t]), (long long)lag,
                                (double)(now - sb->applied_ms[t]) / 1000.0);
            } else {
                len += snprintf(line + len, sizeof(line) - (size_t)len,
                                "%s%s lag %lld (nothing applied yet)", len ? ", " : "",
                                BK_TASK_NAME(sb->tasks[t]), (long long)lag);
            }
        }
    }
    if (log_it && len > 0) {
        bk_log_info("standbys: %s", line);
    }
}

/* Makes what was applied durable and says so in the checkpoint files. */
static int checkpoint(bk_standby_t *sb)
{
    for (int i = 0; i < sb->nitems; i++) {
        if (bk_changelog_flush(sb->items[i].st, sb->err, sizeof(sb->err)) != 0) {
            return -1;
        }
    }
    for (int t = 0; t < sb->ntasks; t++) {
        if (sb->dbs[t] && bk_db_checkpoint(sb->dbs[t], sb->err, sizeof(sb->err)) != 0) {
            sb->corrupt[t] = (char)bk_dbverify_is_corruption(sb->err);
            return -1;
        }
    }
    return 0;
}

/* One slice of the scrub: 0, or -1 with sb->err when a replica's files are damaged (it is
 * marked corrupt: the node removes it and builds it again) or cannot be read. */
static int scrub(bk_standby_t *sb)
{
    char err[768];
    int t, rc;
    for (int k = 0; k < sb->ntasks && !sb->dbs[sb->scrub_t % sb->ntasks]; k++) {
        sb->scrub_t = (sb->scrub_t + 1) % sb->ntasks;
    }
    t = sb->scrub_t % sb->ntasks;
    if (!sb->dbs[t] || (!sb->scrub && !(sb->scrub = bk_dbverify_new()))) {
        return 0;
    }
    rc = bk_dbverify_step(sb->scrub, sb->dbs[t], SCRUB_ENTRIES, err, sizeof(err));
    if (rc == 1) {
        sb->scrub_t = (t + 1) % sb->ntasks; /* a whole pass: the next replica */
    } else if (rc < 0) {
        sb->corrupt[t] = (char)bk_dbverify_is_corruption(err);
        snprintf(sb->err, sizeof(sb->err), "standby %s: %s: %s", BK_TASK_NAME(sb->tasks[t]),
                 sb->corrupt[t] ? "its store is damaged" : "its store cannot be read", err);
        return -1;
    }
    return 0;
}

/* Says when a task's replica applied its changelogs up to where they ended when the runner
 * began: how long building (or catching up) a replica from its changelog took
 * (scripts/bench/bootstrap reads it). */
static void caught_up(bk_standby_t *sb, int t, int64_t now)
{
    for (int i = 0; i < sb->nitems; i++) {
        if (sb->items[i].task == t && sb->items[i].goal >= 0) {
            return;
        }
    }
    bk_log_info("standby %s: caught up: %lld changelog record(s) applied in %lld ms",
                BK_TASK_NAME(sb->tasks[t]), (long long)sb->applied[t], (long long)(now - sb->t0));
    bk_events_emit("standby_caught_up", "\"task\":\"%s\",\"records\":%lld,\"ms\":%lld",
                   BK_TASK_NAME(sb->tasks[t]), (long long)sb->applied[t],
                   (long long)(now - sb->t0));
}

int bk_standby_tail(bk_standby_t *sb)
{
    rd_kafka_queue_t *q = rd_kafka_queue_get_consumer(sb->consumer);
    rd_kafka_message_t *msgs[1000];
    int64_t interval = bk_conf_commit_interval_ms(sb->conf);
    int64_t last_ckpt = bk_clock_mono_ms(), last_report = 0, last_log = bk_clock_mono_ms();
    int64_t last_scrub = bk_clock_mono_ms();
    item_t *hint = NULL;
    bk_fetchkick_t kick;
    int rc = 0;

    bk_fetchkick_init(&kick);
    while (!sb->stop && rc == 0) {
        /* drain; block for one record only when idle (restore.c says why), after waking
         * the fetcher if it stopped on a full queue (fetchkick.h) */
        ssize_t got = rd_kafka_consume_batch_queue(q, 0, msgs, 1000);
        if (got == 0) {
            got = rd_kafka_consume_batch_queue(q, bk_fetchkick_idle(&kick, sb->consumer, 100), msgs,
                                               1);
        }
        bk_fetchkick_took(&kick, msgs, got > 0 ? (size_t)got : 0);
        int64_t now = bk_clock_mono_ms();
        for (ssize_t i = 0; i < got; i++) {
            rd_kafka_message_t *m = msgs[i];
            if (m->err) {
                if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                    bk_log_warn("standby: %s", rd_kafka_message_errstr(m));
                }
            } else if (rc == 0 &&
                       (hint = find(sb, rd_kafka_topic_name(m->rkt), m->partition, hint))) {
                if (bk_changelog_apply(hint->st, m->key, m->key_len, m->payload, m->len, m->offset,
                                       rd_kafka_message_timestamp(m, NULL), sb->err,
                                       sizeof(sb->err)) != 0) {
                    sb->corrupt[hint->task] = (char)bk_dbverify_is_corruption(sb->err);
                    rc = -1;
                } else {
                    sb->applied[hint->task]++;
                    sb->applied_ms[hint->task] = now;
                    if (m->offset + 1 > hint->hi) {
                        hint->hi = m->offset + 1;
                    }
                    if (hint->goal >= 0 && m->offset + 1 >= hint->goal) {
                        hint->goal = -1;
                        caught_up(sb, hint->task, now);
                    }
                }
            }
            rd_kafka_message_destroy(m);
        }
        if (rc == 0 && now - last_ckpt >= interval) {
            rc = checkpoint(sb);
            last_ckpt = now;
        }
        if (rc == 0 && now - last_scrub >= SCRUB_MS) {
            rc = scrub(sb);
            last_scrub = now;
        }
        if (now - last_report >= REPORT_MS) {
            int log_it = now - last_log >= LOG_EVERY_MS;
            report(sb, log_it);
            last_report = now;
            if (log_it) {
                last_log = now;
            }
        }
    }
    bk_fetchkick_free(&kick);
    rd_kafka_queue_destroy(q);
    return rc;
}

static void *standby_main(void *arg)
{
    bk_standby_t *sb = arg;
    char cid[160];
    int rc;

    bk_log_set_thread_name("standby");
    sb->t0 = bk_clock_mono_ms();
    snprintf(cid, sizeof(cid), "%s-standby", sb->plan->id);
    for (int t = 0; t < sb->ntasks; t++) {
        bk_standby_life(sb, t, BK_LIFE_OPENING);
    }
    rc = open_dbs(sb);
    if (rc == 0 && sb->nitems > 0) {
        sb->consumer =
            bk_kafka_new(sb->conf, BK_KAFKA_CONSUMER, cid, sb, NULL, sb->err, sizeof(sb->err));
        rc = sb->consumer ? bk_standby_build_all(sb) : -1;
        if (rc == 0 && !sb->stop) {
            rc = bk_standby_assign(sb);
        } else {
            bk_standby_drop_unopened(
                sb); /* stopped before bk_standby_assign(): what is open is checkpointed */
        }
    }
    /* queries may read the replicas from now on (taskdb.h); report() keeps their lags; a
     * replica whose DB is open tails (one left to cold bootstrap stays opening until the
     * runner starts again on its installed snapshot) */
    for (int t = 0; rc == 0 && t < sb->ntasks; t++) {
        bk_taskdb_serve(sb->pool, sb->tasks[t], sb->dbs[t], BK_TASKDB_STANDBY);
        if (sb->dbs[t]) {
            bk_standby_life(sb, t, BK_LIFE_TAILING);
        }
    }
    if (rc == 0 && sb->nitems > 0) {
        report(sb, 1);
        rc = bk_standby_tail(sb);
    } else if (rc == 0) {
        report(sb, 0); /* nothing logged: every task is as warm as it can be */
        while (!sb->stop) {
            struct timespec tick = {0, 50 * 1000 * 1000};
            nanosleep(&tick, NULL);
        }
    }
    if (rc == 0) {
        rc = checkpoint(sb);
    }
    if (rc != 0) {
        /* a read the brokers did not answer in time is not worth an ERROR: the node starts
         * the runner again (node.c) */
        bk_log(sb->retriable ? BK_LOG_WARN : BK_LOG_ERROR, "standby replicas stopped: %s%s",
               sb->err, sb->retriable ? "; starting them again" : "");
        sb->failed = 1;
    } else if (sb->nitems > 0) {
        report(sb, 1);
    }
    for (int t = 0; t < sb->ntasks; t++) {
        if (sb->applied[t] > 0) {
            bk_log_info("standby %s: applied %lld changelog record(s) while standby",
                        BK_TASK_NAME(sb->tasks[t]), (long long)sb->applied[t]);
        }
    }
    if (sb->consumer) {
        rd_kafka_assign(sb->consumer, NULL);
        rd_kafka_consumer_close(sb->consumer);
        rd_kafka_destroy(sb->consumer);
        sb->consumer = NULL;
    }
    for (int t = 0; t < sb->ntasks; t++) {
        bk_taskdb_release(sb->pool, sb->tasks[t], sb->dbs[t], !sb->failed);
        sb->dbs[t] = NULL;
        bk_standby_life(sb, t, BK_LIFE_FREE);
    }
    sb->done = 1;
    return NULL;
}

void bk_standby_set_live(bk_standby_t *sb, struct bk_livestats_s *live)
{
    sb->life.live = live;
}

void bk_standby_set_pool(bk_standby_t *sb, struct bk_taskdb_pool_s *pool)
{
    sb->pool = pool;
}

void bk_standby_set_ready(bk_standby_t *sb, const uint8_t *ready)
{
    for (int t = 0; t < sb->ntasks; t++) {
        sb->ready[t] = ready[t];
    }
}

void bk_standby_set_bootstrap(bk_standby_t *sb, const int *modes, bk_standby_boot_cb cb,
                              void *opaque)
{
    sb->boot_opaque = opaque;
    sb->boot_on = bk_conf_str(sb->conf, BK_CONF_SSH_KEY) != NULL;
    sb->boot_min = bk_conf_int(sb->conf, BK_CONF_BOOTSTRAP_MIN_RECORDS);
    sb->boot_cb = cb;
    for (int t = 0; t < sb->ntasks; t++) {
        sb->boot_mode[t] = modes ? modes[t] : BK_BOOTSTRAP_MODE_AUTO;
    }
}

int bk_standby_start(bk_standby_t *sb)
{
    if (pthread_create(&sb->tid, NULL, standby_main, sb) != 0) {
        return -1;
    }
    sb->started = 1;
    return 0;
}

int bk_standby_stop(bk_standby_t *sb)
{
    if (!sb) {
        return 0;
    }
    sb->stop = 1;
    if (sb->started) {
        pthread_join(sb->tid, NULL);
        sb->started = 0;
    }
    return sb->failed ? -1 : 0;
}

int bk_standby_done(const bk_standby_t *sb)
{
    return sb->done;
}

int bk_standby_retriable(const bk_standby_t *sb)
{
    return sb->retriable;
}

int bk_standby_corrupt(const bk_standby_t *sb, int32_t *ids)
{
    int n = 0;
    for (int t = 0; t < sb->ntasks; t++) {
        if (sb->corrupt[t]) {
            ids[n++] = sb->ids[t];
        }
    }
    return n;
}

void bk_standby_destroy(bk_standby_t *sb)
{
    if (!sb) {
        return;
    }
    bk_standby_stop(sb);
    free(sb->tasks);
    free(sb->ids);
    free(sb->dbs);
    free(sb->fresh);
    free(sb->unbuilt);
    free(sb->build);
    free(sb->ready);
    free(sb->corrupt);
    bk_dbverify_free(sb->scrub);
    free(sb->items);
    free(sb->applied);
    free(sb->applied_ms);
    free(sb->boot_mode);
    free(sb->boot_lag);
    bk_tasklife_free(&sb->life);
    free(sb);
}
