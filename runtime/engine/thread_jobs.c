/* thread_jobs.c - a stream thread's tasks opening in the background, and going live
 * (thread_tasks.c has the asks that start them and the leaving).
 *
 * An added task opens in a job: a pthread and a consumer of its own open its DB (building a
 * later generation's from the one before), read its committed input offsets and replay its
 * changelogs, so that the thread's other tasks keep processing. The stream thread polls its
 * jobs at the top of its loop (bk_thread_jobs_poll): it moves each task's life along with
 * its job (opening, building, restoring), fires on_restore's progress, and once a job is
 * done settles what a previous owner left after its last commit marker, builds the task's
 * processors in its VM, runs their init() and adds its input partitions to the consumer
 * (incremental assign): the task is live. */
#define _GNU_SOURCE /* pthread_tryjoin_np */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

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

#define JOB_NICE 10    /* an opening job's niceness, above the stream threads' */
#define JOB_ATTEMPTS 5 /* openings of a task in a row that may fail for errors that pass */

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
        bk_store_set_changelog(store, thr->kafka.producer, thr->kafka.changelog_rkts[st],
                               thr->tasks[s].partition);
        if (bk_store_logged(store)) {
            items[(*n)++] = (bk_restore_item_t){
                store, plan->stores[st].changelog, thr->tasks[s].partition, names[k], 0, 0};
        }
    }
    return 0;
}

/* The recovery order's archive step (bk_thread_set_recover) for the job's k-th task, whose
 * items are items[from..to): when its changelogs lost what its state needs, its DB is closed,
 * handed to thr->cb.recover and opened again on what that installed. 0, or -1 with job->err. */
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
        int got = thr->cb.recover(thr->cb.recover_opaque, names[k], dir, changelogs, lo, m, what,
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
        bk_log_info("task %s: restored from the %s; the changelogs' tails follow", names[k], what);
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
    for (int k = 0, from = 0; consumer && thr->cb.recover && k < job->n; k++) {
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
    rc = bk_thread_read_committed(thr, consumer, job->tp_topic, job->tp_part, job->ntp, job->tp_off,
                                  job->tp_meta, &job->stop, job->err, sizeof(job->err));
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
    bk_thread_wake_loop(thr); /* out of its wait for input: the task can go live now (thr outlives
                               * the job thread: the stream thread joins it before it ends) */
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
    pthread_t *more = realloc(thr->open.reap, (size_t)(thr->open.nreap + 1) * sizeof(*more));
    if (!more) {
        pthread_join(tid, NULL); /* no room to remember it: wait for it now */
        return;
    }
    thr->open.reap = more;
    thr->open.reap[thr->open.nreap++] = tid;
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
        job->ntp += thr->tp.nslot[slots[k]];
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
        for (int j = 0; j < thr->tp.nslot[slots[k]]; j++) {
            int tp = thr->tp.slot[slots[k]][j];
            job->tp[job->ntp] = tp;
            job->tp_topic[job->ntp] = thr->plan->topics[thr->tp.topic[tp]].name;
            job->tp_part[job->ntp++] = thr->tp.partition[tp];
        }
    }
    if (pthread_create(&job->tid, NULL, job_main, job) != 0) {
        job_free(job);
        snprintf(thr->err, sizeof(thr->err), "cannot start a thread to open %d task(s)", n);
        return -1;
    }
    job->next = thr->open.jobs;
    thr->open.jobs = job;
    return 0;
}

int bk_thread_job_start(bk_thread_t *thr, const int32_t *slots, int n)
{
    return job_start_again(thr, slots, n, 0);
}

/* Slot s's DB back to the pool (kept open for its next owner only if `synced`: else closed,
 * without its write batch) and the slot free. */
void bk_thread_free_slot(bk_thread_t *thr, int s, int synced)
{
    if (thr->slot.deduped[s] > 1) {
        bk_log_info("%s: task %s skipped %lld record(s) forwarded again by the passthrough",
                    thr->name, BK_TASK_NAME(thr->tasks[s]), (long long)thr->slot.deduped[s]);
    }
    thr->slot.dedup[s] = NULL; /* its store's, which goes with the DB */
    thr->slot.deduped[s] = 0;
    for (int j = 0; j < thr->tp.nslot[s]; j++) {
        bk_order_drop(&thr->batch.order, thr->tp.slot[s][j]); /* read again by its next owner */
    }
    if (thr->dbs[s]) {
        bk_taskdb_release(thr->pool, thr->tasks[s], thr->dbs[s], synced);
        thr->dbs[s] = NULL;
    }
    free(thr->store_of[s]);
    thr->store_of[s] = NULL;
    bk_thread_life(thr, s, thr->park.task[s].on ? BK_LIFE_PARKED : BK_LIFE_FREE);
    bk_thread_moves_forget(thr, s);
}

/* Puts a job's DBs back (closed: nothing of them is committed) and frees its slots. */
static void job_drop_slots(bk_thread_t *thr, bk_thread_job_t *job)
{
    for (int k = 0; k < job->n; k++) {
        bk_thread_free_slot(thr, job->slots[k], 0);
    }
}

static void job_unlink(bk_thread_t *thr, bk_thread_job_t *job)
{
    for (bk_thread_job_t **p = &thr->open.jobs; *p; p = &(*p)->next) {
        if (*p == job) {
            *p = job->next;
            return;
        }
    }
}

void bk_thread_stop_jobs(bk_thread_t *thr)
{
    while (thr->open.jobs) {
        bk_thread_job_t *job = thr->open.jobs;
        job->stop = 1;
        pthread_join(job->tid, NULL);
        job_drop_slots(thr, job);
        thr->open.jobs = job->next;
        job_free(job);
    }
    for (int i = 0; i < thr->open.nreap; i++) {
        pthread_join(thr->open.reap[i], NULL);
    }
    thr->open.nreap = 0;
}

/* Joins the finished jobs' threads that have ended (without waiting for the others). */
void bk_thread_jobs_reap(bk_thread_t *thr)
{
    for (int i = 0; i < thr->open.nreap;) {
        if (pthread_tryjoin_np(thr->open.reap[i], NULL) == 0) {
            thr->open.reap[i] = thr->open.reap[--thr->open.nreap];
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
    lua_rawgeti(L, LUA_REGISTRYINDEX, thr->ref.hook);
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

int bk_thread_lua_slot(bk_thread_t *thr, int ref, int slot)
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
    thr->slot.dedup[slot] = dedup_of(thr, slot);
    thr->slot.deduped[slot] = 0;
    lua_rawgeti(L, LUA_REGISTRYINDEX, thr->ref.add_task);
    lua_pushinteger(L, slot);
    lua_pushinteger(L, thr->tasks[slot].sub);
    lua_pushinteger(L, thr->tasks[slot].partition);
    lua_pushnumber(L, (lua_Number)thr->slot.time[slot]);
    if (bk_vm_pcall(L, 4, 0, 1, thr->err, sizeof(thr->err)) != 0 ||
        bk_thread_lua_slot(thr, thr->ref.init_task, slot) != 0) {
        return -1; /* an init() that raises stops the thread, as at start-up */
    }
    for (int j = 0; j < thr->tp.nslot[slot]; j++) {
        int tp = thr->tp.slot[slot][j], t = thr->tp.topic[tp], p = thr->tp.partition[tp];
        thr->tp.task_of[t][p] = slot;
        thr->tp.of[t][p] = tp;
        thr->tp.first[tp] = -1;
        thr->tp.dirty[tp] = 0;
        /* from the committed offset the job read; none (or a partition the topic gained
         * since): INVALID, the group's committed offset, else auto.offset.reset */
        rd_kafka_topic_partition_list_add(assign, thr->plan->topics[t].name, p)->offset =
            thr->tp.next[tp] >= 0 ? thr->tp.next[tp] : RD_KAFKA_OFFSET_INVALID;
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
const char *bk_thread_slot_names(bk_thread_t *thr, const int32_t *slots, int n, char *buf,
                                 size_t size)
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
const char *bk_thread_slot_json(bk_thread_t *thr, const int32_t *slots, int n, char *buf,
                                size_t size)
{
    char words[6000];
    return bk_events_words(buf, size, bk_thread_slot_names(thr, slots, n, words, sizeof(words)));
}

/* A finished job: its tasks go live, or it failed (the thread stops), or it was stopped
 * because some of its tasks were removed (the others open again in a new job). */
int bk_thread_job_finish(bk_thread_t *thr, bk_thread_job_t *job)
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
                        thr->name,
                        bk_thread_slot_names(thr, job->slots, job->n, list, sizeof(list)), job->err,
                        attempt + 1, JOB_ATTEMPTS);
            stopped = 1;
            attempt++;
        } else if (!stopped) {
            snprintf(thr->err, sizeof(thr->err), "cannot open task(s) %.200s: %.780s",
                     bk_thread_slot_names(thr, job->slots, job->n, list, sizeof(list)), job->err);
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
        thr->tp.next[job->tp[i]] = job->tp_off[i]; /* the committed offsets the job read */
    }
    /* the barriers its tasks had read and their stream times, as their commits' metadata
     * says */
    for (int k = 0; k < job->n; k++) {
        int s = job->slots[k];
        thr->slot.time[s] = -1;
        for (int j = 0; j < thr->tp.nslot[s]; j++) {
            for (int i = 0; i < job->ntp; i++) {
                if (job->tp[i] == thr->tp.slot[s][j] && job->tp_meta[i]) {
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
    kerr = nparts > 0 ? rd_kafka_incremental_assign(thr->kafka.consumer, assign) : NULL;
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
                thr->name, thr->ntasks,
                bk_thread_slot_names(thr, job->slots, job->n, list, sizeof(list)),
                (long long)(bk_clock_wall_ms() - job->t0), (long long)(job->t_open - job->t0),
                (long long)(job->t_restore - job->t_open),
                (long long)(bk_clock_wall_ms() - t_live0), nparts);
    {
        char tasks[6500];
        bk_events_emit(
            "live",
            "\"thread\":\"%s\",\"tasks\":%s,\"running\":%d,\"ms\":%lld,"
            "\"open_ms\":%lld,\"restore_ms\":%lld",
            thr->name, bk_thread_slot_json(thr, job->slots, job->n, tasks, sizeof(tasks)),
            thr->ntasks, (long long)(bk_clock_wall_ms() - job->t0),
            (long long)(job->t_open - job->t0), (long long)(job->t_restore - job->t_open));
    }
    job_free(job);
    return 0;
}

int bk_thread_jobs_poll(bk_thread_t *thr)
{
    for (bk_thread_job_t *job = thr->open.jobs, *next; job; job = next) {
        next = job->next;
        job_phase(thr, job);
        fire_progress(thr, job);
        if (job->done && bk_thread_job_finish(thr, job) != 0) {
            return -1;
        }
    }
    return 0;
}
