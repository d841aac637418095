/* thread_tasks.c - tasks that come and go while a stream thread runs (thread.h).
 *
 * The node asks (bk_thread_add_tasks, bk_thread_remove_tasks, from its own thread); the
 * stream thread takes the asks at the top of its loop, between batches:
 * - An added task opens in the background: a job on a pthread and a consumer of its own
 *   opens its DB, reads its committed input offsets and replays its changelogs, so that the
 *   thread's other tasks keep processing. The stream thread then settles what a previous
 *   owner left after its last commit marker, builds the task's processors in its VM, runs
 *   their init() and adds its input partitions to the consumer (incremental assign).
 * - A removed task's processors close, the thread commits, its partitions leave the
 *   consumer (incremental unassign) and its DB goes back to the node's pool, open. Only
 *   then is the node told, so that it may publish the task's release.
 * Nothing else of the thread stops: the other tasks' processors, stores, clients and VM
 * stay as they are. */
#define _GNU_SOURCE /* pthread_tryjoin_np */
#include <pthread.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <librdkafka/rdkafka.h>

#include "base/clock.h"
#include "base/events.h"
#include "base/ffi.h"
#include "base/log.h"
#include "base/task.h"
#include "engine/changelog.h"
#include "engine/db.h"
#include "engine/dedup.h"
#include "engine/kafka.h"
#include "engine/restore.h"
#include "engine/skips.h"
#include "engine/store.h"
#include "engine/taskdb.h"
#include "engine/thread_internal.h"
#include "engine/vm.h"

#define JOB_NICE 10 /* an opening job's niceness, above the stream threads' */
#define JOB_ATTEMPTS 5 /* openings of a task in a row that may fail for errors that pass */

/* -- Asks, from the node's thread --------------------------------------------------------- */

static void wake(bk_thread_t *thr)
{
    if (thr->queue_ready) {
        rd_kafka_queue_yield(thr->queue); /* out of its blocking consume at once */
    }
}

void bk_thread_add_tasks(bk_thread_t *thr, const int32_t *ids, int n, uint64_t epoch)
{
    pthread_mutex_lock(&thr->box_lock);
    for (int i = 0; i < n; i++) {
        if (ids[i] >= 0 && ids[i] < thr->cap && thr->nbox_add < thr->cap) {
            thr->box_add_epoch[thr->nbox_add] = epoch;
            thr->box_add[thr->nbox_add++] = ids[i];
        }
    }
    thr->box_pending = 1;
    pthread_mutex_unlock(&thr->box_lock);
    wake(thr);
}

uint64_t bk_thread_remove_tasks(bk_thread_t *thr, const int32_t *ids, int n)
{
    uint64_t ticket;

    pthread_mutex_lock(&thr->box_lock);
    for (int i = 0; i < n; i++) {
        /* an addition not taken yet is taken back: the thread takes removals before
         * additions, so it would open the task after this removal found nothing to remove
         * (a task given and taken back by two views in a row, or held and started just
         * before the view that gave it up) */
        for (int j = 0; j < thr->nbox_add; j++) {
            if (thr->box_add[j] == ids[i]) {
                thr->nbox_add--;
                memmove(&thr->box_add[j], &thr->box_add[j + 1],
                        (size_t)(thr->nbox_add - j) * sizeof(thr->box_add[0]));
                memmove(&thr->box_add_epoch[j], &thr->box_add_epoch[j + 1],
                        (size_t)(thr->nbox_add - j) * sizeof(thr->box_add_epoch[0]));
                j--;
            }
        }
        if (ids[i] >= 0 && ids[i] < thr->cap && thr->nbox_rm < thr->cap) {
            thr->box_rm[thr->nbox_rm++] = ids[i];
        }
    }
    ticket = ++thr->box_asked;
    thr->box_pending = 1;
    pthread_mutex_unlock(&thr->box_lock);
    wake(thr);
    return ticket;
}

int bk_thread_wait_removed(bk_thread_t *thr, uint64_t ticket)
{
    int rc;
    pthread_mutex_lock(&thr->box_lock);
    while (thr->box_done < ticket && !thr->done) {
        pthread_cond_wait(&thr->box_cond, &thr->box_lock);
    }
    rc = thr->box_done >= ticket ? 0 : -1; /* the thread ended first: it failed or was stopped */
    pthread_mutex_unlock(&thr->box_lock);
    return rc;
}

/* -- Offsets -------------------------------------------------------------------------------- */

int bk_thread_task_inputs(const bk_thread_t *thr, int s, int64_t *offs)
{
    int n = thr->slot_ntps[s] < BK_STORE_MAX_INPUTS ? thr->slot_ntps[s] : BK_STORE_MAX_INPUTS;
    for (int j = 0; j < n; j++) {
        offs[j] = thr->tp_next[thr->slot_tps[s][j]];
    }
    return n;
}

/* The error of an offset fetch: the request's, else the first partition's. A partition's
 * own error (its coordinator loading, an open transaction holding its offsets) is no answer:
 * taken for "nothing committed", the task would start from auto.offset.reset. */
static rd_kafka_resp_err_t committed_err(rd_kafka_resp_err_t err,
                                         const rd_kafka_topic_partition_list_t *list)
{
    for (int i = 0; !err && i < list->cnt; i++) {
        err = list->elems[i].err;
    }
    return err;
}

int bk_thread_read_committed(bk_thread_t *thr, rd_kafka_t *consumer, const char *const *topics,
                             const int32_t *partitions, int n, int64_t *offs, char **meta,
                             atomic_int *stop, char *err, size_t errsize)
{
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(n + 1);
    rd_kafka_resp_err_t kerr;
    int64_t give_up = bk_clock_mono_ms() + BK_RESTORE_OFFSETS_MS, backoff = 50;

    for (int i = 0; i < n; i++) {
        offs[i] = -1;
        rd_kafka_topic_partition_list_add(list, topics[i], partitions[i])->opaque =
            (void *)(intptr_t)i;
    }
    for (;;) {
        kerr = list->cnt > 0 ? committed_err(rd_kafka_committed(consumer, list, 10000), list) : 0;
        if (!kerr || !bk_kafka_retriable(kerr) || bk_clock_mono_ms() + backoff > give_up ||
            (stop && *stop)) {
            break;
        }
        bk_log_debug("%s: reading committed offsets: %s: again in %lld ms", thr->name,
                     rd_kafka_err2str(kerr), (long long)backoff);
        bk_clock_sleep_ms(backoff);
        backoff = backoff < 1000 ? backoff * 2 : 1000;
    }
    for (int i = 0; !kerr && i < list->cnt; i++) {
        const rd_kafka_topic_partition_t *e = &list->elems[i];
        int at = (int)(intptr_t)e->opaque;
        offs[at] = e->offset >= 0 ? e->offset : -1;
        if (meta && e->metadata && e->metadata_size > 0 &&
            (meta[at] = malloc(e->metadata_size + 1)) != NULL) {
            memcpy(meta[at], e->metadata, e->metadata_size);
            meta[at][e->metadata_size] = '\0';
        }
    }
    rd_kafka_topic_partition_list_destroy(list);
    if (kerr) {
        snprintf(err, errsize, "cannot read the committed input offsets: %s",
                 rd_kafka_err2str(kerr));
        return bk_kafka_retriable(kerr) && !(stop && *stop) ? -2 : -1;
    }
    return 0;
}

/* -- Opening, in the background ------------------------------------------------------------- */

static void job_progress(void *opaque, const bk_restore_progress_t *p)
{
    bk_thread_job_t *job = opaque;
    pthread_mutex_lock(&job->lock);
    job->progress = *p;
    job->progress_seq++;
    pthread_mutex_unlock(&job->lock);
    /* for /metrics and the 503 of a read of a task still restoring: the job's figures */
    for (int i = 0; job->thr->live && i < job->n; i++) {
        bk_livestats_task_t *ts = &job->thr->live->task[job->slots[i]];
        bk_livestats_set(&ts->restore_total, p->total);
        bk_livestats_set(&ts->restore_done, p->done ? p->total : p->records);
    }
}

/* Opens the DB of the job's k-th task and writes its logged stores' restore items from
 * items[*n] on. 0, or -1 with job->err. */
static int open_slot(bk_thread_job_t *job, int k, bk_restore_item_t *items, int *n,
                     char (*names)[BK_TASK_NAME_MAX])
{
    bk_thread_t *thr = job->thr;
    const bk_plan_t *plan = thr->plan;
    int s = job->slots[k], logged;
    if (!thr->store_of[s]) { /* by the plan's room: it may grow while the task runs */
        thr->store_of[s] = calloc((size_t)plan->cap_stores + 1, sizeof(bk_store_t *));
    }
    thr->dbs[s] = bk_taskdb_open(thr->pool, plan, thr->conf, thr->tasks[s], thr->store_of[s],
                                 &logged, job->err, sizeof(job->err));
    if (!thr->dbs[s] && job->err[0]) {
        return -1;
    }
    for (int st = 0; st < plan->nstores; st++) {
        bk_store_t *store = thr->store_of[s][st];
        if (!store) {
            continue;
        }
        bk_store_set_changelog(store, thr->producer, thr->changelog_rkts[st],
                               thr->tasks[s].partition);
        if (bk_store_logged(store)) {
            items[(*n)++] = (bk_restore_item_t){store, plan->stores[st].changelog,
                                                thr->tasks[s].partition, names[k], 0, 0};
        }
    }
    return 0;
}

/* The recovery order's archive step (bk_thread_set_recover) for the job's k-th task, whose
 * items are items[from..to): when its changelogs lost what its state needs, its DB is closed,
 * handed to thr->recover and opened again on what that installed. 0, or -1 with job->err. */
static int recover_slot(bk_thread_job_t *job, rd_kafka_t *consumer, int k, bk_restore_item_t *items,
                        int from, int to, char (*names)[BK_TASK_NAME_MAX])
{
    bk_thread_t *thr = job->thr;
    int m = to - from, s = job->slots[k], gap = -1, n = from;
    const char **topics = calloc((size_t)m + 1, sizeof(*topics));
    char **changelogs = calloc((size_t)m + 1, sizeof(*changelogs));
    int32_t *parts = calloc((size_t)m + 1, sizeof(*parts));
    int64_t *lo = calloc((size_t)m + 1, sizeof(*lo)), *hi = calloc((size_t)m + 1, sizeof(*hi));
    char dir[4096], what[512];
    int rc = -1;

    if (!topics || !changelogs || !parts || !lo || !hi) {
        snprintf(job->err, sizeof(job->err), "out of memory");
        goto done;
    }
    for (int i = 0; i < m; i++) {
        topics[i] = changelogs[i] = (char *)items[from + i].topic;
        parts[i] = items[from + i].partition;
    }
    if (m > 0 && bk_kafka_watermarks(consumer, topics, parts, m, lo, hi, BK_RESTORE_OFFSETS_MS,
                                     &job->stop) != 0) {
        snprintf(job->err, sizeof(job->err), "task %s: cannot read its changelogs' offsets",
                 names[k]);
        goto done;
    }
    for (int i = 0; i < m && gap < 0; i++) {
        int64_t next = bk_store_changelog_next(items[from + i].st);
        if (bk_store_window(items[from + i].st)) {
            continue; /* a window changelog drops its head by design: not a loss */
        }
        if ((next >= 0 && next < lo[i]) || (next < 0 && lo[i] > 0)) {
            gap = i;
        }
    }
    if (gap < 0) {
        rc = 0;
        goto done;
    }
    {
        int64_t next = bk_store_changelog_next(items[from + gap].st);
        bk_log_warn("task %s: changelog %s [%d] starts at offset %lld but the store needs %lld: "
                    "looking in the archive",
                    names[k], topics[gap], (int)parts[gap], (long long)lo[gap],
                    (long long)(next < 0 ? 0 : next));
        bk_taskdb_release(thr->pool, thr->tasks[s], thr->dbs[s], 0);
        thr->dbs[s] = NULL;
        bk_plan_task_dir(thr->plan, thr->conf, thr->tasks[s], dir, sizeof(dir));
        int got = thr->recover(thr->recover_opaque, names[k], dir, changelogs, lo, m, what,
                               sizeof(what), job->err, sizeof(job->err));
        if (got < 0) {
            goto done;
        }
        if (got == 0) {
            snprintf(job->err, sizeof(job->err),
                     "task %s: changelog %s [%d] starts at offset %lld but the store needs "
                     "%lld: offsets %lld to %lld are lost, and %.300s: stopping rather than "
                     "restoring part of the state (docs/state.md, Recovery order)",
                     names[k], topics[gap], (int)parts[gap], (long long)lo[gap],
                     (long long)(next < 0 ? 0 : next), (long long)(next < 0 ? 0 : next),
                     (long long)lo[gap] - 1, what);
            goto done;
        }
        bk_log_info("task %s: restored from the %s; the changelogs' tails follow", names[k],
                    what);
        {
            char from[600];
            bk_events_emit("restored", "\"task\":\"%s\",\"from\":%s", names[k],
                           bk_events_str(from, sizeof(from), what));
        }
        rc = open_slot(job, k, items, &n, names);
    }
done:
    free(topics);
    free(changelogs);
    free(parts);
    free(lo);
    free(hi);
    return rc;
}

/* The restore ends at each changelog partition's end event as well as at its last record
 * (bk_restore_run). */
static const char *const restore_settings[] = {"enable.partition.eof", "true", NULL};

/* The job's thread: DBs, committed offsets, the restore, a checkpoint of what it replayed. */
static void *job_main(void *arg)
{
    bk_thread_job_t *job = arg;
    bk_thread_t *thr = job->thr;
    const bk_plan_t *plan = thr->plan;
    bk_restore_item_t *items = calloc((size_t)(job->n * plan->nstores) + 1, sizeof(*items));
    char(*names)[BK_TASK_NAME_MAX] = calloc((size_t)job->n + 1, BK_TASK_NAME_MAX);
    int64_t *before = NULL;
    rd_kafka_t *consumer = NULL;
    char cid[128];
    int n = 0, rc;

    bk_log_set_thread_name(thr->name);
    /* an opening (a restore, a build) yields the CPU to the stream threads: the tasks that
     * run go on at their pace while others open beside them */
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), JOB_NICE);
    job->rc = -1;
    if (!items || !names) {
        snprintf(job->err, sizeof(job->err), "out of memory");
        goto done;
    }
    for (int k = 0; k < job->n; k++) {
        if (bk_plan_prev_generation(plan, thr->tasks[job->slots[k]].sub) >= 0) {
            atomic_fetch_or(&job->phase, 1 << BK_LIFE_BUILDING); /* from the one before */
        }
    }
    for (int k = 0; k < job->n; k++) {
        bk_task_name(thr->tasks[job->slots[k]], names[k]);
        if (bk_thread_build_prepare(job, k, names[k]) != 0 ||
            open_slot(job, k, items, &n, names) != 0) {
            goto done;
        }
    }
    job->t_open = bk_clock_wall_ms();
    snprintf(cid, sizeof(cid), "%s-restore-%d", plan->id, thr->index);
    consumer = bk_kafka_new_with(thr->conf, BK_KAFKA_CONSUMER, cid, restore_settings, NULL, NULL,
                                 job->err, sizeof(job->err));
    /* a later generation's task starts from the state of the generation before */
    for (int k = 0; consumer && k < job->n; k++) {
        if (bk_thread_build_slot(job, consumer, k, names[k]) != 0) {
            goto done;
        }
    }
    /* the archive, for tasks whose changelogs lost what they need (items are by task) */
    for (int k = 0, from = 0; consumer && thr->recover && k < job->n; k++) {
        int to = from;
        while (to < n && items[to].task == names[k]) {
            to++;
        }
        if (recover_slot(job, consumer, k, items, from, to, names) != 0) {
            goto done;
        }
        from = to;
    }
    if (!consumer) {
        goto done;
    }
    atomic_fetch_or(&job->phase, 1 << BK_LIFE_RESTORING);
    rc = bk_thread_read_committed(thr, consumer, job->tp_topic, job->tp_part, job->ntp,
                                  job->tp_off, job->tp_meta, &job->stop, job->err,
                                  sizeof(job->err));
    if (rc != 0) {
        job->retriable = rc == -2;
        goto done;
    }
    before = calloc((size_t)n + 1, sizeof(*before));
    for (int i = 0; before && i < n; i++) {
        before[i] = bk_store_changelog_next(items[i].st);
    }
    rc = bk_restore_run(consumer, items, n, job_progress, job, &job->stop, job->err,
                        sizeof(job->err));
    if (rc != 0) {
        job->retriable = rc == -2;
        goto done;
    }
    job->t_restore = bk_clock_wall_ms();
    /* Checkpoint what the restore replayed (a DB it did not move keeps its checkpoint, which
     * is as good: each costs two fsyncs). */
    for (int k = 0; k < job->n; k++) {
        int s = job->slots[k], moved = 0;
        for (int i = 0; before && i < n; i++) {
            moved |= items[i].task == names[k] && bk_store_changelog_next(items[i].st) != before[i];
        }
        if (thr->dbs[s] && moved &&
            bk_db_checkpoint(thr->dbs[s], job->err, sizeof(job->err)) != 0) {
            goto done;
        }
    }
    job->rc = 0;

done:
    /* Done before the consumer goes: closing it takes ~100 ms, which the task need not
     * wait for. From here on the job struct is the stream thread's (it may free it). */
    job->done = 1;
    wake(thr); /* out of its wait for input: the task can go live now (thr outlives the job
                * thread: the stream thread joins it before it ends) */
    if (consumer) {
        rd_kafka_consumer_close(consumer);
        rd_kafka_destroy(consumer);
    }
    free(before);
    free(items);
    free(names);
    return NULL;
}

/* A finished job's thread, joined once it has closed its consumer (reap). */
static void reap_later(bk_thread_t *thr, pthread_t tid)
{
    pthread_t *more = realloc(thr->reap, (size_t)(thr->nreap + 1) * sizeof(*more));
    if (!more) {
        pthread_join(tid, NULL); /* no room to remember it: wait for it now */
        return;
    }
    thr->reap = more;
    thr->reap[thr->nreap++] = tid;
}

static void job_free(bk_thread_job_t *job)
{
    pthread_mutex_destroy(&job->lock);
    free(job->tp);
    free(job->tp_topic);
    free(job->tp_part);
    free(job->tp_off);
    for (int i = 0; job->tp_meta && i < job->ntp; i++) {
        free(job->tp_meta[i]);
    }
    free(job->tp_meta);
    free(job->slots);
    free(job);
}

/* attempt: how many openings of these tasks failed before for errors that pass */
static int job_start_again(bk_thread_t *thr, const int32_t *slots, int n, int attempt)
{
    bk_thread_job_t *job = calloc(1, sizeof(*job));
    if (!job || !(job->slots = calloc((size_t)n + 1, sizeof(int32_t)))) {
        free(job);
        snprintf(thr->err, sizeof(thr->err), "out of memory");
        return -1;
    }
    memcpy(job->slots, slots, (size_t)n * sizeof(int32_t));
    job->n = n;
    job->attempt = attempt;
    job->thr = thr;
    job->t0 = bk_clock_wall_ms();
    atomic_init(&job->phase, 0);
    pthread_mutex_init(&job->lock, NULL);
    /* the slots' input partitions as they are now, for the job's thread to read */
    for (int k = 0; k < n; k++) {
        job->ntp += thr->slot_ntps[slots[k]];
    }
    job->tp = calloc((size_t)job->ntp + 1, sizeof(int));
    job->tp_topic = calloc((size_t)job->ntp + 1, sizeof(char *));
    job->tp_part = calloc((size_t)job->ntp + 1, sizeof(int32_t));
    job->tp_off = calloc((size_t)job->ntp + 1, sizeof(int64_t));
    job->tp_meta = calloc((size_t)job->ntp + 1, sizeof(char *));
    if (!job->tp || !job->tp_topic || !job->tp_part || !job->tp_off || !job->tp_meta) {
        job_free(job);
        snprintf(thr->err, sizeof(thr->err), "out of memory");
        return -1;
    }
    job->ntp = 0;
    for (int k = 0; k < n; k++) {
        for (int j = 0; j < thr->slot_ntps[slots[k]]; j++) {
            int tp = thr->slot_tps[slots[k]][j];
            job->tp[job->ntp] = tp;
            job->tp_topic[job->ntp] = thr->plan->topics[thr->tp_topic[tp]].name;
            job->tp_part[job->ntp++] = thr->tp_partition[tp];
        }
    }
    if (pthread_create(&job->tid, NULL, job_main, job) != 0) {
        job_free(job);
        snprintf(thr->err, sizeof(thr->err), "cannot start a thread to open %d task(s)", n);
        return -1;
    }
    job->next = thr->jobs;
    thr->jobs = job;
    return 0;
}

static int job_start(bk_thread_t *thr, const int32_t *slots, int n)
{
    return job_start_again(thr, slots, n, 0);
}

/* Slot s's DB back to the pool (kept open for its next owner only if `synced`: else closed,
 * without its write batch) and the slot free. */
static void free_slot(bk_thread_t *thr, int s, int synced)
{
    if (thr->deduped[s] > 1) {
        bk_log_info("%s: task %s skipped %lld record(s) forwarded again by the passthrough",
                    thr->name, BK_TASK_NAME(thr->tasks[s]), (long long)thr->deduped[s]);
    }
    thr->dedup[s] = NULL; /* its store's, which goes with the DB */
    thr->deduped[s] = 0;
    for (int j = 0; j < thr->slot_ntps[s]; j++) {
        bk_order_drop(&thr->order, thr->slot_tps[s][j]); /* read again by its next owner */
    }
    if (thr->dbs[s]) {
        bk_taskdb_release(thr->pool, thr->tasks[s], thr->dbs[s], synced);
        thr->dbs[s] = NULL;
    }
    free(thr->store_of[s]);
    thr->store_of[s] = NULL;
    bk_thread_life(thr, s, thr->parked[s].on ? BK_LIFE_PARKED : BK_LIFE_FREE);
    bk_thread_moves_forget(thr, s);
}

/* Puts a job's DBs back (closed: nothing of them is committed) and frees its slots. */
static void job_drop_slots(bk_thread_t *thr, bk_thread_job_t *job)
{
    for (int k = 0; k < job->n; k++) {
        free_slot(thr, job->slots[k], 0);
    }
}

static void job_unlink(bk_thread_t *thr, bk_thread_job_t *job)
{
    for (bk_thread_job_t **p = &thr->jobs; *p; p = &(*p)->next) {
        if (*p == job) {
            *p = job->next;
            return;
        }
    }
}

void bk_thread_stop_jobs(bk_thread_t *thr)
{
    while (thr->jobs) {
        bk_thread_job_t *job = thr->jobs;
        job->stop = 1;
        pthread_join(job->tid, NULL);
        job_drop_slots(thr, job);
        thr->jobs = job->next;
        job_free(job);
    }
    for (int i = 0; i < thr->nreap; i++) {
        pthread_join(thr->reap[i], NULL);
    }
    thr->nreap = 0;
}

/* Joins the finished jobs' threads that have ended (without waiting for the others). */
static void reap(bk_thread_t *thr)
{
    for (int i = 0; i < thr->nreap;) {
        if (pthread_tryjoin_np(thr->reap[i], NULL) == 0) {
            thr->reap[i] = thr->reap[--thr->nreap];
        } else {
            i++;
        }
    }
}

/* The job's tasks' life follows the job (opening, building, restoring). */
static void job_phase(bk_thread_t *thr, bk_thread_job_t *job)
{
    int phases = atomic_load(&job->phase);
    for (int k = 0; k < job->n; k++) {
        int s = job->slots[k];
        for (bk_life_t p = BK_LIFE_BUILDING; p <= BK_LIFE_RESTORING; p++) {
            if ((phases & (1 << p)) && bk_tasklife_opening(&thr->life, s) &&
                bk_tasklife_state(&thr->life, s) < p) {
                bk_thread_life(thr, s, p);
            }
        }
    }
}

/* The restore's progress, to the on_restore hook (Lua lives on this thread). */
static void fire_progress(bk_thread_t *thr, bk_thread_job_t *job)
{
    bk_restore_progress_t p;
    lua_State *L = thr->L;
    char err[1024];

    pthread_mutex_lock(&job->lock);
    if (job->progress_seq == job->fired_seq) {
        pthread_mutex_unlock(&job->lock);
        return;
    }
    job->fired_seq = job->progress_seq;
    p = job->progress;
    pthread_mutex_unlock(&job->lock);
    lua_rawgeti(L, LUA_REGISTRYINDEX, thr->ref_hook);
    lua_pushstring(L, "on_restore");
    lua_createtable(L, 0, 10);
    lua_pushstring(L, "restore");
    lua_setfield(L, -2, "kind");
    lua_pushnumber(L, (lua_Number)p.records);
    lua_setfield(L, -2, "records");
    lua_pushnumber(L, (lua_Number)p.total);
    lua_setfield(L, -2, "total");
    lua_pushnumber(L, p.total ? 100.0 * (double)p.records / (double)p.total : 100.0);
    lua_setfield(L, -2, "percent");
    lua_pushnumber(L, p.rate);
    lua_setfield(L, -2, "rate");
    lua_pushnumber(L, p.eta_s);
    lua_setfield(L, -2, "eta_s");
    lua_pushnumber(L, p.elapsed_s);
    lua_setfield(L, -2, "elapsed_s");
    lua_pushinteger(L, p.stores);
    lua_setfield(L, -2, "stores");
    lua_pushboolean(L, p.done);
    lua_setfield(L, -2, "done");
    lua_pushinteger(L, thr->index);
    lua_setfield(L, -2, "thread");
    if (bk_vm_pcall(L, 2, 0, 1, err, sizeof(err)) != 0) {
        bk_log_error("%s: on_restore hook failed: %s", thr->name, err);
    }
}

/* -- Going live, on the stream thread ------------------------------------------------------- */

/* A previous owner may have left changelog records after its last commit marker (it was
 * killed, or failed between committing its input and writing the marker). Their fate
 * follows the committed input offsets: kept if those moved past the last marker, dropped
 * if not. Then a marker here says so to every other reader. */
static int settle(bk_thread_t *thr, int slot)
{
    int64_t offs[BK_STORE_MAX_INPUTS];
    int n = bk_thread_task_inputs(thr, slot, offs);

    for (int s = 0; thr->store_of[slot] && s < thr->plan->nstores; s++) {
        bk_store_t *st = thr->store_of[slot][s];
        int64_t pending;
        int kept;
        if (!st || !bk_store_logged(st)) {
            continue;
        }
        pending = bk_changelog_pending(st);
        kept = bk_changelog_resolve(st, offs, n, thr->err, sizeof(thr->err));
        if (kept < 0) {
            return -1;
        }
        if (pending > 0) {
            bk_log_info("task %s store %s: %lld write(s) after the previous owner's last "
                        "commit %s",
                        BK_TASK_NAME(thr->tasks[slot]), bk_store_name(st), (long long)pending,
                        kept ? "kept: their input was committed"
                             : "dropped: their input was not committed");
        }
        bk_store_set_input(st, offs, n);
        if (bk_changelog_write_marker(st, pending == 0 || kept, offs, n) != 0) {
            snprintf(thr->err, sizeof(thr->err), "%s", bk_ffi_store_error(st));
            return -1;
        }
        if (pending > 0 && !kept) {
            /* the dropped records' keys again, with their committed values, then a commit
             * marker for them: in a compacted changelog a dropped record must not stay the
             * newest of its key (docs/state.md, Markers) */
            int64_t repaired;
            if (bk_changelog_repair(st, &repaired) != 0 ||
                bk_changelog_write_marker(st, 1, offs, n) != 0) {
                snprintf(thr->err, sizeof(thr->err), "%s", bk_ffi_store_error(st));
                return -1;
            }
            bk_log_info("task %s store %s: %lld key(s) written again with their committed "
                        "values",
                        BK_TASK_NAME(thr->tasks[slot]), bk_store_name(st), (long long)repaired);
        }
    }
    return 0;
}

static int lua_slot(bk_thread_t *thr, int ref, int slot)
{
    lua_rawgeti(thr->L, LUA_REGISTRYINDEX, ref);
    lua_pushinteger(thr->L, slot);
    return bk_vm_pcall(thr->L, 1, 0, 1, thr->err, sizeof(thr->err));
}

/* A task of a finished job: settled, its processors built and init()ed, its partitions in
 * the table (the consumer gets them from the caller). */
/* A later generation's task, fed by the passthrough, under at-least-once: its first logged
 * store's dedup table (engine/dedup.h), which its state carries; else NULL. */
static bk_dedup_t *dedup_of(bk_thread_t *thr, int slot)
{
    const bk_plan_t *plan = thr->plan;
    const bk_plan_sub_t *sub = &plan->subs[thr->tasks[slot].sub];
    if (thr->eos || sub->passthrough || sub->generation < 1 || !thr->store_of[slot] ||
        bk_plan_passthrough_of(plan, sub->of) < 0) {
        return NULL;
    }
    for (int s = 0; s < plan->nstores; s++) {
        bk_store_t *st = thr->store_of[slot][s];
        if (st && bk_store_logged(st)) {
            return bk_store_dedup(st);
        }
    }
    return NULL; /* no state to count anything twice in */
}

static int go_live(bk_thread_t *thr, int slot, rd_kafka_topic_partition_list_t *assign)
{
    lua_State *L = thr->L;

    if (settle(thr, slot) != 0) {
        return -1;
    }
    thr->dedup[slot] = dedup_of(thr, slot);
    thr->deduped[slot] = 0;
    lua_rawgeti(L, LUA_REGISTRYINDEX, thr->ref_add_task);
    lua_pushinteger(L, slot);
    lua_pushinteger(L, thr->tasks[slot].sub);
    lua_pushinteger(L, thr->tasks[slot].partition);
    lua_pushnumber(L, (lua_Number)thr->slot_time[slot]);
    if (bk_vm_pcall(L, 4, 0, 1, thr->err, sizeof(thr->err)) != 0 ||
        lua_slot(thr, thr->ref_init_task, slot) != 0) {
        return -1; /* an init() that raises stops the thread, as at start-up */
    }
    for (int j = 0; j < thr->slot_ntps[slot]; j++) {
        int tp = thr->slot_tps[slot][j], t = thr->tp_topic[tp], p = thr->tp_partition[tp];
        thr->task_of[t][p] = slot;
        thr->tp_of[t][p] = tp;
        thr->tp_first[tp] = -1;
        thr->tp_dirty[tp] = 0;
        /* from the committed offset the job read; none (or a partition the topic gained
         * since): INVALID, the group's committed offset, else auto.offset.reset */
        rd_kafka_topic_partition_list_add(assign, thr->plan->topics[t].name, p)->offset =
            thr->tp_next[tp] >= 0 ? thr->tp_next[tp] : RD_KAFKA_OFFSET_INVALID;
    }
    /* live (sealing, if a built task's seal is to make; draining, if its commits say it read
     * every barrier); a passthrough's barriers come before anything it forwards */
    bk_thread_life(thr, slot, BK_LIFE_LIVE);
    bk_thread_seal_live(thr, slot);
    if (bk_thread_moves_live(thr, slot) != 0) {
        return -1;
    }
    thr->owned[thr->ntasks++] = slot;
    /* restored and live: queries may read its committed state (taskdb.h) */
    bk_taskdb_serve(thr->pool, thr->tasks[slot], thr->dbs[slot], BK_TASKDB_ACTIVE);
    if (thr->live) {
        bk_livestats_set(&thr->live->task[slot].restore_total, -1);
    }
    return 0;
}

/* "0_1 0_4 ..." of slots into buf. */
static const char *slot_names(bk_thread_t *thr, const int32_t *slots, int n, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int k = 0; k < n && len + BK_TASK_NAME_MAX + 5 < size; k++) {
        len += (size_t)snprintf(buf + len, size - len, "%s%s", k ? " " : "",
                                BK_TASK_NAME(thr->tasks[slots[k]]));
    }
    if (n > 0 && len + BK_TASK_NAME_MAX + 5 >= size) {
        snprintf(buf + len, size - len, " ...");
    }
    return buf;
}

/* The tasks of `slots` as a JSON array of names, for an event (cut to fit). */
static const char *slot_json(bk_thread_t *thr, const int32_t *slots, int n, char *buf,
                             size_t size)
{
    char words[6000];
    return bk_events_words(buf, size, slot_names(thr, slots, n, words, sizeof(words)));
}

/* A finished job: its tasks go live, or it failed (the thread stops), or it was stopped
 * because some of its tasks were removed (the others open again in a new job). */
static int job_finish(bk_thread_t *thr, bk_thread_job_t *job)
{
    rd_kafka_topic_partition_list_t *assign;
    rd_kafka_error_t *kerr;
    char list[512];
    int64_t t_live0 = bk_clock_wall_ms();

    reap_later(thr, job->tid); /* it may still be closing its consumer */
    job_unlink(thr, job);
    job_phase(thr, job); /* the phases it went through since the last look */
    fire_progress(thr, job);
    if (job->rc != 0) {
        int32_t *again = calloc((size_t)job->n + 1, sizeof(int32_t));
        int n = 0, stopped = job->stop, attempt = job->attempt;
        for (int k = 0; again && k < job->n; k++) {
            if (bk_tasklife_opening(&thr->life, job->slots[k])) {
                again[n++] = job->slots[k];
            }
        }
        if (!stopped && job->retriable && attempt < JOB_ATTEMPTS) {
            /* the brokers did not answer for minutes (all down, or a partition without a
             * leader): the node lives on, and opens the tasks again from the start */
            bk_log_warn("%s: cannot open task(s) %.200s yet: %.700s: trying again (%d of %d)",
                        thr->name, slot_names(thr, job->slots, job->n, list, sizeof(list)),
                        job->err, attempt + 1, JOB_ATTEMPTS);
            stopped = 1;
            attempt++;
        } else if (!stopped) {
            snprintf(thr->err, sizeof(thr->err), "cannot open task(s) %.200s: %.780s",
                     slot_names(thr, job->slots, job->n, list, sizeof(list)), job->err);
        }
        job_drop_slots(thr, job);
        job_free(job);
        if (stopped && again && n > 0) {
            for (int k = 0; k < n; k++) {
                bk_thread_life(thr, again[k], BK_LIFE_OPENING);
            }
            stopped = job_start_again(thr, again, n, attempt) == 0;
        }
        free(again);
        return stopped ? 0 : -1;
    }
    for (int i = 0; i < job->ntp; i++) {
        thr->tp_next[job->tp[i]] = job->tp_off[i]; /* the committed offsets the job read */
    }
    /* the barriers its tasks had read and their stream times, as their commits' metadata
     * says */
    for (int k = 0; k < job->n; k++) {
        int s = job->slots[k];
        thr->slot_time[s] = -1;
        for (int j = 0; j < thr->slot_ntps[s]; j++) {
            for (int i = 0; i < job->ntp; i++) {
                if (job->tp[i] == thr->slot_tps[s][j] && job->tp_meta[i]) {
                    bk_thread_moves_restore(thr, s, job->tp_meta[i]);
                }
            }
        }
    }
    assign = rd_kafka_topic_partition_list_new(job->n + 1);
    for (int k = 0; k < job->n; k++) {
        if (go_live(thr, job->slots[k], assign) != 0) {
            rd_kafka_topic_partition_list_destroy(assign);
            job_free(job);
            return -1;
        }
    }
    int nparts = assign->cnt;
    kerr = nparts > 0 ? rd_kafka_incremental_assign(thr->consumer, assign) : NULL;
    rd_kafka_topic_partition_list_destroy(assign);
    if (kerr) {
        snprintf(thr->err, sizeof(thr->err), "cannot assign input partitions: %s",
                 rd_kafka_error_string(kerr));
        rd_kafka_error_destroy(kerr);
        job_free(job);
        return -1;
    }
    bk_log_info("%s: running %d task(s), with %s live in %lld ms (open %lld, restore %lld, "
                "settle and init %lld) over %d partition(s)",
                thr->name, thr->ntasks, slot_names(thr, job->slots, job->n, list, sizeof(list)),
                (long long)(bk_clock_wall_ms() - job->t0), (long long)(job->t_open - job->t0),
                (long long)(job->t_restore - job->t_open),
                (long long)(bk_clock_wall_ms() - t_live0), nparts);
    {
        char tasks[6500];
        bk_events_emit("live",
                       "\"thread\":\"%s\",\"tasks\":%s,\"running\":%d,\"ms\":%lld,"
                       "\"open_ms\":%lld,\"restore_ms\":%lld",
                       thr->name, slot_json(thr, job->slots, job->n, tasks, sizeof(tasks)),
                       thr->ntasks, (long long)(bk_clock_wall_ms() - job->t0),
                       (long long)(job->t_open - job->t0), (long long)(job->t_restore - job->t_open));
    }
    job_free(job);
    return 0;
}

/* -- Leaving, on the stream thread ---------------------------------------------------------- */

static int owned_index(const bk_thread_t *thr, int slot)
{
    for (int k = 0; k < thr->ntasks; k++) {
        if (thr->owned[k] == slot) {
            return k;
        }
    }
    return -1;
}

/* Removes live tasks: close, commit, unassign, last-record lines, DBs back to the pool. */
static int remove_live(bk_thread_t *thr, const int32_t *slots, int n)
{
    rd_kafka_topic_partition_list_t *list;
    rd_kafka_error_t *kerr;
    int64_t t0 = bk_clock_wall_ms();
    char names[512];

    if (!bk_node_leased(thr->flags, t0)) {
        /* The node's lease ran out (a node lost, frozen past its session): another node may
         * run these tasks already, from their last commit. Committing now would write what
         * this one did since over that one's work. They leave as in a crash, and so does
         * every task of the thread: its producer's queue, shared by them all, is dropped
         * (the others start again from their last commit, and wait for the lease). */
        int rc;
        snprintf(thr->dr_err, sizeof(thr->dr_err),
                 "the node's lease ran out: task(s) %s released without committing (another "
                 "node may run them already)",
                 slot_names(thr, slots, n, names, sizeof(names)));
        thr->redo_unleased = 1;
        rc = bk_thread_redo(thr, slots, n);
        thr->redo_unleased = 0;
        return rc;
    }
    for (int k = 0; k < n; k++) {
        if (lua_slot(thr, thr->ref_close_task, slots[k]) != 0) {
            bk_log_error("%s: closing task %s: %s", thr->name, BK_TASK_NAME(thr->tasks[slots[k]]),
                         thr->err);
        }
    }
    /* what they did so far, flushed and committed: the task's next owner starts from here
     * (the others' part waits for the thread's next commit) */
    int crc = bk_thread_commit_tasks(thr, slots, n);
    if (crc < 0) {
        snprintf(thr->err, sizeof(thr->err), "the commit before releasing task(s) %s failed",
                 slot_names(thr, slots, n, names, sizeof(names)));
        return -1;
    }
    /* The commit's last step wrote markers into the changelogs, whose delivery reports name
     * their store (dr_msg_cb): they are served here, before the DBs go to the pool, where
     * the node may close them (make test SAN=1 caught a report landing in a closed store).
     * Undelivered, the thread fails and keeps the DBs until its producer is gone. */
    while (rd_kafka_outq_len(thr->producer) > 0 && !thr->dr_failed &&
           bk_node_leased(thr->flags, bk_clock_wall_ms()) &&
           !bk_node_stop_overdue(thr->flags, bk_clock_mono_ms())) {
        rd_kafka_flush(thr->producer, 500);
    }
    if (thr->dr_failed) {
        snprintf(thr->err, sizeof(thr->err), "releasing task(s) %s: %s",
                 slot_names(thr, slots, n, names, sizeof(names)), thr->dr_err);
        return -1;
    }
    if (crc == 0) {
        bk_thread_log_last(thr, slots, n); /* "last record ..., committed" */
    }
    list = rd_kafka_topic_partition_list_new(n + 1);
    for (int k = 0; k < n; k++) {
        int slot = slots[k], at = owned_index(thr, slot);
        for (int j = 0; j < thr->slot_ntps[slot]; j++) {
            int tp = thr->slot_tps[slot][j], t = thr->tp_topic[tp], p = thr->tp_partition[tp];
            rd_kafka_topic_partition_list_add(list, thr->plan->topics[t].name, p);
            thr->task_of[t][p] = thr->tp_of[t][p] = -1; /* what is still queued is dropped */
        }
        if (lua_slot(thr, thr->ref_drop_task, slot) != 0) {
            bk_log_error("%s: dropping task %s: %s", thr->name, BK_TASK_NAME(thr->tasks[slot]),
                         thr->err);
        }
        free_slot(thr, slot, crc == 0); /* open for the next owner if its writes are synced */
        if (at >= 0) {
            thr->owned[at] = thr->owned[--thr->ntasks];
        }
    }
    kerr = rd_kafka_incremental_unassign(thr->consumer, list);
    rd_kafka_topic_partition_list_destroy(list);
    if (kerr) {
        snprintf(thr->err, sizeof(thr->err), "cannot unassign the partitions of task(s) %s: %s",
                 slot_names(thr, slots, n, names, sizeof(names)), rd_kafka_error_string(kerr));
        rd_kafka_error_destroy(kerr);
        return -1;
    }
    if (crc > 0) {
        /* the offsets were not committed (the commit failed, or the lease ran out during
         * it): the DBs closed without the interval, whose input the next owner processes */
        bk_log_warn("%s: released task(s) %s in %lld ms: closed, not committed (their input "
                    "since the last commit is processed again); running %d task(s)",
                    thr->name, slot_names(thr, slots, n, names, sizeof(names)),
                    (long long)(bk_clock_wall_ms() - t0), thr->ntasks);
        {
            char tasks[6500];
            bk_events_emit("released",
                           "\"thread\":\"%s\",\"tasks\":%s,\"committed\":false,\"running\":%d",
                           thr->name, slot_json(thr, slots, n, tasks, sizeof(tasks)),
                           thr->ntasks);
        }
        return 0;
    }
    bk_log_info("%s: released task(s) %s in %lld ms: closed, committed (outputs flushed in %lld "
                "ms, stores synced and marked in %lld, offsets in %lld); running %d task(s)",
                thr->name, slot_names(thr, slots, n, names, sizeof(names)),
                (long long)(bk_clock_wall_ms() - t0), (long long)thr->commit_took[0],
                (long long)thr->commit_took[1], (long long)thr->commit_took[2], thr->ntasks);
    {
        char tasks[6500];
        bk_events_emit("released",
                       "\"thread\":\"%s\",\"tasks\":%s,\"committed\":true,\"running\":%d",
                       thr->name, slot_json(thr, slots, n, tasks, sizeof(tasks)), thr->ntasks);
    }
    return 0;
}

static int in_list(const int32_t *list, int n, int32_t v)
{
    for (int i = 0; i < n; i++) {
        if (list[i] == v) {
            return 1;
        }
    }
    return 0;
}

int bk_thread_redo(bk_thread_t *thr, const int32_t *gone, int ngone)
{
    rd_kafka_topic_partition_list_t *list;
    rd_kafka_error_t *kerr;
    int32_t *again = calloc((size_t)thr->cap + 1, sizeof(int32_t)), *live;
    int nagain = 0, nlive = thr->ntasks;
    char why[sizeof(thr->dr_err)], names[512];

    snprintf(why, sizeof(why), "%s", thr->dr_err);
    bk_thread_producer_broken(thr); /* fenced? */
    if (!again || !(live = calloc((size_t)nlive + 1, sizeof(int32_t)))) {
        free(again);
        snprintf(thr->err, sizeof(thr->err), "%s; out of memory to start again", why);
        return -1;
    }
    /* (a lost lease is the membership's doing, not a producer failing again and again: it
     * does not count) */
    if (!thr->fenced && !thr->redo_unleased && !thr->parking &&
        ++thr->redos > BK_THREAD_MAX_REDOS) {
        snprintf(thr->err, sizeof(thr->err),
                 "%s; the tasks started again from their last commit %d times in a row "
                 "without committing since: stopping",
                 why, BK_THREAD_MAX_REDOS);
        free(again);
        free(live);
        return -1;
    }
    memcpy(live, thr->owned, (size_t)nlive * sizeof(int32_t));
    for (int s = 0; s < thr->cap; s++) {
        if (bk_tasklife_state(&thr->life, s) > BK_LIFE_PARKED && !in_list(gone, ngone, s)) {
            again[nagain++] = s;
        }
    }
    /* 1. what processors forward from close() goes the way of the rest: dropped */
    for (int k = 0; k < nlive; k++) {
        if (lua_slot(thr, thr->ref_close_task, live[k]) != 0) {
            bk_log_error("%s: closing task %s: %s", thr->name, BK_TASK_NAME(thr->tasks[live[k]]),
                         thr->err);
        }
    }
    /* 2. the opening ones stop (their DBs close; nothing of them was written) and what the
     * producer holds is dropped, its reports served while the stores they name are open */
    bk_thread_stop_jobs(thr);
    bk_thread_purge_producer(thr);
    /* 3. the live ones leave as in a crash: no commit, the DB closed without the interval's
     * write batch, so it is the last commit's; their partitions leave the consumer, and
     * what it still had queued of them is dropped with their old assignment */
    list = rd_kafka_topic_partition_list_new(nlive * 2 + 1);
    for (int k = 0; k < nlive; k++) {
        int slot = live[k];
        for (int j = 0; j < thr->slot_ntps[slot]; j++) {
            int tp = thr->slot_tps[slot][j], t = thr->tp_topic[tp], p = thr->tp_partition[tp];
            rd_kafka_topic_partition_list_add(list, thr->plan->topics[t].name, p);
            thr->task_of[t][p] = thr->tp_of[t][p] = -1;
        }
        if (lua_slot(thr, thr->ref_drop_task, slot) != 0) {
            bk_log_error("%s: dropping task %s: %s", thr->name, BK_TASK_NAME(thr->tasks[slot]),
                         thr->err);
        }
        free_slot(thr, slot, 0);
    }
    thr->ntasks = 0;
    kerr = list->cnt > 0 ? rd_kafka_incremental_unassign(thr->consumer, list) : NULL;
    rd_kafka_topic_partition_list_destroy(list);
    free(live);
    if (kerr) {
        snprintf(thr->err, sizeof(thr->err), "%s; cannot unassign the input partitions: %s", why,
                 rd_kafka_error_string(kerr));
        rd_kafka_error_destroy(kerr);
        free(again);
        return -1;
    }
    if (thr->fenced) {
        /* Another producer holds this thread's transactional id now: a node took this
         * one's tasks over after deciding it was gone (paused or cut off past its session).
         * Writing on would fence that one in turn. The tasks stay dropped; the node finds
         * itself lost, rejoins as a new incarnation, and the thread then takes a producer of
         * the new id (bk_thread_set_instance). */
        char id[256];
        bk_thread_txn_id(thr, id, sizeof(id));
        bk_log_error("%s: fenced: %s; another producer took transactional id %s (this node was "
                     "taken for dead and its tasks moved, or another process runs with its "
                     "node_id): nothing since the last commit was committed, task(s) %s "
                     "dropped; waiting for the node to rejoin",
                     thr->name, why, id, slot_names(thr, again, nagain, names, sizeof(names)));
        for (int k = 0; k < nagain; k++) {
            bk_thread_life(thr, again[k], BK_LIFE_FREE);
            bk_thread_moves_forget(thr, again[k]);
        }
        thr->fenced_at = bk_clock_mono_ms();
        thr->dr_failed = 0;
        thr->dr_err[0] = '\0';
        free(again);
        return 0;
    }
    /* 4. a new producer: one that failed for good (a fatal idempotence error) never sends
     * again, and a fresh one starts its sequence numbers clean */
    if (bk_thread_renew_producer(thr) != 0) {
        char err[400];
        snprintf(err, sizeof(err), "%.399s", thr->err);
        snprintf(thr->err, sizeof(thr->err), "%.500s; no new producer: %s", why, err);
        free(again);
        return -1;
    }
    thr->dr_failed = 0;
    thr->dr_err[0] = '\0';
    /* 5. all of them open again: restored from their checkpoints, what the dropped work
     * left in their changelogs after the last marker settled away (not committed), and
     * read from the committed offsets */
    for (int k = 0; k < nagain; k++) {
        bk_thread_life(thr, again[k], BK_LIFE_OPENING);
        bk_thread_moves_forget(thr, again[k]); /* barriers read since the commit: again */
    }
    if (nagain > 0) {
        bk_log_warn("%s: %s: the work since the last commit is dropped; task(s) %s start again "
                    "from it with a new producer (%d of %d times in a row)",
                    thr->name, why, slot_names(thr, again, nagain, names, sizeof(names)),
                    thr->redos, BK_THREAD_MAX_REDOS);
    } else {
        bk_log_warn("%s: %s: the work since the last commit is dropped", thr->name, why);
    }
    int rc = nagain > 0 ? job_start(thr, again, nagain) : 0;
    free(again);
    return rc;
}

int bk_thread_park(bk_thread_t *thr)
{
    int32_t *slots = calloc((size_t)thr->nparked + 1, sizeof(int32_t));
    int n = 0, rc = 0;
    char names[512];
    if (!slots) {
        snprintf(thr->err, sizeof(thr->err), "out of memory to park a task");
        return -1;
    }
    thr->park_pending = 0;
    for (int s = 0; s < thr->cap && n < thr->nparked; s++) {
        if (thr->parked[s].on && bk_tasklife_running(&thr->life, s)) {
            slots[n++] = s;
        }
    }
    if (n > 0 && !thr->eos) {
        rc = remove_live(thr, slots, n);
        if (rc != 0 && !thr->commit_failed && bk_thread_producer_broken(thr)) {
            thr->parking = 1;
            rc = bk_thread_redo(thr, slots, n);
            thr->parking = 0;
        }
    } else if (n > 0) {
        snprintf(thr->dr_err, sizeof(thr->dr_err),
                 "task(s) %s parked on a record that failed: the open transaction is aborted",
                 slot_names(thr, slots, n, names, sizeof(names)));
        thr->parking = 1;
        rc = bk_thread_redo(thr, slots, n);
        thr->parking = 0;
    }
    free(slots);
    return rc;
}

int bk_thread_unpark_listed(bk_thread_t *thr)
{
    int32_t *go = calloc((size_t)thr->nparked + 1, sizeof(int32_t));
    int n = 0, rc = 0;
    if (!go) {
        return 0; /* looked at again next time */
    }
    for (int s = 0; s < thr->cap && n < thr->nparked; s++) {
        bk_thread_parked_t *p = &thr->parked[s];
        const char *topic = p->on ? thr->plan->topics[p->topic].name : NULL;
        char note[512];
        if (!p->on || !bk_skips_listed(thr->flags->skips, topic, p->partition, p->offset,
                                       PARKED_CHECK_MS / 2, note, sizeof(note))) {
            continue;
        }
        bk_log_info("task %s: record %s/%d/%lld is listed by beck skip (%s): the task starts "
                    "again from its last commit and goes past it",
                    BK_TASK_NAME(thr->tasks[s]), topic, (int)p->partition,
                    (long long)p->offset, note);
        go[n++] = s;
    }
    for (int k = 0; k < n; k++) {
        thr->parked[go[k]].on = 0;
        thr->nparked--;
        bk_thread_life(thr, go[k], BK_LIFE_OPENING);
    }
    if (n > 0) {
        rc = job_start(thr, go, n);
    }
    free(go);
    return rc;
}

/* A removal or an addition of a parked task ends its parking: it leaves, or opens anew. */
static void unpark(bk_thread_t *thr, int32_t slot)
{
    if (thr->parked[slot].on) {
        thr->parked[slot].on = 0;
        thr->nparked--;
    }
    if (bk_tasklife_state(&thr->life, slot) == BK_LIFE_PARKED) {
        bk_thread_life(thr, slot, BK_LIFE_FREE);
    }
}

/* Removes tasks still opening: their job stops, the job's other tasks open again. */
static int remove_opening(bk_thread_t *thr, int slot)
{
    for (bk_thread_job_t *job = thr->jobs; job; job = job->next) {
        for (int k = 0; k < job->n; k++) {
            if (job->slots[k] == slot) {
                job->stop = 1;
                while (!job->done) {
                    bk_clock_sleep_ms(1);
                }
                /* not opened again (job_finish frees it) */
                bk_thread_life(thr, slot, BK_LIFE_FREE);
                job->rc = -1;
                return job_finish(thr, job);
            }
        }
    }
    return 0;
}

int bk_thread_apply_changes(bk_thread_t *thr)
{
    int32_t *add = NULL, *rm = NULL, *live = NULL;
    uint64_t *epochs = NULL, asked;
    int nadd, nrm, nlive = 0, rc = 0, took = 1;

    if (thr->nreap > 0) {
        reap(thr);
    }
    /* the opening jobs that finished */
    for (bk_thread_job_t *job = thr->jobs, *next; job; job = next) {
        next = job->next;
        job_phase(thr, job);
        fire_progress(thr, job);
        if (job->done && job_finish(thr, job) != 0) {
            return -1;
        }
    }
    /* a new incarnation's transactional id first (the loop's next turn takes it) */
    if (!thr->box_pending || (thr->eos && atomic_load(&thr->txn_inc) != thr->txn_inc_used)) {
        return 0;
    }
    pthread_mutex_lock(&thr->box_lock);
    nadd = thr->nbox_add;
    nrm = thr->nbox_rm;
    add = calloc((size_t)nadd + 1, sizeof(int32_t));
    epochs = calloc((size_t)nadd + 1, sizeof(uint64_t));
    rm = calloc((size_t)nrm + 1, sizeof(int32_t));
    live = calloc((size_t)nrm + 1, sizeof(int32_t));
    if (add && epochs && rm && live) {
        memcpy(add, thr->box_add, (size_t)nadd * sizeof(int32_t));
        memcpy(epochs, thr->box_add_epoch, (size_t)nadd * sizeof(uint64_t));
        memcpy(rm, thr->box_rm, (size_t)nrm * sizeof(int32_t));
        thr->nbox_add = thr->nbox_rm = 0;
        thr->box_pending = 0;
    } else {
        nadd = nrm = 0; /* out of memory: the mailbox stays pending, tried again next loop */
        took = 0;
    }
    asked = thr->box_asked;
    pthread_mutex_unlock(&thr->box_lock);

    /* removals first: a task moved between threads leaves one before it joins the other */
    for (int i = 0; rc == 0 && i < nrm; i++) {
        unpark(thr, rm[i]);
        if (bk_tasklife_running(&thr->life, rm[i])) {
            live[nlive++] = rm[i];
        } else if (bk_tasklife_opening(&thr->life, rm[i])) {
            rc = remove_opening(thr, rm[i]);
        }
    }
    if (rc == 0 && nlive > 0) {
        rc = remove_live(thr, live, nlive);
        if (rc != 0 && !thr->commit_failed && bk_thread_producer_broken(thr)) {
            /* they leave uncommitted (their next owner starts from their last commit), the
             * others start again from theirs */
            rc = bk_thread_redo(thr, live, nlive);
        }
    }
    pthread_mutex_lock(&thr->box_lock);
    if (rc == 0 && took) { /* never "removed" for a removal not taken */
        thr->box_done = asked;
    }
    pthread_cond_broadcast(&thr->box_cond);
    pthread_mutex_unlock(&thr->box_lock);

    /* additions: one job opens them all (none while fenced: they were given to the
     * incarnation that was fenced, and the node is about to find itself lost) */
    if (rc == 0 && nadd > 0 && thr->fenced) {
        bk_log_warn("%s: fenced: not opening %d task(s) given to this node", thr->name, nadd);
    } else if (rc == 0 && nadd > 0 && (rc = bk_thread_follow_plan(thr)) == 0) {
        /* (the plan first: a task of a later generation needs its topics and description) */
        int n = 0;
        for (int i = 0; i < nadd; i++) {
            unpark(thr, add[i]);
            if (bk_tasklife_state(&thr->life, add[i]) == BK_LIFE_FREE) {
                bk_thread_life(thr, add[i], BK_LIFE_OPENING);
                thr->task_epoch[add[i]] = epochs[i];
                add[n++] = add[i];
            }
        }
        if (n > 0) {
            rc = job_start(thr, add, n);
        }
    }
    free(add);
    free(epochs);
    free(rm);
    free(live);
    return rc;
}

/* -- Input growth --------------------------------------------------------------------------- */

/* How often a stream thread looks at its source topics' partition counts. */
#define INPUT_CHECK_MS 5000

int bk_thread_check_inputs(bk_thread_t *thr)
{
    const bk_plan_t *plan = thr->plan;
    int64_t now = bk_clock_mono_ms();
    const char **names;
    int *idx, *counts, n = 0, rc = 0;
    rd_kafka_topic_partition_list_t *assign;
    char err[512];

    if (now < thr->parts_checked + INPUT_CHECK_MS) {
        return 0;
    }
    thr->parts_checked = now;
    names = calloc((size_t)thr->seen_topics + 1, sizeof(*names));
    idx = calloc((size_t)thr->seen_topics + 1, sizeof(*idx));
    counts = calloc((size_t)thr->seen_topics + 1, sizeof(*counts));
    assign = rd_kafka_topic_partition_list_new(4);
    for (int t = 0; names && idx && counts && t < thr->seen_topics; t++) {
        if (plan->topics[t].source && !plan->topics[t].keygroups) {
            idx[n] = t;
            names[n++] = plan->topics[t].name;
        }
    }
    if (n > 0 && bk_kafka_partitions(thr->consumer, names, n, counts, 2000, err, sizeof(err)) != 0) {
        bk_log_debug("%s: cannot look at the inputs' partitions now: %s", thr->name, err);
        n = 0;
    }
    for (int i = 0; rc == 0 && i < n; i++) {
        int t = idx[i], old = thr->parts[t], grown = counts[i];
        const bk_plan_sub_t *sub = &plan->subs[plan->topics[t].sub];
        if (grown <= old) {
            continue;
        }
        if (bk_thread_grow_topic(thr, t, grown) != 0) {
            snprintf(thr->err, sizeof(thr->err), "out of memory");
            rc = -1;
            break;
        }
        if (!sub->passthrough) {
            /* by input partition: its tasks would not hold the state of the keys that
             * now land on the new partitions. Nothing is read there, nor lost, until a
             * cluster's leader moves it to generation 1 (node/node_growth.c): then the
             * passthrough reads them. */
            if (thr->index == 0 && bk_plan_sub_logged(plan, plan->topics[t].sub)) {
                bk_log_warn("input topic %s grew from %d to %d partitions: subtopology %d "
                            "reads it by input partition; partitions %d to %d are read once "
                            "it moves to generation 1, by key group (a cluster app's leader "
                            "moves it; their records wait in Kafka meanwhile: "
                            "docs/repartitioning.md)",
                            plan->topics[t].name, old, grown, plan->topics[t].sub, old,
                            grown - 1);
            } else if (thr->index == 0) {
                bk_log_warn("input topic %s grew from %d to %d partitions: subtopology %d "
                            "reads it by input partition and keeps no changelog; partitions "
                            "%d to %d are read once the app starts again with as many tasks "
                            "(their records wait in Kafka meanwhile)",
                            plan->topics[t].name, old, grown, plan->topics[t].sub, old,
                            grown - 1);
            }
            continue;
        }
        for (int p = old; p < grown; p++) {
            int q = p % sub->partitions, slot = -1, tp = thr->tp_id[t][p];
            for (int s = 0; s < thr->cap && slot < 0; s++) {
                if (thr->tasks[s].sub == plan->topics[t].sub && thr->tasks[s].partition == q) {
                    slot = s;
                }
            }
            if (slot < 0 || !bk_tasklife_running(&thr->life, slot)) {
                continue; /* elsewhere, or opening: it reads the partition once live */
            }
            thr->task_of[t][p] = slot;
            thr->tp_of[t][p] = tp;
            thr->tp_first[tp] = -1;
            thr->tp_dirty[tp] = 0;
            /* the group's committed offset (the task may have read it on another node),
             * else from its start (beck's auto.offset.reset=earliest) */
            rd_kafka_topic_partition_list_add(assign, plan->topics[t].name, p)->offset =
                RD_KAFKA_OFFSET_INVALID;
            bk_log_info("task %s: reads %s [%d] too: the topic grew from %d to %d partitions",
                        BK_TASK_NAME(thr->tasks[slot]), plan->topics[t].name, p, old, grown);
        }
    }
    if (rc == 0 && assign->cnt > 0) {
        rd_kafka_error_t *kerr = rd_kafka_incremental_assign(thr->consumer, assign);
        if (kerr) {
            snprintf(thr->err, sizeof(thr->err), "cannot assign the grown input's partitions: %s",
                     rd_kafka_error_string(kerr));
            rd_kafka_error_destroy(kerr);
            rc = -1;
        }
    }
    rd_kafka_topic_partition_list_destroy(assign);
    free(names);
    free(idx);
    free(counts);
    return rc;
}
