/* bootstrap.c - cold bootstrap, replica and active sides (bootstrap.h). */
#include "bootstrap.h"

#include <errno.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "sftp.h"
#include "snapshot.h"
#include "standby.h"

#define MANIFEST_MAX (64u << 20) /* a manifest of BK_SNAPSHOT_MAX_FILES lines fits */
#define SWEEP_MS 10000

enum { J_IDLE = 0, J_WANTED, J_REQUESTED, J_FETCHING, J_ENDED };

/* One task this node keeps a standby of. */
typedef struct job_s {
    int state;
    int mode; /* BK_STANDBY_BOOT_* for the next standby runner */
    char req[128];
    char why[512];
    int64_t deadline;
    /* from "snapshot-ready" */
    char from[BK_MEMBER_MAX_ID + 1], host[256], dir[4096];
    int port;
    /* the worker's */
    pthread_t tid;
    int joinable;
    volatile int finished;
    int ok;
    char err[1024];
    int64_t t0;
    volatile uint64_t bytes, total;
    int64_t last_log, hook_at;
    struct bk_bootstrap_s *b;
    int32_t task;
} job_t;

/* A snapshot this node made for someone. */
typedef struct served_s {
    char req[128];
    char to[BK_MEMBER_MAX_ID + 1];
    int32_t task;
    int made;
    char dir[4096];
    int64_t until; /* dropped then if not fetched (the thread asked may have stopped) */
} served_t;

struct bk_bootstrap_s {
    bk_bootstrap_env_t env;
    int fetch_on;
    pthread_mutex_t lock; /* guards job states WANTED (set by bk_bootstrap_want) */
    job_t *jobs;          /* [ntasks] */
    served_t *served;
    int nserved, max;
    unsigned seq;
    int64_t last_sweep;
    char root[4096]; /* <state_dir>/<app>/snapshots */
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The value of word `key=` in a note's text into out ("" when missing). `why=` takes the
 * rest of the text. */
static void word(const char *text, const char *key, char *out, size_t size)
{
    size_t kl = strlen(key);
    const char *p = text;
    out[0] = '\0';
    while (p && *p) {
        while (*p == ' ') {
            p++;
        }
        if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
            const char *v = p + kl + 1;
            size_t n = strcmp(key, "why") == 0 ? strlen(v) : strcspn(v, " ");
            snprintf(out, size, "%.*s", (int)n, v);
            return;
        }
        p = strchr(p, ' ');
    }
}

static int32_t task_by_name(const bk_bootstrap_t *b, const char *name)
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
    b->jobs = calloc((size_t)env->ntasks + 1, sizeof(*b->jobs));
    b->served = calloc((size_t)b->max + 1, sizeof(*b->served));
    if (!b->jobs || !b->served) {
        free(b->jobs);
        free(b->served);
        free(b);
        return NULL;
    }
    pthread_mutex_init(&b->lock, NULL);
    snprintf(b->root, sizeof(b->root), "%s/%s/snapshots",
             bk_conf_str(env->conf, BK_CONF_STATE_DIR), env->plan->id);
    /* snapshots left by an earlier run of this node are nobody's now */
    bk_snapshot_sweep(b->root, 0, wall_ms() + 1);
    return b;
}

static void join_job(job_t *j)
{
    if (j->joinable) {
        pthread_join(j->tid, NULL);
        j->joinable = 0;
    }
}

void bk_bootstrap_destroy(bk_bootstrap_t *b)
{
    if (!b) {
        return;
    }
    for (int32_t t = 0; t < b->env.ntasks; t++) {
        join_job(&b->jobs[t]);
    }
    for (int i = 0; i < b->nserved; i++) {
        if (b->served[i].made) {
            bk_snapshot_remove(b->served[i].dir);
        }
    }
    pthread_mutex_destroy(&b->lock);
    free(b->jobs);
    free(b->served);
    free(b);
}

void bk_bootstrap_want(bk_bootstrap_t *b, int32_t task, const char *why)
{
    if (!b || task < 0 || task >= b->env.ntasks) {
        return;
    }
    pthread_mutex_lock(&b->lock);
    if (b->jobs[task].state == J_IDLE || b->jobs[task].state == J_ENDED) {
        b->jobs[task].state = J_WANTED;
        snprintf(b->jobs[task].why, sizeof(b->jobs[task].why), "%s", why);
    }
    pthread_mutex_unlock(&b->lock);
}

int bk_bootstrap_mode(bk_bootstrap_t *b, int32_t task)
{
    if (!b || task < 0 || task >= b->env.ntasks) {
        return BK_STANDBY_BOOT_AUTO;
    }
    if (b->jobs[task].state == J_REQUESTED || b->jobs[task].state == J_FETCHING) {
        return BK_STANDBY_BOOT_BUSY; /* its directory is about to be replaced */
    }
    return b->jobs[task].mode;
}

void bk_bootstrap_keep(bk_bootstrap_t *b, const int32_t *standby, int32_t n)
{
    if (!b) {
        return;
    }
    for (int32_t t = 0; t < b->env.ntasks; t++) {
        int kept = 0;
        job_t *j = &b->jobs[t];
        for (int32_t i = 0; i < n && !kept; i++) {
            kept = standby[i] == t;
        }
        if (kept || j->state == J_FETCHING) {
            continue; /* a fetch runs to its end (bounded by its timeouts) */
        }
        pthread_mutex_lock(&b->lock);
        join_job(j);
        j->state = J_IDLE;
        j->mode = BK_STANDBY_BOOT_AUTO;
        pthread_mutex_unlock(&b->lock);
    }
}

void bk_bootstrap_settle(bk_bootstrap_t *b, const int32_t *tasks, int32_t n)
{
    if (!b) {
        return;
    }
    for (int32_t i = 0; i < n; i++) {
        job_t *j = tasks[i] >= 0 && tasks[i] < b->env.ntasks ? &b->jobs[tasks[i]] : NULL;
        int state;
        if (!j) {
            continue;
        }
        pthread_mutex_lock(&b->lock);
        state = j->state;
        pthread_mutex_unlock(&b->lock);
        if (state == J_FETCHING) {
            bk_log_info("bootstrap %s: the task becomes active here: waiting for its fetch",
                        b->env.names[tasks[i]]);
            join_job(j); /* installed or not: either way the stream thread restores */
        }
        if (state != J_IDLE) {
            pthread_mutex_lock(&b->lock);
            j->state = J_IDLE;
            j->mode = BK_STANDBY_BOOT_AUTO;
            pthread_mutex_unlock(&b->lock);
        }
    }
}

/* -- The replica's side ------------------------------------------------------------------- */

static void progress(void *opaque, uint64_t done, uint64_t total)
{
    job_t *j = opaque;
    int64_t now = mono_ms();
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

static const char *home_file(const char *name, char *buf, size_t size)
{
    const char *home = getenv("HOME");
    struct passwd *pw = home ? NULL : getpwuid(getuid());
    snprintf(buf, size, "%s/%s", home ? home : pw ? pw->pw_dir : "/", name);
    return buf;
}

/* Fetches the snapshot of j into a directory beside the task's and installs it. */
static void *fetch_main(void *arg)
{
    job_t *j = arg;
    bk_bootstrap_t *b = j->b;
    const bk_conf_t *conf = b->env.conf;
    const char *name = b->env.names[j->task];
    char known[4096], user[256], path[4200], local[4200], taskdir[4096];
    char *text = NULL;
    size_t len = 0;
    bk_manifest_t m;
    int parsed = 0, made = 0;
    struct passwd *pw = getpwuid(getuid());
    bk_sftp_conf_t sc;

    bk_log_set_thread_name("bootstrap");
    memset(&sc, 0, sizeof(sc));
    snprintf(user, sizeof(user), "%s",
             bk_conf_str(conf, BK_CONF_SSH_USER) ? bk_conf_str(conf, BK_CONF_SSH_USER)
             : pw                                  ? pw->pw_name
                                                   : "root");
    sc.host = j->host;
    sc.port = j->port;
    sc.user = user;
    sc.private_key = bk_conf_str(conf, BK_CONF_SSH_KEY);
    sc.known_hosts = bk_conf_str(conf, BK_CONF_SSH_KNOWN_HOSTS)
                         ? bk_conf_str(conf, BK_CONF_SSH_KNOWN_HOSTS)
                         : home_file(".ssh/known_hosts", known, sizeof(known));
    sc.timeout_ms = (int)bk_conf_int(conf, BK_CONF_BOOTSTRAP_TIMEOUT_MS);
    sc.rate_bytes_per_s = bk_conf_int(conf, BK_CONF_BOOTSTRAP_RATE);
    sc.parallel = (int)bk_conf_int(conf, BK_CONF_BOOTSTRAP_PARALLEL);
    j->t0 = mono_ms();
    j->ok = 0;
    snprintf(path, sizeof(path), "%s/%s", j->dir, BK_SNAPSHOT_MANIFEST);
    bk_plan_task_dir(b->env.plan, conf, b->env.tasks[j->task].sub,
                     b->env.tasks[j->task].partition, taskdir, sizeof(taskdir));
    /* beside the task's directory (install renames it into place), hidden from dump */
    snprintf(local, sizeof(local), "%s/%s/.bootstrap-%s-%s",
             bk_conf_str(conf, BK_CONF_STATE_DIR), b->env.plan->id, name, j->req);
    if (bk_sftp_read_small(&sc, path, MANIFEST_MAX, &text, &len, j->err, sizeof(j->err)) != 0) {
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
    if (mkdir(local, 0755) != 0) {
        snprintf(j->err, sizeof(j->err), "cannot create %.900s: %s", local, strerror(errno));
        goto done;
    }
    made = 1;
    bk_log_info("bootstrap %s: fetching snapshot %s from %s (%s:%d): %d file(s), %.1f MB", name,
                m.id, j->from, j->host, j->port, m.nfiles, (double)m.total_bytes / 1e6);
    if (bk_sftp_fetch(&sc, j->dir, &m, local, progress, j, j->err, sizeof(j->err)) != 0 ||
        bk_snapshot_install(&m, local, taskdir, j->err, sizeof(j->err)) != 0) {
        goto done;
    }
    made = 0; /* it is the task's directory now */
    j->bytes = m.total_bytes;
    j->ok = 1;
    {
        int64_t ms = mono_ms() - j->t0;
        bk_log_info("bootstrap %s: installed snapshot %s from %s: %d file(s), %.1f MB in %lld ms "
                    "(%.1f MB/s); the standby tails the changelog from offset %lld",
                    name, m.id, j->from, m.nfiles, (double)m.total_bytes / 1e6, (long long)ms,
                    ms > 0 ? (double)m.total_bytes / 1e3 / (double)ms : 0.0,
                    m.nstores > 0 ? (long long)m.stores[0].next : -1LL);
    }

done:
    if (made) {
        bk_snapshot_remove(local);
    }
    if (parsed) {
        bk_manifest_free(&m);
    }
    free(text);
    j->finished = 1;
    return NULL;
}

/* Sends a request for task t to its active, if a job waits and there is room. */
static void request(bk_bootstrap_t *b, const bk_member_view_t *view, int32_t t, int running)
{
    job_t *j = &b->jobs[t];
    int32_t owner = t < view->ntasks ? view->owner[t] : -1;
    char text[512];

    if (running >= b->max) {
        return; /* waits its turn */
    }
    if (owner < 0 || owner >= view->npeers || view->peers[owner].state != BK_MEMBER_ALIVE) {
        return; /* no active to ask yet */
    }
    snprintf(j->req, sizeof(j->req), "%s.%d.%u", b->env.node_id, (int)getpid(), ++b->seq);
    snprintf(j->from, sizeof(j->from), "%s", view->peers[owner].id);
    snprintf(text, sizeof(text), "task=%s req=%s", b->env.names[t], j->req);
    if (bk_member_note(b->env.member, j->from, "snapshot-request", text) != 0) {
        return;
    }
    bk_log_info("bootstrap %s: asking %s for a snapshot (%s)", b->env.names[t], j->from, j->why);
    j->state = J_REQUESTED;
    j->deadline = mono_ms() + bk_conf_int(b->env.conf, BK_CONF_BOOTSTRAP_TIMEOUT_MS);
}

/* on_restore with the fetch's progress (main thread: the hooks' VM is its). */
static void hook(bk_bootstrap_t *b, job_t *j, int done, int ok)
{
    double s = (double)(mono_ms() - j->t0) / 1000.0;
    double rate = s > 0 ? (double)j->bytes / s : 0;
    bk_hooks_bootstrap_t p = {b->env.names[j->task], j->from, j->bytes, j->total, s,
                              rate > 0 && j->total > j->bytes
                                  ? (double)(j->total - j->bytes) / rate
                                  : 0.0,
                              done, ok};
    j->hook_at = mono_ms();
    bk_hooks_bootstrap(b->env.hooks, &p);
}

static void end_job(bk_bootstrap_t *b, int32_t t, int ok, const char *why)
{
    job_t *j = &b->jobs[t];
    j->state = J_ENDED;
    /* after a bootstrap the replica tails what came since its snapshot, however much */
    j->mode = ok ? BK_STANDBY_BOOT_GAP : BK_STANDBY_BOOT_NEVER;
    if (!ok) {
        bk_log_warn("bootstrap %s: failed: %s; the standby restores from the changelog instead",
                    b->env.names[t], why);
    }
}

/* -- The active's side -------------------------------------------------------------------- */

static void answer_failed(bk_bootstrap_t *b, const char *to, const char *task, const char *req,
                          const char *why)
{
    char text[1024];
    snprintf(text, sizeof(text), "task=%s req=%s why=%s", task, req, why);
    bk_member_note(b->env.member, to, "snapshot-failed", text);
}

static void on_request(bk_bootstrap_t *b, const bk_member_note_t *n)
{
    char task[64], req[128], why[256];
    int32_t t;
    word(n->text, "task", task, sizeof(task));
    word(n->text, "req", req, sizeof(req));
    t = task_by_name(b, task);
    if (t < 0 || !req[0]) {
        return;
    }
    if (b->nserved >= b->max) {
        answer_failed(b, n->from, task, req, "busy: bootstrap_max_concurrent snapshots out");
        return;
    }
    if (b->env.ask(b->env.opaque, t, req) != 0) {
        snprintf(why, sizeof(why), "task %s is not active on %s", task, b->env.node_id);
        answer_failed(b, n->from, task, req, why);
        return;
    }
    served_t *s = &b->served[b->nserved++];
    memset(s, 0, sizeof(*s));
    snprintf(s->req, sizeof(s->req), "%s", req);
    snprintf(s->to, sizeof(s->to), "%s", n->from);
    s->task = t;
    s->until = mono_ms() + 2 * bk_conf_int(b->env.conf, BK_CONF_BOOTSTRAP_TIMEOUT_MS);
    bk_log_info("bootstrap: %s asks for a snapshot of %s (%s)", n->from, task, req);
}

static served_t *served_by_req(bk_bootstrap_t *b, const char *req)
{
    for (int i = 0; i < b->nserved; i++) {
        if (strcmp(b->served[i].req, req) == 0) {
            return &b->served[i];
        }
    }
    return NULL;
}

static void drop_served(bk_bootstrap_t *b, served_t *s)
{
    if (s->made) {
        bk_snapshot_remove(s->dir);
    }
    *s = b->served[--b->nserved];
}

static void serve(bk_bootstrap_t *b)
{
    bk_thread_snapshot_t r;
    while (b->env.take(b->env.opaque, &r)) {
        served_t *s = served_by_req(b, r.req);
        char text[BK_MEMBER_NOTE_MAX];
        const char *host = bk_conf_str(b->env.conf, BK_CONF_SSH_HOST);
        char hostbuf[256];
        if (!s) {
            if (r.ok) {
                bk_snapshot_remove(r.dir);
            }
            continue;
        }
        if (!r.ok) {
            answer_failed(b, s->to, b->env.names[s->task], s->req, r.err);
            drop_served(b, s);
            continue;
        }
        if (!host) {
            const char *ep = bk_conf_str(b->env.conf, BK_CONF_ENDPOINT);
            snprintf(hostbuf, sizeof(hostbuf), "%.*s", ep ? (int)strcspn(ep, ":") : 9,
                     ep ? ep : "127.0.0.1");
            host = hostbuf;
        }
        s->made = 1;
        snprintf(s->dir, sizeof(s->dir), "%s", r.dir);
        snprintf(text, sizeof(text), "task=%s req=%s host=%s port=%lld dir=%.1500s",
                 b->env.names[s->task], s->req, host,
                 (long long)bk_conf_int(b->env.conf, BK_CONF_SSH_PORT), s->dir);
        if (bk_member_note(b->env.member, s->to, "snapshot-ready", text) != 0) {
            drop_served(b, s);
        }
    }
}

/* -- The loop ----------------------------------------------------------------------------- */

static int on_note(bk_bootstrap_t *b, const bk_member_note_t *n)
{
    char task[64], req[128], why[BK_MEMBER_NOTE_MAX];
    int32_t t;
    word(n->text, "task", task, sizeof(task));
    word(n->text, "req", req, sizeof(req));
    t = task_by_name(b, task);
    if (strcmp(n->kind, "snapshot-request") == 0) {
        on_request(b, n);
    } else if (strcmp(n->kind, "snapshot-fetched") == 0) {
        served_t *s = served_by_req(b, req);
        if (s) {
            drop_served(b, s);
        }
    } else if (t >= 0 && strcmp(n->kind, "snapshot-ready") == 0) {
        job_t *j = &b->jobs[t];
        char port[16];
        if (j->state != J_REQUESTED || strcmp(j->req, req) != 0) {
            return 0; /* an answer to a request given up on */
        }
        word(n->text, "host", j->host, sizeof(j->host));
        word(n->text, "port", port, sizeof(port));
        word(n->text, "dir", j->dir, sizeof(j->dir));
        j->port = atoi(port);
        j->finished = 0;
        j->b = b;
        j->task = t;
        j->state = J_FETCHING;
        if (pthread_create(&j->tid, NULL, fetch_main, j) != 0) {
            end_job(b, t, 0, "cannot start a thread");
            return 1;
        }
        j->joinable = 1;
    } else if (t >= 0 && strcmp(n->kind, "snapshot-failed") == 0) {
        if (b->jobs[t].state == J_REQUESTED && strcmp(b->jobs[t].req, req) == 0) {
            word(n->text, "why", why, sizeof(why));
            snprintf(b->jobs[t].err, sizeof(b->jobs[t].err), "%s answered: %.700s", n->from, why);
            end_job(b, t, 0, b->jobs[t].err);
            return 1;
        }
    } else if (strcmp(n->kind, "bootstrap") == 0) {
        if (t < 0) {
            bk_log_warn("bootstrap: %s asks for task '%s', which this app does not have", n->from,
                        task);
        } else if (!b->fetch_on) {
            bk_log_warn("bootstrap %s: asked by %s, but cold bootstrap is off here (no ssh_key)",
                        task, n->from);
        } else if (b->jobs[t].state == J_REQUESTED || b->jobs[t].state == J_FETCHING) {
            bk_log_info("bootstrap %s: asked by %s: already under way", task, n->from);
        } else {
            bk_log_info("bootstrap %s: asked by %s", task, n->from);
            b->jobs[t].mode = BK_STANDBY_BOOT_FORCE;
            return 1;
        }
    }
    return 0;
}

int bk_bootstrap_poll(bk_bootstrap_t *b, const bk_member_view_t *view)
{
    bk_member_note_t note;
    int restart = 0, running = 0;
    int64_t now = mono_ms();

    if (!b) {
        return 0;
    }
    while (bk_member_take_note(b->env.member, &note)) {
        restart |= on_note(b, &note);
    }
    serve(b);
    for (int i = 0; i < b->nserved; i++) {
        if (now >= b->served[i].until) {
            drop_served(b, &b->served[i--]);
        }
    }
    if (now - b->last_sweep >= SWEEP_MS) {
        b->last_sweep = now;
        bk_snapshot_sweep(b->root, bk_conf_int(b->env.conf, BK_CONF_SNAPSHOT_TTL_MS), wall_ms());
    }
    for (int32_t t = 0; t < b->env.ntasks; t++) {
        running += b->jobs[t].state == J_REQUESTED || b->jobs[t].state == J_FETCHING;
    }
    for (int32_t t = 0; t < b->env.ntasks; t++) {
        job_t *j = &b->jobs[t];
        int state;
        pthread_mutex_lock(&b->lock);
        state = j->state;
        pthread_mutex_unlock(&b->lock);
        if (state == J_WANTED && b->fetch_on) {
            request(b, view, t, running);
            running += j->state == J_REQUESTED;
        } else if (state == J_REQUESTED && now >= j->deadline) {
            end_job(b, t, 0, "no snapshot came in bootstrap_timeout_ms");
            restart = 1;
        } else if (state == J_FETCHING && j->finished) {
            char text[512];
            join_job(j);
            hook(b, j, 1, j->ok);
            snprintf(text, sizeof(text), "task=%s req=%s", b->env.names[t], j->req);
            bk_member_note(b->env.member, j->from, "snapshot-fetched", text);
            end_job(b, t, j->ok, j->err);
            restart = 1;
        } else if (state == J_FETCHING && j->total > 0 && now - j->hook_at >= 1000) {
            hook(b, j, 0, 0);
        }
    }
    return restart;
}
