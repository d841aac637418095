/* bootstrap.c - cold bootstrap (bootstrap.h): the replica's side and the loop; the active's
 * side is in bootstrap_serve.c. */
#include "replica/bootstrap.h"
#include "replica/bootstrap_internal.h"

#include <errno.h>
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
#include "engine/drained.h"
#include "engine/snapshot.h"
#include "engine/taskdb.h"
#include "replica/install.h"
#include "replica/sftp.h"
#include "replica/standby.h"

int32_t bk_bootstrap_task_by_name(const bk_bootstrap_t *b, const char *name)
{
    for (int32_t t = 0; t < b->env.ntasks; t++) {
        if (strcmp(b->env.names[t], name) == 0) {
            return t;
        }
    }
    return -1;
}

bk_bootstrap_t *bk_bootstrap_new(const bk_bootstrap_env_t *env)
{
    bk_bootstrap_t *b = calloc(1, sizeof(*b));
    if (!b) {
        return NULL;
    }
    b->env = *env;
    b->fetch_on = bk_conf_str(env->conf, BK_CONF_SSH_KEY) != NULL;
    b->max = (int)bk_conf_int(env->conf, BK_CONF_BOOTSTRAP_MAX);
    if (b->env.cap < b->env.ntasks) {
        b->env.cap = b->env.ntasks;
    }
    b->jobs = calloc((size_t)b->env.cap + 1, sizeof(*b->jobs));
    b->batches = calloc((size_t)b->max + 1, sizeof(*b->batches));
    b->served = calloc((size_t)b->max + 1, sizeof(*b->served));
    if (!b->jobs || !b->batches || !b->served) {
        free(b->jobs);
        free(b->batches);
        free(b->served);
        free(b);
        return NULL;
    }
    for (int32_t t = 0; t < env->ntasks; t++) {
        b->jobs[t].batch = -1;
        b->jobs[t].b = b;
        b->jobs[t].task = t;
    }
    pthread_mutex_init(&b->lock, NULL);
    bk_plan_snapshot_dir(env->plan, env->conf, b->root, sizeof(b->root));
    /* snapshots left by an earlier run of this node are nobody's now */
    bk_snapshot_sweep(b->root, 0, bk_clock_wall_ms() + 1);
    return b;
}

static void join_batch(batch_t *x)
{
    if (x->joinable) {
        pthread_join(x->tid, NULL);
        x->joinable = 0;
    }
}

static void set_state(bk_bootstrap_t *b, job_t *j, int state)
{
    pthread_mutex_lock(&b->lock);
    j->state = state;
    pthread_mutex_unlock(&b->lock);
}

static int get_state(bk_bootstrap_t *b, const job_t *j)
{
    int state;
    pthread_mutex_lock(&b->lock);
    state = j->state;
    pthread_mutex_unlock(&b->lock);
    return state;
}

void bk_bootstrap_remove_served(bk_bootstrap_t *b, served_t *s)
{
    for (int i = 0; i < s->ntasks; i++) {
        if (s->ids[i][0]) {
            char dir[4400];
            snprintf(dir, sizeof(dir), "%s/%s", b->root, s->ids[i]);
            bk_snapshot_remove(dir);
        }
    }
}

void bk_bootstrap_destroy(bk_bootstrap_t *b)
{
    if (!b) {
        return;
    }
    for (int i = 0; i < b->max; i++) {
        join_batch(&b->batches[i]);
    }
    for (int i = 0; i < b->nserved; i++) {
        bk_bootstrap_remove_served(b, &b->served[i]);
    }
    pthread_mutex_destroy(&b->lock);
    free(b->jobs);
    free(b->batches);
    free(b->served);
    free(b);
}

void bk_bootstrap_grow(bk_bootstrap_t *b, int32_t ntasks)
{
    int32_t t;
    if (!b) {
        return;
    }
    pthread_mutex_lock(&b->lock);
    for (t = b->env.ntasks; t < ntasks && t < b->env.cap; t++) {
        b->jobs[t].batch = -1;
        b->jobs[t].b = b;
        b->jobs[t].task = t;
    }
    b->env.ntasks = t; /* under the lock: the standby thread asks for tasks by index */
    pthread_mutex_unlock(&b->lock);
}

void bk_bootstrap_want(bk_bootstrap_t *b, int32_t task, const char *why)
{
    if (!b) {
        return;
    }
    pthread_mutex_lock(&b->lock);
    if (task < 0 || task >= b->env.ntasks) {
        pthread_mutex_unlock(&b->lock);
        return;
    }
    if (b->jobs[task].state == J_IDLE || b->jobs[task].state == J_ENDED) {
        b->jobs[task].state = J_WANTED;
        snprintf(b->jobs[task].why, sizeof(b->jobs[task].why), "%s", why);
    }
    pthread_mutex_unlock(&b->lock);
}

int bk_bootstrap_mode(bk_bootstrap_t *b, int32_t task)
{
    int state, known;
    if (!b) {
        return BK_BOOTSTRAP_MODE_AUTO;
    }
    pthread_mutex_lock(&b->lock);
    known = task >= 0 && task < b->env.ntasks;
    pthread_mutex_unlock(&b->lock);
    if (!known) {
        return BK_BOOTSTRAP_MODE_AUTO;
    }
    state = get_state(b, &b->jobs[task]);
    if (state == J_REQUESTED || state == J_FETCHING || b->jobs[task].retry_at > 0) {
        return BK_BOOTSTRAP_MODE_BUSY; /* its directory is about to be replaced */
    }
    return b->jobs[task].mode;
}

/* Forgets task t's job (its batch's fetch, if any, skips it or has installed it). */
static void drop_job(bk_bootstrap_t *b, int32_t t)
{
    job_t *j = &b->jobs[t];
    pthread_mutex_lock(&b->lock);
    j->state = J_IDLE;
    j->mode = BK_BOOTSTRAP_MODE_AUTO;
    j->batch = -1;
    j->retry_at = 0;
    j->moved_retries = 0;
    pthread_mutex_unlock(&b->lock);
}

void bk_bootstrap_keep(bk_bootstrap_t *b, const int32_t *standby, int32_t n)
{
    if (!b) {
        return;
    }
    for (int32_t t = 0; t < b->env.ntasks; t++) {
        int kept = 0;
        for (int32_t i = 0; i < n && !kept; i++) {
            kept = standby[i] == t;
        }
        b->jobs[t].standing = kept;
        if (!kept && get_state(b, &b->jobs[t]) != J_FETCHING) {
            drop_job(b, t); /* a fetch runs to its end (bounded by its timeouts) */
        }
    }
}

void bk_bootstrap_settle(bk_bootstrap_t *b, const int32_t *tasks, int32_t n)
{
    if (!b) {
        return;
    }
    for (int32_t i = 0; i < n; i++) {
        job_t *j = tasks[i] >= 0 && tasks[i] < b->env.ntasks ? &b->jobs[tasks[i]] : NULL;
        int state = j ? get_state(b, j) : J_IDLE;
        if (state == J_FETCHING && j->batch >= 0) {
            bk_log_info("bootstrap %s: the task becomes active here: waiting for its fetch",
                        b->env.names[tasks[i]]);
            /* installed or not: either way the stream thread restores from what is there */
            join_batch(&b->batches[j->batch]);
        }
        if (state != J_IDLE) {
            drop_job(b, tasks[i]);
        }
    }
}

/* -- The replica's side ------------------------------------------------------------------- */

static void progress(void *opaque, uint64_t done, uint64_t total)
{
    job_t *j = opaque;
    int64_t now = bk_clock_mono_ms();
    double s = (double)(now - j->t0) / 1000.0, rate = s > 0 ? (double)done / s : 0;
    j->bytes = done;
    j->total = total;
    if (now - j->last_log < 1000 && done < total) {
        return;
    }
    j->last_log = now;
    bk_log_info("bootstrap %s: %.1f of %.1f MB (%.0f%%), %.1f MB/s, %.1f s left",
                j->b->env.names[j->task], (double)done / 1e6, (double)total / 1e6,
                total ? 100.0 * (double)done / (double)total : 100.0, rate / 1e6,
                rate > 0 ? (double)(total - done) / rate : 0.0);
}

/* Fetches one task's snapshot into a directory beside the task's and installs it. */
static void fetch_task(bk_bootstrap_t *b, batch_t *x, job_t *j, bk_sftp_session_t *ss)
{
    const bk_conf_t *conf = b->env.conf;
    const char *name = b->env.names[j->task];
    char path[4500], dir[4400], local[4200], taskdir[4096], appdir[4096];
    char *text = NULL;
    size_t len = 0;
    bk_manifest_t m;
    int parsed = 0, made = 0;

    j->t0 = bk_clock_mono_ms();
    j->ok = 0;
    j->bytes = j->total = 0;
    if (!j->snap[0]) {
        snprintf(j->err, sizeof(j->err), "%s made no snapshot of it (see its log)", x->from);
        return;
    }
    if (!bk_manifest_name_ok(j->snap)) {
        snprintf(j->err, sizeof(j->err),
                 "snapshot id '%.200s' from %s is not a safe name: "
                 "refused",
                 j->snap, x->from);
        return;
    }
    snprintf(dir, sizeof(dir), "%s/%s", x->root, j->snap);
    snprintf(path, sizeof(path), "%s/%s", dir, BK_MANIFEST_NAME);
    bk_plan_task_dir(b->env.plan, conf, b->env.tasks[j->task], taskdir, sizeof(taskdir));
    /* beside the task's directory (install renames it into place), hidden from dump */
    snprintf(local, sizeof(local), "%s/%s/.bootstrap-%s", bk_conf_str(conf, BK_CONF_STATE_DIR),
             b->env.plan->id, name);
    if (bk_sftp_session_read_small(ss, path, MANIFEST_MAX, &text, &len, j->err, sizeof(j->err)) !=
        0) {
        goto done;
    }
    if (bk_manifest_parse(text, len, &m, j->err, sizeof(j->err)) != 0) {
        goto done;
    }
    parsed = 1;
    if (strcmp(m.task, name) != 0) {
        snprintf(j->err, sizeof(j->err), "the snapshot is of task %s, not %s: refused", m.task,
                 name);
        goto done;
    }
    bk_snapshot_remove(local); /* a leftover of an earlier try */
    /* a fresh replica may have no directory for the app yet (standby.c opens no DB for a
     * task that goes to cold bootstrap) */
    snprintf(appdir, sizeof(appdir), "%s/%s", bk_conf_str(conf, BK_CONF_STATE_DIR),
             b->env.plan->id);
    if (bk_fs_mkdirs(appdir) != 0 || mkdir(local, 0755) != 0) {
        snprintf(j->err, sizeof(j->err), "cannot create %.900s: %s", local, strerror(errno));
        goto done;
    }
    made = 1;
    bk_log_info("bootstrap %s: fetching snapshot %s from %s (%s:%d): %d file(s), %.1f MB", name,
                m.id, x->from, x->host, x->port, m.nfiles, (double)m.total_bytes / 1e6);
    if (bk_sftp_session_fetch(ss, dir, &m, local, progress, j, j->err, sizeof(j->err)) != 0) {
        goto done;
    }
    /* a DB of the task kept open in the pool is of the directory replaced now: closed */
    if (b->env.pool) {
        bk_taskdb_pool_close(b->env.pool, b->env.tasks[j->task]);
    }
    if (bk_install_snapshot(&m, local, taskdir, j->err, sizeof(j->err)) != 0) {
        goto done;
    }
    made = 0; /* it is the task's directory now */
    if (bk_plan_prev_generation(b->env.plan, b->env.tasks[j->task].sub) >= 0) {
        /* a snapshot of a built task is built: a promotion must not build it again */
        char how[512];
        snprintf(how, sizeof(how), "installed from snapshot %.200s of %.100s", m.id, x->from);
        if (bk_drained_mark_built(taskdir, how, j->err, sizeof(j->err)) != 0) {
            goto done;
        }
    }
    j->bytes = j->total = m.total_bytes;
    j->ok = 1;
    if (b->env.pool) {
        bk_store_t **store_of = calloc((size_t)b->env.plan->cap_stores + 1, sizeof(*store_of));
        char err[512];
        int logged;
        /* opened through the pool, so that the pool counts it out until it is back */
        bk_db_t *db = store_of
                          ? bk_taskdb_open(b->env.pool, b->env.plan, conf, b->env.tasks[j->task],
                                           store_of, &logged, err, sizeof(err))
                          : NULL;
        /* a failure here is the standby runner's to report when it opens it itself */
        bk_taskdb_release(b->env.pool, b->env.tasks[j->task], db, 1);
        free(store_of);
    }
    {
        int64_t ms = bk_clock_mono_ms() - j->t0;
        bk_log_info("bootstrap %s: installed snapshot %s from %s: %d file(s), %.1f MB in %lld ms "
                    "(%.1f MB/s); the standby tails the changelog from offset %lld",
                    name, m.id, x->from, m.nfiles, (double)m.total_bytes / 1e6, (long long)ms,
                    ms > 0 ? (double)m.total_bytes / 1e3 / (double)ms : 0.0,
                    m.nstores > 0 ? (long long)m.stores[0].next : -1LL);
        bk_events_emit("bootstrap_installed",
                       "\"task\":\"%s\",\"snapshot\":\"%s\",\"from\":\"%s\",\"files\":%d,"
                       "\"bytes\":%lld,\"ms\":%lld",
                       name, m.id, x->from, m.nfiles, (long long)m.total_bytes, (long long)ms);
    }

done:
    if (made) {
        bk_snapshot_remove(local);
    }
    if (parsed) {
        bk_manifest_free(&m);
    }
    free(text);
}

/* A batch's fetch: LANES threads, each with its own SSH connection, take its tasks in turn.
 * A small task's fetch and install is mostly waiting (round trips, fsyncs), so a few at once
 * go faster even on two cores. */
#define LANES 4

typedef struct lane_s {
    batch_t *x;
    const bk_sftp_conf_t *sc;
    pthread_mutex_t *lock;
    int *next;
    pthread_t tid;
} lane_t;

static void *lane_main(void *arg)
{
    lane_t *l = arg;
    batch_t *x = l->x;
    bk_bootstrap_t *b = x->b;
    /* one connection for every manifest and file it fetches (a handshake costs more than a
     * small task's files); a new one if a failure broke it */
    bk_sftp_session_t *ss = NULL;
    bk_log_set_thread_name("bootstrap");
    for (;;) {
        int i;
        job_t *j;
        pthread_mutex_lock(l->lock);
        i = (*l->next)++;
        pthread_mutex_unlock(l->lock);
        if (i >= x->ntasks) {
            break;
        }
        j = &b->jobs[x->tasks[i]];
        if (get_state(b, j) != J_FETCHING || j->batch != (int)(x - b->batches)) {
            continue;
        }
        if (!ss && !(ss = bk_sftp_connect(l->sc, j->err, sizeof(j->err)))) {
            j->ok = 0;
            continue;
        }
        fetch_task(b, x, j, ss);
        if (!j->ok && strstr(j->err, "lost")) {
            bk_sftp_disconnect(ss);
            ss = NULL;
        }
    }
    bk_sftp_disconnect(ss);
    return NULL;
}

static void *fetch_main(void *arg)
{
    batch_t *x = arg;
    bk_bootstrap_t *b = x->b;
    const bk_conf_t *conf = b->env.conf;
    char known[4096], user[256];
    bk_sftp_conf_t sc;
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    lane_t lanes[LANES];
    int next = 0, nlanes = x->ntasks < LANES ? x->ntasks : LANES, started = 0;

    bk_log_set_thread_name("bootstrap");
    memset(&sc, 0, sizeof(sc));
    bk_sftp_conf_settings(conf, &sc, user, sizeof(user), known, sizeof(known));
    sc.host = x->host;
    sc.port = x->port;
    sc.rate_bytes_per_s = bk_conf_int(conf, BK_CONF_BOOTSTRAP_RATE);
    sc.parallel = (int)bk_conf_int(conf, BK_CONF_BOOTSTRAP_PARALLEL);
    for (int i = 0; i < nlanes; i++) {
        lanes[i] = (lane_t){x, &sc, &lock, &next, 0};
        if (i > 0 && pthread_create(&lanes[i].tid, NULL, lane_main, &lanes[i]) != 0) {
            break;
        }
        started = i + 1;
    }
    if (started > 0) {
        lane_main(&lanes[0]); /* this thread is the first lane */
    }
    for (int i = 1; i < started; i++) {
        pthread_join(lanes[i].tid, NULL);
    }
    pthread_mutex_destroy(&lock);
    x->finished = 1;
    return NULL;
}

/* Sends one request to `owner` for the wanted tasks it runs (up to BATCH_MAX), if a batch
 * slot is free. */
void bk_bootstrap_request(bk_bootstrap_t *b, const bk_member_view_t *view, int32_t owner)
{
    batch_t *x = NULL;
    char text[BK_MEMBER_NOTE_MAX];
    int len;

    for (int i = 0; i < b->max && !x; i++) {
        x = b->batches[i].used ? NULL : &b->batches[i];
    }
    if (!x) {
        return; /* waits its turn: bootstrap_max_concurrent */
    }
    memset(x, 0, sizeof(*x));
    x->b = b;
    snprintf(x->req, sizeof(x->req), "%s.%d.%u", b->env.node_id, (int)getpid(), ++b->seq);
    snprintf(x->from, sizeof(x->from), "%s", view->peers[owner].id);
    len = snprintf(text, sizeof(text), "req=%s tasks=", x->req);
    for (int32_t t = 0; t < b->env.ntasks && t < view->ntasks && x->ntasks < BATCH_MAX; t++) {
        if (view->owner[t] == owner && get_state(b, &b->jobs[t]) == J_WANTED &&
            len + 40 < (int)sizeof(text)) {
            len += snprintf(text + len, sizeof(text) - (size_t)len, "%s%s", x->ntasks ? "," : "",
                            b->env.names[t]);
            x->tasks[x->ntasks++] = t;
        }
    }
    if (x->ntasks == 0 || bk_member_note(b->env.member, x->from, "snapshot-request", text) != 0) {
        return;
    }
    x->used = 1;
    x->deadline = bk_clock_mono_ms() + bk_conf_int(b->env.conf, BK_CONF_BOOTSTRAP_TIMEOUT_MS);
    for (int i = 0; i < x->ntasks; i++) {
        job_t *j = &b->jobs[x->tasks[i]];
        j->batch = (int)(x - b->batches);
        j->snap[0] = '\0';
        set_state(b, j, J_REQUESTED);
        bk_log_info("bootstrap %s: asking %s for a snapshot (%s)", b->env.names[x->tasks[i]],
                    x->from, j->why);
    }
}

/* on_restore with a fetch's progress (main thread: the hooks' VM is its). */
static void hook(bk_bootstrap_t *b, job_t *j, const char *from, int done, int ok)
{
    double s = (double)(bk_clock_mono_ms() - j->t0) / 1000.0;
    double rate = s > 0 ? (double)j->bytes / s : 0;
    bk_hooks_bootstrap_t p = {b->env.names[j->task],
                              from,
                              j->bytes,
                              j->total,
                              s,
                              rate > 0 && j->total > j->bytes ? (double)(j->total - j->bytes) / rate
                                                              : 0.0,
                              done,
                              ok};
    j->hook_at = bk_clock_mono_ms();
    bk_hooks_bootstrap(b->env.hooks, &p);
}

static void end_job(bk_bootstrap_t *b, int32_t t, int ok, const char *why)
{
    job_t *j = &b->jobs[t];
    int later, moved;
    pthread_mutex_lock(&b->lock);
    j->state = J_ENDED;
    j->batch = -1;
    /* after a bootstrap the replica tails what came since its snapshot, however much */
    j->mode = ok ? BK_BOOTSTRAP_MODE_GAP : BK_BOOTSTRAP_MODE_NEVER;
    later = !ok && bk_plan_prev_generation(b->env.plan, b->env.tasks[t].sub) >= 0;
    moved = !ok && !later && why && strstr(why, NO_SNAPSHOT) && j->moved_retries < MOVED_RETRIES;
    int said = j->later_retries > 0; /* the reason is said once, not at every retry */
    if (later || moved) {
        j->mode = BK_BOOTSTRAP_MODE_AUTO;
        j->retry_at = bk_clock_mono_ms() + RETRY_LATER_MS;
        j->moved_retries += moved;
        j->later_retries += later;
    } else {
        j->moved_retries = 0;
        j->later_retries = 0;
    }
    pthread_mutex_unlock(&b->lock);
    if (moved) {
        bk_log_info("bootstrap %s: no snapshot (%s): its active may have just given it up; "
                    "asked again in %d ms, of the active then",
                    b->env.names[t], why, RETRY_LATER_MS);
    } else if (later) {
        /* a busy active (bootstrap_max_concurrent), or one that had not started the task
         * yet or had given it up (a move's handoffs), is no fault: it is asked again */
        int passing = why && (strstr(why, "busy:") || strstr(why, NO_SNAPSHOT) ||
                              strstr(why, "made no snapshot of it"));
        bk_log(said      ? BK_LOG_DEBUG
               : passing ? BK_LOG_INFO
                         : BK_LOG_WARN,
               "bootstrap %s: failed: %s; a later generation's replica has no changelog to start "
               "from: asked for again every %d ms until it has one",
               b->env.names[t], why, RETRY_LATER_MS);
        if (!said && !passing) {
            char w[1100];
            bk_events_emit("bootstrap_failed",
                           "\"task\":\"%s\",\"error\":%s,\"fallback\":\"retry\"", b->env.names[t],
                           bk_events_str(w, sizeof(w), why));
        }
    } else if (!ok) {
        char w[1100];
        bk_log_warn("bootstrap %s: failed: %s; the standby restores from the changelog instead",
                    b->env.names[t], why);
        bk_events_emit("bootstrap_failed",
                       "\"task\":\"%s\",\"error\":%s,\"fallback\":\"changelog\"", b->env.names[t],
                       bk_events_str(w, sizeof(w), why ? why : ""));
    }
}

/* Ends every job of batch x still waiting for an answer, as failed. */
static void fail_batch(bk_bootstrap_t *b, batch_t *x, const char *why)
{
    for (int i = 0; i < x->ntasks; i++) {
        job_t *j = &b->jobs[x->tasks[i]];
        if (get_state(b, j) == J_REQUESTED && j->batch == (int)(x - b->batches)) {
            end_job(b, x->tasks[i], 0, why);
        }
    }
    x->used = 0;
}

static batch_t *batch_by_req(bk_bootstrap_t *b, const char *req)
{
    for (int i = 0; i < b->max; i++) {
        if (b->batches[i].used && strcmp(b->batches[i].req, req) == 0) {
            return &b->batches[i];
        }
    }
    return NULL;
}

/* "snapshot-ready req=R host=H port=P root=DIR snaps=S_P:ID,...": the fetch starts. */
static int on_ready(bk_bootstrap_t *b, const bk_member_note_t *n)
{
    char req[128], port[16], snaps[BK_MEMBER_NOTE_MAX];
    batch_t *x;
    bk_member_note_word(n->text, "req", req, sizeof(req));
    x = batch_by_req(b, req);
    if (!x || x->fetching) {
        return 0; /* an answer to a request given up on */
    }
    bk_member_note_word(n->text, "host", x->host, sizeof(x->host));
    bk_member_note_word(n->text, "port", port, sizeof(port));
    bk_member_note_word(n->text, "root", x->root, sizeof(x->root));
    bk_member_note_word(n->text, "snaps", snaps, sizeof(snaps));
    x->port = atoi(port);
    char *save = NULL;
    for (char *p = strtok_r(snaps, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(p, ':');
        int32_t t;
        if (!colon) {
            continue;
        }
        *colon = '\0';
        t = bk_bootstrap_task_by_name(b, p);
        if (t >= 0 && b->jobs[t].batch == (int)(x - b->batches)) {
            snprintf(b->jobs[t].snap, sizeof(b->jobs[t].snap), "%s", colon + 1);
        }
    }
    for (int i = 0; i < x->ntasks; i++) {
        job_t *j = &b->jobs[x->tasks[i]];
        if (get_state(b, j) == J_REQUESTED && j->batch == (int)(x - b->batches)) {
            set_state(b, j, J_FETCHING);
        }
    }
    x->fetching = 1;
    x->finished = 0;
    if (pthread_create(&x->tid, NULL, fetch_main, x) != 0) {
        for (int i = 0; i < x->ntasks; i++) {
            if (get_state(b, &b->jobs[x->tasks[i]]) == J_FETCHING) {
                end_job(b, x->tasks[i], 0, "cannot start a thread");
            }
        }
        x->used = 0;
        return 1;
    }
    x->joinable = 1;
    return 0;
}

/* The batch's worker is done: each job ends as its fetch did. */
static void batch_done(bk_bootstrap_t *b, batch_t *x)
{
    char text[512];
    join_batch(x);
    for (int i = 0; i < x->ntasks; i++) {
        job_t *j = &b->jobs[x->tasks[i]];
        if (get_state(b, j) == J_FETCHING && j->batch == (int)(x - b->batches)) {
            hook(b, j, x->from, 1, j->ok);
            end_job(b, x->tasks[i], j->ok, j->err);
        }
    }
    snprintf(text, sizeof(text), "req=%s", x->req);
    bk_member_note(b->env.member, x->from, "snapshot-fetched", text);
    x->used = 0;
}

/* -- The loop ----------------------------------------------------------------------------- */

int bk_bootstrap_note(bk_bootstrap_t *b, const bk_member_note_t *n)
{
    if (!b) {
        return 0;
    }
    char task[64], req[128], why[BK_MEMBER_NOTE_MAX];
    int32_t t;
    if (strcmp(n->kind, "snapshot-request") == 0) {
        bk_bootstrap_on_request(b, n);
    } else if (strcmp(n->kind, "snapshot-fetched") == 0) {
        served_t *s;
        bk_member_note_word(n->text, "req", req, sizeof(req));
        if ((s = bk_bootstrap_served_by_req(b, req)) != NULL) {
            bk_bootstrap_drop_served(b, s);
        }
    } else if (strcmp(n->kind, "snapshot-ready") == 0) {
        return on_ready(b, n);
    } else if (strcmp(n->kind, "snapshot-failed") == 0) {
        batch_t *x;
        bk_member_note_word(n->text, "req", req, sizeof(req));
        if ((x = batch_by_req(b, req)) != NULL && !x->fetching) {
            char err[1024];
            bk_member_note_word(n->text, "why", why, sizeof(why));
            snprintf(err, sizeof(err), "%s answered: %.700s", n->from, why);
            fail_batch(b, x, err);
            return 1;
        }
    } else if (strcmp(n->kind, "bootstrap") == 0) {
        bk_member_note_word(n->text, "task", task, sizeof(task));
        t = bk_bootstrap_task_by_name(b, task);
        if (t < 0) {
            bk_log_warn("bootstrap: %s asks for task '%s', which this app does not have", n->from,
                        task);
        } else if (!b->fetch_on) {
            bk_log_warn("bootstrap %s: asked by %s, but cold bootstrap is off here (no ssh_key)",
                        task, n->from);
        } else if (!b->jobs[t].standing) {
            bk_log_info("bootstrap %s: asked by %s, but this node keeps no standby of it", task,
                        n->from);
        } else if (get_state(b, &b->jobs[t]) == J_REQUESTED ||
                   get_state(b, &b->jobs[t]) == J_FETCHING) {
            bk_log_info("bootstrap %s: asked by %s: already under way", task, n->from);
        } else {
            bk_log_info("bootstrap %s: asked by %s", task, n->from);
            b->jobs[t].mode = BK_BOOTSTRAP_MODE_FORCE;
            return 1;
        }
    }
    return 0;
}

int bk_bootstrap_poll(bk_bootstrap_t *b, const bk_member_view_t *view)
{
    int restart = 0;
    int64_t now = bk_clock_mono_ms();

    if (!b) {
        return 0;
    }
    bk_bootstrap_serve(b);
    for (int i = 0; i < b->nserved; i++) {
        if (now >= b->served[i].until) {
            bk_bootstrap_drop_served(b, &b->served[i--]);
        }
    }
    if (now - b->last_sweep >= SWEEP_MS) {
        b->last_sweep = now;
        bk_snapshot_sweep(b->root, bk_conf_int(b->env.conf, BK_CONF_SNAPSHOT_TTL_MS),
                          bk_clock_wall_ms());
    }
    /* the replica's side: answers late, fetches done, progress, new requests */
    for (int i = 0; i < b->max; i++) {
        batch_t *x = &b->batches[i];
        if (!x->used) {
            continue;
        }
        if (!x->fetching && now >= x->deadline) {
            fail_batch(b, x, "no snapshot came in bootstrap_timeout_ms");
            restart = 1;
        } else if (x->fetching && x->finished) {
            batch_done(b, x);
            restart = 1;
        } else if (x->fetching) {
            for (int k = 0; k < x->ntasks; k++) {
                job_t *j = &b->jobs[x->tasks[k]];
                if (j->total > 0 && j->bytes < j->total && now - j->hook_at >= 1000) {
                    hook(b, j, x->from, 0, 0);
                }
            }
        }
    }
    for (int32_t t = 0; b->fetch_on && t < b->env.ntasks && t < view->ntasks; t++) {
        int32_t owner = view->owner[t];
        if (get_state(b, &b->jobs[t]) == J_WANTED && owner >= 0 && owner < view->npeers &&
            view->peers[owner].state == BK_MEMBER_ALIVE) {
            bk_bootstrap_request(b, view, owner);
        }
    }
    for (int32_t t = 0; t < b->env.ntasks; t++) {
        if (b->jobs[t].retry_at > 0 && now >= b->jobs[t].retry_at) {
            b->jobs[t].retry_at = 0; /* the next runner hands it over again */
            restart = 1;
        }
    }
    return restart;
}
