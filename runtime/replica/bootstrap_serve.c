/* bootstrap_serve.c - cold bootstrap, the active's side: the snapshots another node asked
 * for (a "snapshot-request" note) made by the threads running the tasks, and announced
 * ("snapshot-ready") for it to fetch over SFTP (bootstrap_internal.h). Main thread. */
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

served_t *bk_bootstrap_served_by_req(bk_bootstrap_t *b, const char *req)
{
    for (int i = 0; i < b->nserved; i++) {
        if (strcmp(b->served[i].req, req) == 0) {
            return &b->served[i];
        }
    }
    return NULL;
}

void bk_bootstrap_drop_served(bk_bootstrap_t *b, served_t *s)
{
    bk_bootstrap_remove_served(b, s);
    *s = b->served[--b->nserved];
}

void bk_bootstrap_on_request(bk_bootstrap_t *b, const bk_member_note_t *n)
{
    char req[128], tasks[BK_MEMBER_NOTE_MAX], text[512];
    served_t *s;
    bk_member_note_word(n->text, "req", req, sizeof(req));
    bk_member_note_word(n->text, "tasks", tasks, sizeof(tasks));
    if (!req[0] || !tasks[0]) {
        return;
    }
    if (b->nserved >= b->max) {
        snprintf(text, sizeof(text),
                 "req=%s why=busy: %d bk_bootstrap_request(s) served already "
                 "(bootstrap_max_concurrent)",
                 req, b->max);
        bk_member_note(b->env.member, n->from, "snapshot-failed", text);
        return;
    }
    s = &b->served[b->nserved++];
    memset(s, 0, sizeof(*s));
    snprintf(s->req, sizeof(s->req), "%s", req);
    snprintf(s->to, sizeof(s->to), "%s", n->from);
    s->until = bk_clock_mono_ms() + 2 * bk_conf_int(b->env.conf, BK_CONF_BOOTSTRAP_TIMEOUT_MS);
    char *save = NULL;
    for (char *p = strtok_r(tasks, ",", &save); p && s->ntasks < BATCH_MAX;
         p = strtok_r(NULL, ",", &save)) {
        int32_t t = bk_bootstrap_task_by_name(b, p);
        if (t < 0) {
            continue;
        }
        s->tasks[s->ntasks] = t;
        if (b->env.ask(b->env.opaque, t, req) != 0) {
            /* a view behind or ahead of the asker's (a move, a handoff): it asks again, of
             * the active then */
            bk_log_info("bootstrap: %s asks for a snapshot of %s, which is not active here",
                        n->from, p);
            s->got[s->ntasks] = 1;
        }
        s->ntasks++;
    }
    bk_log_info("bootstrap: %s asks for snapshots of %d task(s) (%s)", n->from, s->ntasks, req);
}

/* Answers a served request once every task of it has its snapshot made, or failed. */
static void answer(bk_bootstrap_t *b, served_t *s)
{
    char text[BK_MEMBER_NOTE_MAX], root[4096];
    const char *host = bk_conf_str(b->env.conf, BK_CONF_SSH_HOST);
    char hostbuf[256];
    int len, made = 0;

    for (int i = 0; i < s->ntasks; i++) {
        if (!s->got[i]) {
            return;
        }
        made += s->ids[i][0] != '\0';
    }
    if (!host) {
        const char *ep = bk_conf_str(b->env.conf, BK_CONF_ENDPOINT);
        snprintf(hostbuf, sizeof(hostbuf), "%.*s", ep ? (int)strcspn(ep, ":") : 9,
                 ep ? ep : "127.0.0.1");
        host = hostbuf;
    }
    if (!realpath(b->root, root)) {
        snprintf(root, sizeof(root), "%s", b->root);
    }
    len = snprintf(text, sizeof(text), "req=%s host=%s port=%lld root=%.1000s snaps=", s->req, host,
                   (long long)bk_conf_int(b->env.conf, BK_CONF_SSH_PORT), root);
    for (int i = 0; i < s->ntasks && len < (int)sizeof(text); i++) {
        if (s->ids[i][0]) {
            len += snprintf(text + len, sizeof(text) - (size_t)len, "%s:%s,",
                            b->env.names[s->tasks[i]], s->ids[i]);
        }
    }
    if (made == 0 || len >= (int)sizeof(text) ||
        bk_member_note(b->env.member, s->to, "snapshot-ready", text) != 0) {
        snprintf(text, sizeof(text), "req=%s why=%s", s->req,
                 made == 0 ? NO_SNAPSHOT " (see the active's log)"
                           : "the answer does not fit in a note");
        bk_member_note(b->env.member, s->to, "snapshot-failed", text);
        bk_bootstrap_drop_served(b, s);
        return;
    }
    s->until = bk_clock_mono_ms() + bk_conf_int(b->env.conf, BK_CONF_SNAPSHOT_TTL_MS);
}

void bk_bootstrap_serve(bk_bootstrap_t *b)
{
    bk_snapshot_made_t r;
    while (b->env.take(b->env.opaque, &r)) {
        served_t *s = bk_bootstrap_served_by_req(b, r.req);
        const char *id = r.ok ? strrchr(r.dir, '/') : NULL;
        int found = 0;
        for (int i = 0; s && i < s->ntasks; i++) {
            if (s->tasks[i] == r.id && !s->got[i]) {
                s->got[i] = 1;
                found = 1;
                if (id && bk_manifest_name_ok(id + 1)) {
                    snprintf(s->ids[i], sizeof(s->ids[i]), "%s", id + 1);
                }
                break;
            }
        }
        if (!found && r.ok) {
            bk_snapshot_remove(r.dir); /* nobody waits for it any more */
        }
        if (s) {
            answer(b, s);
        }
    }
}
