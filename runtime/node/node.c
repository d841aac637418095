/* node.c - one node of an app: alone, or as a member of its cluster (node.h). */
#include "node/node.h"
#include "node/node_internal.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/events.h"
#include "base/fs.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/task.h"
#include "cluster/member.h"
#include "cluster/reconcile.h"
#include "engine/brokerwatch.h"
#include "engine/crew.h"
#include "engine/db.h"
#include "engine/diskwatch.h"
#include "engine/drained.h"
#include "engine/global.h"
#include "engine/hooks.h"
#include "engine/kafka.h"
#include "engine/taskdb.h"
#include "node/node_cleanup.h"
#include "node/node_fence.h"
#include "node/node_growth.h"
#include "node/node_moves.h"
#include "node/node_queries.h"
#include "replica/archive.h"
#include "replica/bootstrap.h"
#include "replica/drainfetch.h"
#include "replica/install.h"
#include "replica/standby.h"

static void active_progress(void *opaque, int32_t task, int64_t offset)
{
    bk_member_set_progress(opaque, task, offset, 0);
}

/* A task of a generation a move replaces drained: on the control topic, for the tasks of
 * the next generation that wait for it (any node's). */
static void task_drained(void *opaque, int32_t task)
{
    if (bk_member_drained(opaque, task) != 0) {
        bk_log_warn("task %d drained, but the control topic could not be told: the next "
                    "generation's tasks wait until it drains again elsewhere",
                    (int)task);
    }
}

/* Snapshots asked for the running tasks whose state is due for the archive. */
static void archive_ask(bk_archive_t *a, bk_crew_t *crew, const int32_t *running, int n,
                        int32_t *due)
{
    int k = bk_archive_due(a, running, n, due);
    for (int i = 0; i < k; i++) {
        if (bk_crew_request_snapshot(crew, due[i], BK_ARCHIVE_REQ) != 0) {
            bk_archive_retry(a, due[i]); /* its thread has many waiting: in a second */
        }
    }
}

/* One signal stops the node cleanly, a second aborts it. Returns 1 on a
 * stop request. */
static int wait_signal(const sigset_t *set, int *signals)
{
    struct timespec tick = {0, 100 * 1000 * 1000};
    int sig = sigtimedwait(set, NULL, &tick);
    if (sig <= 0 || sig == SIGUSR2) {
        return 0;
    }
    if (++*signals > 1) {
        bk_log_error("second signal: aborting without commit");
        _exit(130);
    }
    bk_log_info("signal %d: finishing records in hand, committing, closing", sig);
    return 1;
}

/* Names ("0_3") of tasks [from, to) of the app's task order into names[]. */
static void name_tasks(char **names, const bk_task_id_t *tasks, int from, int to)
{
    for (int i = from; i < to; i++) {
        names[i] = malloc(BK_TASK_NAME_MAX);
        if (names[i]) {
            bk_task_name(tasks[i], names[i]);
        }
    }
}

/* Every task's name, in room for cap. */
static char **task_names(const bk_task_id_t *tasks, int ntasks, int cap)
{
    char **names = calloc((size_t)(cap > ntasks ? cap : ntasks) + 1, sizeof(char *));
    if (names) {
        name_tasks(names, tasks, 0, ntasks);
    }
    return names;
}

static void free_names(char **names, int ntasks)
{
    for (int i = 0; names && i < ntasks; i++) {
        free(names[i]);
    }
    free(names);
}

/* The task names at `which` (indices into names). */
static const char **pick_names(char **names, const int32_t *which, int n)
{
    const char **out = calloc((size_t)n + 1, sizeof(*out));
    for (int i = 0; i < n; i++) {
        out[i] = names[which[i]];
    }
    return out;
}

static void call_hook(bk_hooks_t *hooks, const char *name, char **names, const int32_t *which,
                      int n)
{
    const char **list = pick_names(names, which, n);
    bk_hooks_tasks(hooks, name, list, n);
    free(list);
}

/* Alone: this node takes every task of its app. */
/* The global tables' thread stopped on an error (logged): the node stops too, as a Kafka
 * Streams app whose global thread died does, rather than join against a table that no
 * longer follows its topic. */
static int globals_failed(void)
{
    bk_global_t *g = bk_global_current();
    if (g && bk_global_ready(g) < 0) {
        bk_log_error("the global tables stopped following their topics: stopping the node");
        return 1;
    }
    return 0;
}

static int run_alone(bk_plan_t *plan, const bk_conf_t *conf, bk_hooks_t *hooks, const sigset_t *set)
{
    int ntasks, signals = 0, failed, global_failed = 0;
    bk_task_id_t *tasks = bk_plan_tasks(plan, &ntasks);
    char **names = task_names(tasks, ntasks, ntasks);
    int32_t *every = calloc((size_t)ntasks + 1, sizeof(int32_t));
    int32_t *due = calloc((size_t)ntasks + 1, sizeof(int32_t));
    bk_crew_t crew;
    bk_taskdb_pool_t *pool = bk_taskdb_pool_new();
    bk_node_queries_t q;
    recover_ctx_t rctx = {plan, conf};
    bk_archive_t *arch = bk_archive_new(plan, conf);
    bk_snapshot_made_t made;
    char err[1024];

    if (!pool || bk_node_queries_start(&q, plan, conf, pool, err, sizeof(err)) != 0) {
        bk_log_error("cannot serve queries: %s", pool ? err : "out of memory");
        bk_taskdb_pool_destroy(pool);
        bk_archive_destroy(arch);
        free_names(names, ntasks);
        free(every);
        free(due);
        free(tasks);
        return 1;
    }
    if (q.route) {
        bk_route_set_alone(q.route);
    }
    for (int i = 0; i < ntasks; i++) {
        every[i] = i;
    }
    int nthreads = (int)bk_conf_int(conf, BK_CONF_THREADS);
    if (nthreads > ntasks) {
        bk_log_warn("%d threads for %d tasks: running %d threads", nthreads, ntasks, ntasks);
        nthreads = ntasks;
    }
    call_hook(hooks, "on_assign", names, every, ntasks);
    bk_crew_start(&crew, plan, conf, nthreads, 0, NULL, NULL, pool, q.live);
    if (bk_conf_str(conf, BK_CONF_SNAPSHOT_ARCHIVE)) {
        bk_crew_set_recover(&crew, bk_node_archive_recover, &rctx);
    }
    bk_log_info("app %s: %d task(s) on %d thread(s)", plan->id, ntasks, crew.nthreads);
    bk_events_emit("started", "\"app\":\"%s\",\"cluster\":false,\"tasks\":%d,\"threads\":%d",
                   plan->id, ntasks, crew.nthreads);
    bk_crew_add(&crew, 0, every, ntasks);
    for (;;) {
        int done;
        if (wait_signal(set, &signals)) {
            bk_crew_ask_stop(&crew);
        }
        if (arch && !crew.flags.stop) {
            archive_ask(arch, &crew, every, ntasks, due);
        }
        while (bk_crew_take_snapshot(&crew, &made)) {
            if (arch && strcmp(made.req, BK_ARCHIVE_REQ) == 0) {
                bk_archive_put(arch, &made);
            } else if (made.ok) {
                bk_snapshot_remove(made.dir);
            }
        }
        done = bk_crew_done(&crew);
        if (done == crew.nthreads) {
            break;
        }
        if (done > 0 && !crew.flags.stop) {
            bk_crew_ask_stop(&crew); /* a thread ended by itself: stop the node */
        }
        if (!crew.flags.stop && globals_failed()) {
            global_failed = 1;
            bk_crew_ask_stop(&crew);
        }
    }
    bk_node_queries_stop(&q); /* before the DBs close: no reader waits on a closing one */
    failed = bk_crew_stop(&crew) | global_failed;
    bk_archive_destroy(arch);
    bk_taskdb_pool_destroy(pool);
    bk_node_queries_free(&q);
    call_hook(hooks, "on_revoke", names, every, ntasks);
    bk_log_info("app %s stopped%s: %llu in, %llu out, %llu skipped, %llu dead-lettered", plan->id,
                failed ? " after a failure" : "", (unsigned long long)crew.total.in,
                (unsigned long long)crew.total.out, (unsigned long long)crew.total.skipped,
                (unsigned long long)crew.total.dlq);
    bk_events_emit("stopped",
                   "\"failed\":%s,\"in\":%llu,\"out\":%llu,\"skipped\":%llu,\"dead_lettered\":%llu",
                   failed ? "true" : "false", (unsigned long long)crew.total.in,
                   (unsigned long long)crew.total.out, (unsigned long long)crew.total.skipped,
                   (unsigned long long)crew.total.dlq);
    free_names(names, ntasks);
    free(every);
    free(due);
    free(tasks);
    return failed ? 1 : 0;
}

/* "0_1 0_4 ..." into buf, cut with "..." when it does not fit. */
static const char *list_names(char **names, const int32_t *which, int n, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        size_t need = strlen(names[which[i]]) + 1;
        if (len + need + 4 >= size) {
            snprintf(buf + len, size - len, "...");
            break;
        }
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? " " : "", names[which[i]]);
    }
    return buf;
}

/* The tasks `which` as a JSON array of their names (malloc'd; NULL without memory). */
static char *json_names(char **names, const int32_t *which, int n)
{
    size_t cap = 3, len = 0;
    char *buf;
    for (int i = 0; i < n; i++) {
        cap += strlen(names[which[i]]) + 3;
    }
    if (!(buf = malloc(cap))) {
        return NULL;
    }
    buf[len++] = '[';
    for (int i = 0; i < n; i++) {
        len += (size_t)snprintf(buf + len, cap - len, "%s\"%s\"", i ? "," : "", names[which[i]]);
    }
    buf[len++] = ']';
    buf[len] = '\0';
    return buf;
}

/* The event of an epoch applied (docs/events.md): what the node runs and stands by for. */
static void epoch_event(member_node_t *mn, const bk_member_view_t *view, const int32_t *running,
                        int nrunning, int gained, int gave_up, int changed)
{
    char *run = json_names(mn->names, running, nrunning);
    char *sb = json_names(mn->names, mn->standing, mn->nstand);
    bk_events_emit("epoch",
                   "\"epoch\":%llu,\"running\":%s,\"standby\":%s,\"waiting\":%d,"
                   "\"gained\":%d,\"gave_up\":%d,\"changed\":%s",
                   (unsigned long long)view->epoch, run ? run : "[]", sb ? sb : "[]",
                   view->nwaiting, gained, gave_up, changed ? "true" : "false");
    free(run);
    free(sb);
}

/* Applies a new view: reconcile.h says what to do, this does it in its order (the actives
 * given up commit and close, standbys checkpoint, releases are published, then the new
 * standbys start and the gained actives open). Tasks that stay are not touched. Returns 1
 * if a stream thread failed. */
static int apply_view(member_node_t *mn, const bk_member_view_t *view)
{
    bk_reconcile_now_t now = {mn->ntasks, mn->running, mn->nrun,        mn->standing,
                              mn->nstand, mn->was_sb,  mn->logged_epoch};
    bk_reconcile_actions_t *a = &mn->actions;
    char run_list[1024], sb_list[1024];

    bk_reconcile_diff(view, &now, a);
    if (!a->changed) {
        if (a->log_unchanged) {
            /* the same line as for a change, so that a reader of any node's log sees
             * every epoch it applied (scripts/bench/failover waits for one epoch on all) */
            mn->logged_epoch = view->epoch;
            bk_log_info("epoch %llu: running %d task(s), %d waiting for their release, %d "
                        "standby (running [%s], standby [%s]), unchanged",
                        (unsigned long long)view->epoch, mn->nrun, view->nwaiting, mn->nstand,
                        list_names(mn->names, mn->running, mn->nrun, run_list, sizeof(run_list)),
                        list_names(mn->names, mn->standing, mn->nstand, sb_list, sizeof(sb_list)));
            epoch_event(mn, view, mn->running, mn->nrun, 0, 0, 0);
        }
        return 0;
    }
    mn->logged_epoch = view->epoch;
    int64_t t0 = bk_clock_mono_ms(), t1, t2;
    if (a->nrevoked > 0 && bk_crew_remove(&mn->crew, a->revoked, a->nrevoked) != 0) {
        return 1;
    }
    t1 = bk_clock_mono_ms();
    if (a->stop_standbys) {
        bk_node_stop_standby(mn);
    }
    t2 = bk_clock_mono_ms();
    if (t2 - t0 >= 50) {
        bk_log_info("epoch %llu: giving up took %lld ms (%d active task(s) %lld, standbys %lld)",
                    (unsigned long long)view->epoch, (long long)(t2 - t0), a->nrevoked,
                    (long long)(t1 - t0), (long long)(t2 - t1));
    }
    {
        bk_task_id_t *keep = calloc((size_t)a->nkeep + 1, sizeof(*keep));
        for (int i = 0; keep && i < a->nkeep; i++) {
            keep[i] = mn->tasks[a->keep[i]];
        }
        bk_taskdb_pool_keep(mn->pool, keep, keep ? a->nkeep : 0);
        free(keep);
    }
    if (a->nrelease > 0 &&
        bk_member_released(mn->member, view->epoch, a->release, a->nrelease) != 0) {
        bk_log_warn("could not publish the release of %d task(s)", a->nrelease);
    }
    call_hook(mn->hooks, "on_revoke", mn->names, a->revoked, a->nrevoked);
    for (int i = 0; i < a->nforget; i++) {
        bk_member_set_progress(mn->member, a->forget[i], 0, -1);
    }
    if (a->stop_standbys) {
        bk_bootstrap_keep(mn->boot, a->standbys, a->nstandbys);
        bk_node_start_standby(mn, a->standbys, a->nstandbys);
    }
    for (int i = 0; i < a->npromoted; i++) {
        bk_log_info("task %s: promoted from standby to active in epoch %llu",
                    mn->names[a->promoted[i]], (unsigned long long)view->epoch);
        bk_events_emit("promoted", "\"task\":\"%s\",\"epoch\":%llu", mn->names[a->promoted[i]],
                       (unsigned long long)view->epoch);
        bk_hooks_task(mn->hooks, "on_promote", mn->names[a->promoted[i]]);
    }
    memcpy(mn->was_sb, a->was_standby, (size_t)mn->ntasks);
    if (a->change_actives) {
        bk_bootstrap_settle(mn->boot, a->running, a->nrunning);
        call_hook(mn->hooks, "on_assign", mn->names, a->gained, a->ngained);
        mn->nrun = a->nrunning;
        memcpy(mn->running, a->running, (size_t)a->nrunning * sizeof(int32_t));
        for (int i = 0; i < a->ngained; i++) {
            bk_member_set_progress(mn->member, a->gained[i], -1, 0);
        }
        bk_log_info("epoch %llu: running %d task(s), %d waiting for their release, %d standby "
                    "(running [%s], standby [%s]), gained %d, gave up %d",
                    (unsigned long long)view->epoch, mn->nrun, view->nwaiting, mn->nstand,
                    list_names(mn->names, a->running, a->nrunning, run_list, sizeof(run_list)),
                    list_names(mn->names, mn->standing, mn->nstand, sb_list, sizeof(sb_list)),
                    a->ngained, a->nrevoked);
        epoch_event(mn, view, a->running, a->nrunning, a->ngained, a->nrevoked, 1);
        if (bk_node_start_ready(mn, view, a->gained, a->ngained) != 0) {
            return 1;
        }
    } else {
        bk_log_info("epoch %llu: %d standby task(s) [%s]", (unsigned long long)view->epoch,
                    mn->nstand,
                    list_names(mn->names, mn->standing, mn->nstand, sb_list, sizeof(sb_list)));
        epoch_event(mn, view, mn->running, mn->nrun, 0, 0, 1);
    }
    return 0;
}

/* The notes for this node: `beck repartition`'s to its leader, drained checkpoints' fetches,
 * the rest cold bootstrap's.
 * Returns 1 when the standby runner must restart. */
static int take_notes(member_node_t *mn, const bk_member_view_t *view)
{
    bk_member_note_t note;
    int restart = 0;
    while (bk_member_take_note(mn->member, &note)) {
        if (strcmp(note.kind, BK_NODE_MOVES_NOTE) == 0) {
            bk_node_moves_on_note(mn->plan, mn->member, view, &note);
        } else if (!bk_drainfetch_note(mn->fetch, &note)) {
            restart |= bk_bootstrap_note(mn->boot, &note);
        }
    }
    return restart;
}

/* The view lists moves the plan does not describe yet (a move made while the node runs, or
 * before it started): the plan grows by them and their topics are made, then the node's
 * tables, cold bootstrap's and the member's take the new tasks, before any view that
 * assigns them is applied. -1: the node cannot run them (logged). */
static int follow_moves(member_node_t *mn, const bk_member_view_t *view)
{
    const char *have = mn->plan->generations ? mn->plan->generations : "";
    int was = mn->ntasks, n, cap;
    char err[1024];

    if (strcmp(view->generations, have) == 0) {
        return 0;
    }
    if (bk_node_moves_follow(mn->plan, mn->conf, mn->L, view->generations, err, sizeof(err)) != 0) {
        bk_log_error("cannot follow the app's moves (%s): %s", view->generations, err);
        return -1;
    }
    bk_plan_task_table(mn->plan, &n, &cap);
    name_tasks(mn->names, mn->tasks, was, n);
    bk_bootstrap_grow(mn->boot, n);
    bk_node_moves_origins(mn->plan, mn->origin, was, n);
    mn->ntasks = n; /* the member hears of them from retire_replaced */
    bk_log_info("app %s: moves %s: %d task(s), %d new (%s to %s)", mn->plan->id, view->generations,
                n, n - was, n > was ? mn->names[was] : "-", n > was ? mn->names[n - 1] : "-");
    bk_events_emit("moves",
                   "\"moves\":\"%s\",\"tasks\":%d,\"new\":%d,\"first\":\"%s\","
                   "\"last\":\"%s\"",
                   view->generations, n, n - was, n > was ? mn->names[was] : "-",
                   n > was ? mn->names[n - 1] : "-");
    return 0;
}

/* What the member may do with subtopology s's tasks while they are not retired: give them
 * standbys only when they hold state a standby keeps (a logged store); a stateless task's
 * standby would keep nothing, and cost the leader a slot and the node a runner. */
static uint8_t assign_mark(const bk_plan_t *plan, int s)
{
    for (int i = 0; i < plan->nstores; i++) {
        if (plan->stores[i].sub == s && plan->stores[i].logged) {
            return 1;
        }
    }
    return BK_MEMBER_ACTIVE_ONLY;
}

/* Once a move is complete (every task of the generation it replaced drained), those tasks
 * have nothing more to do: the member stops assigning them and the nodes running them close
 * them. Their changelogs stay: a later generation's task is built from them. Tells the
 * member the task table and what it may assign when either changed. */
static void retire_replaced(member_node_t *mn, const bk_member_view_t *view)
{
    const bk_plan_t *plan = mn->plan;
    int nsubs = plan->nsubs, changed = mn->told_tasks != mn->ntasks, first = 0;
    for (int s = 0; s < nsubs; s++) {
        const bk_plan_sub_t *sub = &plan->subs[s];
        int done = !sub->passthrough && (sub->generation >= 1 || sub->of == s) &&
                   bk_plan_latest_generation(plan, sub->of) > sub->generation;
        for (int p = 0; done && p < sub->partitions; p++) {
            done = bk_node_in_sorted(view->drained, view->ndrained, first + p);
        }
        if (done) {
            /* no passthrough writes there any more; the cleanup removes what it left */
            bk_plan_set_retired(mn->plan, s);
        }
        for (int p = 0; p < sub->partitions && first + p < mn->ntasks; p++) {
            uint8_t mark = done ? 0 : assign_mark(plan, s);
            changed |= mn->assignable[first + p] != mark;
            mn->assignable[first + p] = mark;
        }
        first += sub->partitions;
    }
    if (!changed) {
        return;
    }
    if (bk_member_set_tasks(mn->member, mn->ntasks, mn->assignable, mn->origin) != 0) {
        bk_log_warn("cannot tell the membership of the app's %d tasks now: out of memory",
                    mn->ntasks);
        return;
    }
    mn->told_tasks = mn->ntasks;
}

static pthread_t main_thread;

static void wake_main(void *opaque)
{
    (void)opaque;
    pthread_kill(main_thread, SIGUSR2);
}

/* In a cluster (--cluster): the tasks come from the app's membership (member.h). The
 * node's --threads stream threads run for its whole life; a change of its active tasks
 * changes them in place: the tasks given up commit and close alone and are released for
 * their new owners, the tasks gained open beside the bk_node_others (crew.h). A change of its
 * standby tasks restarts its standby runner (standby.h). */
static int run_member(bk_plan_t *plan, const bk_conf_t *conf, bk_hooks_t *hooks, lua_State *L,
                      const sigset_t *set)
{
    int signals = 0, failed = 0;
    member_node_t mn;
    bk_member_conf_t mc;
    bk_member_view_t view;
    bk_node_queries_t q;
    char err[1024];
    int64_t progress_at = 0;

    memset(&mn, 0, sizeof(mn));
    memset(&q, 0, sizeof(q));
    mn.plan = plan;
    mn.conf = conf;
    mn.hooks = hooks;
    mn.L = L;
    mn.tasks = bk_plan_task_table(plan, &mn.ntasks, &mn.cap);
    mn.names = task_names(mn.tasks, mn.ntasks, mn.cap);
    mn.running = calloc((size_t)mn.cap + 1, sizeof(int32_t));
    mn.standing = calloc((size_t)mn.cap + 1, sizeof(int32_t));
    mn.scratch = calloc((size_t)mn.cap + 1, sizeof(int32_t));
    mn.held = calloc((size_t)mn.cap + 1, sizeof(int32_t));
    mn.assignable = malloc((size_t)mn.cap + 1);
    mn.origin = malloc(((size_t)mn.cap + 1) * sizeof(int32_t));
    mn.told = malloc(((size_t)plan->cap_subs + 1) * sizeof(int32_t));
    for (int s = 0; mn.told && s <= plan->cap_subs; s++) {
        mn.told[s] = -1;
    }
    if (mn.origin) {
        bk_node_moves_origins(mn.plan, mn.origin, 0, mn.ntasks);
    }
    if (mn.assignable) {
        memset(mn.assignable, 1, (size_t)mn.cap + 1);
        for (int s = 0, first = 0; s < plan->nsubs; first += plan->subs[s++].partitions) {
            for (int p = 0; p < plan->subs[s].partitions && first + p < mn.cap; p++) {
                mn.assignable[first + p] = assign_mark(plan, s);
            }
        }
    }
    mn.told_tasks = mn.ntasks; /* told before the member starts (below) */
    mn.was_sb = calloc((size_t)mn.cap + 1, 1);
    mn.sb_ready = calloc((size_t)mn.cap + 1, 1);
    mn.due = calloc((size_t)mn.cap + 1, sizeof(int32_t));
    mn.rctx = (recover_ctx_t){plan, conf};
    mn.arch = bk_archive_new(plan, conf);
    memset(&mc, 0, sizeof(mc));
    mc.conf = conf;
    mc.app_id = plan->id;
    mc.node_id = bk_conf_str(conf, BK_CONF_NODE_ID);
    mc.rack = bk_conf_str(conf, BK_CONF_RACK);
    mc.endpoint = bk_conf_str(conf, BK_CONF_ENDPOINT);
    mc.threads = (int32_t)bk_conf_int(conf, BK_CONF_THREADS);
    mc.ntasks = mn.ntasks;
    mc.task_names = (const char *const *)mn.names;
    mc.standbys = (int32_t)bk_conf_int(conf, BK_CONF_STANDBYS);
    /* Warm-up (KIP-441): with standbys, a task stays where its state is warm while the
     * node balance chose catches up; the leader's probes move it once it has. */
    mc.warmup = mc.standbys > 0;
    mc.acceptable_lag = bk_conf_int(conf, BK_CONF_RECOVERY_LAG);
    mc.probe_interval_ms = (int)bk_conf_int(conf, BK_CONF_PROBE_MS);
    mc.heartbeat_interval_ms = (int)bk_conf_int(conf, BK_CONF_HEARTBEAT_MS);
    mc.session_timeout_ms = (int)bk_conf_int(conf, BK_CONF_SESSION_MS);
    mc.checkpoint_interval_ms = (int)bk_conf_int(conf, BK_CONF_CONTROL_CHECKPOINT_MS);
    /* a new view wakes the main thread at once instead of at its next 100 ms tick */
    main_thread = pthread_self();
    mc.on_change = wake_main;
    memset(&view, 0, sizeof(view));
    mn.view = &view;
    mn.pool = bk_taskdb_pool_new();
    /* the query server first: the endpoint published names the port it got */
    if (bk_node_queries_start(&q, plan, conf, mn.pool, err, sizeof(err)) != 0) {
        bk_log_error("cannot serve queries: %s", err);
        failed = 1;
        goto done;
    }
    if (q.endpoint[0]) {
        mc.endpoint = q.endpoint;
    }
    if (!mn.names || !mn.running || !mn.standing || !mn.scratch || !mn.held || !mn.assignable ||
        !mn.origin || !mn.told || !mn.was_sb || !mn.sb_ready || !mn.due ||
        bk_reconcile_actions_new(&mn.actions, mn.cap) != 0) {
        bk_log_error("cannot join app %s: out of memory", plan->id);
        failed = 1;
        goto done;
    }
    mn.member = bk_member_new(&mc, err, sizeof(err));
    if (mn.member && bk_member_set_tasks(mn.member, mn.ntasks, mn.assignable, NULL) != 0) {
        snprintf(err, sizeof(err), "out of memory");
        bk_member_destroy(mn.member);
        mn.member = NULL;
    }
    if (!mn.member || bk_member_start(mn.member, err, sizeof(err)) != 0) {
        bk_log_error("cannot join app %s: %s", plan->id, err);
        failed = 1;
        goto done;
    }
    /* --threads stream threads for the node's life: tasks come and go on them */
    mn.instance = bk_member_incarnation(mn.member);
    mn.fence = bk_conf_exactly_once(conf) && !bk_kafka_dev_broker();
    mn.live = q.live;
    bk_crew_start(&mn.crew, plan, conf, mc.threads, mn.instance, active_progress, mn.member,
                  mn.pool, q.live);
    /* its threads process and commit only while the membership says nobody can have taken
     * this node for dead */
    bk_member_set_lease(mn.member, &mn.crew.flags.lease_until);
    if (bk_conf_str(conf, BK_CONF_SNAPSHOT_ARCHIVE)) {
        bk_crew_set_recover(&mn.crew, bk_node_archive_recover, &mn.rctx);
    }
    bk_crew_set_drained(&mn.crew, task_drained, mn.member);
    {
        bk_bootstrap_env_t env = {plan,   conf,     mn.member, mc.node_id,       mn.ntasks,
                                  mn.cap, mn.tasks, mn.names,  bk_node_crew_ask, bk_node_crew_take,
                                  &mn,    hooks,    mn.pool};
        mn.boot = bk_bootstrap_new(&env);
    }
    mn.fetch = bk_drainfetch_new(plan, conf, mn.member, mc.node_id);
    mn.cleanup = mn.pool ? bk_node_cleanup_new(plan, conf, mn.pool) : NULL;
    mn.growth = bk_node_growth_new(plan, conf);
    if (!mn.boot || !mn.fetch || !mn.cleanup) {
        bk_log_error("cannot join app %s: out of memory", plan->id);
        failed = 1;
        goto done;
    }
    bk_log_info("app %s: node %s (rack %s) joining, %d standby replica(s) per task%s", plan->id,
                mc.node_id, mc.rack ? mc.rack : "-", (int)mc.standbys,
                bk_conf_str(conf, BK_CONF_SSH_KEY) ? ", cold bootstrap on" : "");
    bk_events_emit("started", "\"app\":\"%s\",\"cluster\":true,\"rack\":\"%s\",\"standbys\":%d",
                   plan->id, mc.rack ? mc.rack : "", (int)mc.standbys);
    for (;;) {
        int held;
        if (wait_signal(set, &signals)) {
            break;
        }
        if (mn.crew.nthreads > 0 && bk_crew_done(&mn.crew) > 0) {
            bk_log_error("a stream thread stopped: leaving the app");
            failed = 1;
            break;
        }
        if (globals_failed()) {
            failed = 1;
            break;
        }
        if (mn.standby && bk_standby_done(mn.standby)) {
            bk_node_rebuild_or_drop_standbys(&mn);
        }
        if (mn.arch && mn.nrun > 0) {
            archive_ask(mn.arch, &mn.crew, mn.running, mn.nrun, mn.due);
        }
        /* a drained checkpoint arrived (or was given up): a task held for it may start */
        bk_node_cleanup_poll(mn.cleanup);
        bk_node_growth_poll(mn.growth, mn.member, &view);
        if (bk_drainfetch_poll(mn.fetch, bk_node_others(&view, mc.node_id)) && mn.nheld > 0 &&
            bk_node_start_ready(&mn, &view, NULL, 0) != 0) {
            failed = 1;
            break;
        }
        if (!view.lost) {
            bk_node_restart_ready(&mn); /* a replica waiting for a drain may be built now */
        }
        if ((take_notes(&mn, &view) | bk_bootstrap_poll(mn.boot, &view)) && mn.standby &&
            !view.lost) {
            /* a bootstrap ended (or was asked for): the runner picks up the new state */
            memcpy(mn.scratch, mn.standing, (size_t)mn.nstand * sizeof(int32_t));
            bk_node_stop_standby(&mn);
            bk_node_start_standby(&mn, mn.scratch, mn.nstand);
        }
        /* a view held back by a failed fence goes on below without a new one */
        held = mn.fence_held && bk_clock_mono_ms() >= mn.fence_at;
        /* with a query server, once a second a full copy: its table shows the replicas'
         * progress and the heartbeats, which change without a new version */
        if (q.route && bk_clock_mono_ms() >= progress_at) {
            int changed = bk_member_poll_force(mn.member, &view);
            progress_at = bk_clock_mono_ms() + 1000;
            if (changed >= 0) {
                bk_route_update(q.route, &view);
            }
            if (changed <= 0 && !held) {
                continue;
            }
        } else if (bk_member_poll(mn.member, &view) == 0 && !held) {
            continue;
        }
        if (view.error) {
            bk_log_error("membership failed: %s", view.error);
            failed = 1;
            break;
        }
        if (q.route) {
            bk_route_update(q.route, &view);
        }
        if (view.lost && !mn.was_lost && (mn.nrun > 0 || mn.standby)) {
            /* (a state the node leaves by itself: it rejoins once it reads the log again) */
            bk_log_warn("lost the control plane: stopping every task, without committing "
                        "(another node may run them already); rejoining");
        }
        mn.was_lost = view.lost;
        /* exactly-once: before any task of theirs starts here, the producers of the nodes
         * that ended without leaving are fenced; and after a rejoin the threads' ids name
         * the new incarnation before they open a task of it. A view whose fence failed
         * (the transaction coordinator out of reach) is not acted on: a node taken for
         * dead may still run, and could commit for a task this view would start here. It
         * waits, tried again every second (or with the next view); this node's own
         * commits need the same coordinators meanwhile. A lost control plane stops every
         * task at once, fenced or not. */
        if (mn.fence && !view.lost) {
            if (bk_node_fence_gone(&mn.fenced, conf, plan->id, mc.node_id, &view) != 0) {
                if (!mn.fence_held) {
                    bk_log_warn("exactly-once: the membership view waits until the fence "
                                "goes through");
                }
                mn.fence_held = 1;
                mn.fence_at = bk_clock_mono_ms() + 1000;
                continue;
            }
            if (mn.fence_held) {
                bk_log_info("exactly-once: fenced; the membership view is applied");
                bk_events_emit("fenced", NULL);
            }
            mn.fence_held = 0;
        }
        if (follow_moves(&mn, &view) != 0) {
            failed = 1;
            break;
        }
        retire_replaced(&mn, &view);
        bk_node_moves_progress(plan, &view, hooks, mn.told);
        bk_node_cleanup_view(mn.cleanup, &view);
        if (view.incarnation && view.incarnation != mn.instance) {
            mn.instance = view.incarnation;
            bk_crew_set_instance(&mn.crew, mn.instance);
        }
        if (apply_view(&mn, &view) != 0 ||
            (mn.nheld > 0 && bk_node_start_ready(&mn, &view, NULL, 0) != 0)) {
            failed = 1;
            break;
        }
    }
    bk_node_queries_stop(&q); /* before the DBs close: no reader waits on a closing one */
    failed |= bk_crew_stop(&mn.crew);
    bk_crew_add_stats(&mn.total, &mn.crew.total);
    bk_node_stop_standby(&mn);
    call_hook(hooks, "on_revoke", mn.names, mn.running, mn.nrun);
    if (bk_member_stop(mn.member, 1) != 0) {
        bk_log_warn("the leave notice was not delivered: the bk_node_others wait for the session "
                    "timeout");
    }

done:
    bk_node_queries_stop(&q);
    if (mn.crew.threads) {
        bk_crew_stop(&mn.crew);
    }
    bk_node_stop_standby(&mn);
    bk_archive_destroy(mn.arch); /* before cold bootstrap removes this node's snapshots */
    bk_bootstrap_destroy(mn.boot);
    bk_drainfetch_destroy(mn.fetch);
    bk_node_cleanup_destroy(mn.cleanup);
    bk_node_growth_destroy(mn.growth);
    bk_taskdb_pool_destroy(mn.pool);
    bk_node_queries_free(&q);
    bk_log_info("app %s: node %s stopped%s: %llu in, %llu out, %llu skipped, %llu dead-lettered",
                plan->id, mc.node_id, failed ? " after a failure" : "",
                (unsigned long long)mn.total.in, (unsigned long long)mn.total.out,
                (unsigned long long)mn.total.skipped, (unsigned long long)mn.total.dlq);
    bk_events_emit("stopped",
                   "\"failed\":%s,\"in\":%llu,\"out\":%llu,\"skipped\":%llu,\"dead_lettered\":%llu",
                   failed ? "true" : "false", (unsigned long long)mn.total.in,
                   (unsigned long long)mn.total.out, (unsigned long long)mn.total.skipped,
                   (unsigned long long)mn.total.dlq);
    bk_member_view_clear(&view);
    bk_member_destroy(mn.member);
    free_names(mn.names, mn.ntasks);
    free(mn.running);
    free(mn.standing);
    free(mn.scratch);
    free(mn.held);
    free(mn.assignable);
    free(mn.origin);
    free(mn.told);
    bk_reconcile_actions_free(&mn.actions);
    free(mn.was_sb);
    free(mn.sb_ready);
    free(mn.due);
    return failed ? 1 : 0;
}

/* The global tables, caught up to their topics' ends before any task runs (global.h): 0
 * and *out (NULL when the app has none), -1 on an error (logged), 1 when a signal came
 * first (a clean stop). */
static int start_globals(const bk_plan_t *plan, const bk_conf_t *conf, const sigset_t *set,
                         bk_global_t **out)
{
    char err[1024];
    int signals = 0, ready;
    *out = NULL;
    if (plan->nglobals == 0) {
        return 0;
    }
    bk_global_t *g = bk_global_start(plan, conf, err, sizeof(err));
    if (!g) {
        bk_log_error("%s", err);
        return -1;
    }
    while ((ready = bk_global_ready(g)) == 0) {
        if (wait_signal(set, &signals)) {
            bk_global_stop(g);
            return 1;
        }
    }
    if (ready < 0) {
        bk_global_stop(g);
        return -1;
    }
    *out = g;
    return 0;
}

int bk_node_run(bk_plan_t *plan, const bk_conf_t *conf, bk_hooks_t *hooks, lua_State *L)
{
    sigset_t set;
    int rc;
    /* Signals go to this thread only (sigtimedwait); threads started later
     * inherit the mask. */
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR2); /* wake-up: the membership's view changed */
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    bk_db_start_background(); /* with the mask: a signal must not land in one of them */
    {
        /* before any task opens: what a crash left of an install in the state directory */
        char app_dir[4096];
        snprintf(app_dir, sizeof(app_dir), "%s/%s", bk_conf_str(conf, BK_CONF_STATE_DIR), plan->id);
        if (bk_install_recover(app_dir) < 0) {
            bk_log_warn("cannot read the state directory %s: %s", app_dir, strerror(errno));
        }
    }
    /* one line when no broker answers, and one when a broker does again */
    if (bk_brokerwatch_start(conf) != 0) {
        bk_log_warn("cannot start the broker watch: outages are logged by each client");
    }
    /* a warning before the state directory's disk fills, rather than a failed write */
    if (bk_diskwatch_start(conf) != 0) {
        bk_log_warn("cannot start the disk watch: a full disk shows as a failed write");
    }
    /* the task table the threads share, once the topics' partition counts are known */
    bk_global_t *globals = NULL;
    if (bk_plan_make_task_table(plan) != 0) {
        bk_log_error("out of memory");
        rc = 1;
    } else if ((rc = start_globals(plan, conf, &set, &globals)) != 0) {
        rc = rc < 0 ? 1 : 0;
    } else {
        rc = bk_conf_int(conf, BK_CONF_CLUSTER) ? run_member(plan, conf, hooks, L, &set)
                                                : run_alone(plan, conf, hooks, &set);
    }
    bk_global_stop(globals); /* after the stream threads: they read the tables */
    bk_diskwatch_stop();
    bk_brokerwatch_stop();
    return rc;
}
