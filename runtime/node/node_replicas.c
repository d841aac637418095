/* node_replicas.c - a cluster node's standby runner (started, stopped, rebuilt after damage)
 * and the gates a task assigned here waits at before it starts: a passthrough until the
 * generation it feeds can take its records, a later generation's task (active or standby)
 * until the tasks of the one before whose key groups overlap its have drained
 * (node_internal.h). Main thread. */
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

static void standby_progress(void *opaque, int32_t task, int64_t offset, int64_t lag)
{
    bk_member_set_progress(opaque, task, offset, lag);
}

int bk_node_archive_recover(void *opaque, const char *task, const char *task_dir,
                            char *const *changelogs, const int64_t *lo, int n, char *what,
                            size_t what_size, char *err, size_t err_size)
{
    const recover_ctx_t *rc = opaque;
    return bk_archive_recover(rc->conf, rc->plan->id, task, task_dir, changelogs, lo, n, what,
                              what_size, err, err_size);
}

static void standby_boot(void *opaque, int32_t task, const char *why)
{
    bk_bootstrap_want(opaque, task, why);
}

/* The active's side of cold bootstrap: the thread of the crew that runs `task`. */
int bk_node_crew_ask(void *opaque, int32_t task, const char *req)
{
    member_node_t *mn = opaque;
    return bk_crew_request_snapshot(&mn->crew, task, req);
}

/* Cold bootstrap's snapshots; those made for the archive go to it on the way. */
int bk_node_crew_take(void *opaque, bk_snapshot_made_t *out)
{
    member_node_t *mn = opaque;
    while (bk_crew_take_snapshot(&mn->crew, out)) {
        if (strcmp(out->req, BK_ARCHIVE_REQ) != 0) {
            return 1;
        }
        if (mn->arch) {
            bk_archive_put(mn->arch, out);
        }
    }
    return 0;
}

static int standby_ready(const member_node_t *mn, const bk_member_view_t *view, int32_t task);

void bk_node_start_standby(member_node_t *mn, const int32_t *which, int n)
{
    bk_task_id_t *tt = calloc((size_t)n + 1, sizeof(*tt));
    for (int i = 0; i < n; i++) {
        tt[i] = mn->tasks[which[i]];
        mn->standing[i] = which[i];
    }
    mn->nstand = n;
    if (n == 0) {
        free(tt);
        return;
    }
    mn->standby = bk_standby_new(mn->plan, mn->conf, tt, which, n, standby_progress, mn->member);
    free(tt);
    bk_standby_set_pool(mn->standby, mn->pool);
    bk_standby_set_live(mn->standby, mn->live);
    if (bk_conf_str(mn->conf, BK_CONF_SNAPSHOT_ARCHIVE)) {
        bk_standby_set_recover(mn->standby, bk_node_archive_recover, &mn->rctx);
    }
    mn->sb_waiting = 0;
    for (int i = 0; i < n; i++) {
        mn->sb_ready[i] = (uint8_t)standby_ready(mn, mn->view, which[i]);
        /* with cold bootstrap on, a snapshot of the built active replaces the replica: no
         * restart of the runner waits on the drains */
        mn->sb_waiting += !mn->sb_ready[i] && !bk_conf_str(mn->conf, BK_CONF_SSH_KEY);
    }
    bk_standby_set_ready(mn->standby, mn->sb_ready);
    if (mn->boot) {
        int *modes = calloc((size_t)n + 1, sizeof(*modes));
        for (int i = 0; modes && i < n; i++) {
            modes[i] = bk_bootstrap_mode(mn->boot, which[i]);
        }
        bk_standby_set_bootstrap(mn->standby, modes, standby_boot, mn->boot);
        free(modes);
    }
    if (bk_standby_start(mn->standby) != 0) {
        bk_log_error("cannot start the standby thread");
        bk_standby_destroy(mn->standby);
        mn->standby = NULL;
    }
}

void bk_node_stop_standby(member_node_t *mn)
{
    if (mn->standby) {
        bk_standby_stop(mn->standby);
        bk_standby_destroy(mn->standby);
        mn->standby = NULL;
    }
}

/* The standby runner ended by itself; it logged why. Replicas found damaged
 * (bk_standby_corrupt) are removed and the runner starts again on the same tasks, which
 * builds them anew (from their changelogs, or by cold bootstrap); after reads the brokers did
 * not answer for a minute (bk_standby_retriable) it starts again on the same tasks as they
 * are. After any other failure, or too many of either within REBUILDS_WINDOW_MS, the
 * replicas are dropped until the next change. */
void bk_node_rebuild_or_drop_standbys(member_node_t *mn)
{
    int nbad = bk_standby_corrupt(mn->standby, mn->scratch);
    int again = nbad == 0 && bk_standby_retriable(mn->standby);
    int64_t now = bk_clock_mono_ms(), oldest = mn->rebuilt_at[mn->nrebuilt % REBUILDS_MAX];
    bk_node_stop_standby(mn);
    if (nbad == 0 && !again) {
        mn->nstand = 0;
        return;
    }
    if (again) {
        int64_t first = mn->restarted_at[mn->nrestarted % REBUILDS_MAX];
        if (mn->nrestarted >= REBUILDS_MAX && now - first < REBUILDS_WINDOW_MS) {
            bk_log_error("standby replicas stopped again, after %d restarts in %lld s: "
                         "dropping them until the next change",
                         REBUILDS_MAX, (long long)((now - first) / 1000));
            mn->nstand = 0;
            return;
        }
        mn->restarted_at[mn->nrestarted++ % REBUILDS_MAX] = now;
        memcpy(mn->scratch, mn->standing, (size_t)mn->nstand * sizeof(int32_t));
        bk_node_start_standby(mn, mn->scratch, mn->nstand);
        return;
    }
    if (mn->nrebuilt >= REBUILDS_MAX && now - oldest < REBUILDS_WINDOW_MS) {
        bk_log_error("standby replicas found damaged again, after %d rebuilds in %lld s: the "
                     "disk under the state directory may be failing; dropping the replicas "
                     "until the next change",
                     REBUILDS_MAX, (long long)((now - oldest) / 1000));
        mn->nstand = 0;
        return;
    }
    mn->rebuilt_at[mn->nrebuilt++ % REBUILDS_MAX] = now;
    for (int i = 0; i < nbad; i++) {
        char dir[4096];
        bk_plan_task_dir(mn->plan, mn->conf, mn->tasks[mn->scratch[i]], dir, sizeof(dir));
        if (bk_fs_rm_tree(dir) != 0) {
            bk_log_error("standby %s: cannot remove its damaged store %s: %s: dropping the "
                         "replicas until the next change",
                         mn->names[mn->scratch[i]], dir, strerror(errno));
            mn->nstand = 0;
            return;
        }
        bk_log_warn("standby %s: its damaged store is removed: building the replica anew",
                    mn->names[mn->scratch[i]]);
        bk_events_emit("standby_damaged", "\"task\":\"%s\",\"removed\":true",
                       mn->names[mn->scratch[i]]);
    }
    memcpy(mn->scratch, mn->standing, (size_t)mn->nstand * sizeof(int32_t));
    bk_node_start_standby(mn, mn->scratch, mn->nstand);
}

int bk_node_in_sorted(const int32_t *list, int32_t n, int32_t x)
{
    int32_t lo = 0, hi = n;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (list[mid] == x) {
            return 1;
        }
        if (list[mid] < x) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return 0;
}

/* The other live nodes of the view: who may hold a drained checkpoint. */
int bk_node_others(const bk_member_view_t *view, const char *self)
{
    int n = 0;
    for (int i = 0; i < view->npeers; i++) {
        n += view->peers[i].state == BK_MEMBER_ALIVE && strcmp(view->peers[i].id, self) != 0;
    }
    return n;
}

/* A passthrough task added by a move from generation 0 reads the inputs that generation 0's
 * tasks read: from the offsets they committed, so once each of them has drained (it
 * processes nothing after) and none of them is open here (one stream thread cannot read a
 * partition for two tasks). */
static int pass_ready(const member_node_t *mn, const bk_member_view_t *view, bk_task_id_t t)
{
    const bk_plan_t *plan = mn->plan;
    int of = plan->subs[t.sub].of, first, n;
    if (plan->subs[of].generation != 0) {
        return 1;
    }
    first = bk_plan_first_task(plan, of);
    n = plan->subs[of].partitions;
    for (int p = 0; p < n; p++) {
        if (!bk_node_in_sorted(view->drained, view->ndrained, first + p)) {
            return 0;
        }
    }
    for (int j = 0; j < mn->nrun; j++) {
        if (mn->running[j] >= first && mn->running[j] < first + n) {
            return 0;
        }
    }
    return 1;
}

/* Whether each task of the generation before a later generation's task whose key groups
 * overlap its own has drained (read every passthrough's barrier and committed what came
 * before): their changelogs end there, and the task may be built (engine/build.h). A task of
 * generation 0, and one of a sealed generation (its own changelogs restore it), need not
 * wait. */
static int drained_before(const member_node_t *mn, const bk_member_view_t *view, bk_task_id_t t)
{
    const bk_plan_t *plan = mn->plan;
    int prev = bk_plan_prev_generation(plan, t.sub), first, lo, hi;
    if (prev < 0 || bk_plan_sealed(plan, t.sub)) {
        return 1;
    }
    if (!view) {
        return 0;
    }
    first = bk_plan_first_task(plan, prev);
    bk_hash_group_range(t.partition, plan->subs[t.sub].partitions, &lo, &hi);
    for (int p = 0; p < plan->subs[prev].partitions; p++) {
        int plo, phi;
        bk_plan_task_groups(plan, prev, p, &plo, &phi);
        if (phi > lo && plo < hi && !bk_node_in_sorted(view->drained, view->ndrained, first + p)) {
            return 0;
        }
    }
    return 1;
}

/* Whether the standby runner may build a replica of `task` now (standby.h's ready). */
static int standby_ready(const member_node_t *mn, const bk_member_view_t *view, int32_t task)
{
    const bk_task_id_t t = mn->tasks[task];
    return mn->plan->subs[t.sub].passthrough || drained_before(mn, view, t);
}

/* Starts the standby runner again once replicas it was told to wait for may be built: when
 * all of them may, or RESTART_READY_MS after the first one could (a restart stops a build
 * under way, to start it over: the drains of one move come close together). */
#define RESTART_READY_MS 5000
void bk_node_restart_ready(member_node_t *mn)
{
    int now = 0;
    if (!mn->standby || mn->sb_waiting == 0) {
        mn->sb_ready_at = 0;
        return;
    }
    for (int i = 0; i < mn->nstand; i++) {
        now += !mn->sb_ready[i] && standby_ready(mn, mn->view, mn->standing[i]);
    }
    now = now < mn->sb_waiting ? now : mn->sb_waiting;
    if (now > 0 && mn->sb_ready_at == 0) {
        mn->sb_ready_at = bk_clock_mono_ms();
    }
    if (now > 0 &&
        (now == mn->sb_waiting || bk_clock_mono_ms() - mn->sb_ready_at >= RESTART_READY_MS)) {
        mn->sb_ready_at = 0;
        bk_log_info("%d standby replica(s) of a later generation may be built now: the tasks "
                    "they are built from have drained",
                    now);
        memcpy(mn->scratch, mn->standing, (size_t)mn->nstand * sizeof(int32_t));
        bk_node_stop_standby(mn);
        bk_node_start_standby(mn, mn->scratch, mn->nstand);
    }
}

/* A later generation's task starts from the state of the generation before it
 * (engine/thread_build.c): only once each task of that generation whose key groups overlap
 * its own has drained (drained_before), and its drained checkpoint is on this node or cannot
 * be had (replica/drainfetch.h: then the build replays changelogs). A task built here
 * before (as active or standby), and any other task, is ready at once. */
static int build_ready(const member_node_t *mn, const bk_member_view_t *view, int32_t task)
{
    const bk_plan_t *plan = mn->plan;
    const bk_task_id_t t = mn->tasks[task];
    const bk_plan_sub_t *sub = &plan->subs[t.sub];
    int prev, n, lo, hi, here = 1;
    char dir[4096];
    if (sub->passthrough) {
        return pass_ready(mn, view, t);
    }
    if (!drained_before(mn, view, t)) {
        return 0;
    }
    prev = bk_plan_prev_generation(plan, t.sub);
    if (prev < 0 || bk_plan_sealed(plan, t.sub)) {
        return 1; /* a sealed one restores from its own changelogs (thread_build.c) */
    }
    bk_plan_task_dir(plan, mn->conf, t, dir, sizeof(dir));
    if (bk_drained_built(dir)) {
        return 1; /* its changelog follows on what was built */
    }
    n = plan->subs[prev].partitions;
    bk_hash_group_range(t.partition, sub->partitions, &lo, &hi);
    for (int p = 0; p < n; p++) { /* every one asked for at once */
        int plo, phi;
        bk_plan_task_groups(plan, prev, p, &plo, &phi);
        if (phi > lo && plo < hi &&
            bk_drainfetch_want(mn->fetch, (bk_task_id_t){prev, p},
                               bk_node_others(view, bk_conf_str(mn->conf, BK_CONF_NODE_ID))) == 0) {
            here = 0;
        }
    }
    return here;
}

/* Gives the crew the tasks of `ids` that are ready (build_ready) and holds the bk_node_others, then
 * those held before that are ready now; a held task the node no longer runs is let go. 0, or
 * 1 if a stream thread failed. */
int bk_node_start_ready(member_node_t *mn, const bk_member_view_t *view, const int32_t *ids, int n)
{
    int32_t *go = mn->scratch;
    int ngo = 0, kept = 0;
    for (int i = 0; i < mn->nheld; i++) {
        int32_t t = mn->held[i];
        int mine = 0;
        for (int j = 0; j < mn->nrun && !mine; j++) {
            mine = mn->running[j] == t;
        }
        if (mine && build_ready(mn, view, t)) {
            bk_log_info("task %s: %s", mn->names[t],
                        mn->plan->subs[mn->tasks[t].sub].passthrough
                            ? "generation 0's tasks have drained: starting it"
                            : "the tasks it is built from have drained, their checkpoints are "
                              "here: starting it");
            go[ngo++] = t;
        } else if (mine) {
            mn->held[kept++] = t;
        }
    }
    mn->nheld = kept;
    for (int i = 0; i < n; i++) {
        if (build_ready(mn, view, ids[i])) {
            go[ngo++] = ids[i];
        } else if (mn->plan->subs[mn->tasks[ids[i]].sub].passthrough) {
            bk_log_info("task %s: waits until generation 0's tasks have drained and closed "
                        "here: it reads their input on from the offsets they committed",
                        mn->names[ids[i]]);
            mn->held[mn->nheld++] = ids[i];
        } else {
            bk_log_info("task %s: waits until the tasks of the generation before that it is "
                        "built from have drained and their checkpoints are here",
                        mn->names[ids[i]]);
            mn->held[mn->nheld++] = ids[i];
        }
    }
    return ngo > 0 && bk_crew_add(&mn->crew, view->epoch, go, ngo) != 0 ? 1 : 0;
}
