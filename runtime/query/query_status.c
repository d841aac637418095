/* query_status.c - a node's health, readiness, the assignment as it sees it, and its metrics in
 * Prometheus' text format (docs/queries.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/events.h"
#include "base/task.h"
#include "engine/dbread.h"
#include "engine/diskwatch.h"
#include "engine/global.h"
#include "engine/tasklife.h"
#include "query/query_internal.h"

enum MHD_Result bk_query_healthz(bk_qreq_t *r)
{
    bk_jbuf_t b = {0};
    bk_jbuf_lit(&b, "{\"ok\":true,\"node\":");
    bk_jbuf_str(&b, r->q->env.node_id, strlen(r->q->env.node_id));
    bk_jbuf_lit(&b, "}");
    return bk_query_reply(r, 200, &b, -1);
}

/* Is task t served here as an active? */
static int served_active(bk_qreq_t *r, bk_task_id_t tid)
{
    bk_taskdb_read_t rd;
    if (bk_taskdb_read_begin(r->q->env.pool, tid, BK_TASKDB_ACTIVE, &rd) != 0) {
        return 0;
    }
    bk_taskdb_read_end(r->q->env.pool, &rd);
    return 1;
}

/* Ready: every task this node should run as active is restored and running. A task without
 * stores is never served (nothing to read) and does not count. */
enum MHD_Result bk_query_readyz(bk_qreq_t *r)
{
    const bk_plan_t *plan = r->q->env.plan;
    int ntasks = 0, n, waiting = 0;
    bk_task_id_t *all = bk_plan_tasks(plan, &ntasks);
    int32_t *mine = calloc((size_t)ntasks + 1, sizeof(*mine));
    bk_jbuf_t b = {0};

    if (!all || !mine) {
        free(all);
        free(mine);
        return bk_query_error(r, 500, -1, "out of memory");
    }
    n = bk_route_mine(r->q->env.route, mine, ntasks);
    bk_jbuf_lit(&b, "{\"waiting\":[");
    for (int i = 0; i < n; i++) {
        bk_task_id_t tid = all[mine[i]];
        int stores = 0;
        for (int s = 0; s < plan->nstores; s++) {
            stores += plan->stores[s].sub == tid.sub;
        }
        if (stores && !served_active(r, tid)) {
            bk_jbuf_printf(&b, "%s\"%s\"", waiting++ ? "," : "", BK_TASK_NAME(tid));
        }
    }
    bk_jbuf_printf(&b, "],\"active\":%d,\"ready\":%s,\"node\":", n, waiting ? "false" : "true");
    bk_jbuf_str(&b, r->q->env.node_id, strlen(r->q->env.node_id));
    bk_jbuf_lit(&b, "}");
    free(all);
    free(mine);
    return bk_query_reply(r, waiting ? 503 : 200, &b, waiting ? 1 : -1);
}

enum MHD_Result bk_query_assignment(bk_qreq_t *r)
{
    bk_jbuf_t b = {0};
    bk_route_json(r->q->env.route, &b);
    return bk_query_reply(r, 200, &b, -1);
}

/* GET /v1/events?after=SEQ&limit=N: the node's events after SEQ still kept in memory
 * (docs/events.md): {"events":[...],"next":SEQ,"first":SEQ,"node":"ID"}; ask again with
 * after=next. A reader whose after is below first - 1 missed events (they are no longer kept). */
enum MHD_Result bk_query_events(bk_qreq_t *r)
{
    const char *a = bk_query_arg(r, "after"), *l = bk_query_arg(r, "limit");
    char *end = NULL, *events;
    long long after = 0;
    long limit = 1000;
    size_t len;
    int64_t next, first;
    bk_jbuf_t b = {0};
    if (a && ((after = strtoll(a, &end, 10)) < 0 || *end || end == a)) {
        return bk_query_error(r, 400, -1, "after=%s: a number >= 0 is needed", a);
    }
    if (l && ((limit = strtol(l, &end, 10)) < 1 || limit > BK_EVENTS_KEEP || *end || end == l)) {
        return bk_query_error(r, 400, -1, "limit=%s: 1 to %d", l, BK_EVENTS_KEEP);
    }
    if (bk_events_since(after, (int)limit, &events, &len, &next, &first) != 0) {
        return bk_query_error(r, 503, 1, "out of memory");
    }
    bk_jbuf_lit(&b, "{\"events\":");
    bk_jbuf_printf(&b, "%s,\"next\":%lld,\"first\":%lld,\"node\":", events, (long long)next,
                   (long long)first);
    bk_jbuf_str(&b, r->q->env.node_id, strlen(r->q->env.node_id));
    bk_jbuf_lit(&b, "}");
    free(events);
    return bk_query_reply(r, 200, &b, -1);
}

/* The replicas served here (a task may have an active and a standby while it is promoted):
 * their tasks and roles into *tasks and *roles (free both); their count. */
static int served(bk_qreq_t *r, bk_task_id_t **tasks, int **roles)
{
    int max = 0;
    bk_task_id_t *all = bk_plan_tasks(r->q->env.plan, &max);
    free(all);
    *tasks = calloc((size_t)max * 2 + 1, sizeof(**tasks));
    *roles = calloc((size_t)max * 2 + 1, sizeof(**roles));
    return *tasks && *roles ? bk_taskdb_served(r->q->env.pool, *tasks, *roles, max * 2) : 0;
}

/* What this node serves: its tasks, each role and lag. */
static void served_json(bk_qreq_t *r, bk_jbuf_t *b)
{
    bk_task_id_t *tasks;
    int *roles, n = served(r, &tasks, &roles);
    bk_jbuf_lit(b, "[");
    for (int i = 0; i < n; i++) {
        bk_taskdb_read_t rd;
        long long lag = -1;
        if (bk_taskdb_read_begin(r->q->env.pool, tasks[i], roles[i], &rd) == 0) {
            lag = rd.role == roles[i] ? rd.lag : lag;
            bk_taskdb_read_end(r->q->env.pool, &rd);
        }
        bk_jbuf_printf(b, "%s{\"task\":\"%s\",\"role\":\"%s\",\"lag\":%lld}", i ? "," : "",
                       BK_TASK_NAME(tasks[i]), roles[i] == BK_TASKDB_ACTIVE ? "active" : "standby",
                       lag);
    }
    bk_jbuf_lit(b, "]");
    free(tasks);
    free(roles);
}

/* Each task this node's stream threads hold and each standby replica it keeps, with its role,
 * its state in its life (engine/tasklife.h) and for how long. */
static void tasks_json(bk_qreq_t *r, bk_jbuf_t *b)
{
    const bk_livestats_t *live = r->q->env.live;
    int ntasks = 0, first = 1;
    bk_task_id_t *all = bk_plan_tasks(r->q->env.plan, &ntasks);
    int64_t now = bk_clock_wall_ms();
    bk_jbuf_lit(b, "[");
    for (int t = 0; live && all && t < ntasks && t < live->ntasks; t++) {
        const bk_livestats_task_t *ts = &live->task[t];
        for (int sb = 0; sb < 2; sb++) { /* its active here, then its standby */
            int64_t st = atomic_load_explicit(sb ? &ts->sb_life : &ts->life, memory_order_relaxed);
            int64_t since = atomic_load_explicit(sb ? &ts->sb_life_since_ms : &ts->life_since_ms,
                                                 memory_order_relaxed);
            if (st == BK_LIFE_FREE) {
                continue;
            }
            bk_jbuf_printf(b,
                           "%s{\"task\":\"%s\",\"role\":\"%s\",\"state\":\"%s\","
                           "\"for_ms\":%lld}",
                           first ? "" : ",", BK_TASK_NAME(all[t]), sb ? "standby" : "active",
                           bk_tasklife_name((bk_life_t)st),
                           (long long)(now > since ? now - since : 0));
            first = 0;
        }
    }
    bk_jbuf_lit(b, "]");
    free(all);
}

enum MHD_Result bk_query_status(bk_qreq_t *r)
{
    bk_jbuf_t b = {0};
    bk_jbuf_lit(&b, "{\"app\":");
    bk_jbuf_str(&b, r->q->env.plan->id, strlen(r->q->env.plan->id));
    bk_jbuf_lit(&b, ",\"node\":");
    bk_jbuf_str(&b, r->q->env.node_id, strlen(r->q->env.node_id));
    bk_jbuf_lit(&b, ",\"served\":");
    served_json(r, &b);
    bk_jbuf_lit(&b, ",\"tasks\":");
    tasks_json(r, &b);
    {
        /* the global tables this node holds whole (engine/global.h) */
        bk_global_t *g = bk_global_current();
        bk_jbuf_lit(&b, ",\"global_tables\":[");
        for (int i = 0; i < bk_global_count(g); i++) {
            const char *name = bk_global_name(g, i), *topic = bk_global_topic(g, i);
            if (i > 0) {
                bk_jbuf_lit(&b, ",");
            }
            bk_jbuf_lit(&b, "{\"table\":");
            bk_jbuf_str(&b, name, strlen(name));
            bk_jbuf_lit(&b, ",\"topic\":");
            bk_jbuf_str(&b, topic, strlen(topic));
            bk_jbuf_printf(&b, ",\"applied\":%llu,\"lag\":%lld}",
                           (unsigned long long)bk_global_applied(g, i),
                           (long long)bk_global_lag(g, i));
        }
        bk_jbuf_lit(&b, "]");
    }
    bk_jbuf_lit(&b, ",\"cluster\":");
    bk_route_json(r->q->env.route, &b);
    bk_jbuf_lit(&b, "}");
    return bk_query_reply(r, 200, &b, -1);
}

/* -- /metrics ----------------------------------------------------------------------------- */

/* A label value: Prometheus escapes \, " and newlines. */
static void label(bk_jbuf_t *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"') {
            bk_jbuf_printf(b, "\\%c", *s);
        } else if (*s == '\n') {
            bk_jbuf_lit(b, "\\n");
        } else {
            bk_jbuf_raw(b, s, 1);
        }
    }
}

static void head(bk_jbuf_t *b, const char *name, const char *type, const char *help)
{
    bk_jbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void sample(bk_qreq_t *r, bk_jbuf_t *b, const char *name, const char *task,
                   const char *store, const char *role, long long v)
{
    bk_jbuf_printf(b, "%s{app=\"", name);
    label(b, r->q->env.plan->id);
    bk_jbuf_lit(b, "\",node=\"");
    label(b, r->q->env.node_id);
    if (task) {
        bk_jbuf_printf(b, "\",task=\"%s", task);
    }
    if (store) {
        bk_jbuf_lit(b, "\",store=\"");
        label(b, store);
    }
    if (role) {
        bk_jbuf_printf(b, "\",role=\"%s", role);
    }
    bk_jbuf_printf(b, "\"} %lld\n", v);
}

/* The served replicas' figures: lag, and RocksDB's per store. */
static void replica_metrics(bk_qreq_t *r, bk_jbuf_t *b)
{
    static const struct {
        const char *name, *prop, *help;
    } db_figs[] = {
        {"beck_rocksdb_live_sst_bytes", "rocksdb.live-sst-files-size",
         "bytes of the SST files the store's current version uses"},
        {"beck_rocksdb_pending_compaction_bytes", "rocksdb.estimate-pending-compaction-bytes",
         "bytes RocksDB estimates compaction has to rewrite"},
        {"beck_rocksdb_estimated_keys", "rocksdb.estimate-num-keys",
         "RocksDB's estimate of the store's keys"},
        {"beck_rocksdb_memtable_bytes", "rocksdb.cur-size-all-mem-tables",
         "bytes in the store's memtables"},
    };
    bk_task_id_t *tasks;
    int *roles, n = served(r, &tasks, &roles);
    head(b, "beck_replica_lag_records", "gauge",
         "changelog records a served replica is behind (0: an active)");
    for (int i = 0; i < n; i++) {
        bk_taskdb_read_t rd;
        if (bk_taskdb_read_begin(r->q->env.pool, tasks[i], roles[i], &rd) == 0) {
            sample(r, b, "beck_replica_lag_records", BK_TASK_NAME(tasks[i]), NULL,
                   rd.role == BK_TASKDB_ACTIVE ? "active" : "standby", rd.lag);
            bk_taskdb_read_end(r->q->env.pool, &rd);
        }
    }
    /* the block cache every DB shares (engine/db.c): one figure, from any served DB */
    for (int i = 0; i < n; i++) {
        bk_taskdb_read_t rd;
        int64_t use, cap;
        if (bk_taskdb_read_begin(r->q->env.pool, tasks[i], roles[i], &rd) != 0) {
            continue;
        }
        use = bk_dbread_property(rd.db, -1, "rocksdb.block-cache-usage");
        cap = bk_dbread_property(rd.db, -1, "rocksdb.block-cache-capacity");
        bk_taskdb_read_end(r->q->env.pool, &rd);
        if (use >= 0 && cap > 0) {
            head(b, "beck_rocksdb_block_cache_usage_bytes", "gauge",
                 "bytes in the block cache the node's stores share");
            sample(r, b, "beck_rocksdb_block_cache_usage_bytes", NULL, NULL, NULL, use);
            head(b, "beck_rocksdb_block_cache_capacity_bytes", "gauge",
                 "the shared block cache's capacity (block_cache_bytes)");
            sample(r, b, "beck_rocksdb_block_cache_capacity_bytes", NULL, NULL, NULL, cap);
            break;
        }
    }
    {
        /* the state directory's filesystem, as the disk watch last saw it (diskwatch.h) */
        int64_t avail, size;
        bk_diskwatch_space(&avail, &size);
        if (avail >= 0 && size > 0) {
            head(b, "beck_state_disk_free_bytes", "gauge",
                 "free bytes on the state directory's filesystem");
            sample(r, b, "beck_state_disk_free_bytes", NULL, NULL, NULL, avail);
            head(b, "beck_state_disk_size_bytes", "gauge",
                 "the state directory's filesystem's size");
            sample(r, b, "beck_state_disk_size_bytes", NULL, NULL, NULL, size);
        }
    }
    for (size_t f = 0; f < sizeof(db_figs) / sizeof(db_figs[0]); f++) {
        head(b, db_figs[f].name, "gauge", db_figs[f].help);
        for (int i = 0; i < n; i++) {
            bk_taskdb_read_t rd;
            if (bk_taskdb_read_begin(r->q->env.pool, tasks[i], roles[i], &rd) != 0) {
                continue;
            }
            for (int s = 0; s < r->q->env.plan->nstores; s++) {
                const char *name = r->q->env.plan->stores[s].name;
                int si = bk_dbread_store(rd.db, name);
                int64_t v = si < 0 ? -1 : bk_dbread_property(rd.db, si, db_figs[f].prop);
                if (v >= 0) {
                    sample(r, b, db_figs[f].name, BK_TASK_NAME(tasks[i]), name,
                           rd.role == BK_TASKDB_ACTIVE ? "active" : "standby", v);
                }
            }
            bk_taskdb_read_end(r->q->env.pool, &rd);
        }
    }
    free(tasks);
    free(roles);
}

/* The stream threads' live counters (livestats.h): each task this node runs, each thread. */
static void live_metrics(bk_qreq_t *r, bk_jbuf_t *b)
{
    static const struct {
        const char *name, *type, *help;
        int field;
    } figs[] = {
        {"beck_task_records_in_total", "counter", "input records the task processed", 0},
        {"beck_task_records_out_total", "counter", "records the task wrote to its sinks", 1},
        {"beck_task_records_skipped_total", "counter", "records skipped (on_error = skip)", 2},
        {"beck_task_records_dead_lettered_total", "counter", "records sent to the DLQ", 3},
        {"beck_task_input_lag_records", "gauge",
         "input records past the task's next offsets at its last commit", 4},
        {"beck_task_latency_ms", "gauge",
         "wall clock minus the timestamp of the task's latest record, when it was done", 5},
        {"beck_task_restore_records_done", "gauge",
         "changelog records restored so far while the task opens here", 6},
        {"beck_task_restore_records_total", "gauge",
         "changelog records to restore while the task opens here", 7},
    };
    static const struct {
        const char *name, *type, *help;
        int field;
    } tfigs[] = {
        {"beck_thread_commits_total", "counter", "commits of a stream thread", 0},
        {"beck_thread_commit_ms_total", "counter",
         "ms a stream thread's commits took (flush, sync, offsets, markers)", 1},
        {"beck_thread_cache_hits_total", "counter",
         "gets the record cache answered (as of the thread's last commit)", 2},
        {"beck_thread_cache_misses_total", "counter",
         "gets the record cache sent on to the stores (as of the thread's last commit)", 3},
        {"beck_thread_last_commit_ms", "gauge", "ms the thread's latest commit took", 4},
    };
    const bk_livestats_t *live = r->q->env.live;
    int ntasks = 0;
    bk_task_id_t *all = bk_plan_tasks(r->q->env.plan, &ntasks);
    int32_t *mine = calloc((size_t)ntasks + 1, sizeof(*mine));
    int n = mine && all ? bk_route_mine(r->q->env.route, mine, ntasks) : 0;

    for (size_t f = 0; live && f < sizeof(figs) / sizeof(figs[0]); f++) {
        head(b, figs[f].name, figs[f].type, figs[f].help);
        for (int i = 0; i < n; i++) {
            const bk_livestats_task_t *ts;
            long long v;
            if (mine[i] >= live->ntasks) {
                continue;
            }
            ts = &live->task[mine[i]];
            switch (figs[f].field) {
            case 0:
                v = (long long)atomic_load_explicit(&ts->in, memory_order_relaxed);
                break;
            case 1:
                v = (long long)atomic_load_explicit(&ts->out, memory_order_relaxed);
                break;
            case 2:
                v = (long long)atomic_load_explicit(&ts->skipped, memory_order_relaxed);
                break;
            case 3:
                v = (long long)atomic_load_explicit(&ts->dlq, memory_order_relaxed);
                break;
            case 4:
                v = atomic_load_explicit(&ts->lag, memory_order_relaxed);
                break;
            case 5:
                v = atomic_load_explicit(&ts->e2e_ms, memory_order_relaxed);
                break;
            default:
                /* only while it restores */
                v = atomic_load_explicit(&ts->restore_total, memory_order_relaxed) < 0 ? -1
                    : figs[f].field == 6
                        ? atomic_load_explicit(&ts->restore_done, memory_order_relaxed)
                        : atomic_load_explicit(&ts->restore_total, memory_order_relaxed);
                break;
            }
            if (v >= 0) {
                sample(r, b, figs[f].name, BK_TASK_NAME(all[mine[i]]), NULL, NULL, v);
            }
        }
    }
    /* records dropped as late, by task and by the window or join store of each task's
     * subtopology (every one, 0 too, so that a rate can be taken from the start) */
    if (live) {
        const bk_plan_t *plan = r->q->env.plan;
        int nst = atomic_load(&plan->nstores);
        head(b, "beck_task_late_records_total", "counter",
             "records dropped as late (their window closed), by task and store");
        for (int i = 0; i < n; i++) {
            if (mine[i] >= live->ntasks) {
                continue;
            }
            for (int s = 0; s < nst && s < live->nstores; s++) {
                const bk_plan_store_t *ps = &plan->stores[s];
                if (ps->window && ps->sub == all[mine[i]].sub) {
                    sample(r, b, "beck_task_late_records_total", BK_TASK_NAME(all[mine[i]]),
                           ps->name, NULL,
                           (long long)atomic_load_explicit(
                               &live->late[(size_t)mine[i] * (size_t)live->nstores + (size_t)s],
                               memory_order_relaxed));
                }
            }
        }
    }
    for (size_t f = 0; live && f < sizeof(tfigs) / sizeof(tfigs[0]); f++) {
        head(b, tfigs[f].name, tfigs[f].type, tfigs[f].help);
        for (int t = 0; t < live->nthreads; t++) {
            const bk_livestats_thread_t *ls = &live->thread[t];
            long long v = tfigs[f].field == 0   ? (long long)atomic_load(&ls->commits)
                          : tfigs[f].field == 1 ? (long long)atomic_load(&ls->commit_ms)
                          : tfigs[f].field == 2 ? (long long)atomic_load(&ls->cache_hits)
                          : tfigs[f].field == 3 ? (long long)atomic_load(&ls->cache_misses)
                                                : (long long)atomic_load(&ls->last_commit_ms);
            bk_jbuf_printf(b, "%s{app=\"", tfigs[f].name);
            label(b, r->q->env.plan->id);
            bk_jbuf_lit(b, "\",node=\"");
            label(b, r->q->env.node_id);
            bk_jbuf_printf(b, "\",thread=\"%d\"} %lld\n", t, v);
        }
    }
    free(all);
    free(mine);
}

/* The global tables (engine/global.h): records applied, and how far behind their topics. */
static void global_metrics(bk_qreq_t *r, bk_jbuf_t *b)
{
    bk_global_t *g = bk_global_current();
    int n = bk_global_count(g);
    if (n == 0) {
        return;
    }
    head(b, "beck_global_records_total", "counter",
         "records of its topic a global table applied since the node started");
    for (int i = 0; i < n; i++) {
        sample(r, b, "beck_global_records_total", NULL, bk_global_name(g, i), NULL,
               (long long)bk_global_applied(g, i));
    }
    head(b, "beck_global_lag_records", "gauge",
         "records of its topic a global table has not applied yet");
    for (int i = 0; i < n; i++) {
        sample(r, b, "beck_global_lag_records", NULL, bk_global_name(g, i), NULL,
               (long long)bk_global_lag(g, i));
    }
}

enum MHD_Result bk_query_metrics(bk_qreq_t *r)
{
    bk_jbuf_t b = {0};
    enum MHD_Result rc;
    head(&b, "beck_http_requests_total", "counter", "HTTP requests this node answered");
    sample(r, &b, "beck_http_requests_total", NULL, NULL, NULL,
           (long long)atomic_load(&r->q->requests));
    head(&b, "beck_http_forwarded_total", "counter",
         "requests this node sent on to the node holding a key");
    sample(r, &b, "beck_http_forwarded_total", NULL, NULL, NULL,
           (long long)atomic_load(&r->q->forwarded));
    head(&b, "beck_http_errors_total", "counter", "answers with a 4xx or 5xx status");
    sample(r, &b, "beck_http_errors_total", NULL, NULL, NULL,
           (long long)atomic_load(&r->q->errors));
    live_metrics(r, &b);
    replica_metrics(r, &b);
    global_metrics(r, &b);
    if (b.oom) {
        bk_jbuf_free(&b);
        return bk_query_error(r, 500, -1, "out of memory");
    }
    rc = bk_query_reply_raw(r, 200, "text/plain; version=0.0.4", b.p, b.len, -1);
    bk_jbuf_free(&b);
    return rc;
}
