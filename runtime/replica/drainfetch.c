/* drainfetch.c - drained checkpoints fetched from the node that holds them (drainfetch.h). */
#include "replica/drainfetch.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/events.h"
#include "base/clock.h"
#include "base/fs.h"
#include "base/log.h"
#include "engine/drained.h"
#include "engine/manifest.h"
#include "engine/snapshot.h"
#include "replica/sftp.h"

#define MANIFEST_MAX (64u << 20)
/* A request not answered by then is sent again, to the nodes alive then: a node that
 * started since (it does not read notes from before its start) or died meanwhile. */
#define ASK_AGAIN_MS 2000
#define NONE_ROUNDS 3     /* asks answered "none" by every node before it is given up */
#define NONE_AGAIN_MS 300 /* ... and the pause before the next */

enum { F_ASKED = 1, F_FETCHING, F_DONE, F_FAILED };

/* One checkpoint this node wants. */
typedef struct want_s {
    bk_task_id_t task;
    int state;
    char req[320], prev[320]; /* the request's id, and the one before (answers still count) */
    int expected, nones; /* answers that may come, "drained-none" ones received */
    int none_rounds;     /* asks every node answered "none" to */
    int64_t t0, deadline, asked_at;
    char from[BK_MEMBER_MAX_ID + 1], host[256], dir[2048];
    int port;
    pthread_t tid;
    atomic_int finished;
    int ok;
    int64_t bytes;
    char err[1024];
    struct bk_drainfetch_s *df;
} want_t;

struct bk_drainfetch_s {
    const bk_plan_t *plan;
    const bk_conf_t *conf;
    bk_member_t *member;
    char node_id[BK_MEMBER_MAX_ID + 1];
    int fetch_on;
    want_t **w;
    int n, cap;
    unsigned seq;
    int ended; /* a want ended since the last poll */
};

bk_drainfetch_t *bk_drainfetch_new(const bk_plan_t *plan, const bk_conf_t *conf,
                                   bk_member_t *member, const char *node_id)
{
    bk_drainfetch_t *df = calloc(1, sizeof(*df));
    if (!df) {
        return NULL;
    }
    df->plan = plan;
    df->conf = conf;
    df->member = member;
    snprintf(df->node_id, sizeof(df->node_id), "%s", node_id);
    df->fetch_on = bk_conf_str(conf, BK_CONF_SSH_KEY) != NULL;
    return df;
}

void bk_drainfetch_destroy(bk_drainfetch_t *df)
{
    if (!df) {
        return;
    }
    for (int i = 0; i < df->n; i++) {
        if (df->w[i]->state == F_FETCHING) {
            pthread_join(df->w[i]->tid, NULL);
        }
        free(df->w[i]);
    }
    free(df->w);
    free(df);
}

static want_t *find(bk_drainfetch_t *df, bk_task_id_t task)
{
    for (int i = 0; i < df->n; i++) {
        if (df->w[i]->task.sub == task.sub && df->w[i]->task.partition == task.partition) {
            return df->w[i];
        }
    }
    return NULL;
}

static want_t *by_req(bk_drainfetch_t *df, const char *req)
{
    for (int i = 0; i < df->n; i++) {
        if (strcmp(df->w[i]->req, req) == 0 || strcmp(df->w[i]->prev, req) == 0) {
            return df->w[i];
        }
    }
    return NULL;
}

static void give_up(want_t *w, const char *why)
{
    w->state = F_FAILED;
    w->df->ended = 1;
    bk_log_warn("task %s: its drained checkpoint cannot be had (%s): the tasks built from it "
                "replay its key groups from the changelogs",
                BK_TASK_NAME(w->task), why);
}

/* Asks every node (again) under a new request id, expecting npeers answers. 0, or -1
 * (given up). */
static int ask(bk_drainfetch_t *df, want_t *w, int npeers)
{
    char text[512];
    if (npeers <= 0) {
        give_up(w, "no other node runs");
        return -1;
    }
    memcpy(w->prev, w->req, sizeof(w->prev));
    snprintf(w->req, sizeof(w->req), "%s.%d.d%u", df->node_id, (int)getpid(), ++df->seq);
    snprintf(text, sizeof(text), "req=%s task=%s", w->req, BK_TASK_NAME(w->task));
    if (bk_member_note(df->member, NULL, BK_DRAINFETCH_WANT, text) != 0) {
        give_up(w, "the request could not be queued");
        return -1;
    }
    w->expected = npeers;
    w->nones = 0;
    w->asked_at = bk_clock_mono_ms();
    w->state = F_ASKED;
    return 0;
}

int bk_drainfetch_want(bk_drainfetch_t *df, bk_task_id_t task, int npeers)
{
    char dir[4096];
    want_t *w;

    if (bk_drained_find(df->plan, df->conf, task, dir, sizeof(dir))) {
        return 1;
    }
    if ((w = find(df, task)) != NULL) {
        return w->state == F_FAILED ? -1 : w->state == F_DONE ? 1 : 0;
    }
    if (df->n == df->cap) {
        int cap = df->cap ? df->cap * 2 : 16;
        want_t **more = realloc(df->w, (size_t)cap * sizeof(*more));
        if (!more) {
            return -1;
        }
        df->w = more;
        df->cap = cap;
    }
    if (!(w = calloc(1, sizeof(*w)))) {
        return -1;
    }
    df->w[df->n++] = w;
    w->df = df;
    w->task = task;
    w->expected = npeers;
    w->t0 = bk_clock_mono_ms();
    w->deadline = w->t0 + bk_conf_int(df->conf, BK_CONF_BOOTSTRAP_TIMEOUT_MS);
    if (!df->fetch_on) {
        give_up(w, "ssh_key is not set, so this node fetches nothing over SSH");
        return -1;
    }
    return ask(df, w, npeers);
}

/* -- The holder ----------------------------------------------------------------------- */

static void serve(bk_drainfetch_t *df, const bk_member_note_t *n)
{
    char req[320], name[64], dir[4096], real[4096], text[BK_MEMBER_NOTE_MAX], hostbuf[256];
    const char *host = bk_conf_str(df->conf, BK_CONF_SSH_HOST);
    bk_task_id_t task;

    bk_member_note_word(n->text, "req", req, sizeof(req));
    bk_member_note_word(n->text, "task", name, sizeof(name));
    if (strcmp(n->from, df->node_id) == 0 || !req[0] ||
        sscanf(name, "%d_%d", &task.sub, &task.partition) != 2) {
        return;
    }
    if (!bk_drained_find(df->plan, df->conf, task, dir, sizeof(dir)) || !realpath(dir, real) ||
        strlen(real) > 1000) {
        snprintf(text, sizeof(text), "req=%s task=%s", req, name);
        bk_member_note(df->member, n->from, BK_DRAINFETCH_NONE, text);
        return;
    }
    if (!host) {
        const char *ep = bk_conf_str(df->conf, BK_CONF_ENDPOINT);
        snprintf(hostbuf, sizeof(hostbuf), "%.*s", ep ? (int)strcspn(ep, ":") : 9,
                 ep ? ep : "127.0.0.1");
        host = hostbuf;
    }
    snprintf(text, sizeof(text), "req=%s task=%s host=%s port=%lld dir=%.1000s", req, name, host,
             (long long)bk_conf_int(df->conf, BK_CONF_SSH_PORT), real);
    if (bk_member_note(df->member, n->from, BK_DRAINFETCH_HERE, text) == 0) {
        bk_log_info("task %s: %s fetches its drained checkpoint (%s)", name, n->from, req);
    }
}

/* -- The asker ------------------------------------------------------------------------ */

static void *fetch_main(void *arg)
{
    want_t *w = arg;
    bk_drainfetch_t *df = w->df;
    char known[4096], user[256], path[4700], root[4096], local[4500], final[4400];
    char *text = NULL;
    size_t len = 0;
    bk_sftp_conf_t sc;
    bk_manifest_t m;
    int parsed = 0, made = 0;

    bk_log_set_thread_name("drainfetch");
    memset(&sc, 0, sizeof(sc));
    bk_sftp_conf_settings(df->conf, &sc, user, sizeof(user), known, sizeof(known));
    sc.host = w->host;
    sc.port = w->port;
    sc.rate_bytes_per_s = bk_conf_int(df->conf, BK_CONF_BOOTSTRAP_RATE);
    sc.parallel = (int)bk_conf_int(df->conf, BK_CONF_BOOTSTRAP_PARALLEL);
    snprintf(path, sizeof(path), "%s/%s", w->dir, BK_MANIFEST_NAME);
    if (bk_sftp_read_small(&sc, path, MANIFEST_MAX, &text, &len, w->err, sizeof(w->err)) != 0 ||
        bk_manifest_parse(text, len, &m, w->err, sizeof(w->err)) != 0) {
        goto done;
    }
    parsed = 1;
    if (strcmp(m.task, BK_TASK_NAME(w->task)) != 0 || !bk_manifest_name_ok(m.id)) {
        snprintf(w->err, sizeof(w->err), "the checkpoint from %s is of task %.64s (id %.64s): "
                 "refused", w->from, m.task, m.id);
        goto done;
    }
    bk_drained_root(df->plan, df->conf, w->task, root, sizeof(root));
    snprintf(final, sizeof(final), "%s/%s", root, m.id);
    snprintf(local, sizeof(local), "%s.tmp", final);
    bk_fs_rm_tree(local); /* a leftover of an earlier try */
    if (bk_fs_mkdirs(local) != 0) {
        snprintf(w->err, sizeof(w->err), "cannot create %.900s: %s", local, strerror(errno));
        goto done;
    }
    made = 1;
    snprintf(path, sizeof(path), "%s/%s", local, BK_MANIFEST_NAME);
    /* the manifest last, then the rename: bk_drained_find takes only a whole one */
    if (bk_sftp_fetch(&sc, w->dir, &m, local, NULL, NULL, w->err, sizeof(w->err)) != 0 ||
        bk_manifest_write(&m, path, w->err, sizeof(w->err)) != 0) {
        goto done;
    }
    if (rename(local, final) != 0) {
        snprintf(w->err, sizeof(w->err), "cannot rename %.900s: %s", local, strerror(errno));
        goto done;
    }
    bk_fs_sync_dir(root);
    made = 0;
    w->bytes = m.total_bytes;
    w->ok = 1;
done:
    if (made) {
        bk_fs_rm_tree(local);
    }
    if (parsed) {
        bk_manifest_free(&m);
    }
    free(text);
    w->finished = 1;
    return NULL;
}

static void on_here(bk_drainfetch_t *df, const bk_member_note_t *n)
{
    char req[320], port[32];
    want_t *w;
    bk_member_note_word(n->text, "req", req, sizeof(req));
    if (!(w = by_req(df, req)) || w->state != F_ASKED) {
        return; /* answered already (another holder) or given up */
    }
    snprintf(w->from, sizeof(w->from), "%s", n->from);
    bk_member_note_word(n->text, "host", w->host, sizeof(w->host));
    bk_member_note_word(n->text, "port", port, sizeof(port));
    bk_member_note_word(n->text, "dir", w->dir, sizeof(w->dir));
    w->port = atoi(port);
    if (!w->host[0] || !w->dir[0] || w->port <= 0 || w->port > 65535) {
        give_up(w, "the holder's answer names no host, port or directory");
        return;
    }
    w->finished = 0;
    if (pthread_create(&w->tid, NULL, fetch_main, w) != 0) {
        give_up(w, "no thread for the fetch");
        return;
    }
    w->state = F_FETCHING;
}

static void on_none(bk_drainfetch_t *df, const bk_member_note_t *n)
{
    char req[320];
    want_t *w;
    bk_member_note_word(n->text, "req", req, sizeof(req));
    if ((w = by_req(df, req)) != NULL && w->state == F_ASKED && strcmp(w->req, req) == 0 &&
        ++w->nones >= w->expected) {
        /* The node that drained it may have answered before its checkpoint was in place (it
         * publishes the drain as it commits): asked again shortly, a few times, before the
         * build falls back to the changelogs. */
        if (++w->none_rounds < NONE_ROUNDS) {
            w->asked_at = bk_clock_mono_ms() - ASK_AGAIN_MS + NONE_AGAIN_MS;
        } else {
            give_up(w, "no node holds it");
        }
    }
}

int bk_drainfetch_note(bk_drainfetch_t *df, const bk_member_note_t *note)
{
    if (strcmp(note->kind, BK_DRAINFETCH_WANT) == 0) {
        serve(df, note);
    } else if (strcmp(note->kind, BK_DRAINFETCH_HERE) == 0) {
        on_here(df, note);
    } else if (strcmp(note->kind, BK_DRAINFETCH_NONE) == 0) {
        on_none(df, note);
    } else {
        return 0;
    }
    return 1;
}

int bk_drainfetch_poll(bk_drainfetch_t *df, int npeers)
{
    int64_t now = bk_clock_mono_ms();
    int ended = 0;
    for (int i = 0; i < df->n; i++) {
        want_t *w = df->w[i];
        if (w->state == F_FETCHING && w->finished) {
            pthread_join(w->tid, NULL);
            if (w->ok) {
                w->state = F_DONE;
                bk_log_info("task %s: drained checkpoint fetched from %s (%s:%d): %lld "
                            "byte(s), %lld ms after it was asked for",
                            BK_TASK_NAME(w->task), w->from, w->host, w->port,
                            (long long)w->bytes, (long long)(now - w->t0));
                bk_events_emit("checkpoint_fetched",
                               "\"task\":\"%s\",\"from\":\"%s\",\"bytes\":%lld,\"ms\":%lld",
                               BK_TASK_NAME(w->task), w->from, (long long)w->bytes,
                               (long long)(now - w->t0));
            } else {
                give_up(w, w->err);
            }
            ended = 1;
        } else if (w->state == F_ASKED && now >= w->deadline) {
            give_up(w, "no node answered within bootstrap_timeout_ms");
            ended = 1;
        } else if (w->state == F_ASKED && now >= w->asked_at + ASK_AGAIN_MS) {
            ended |= ask(df, w, npeers) != 0;
        }
    }
    ended |= df->ended; /* given up on a note */
    df->ended = 0;
    return ended;
}
