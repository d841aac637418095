/* reconcile.c - from what a node runs to what a view asks (reconcile.h). */
#include "cluster/reconcile.h"

#include <stdlib.h>
#include <string.h>


static int same_set(const int32_t *a, int32_t na, const int32_t *b, int32_t nb)
{
    return na == nb && (na == 0 || memcmp(a, b, (size_t)na * sizeof(*a)) == 0);
}

static int in_set(const int32_t *a, int32_t n, int32_t x)
{
    for (int32_t i = 0; i < n; i++) {
        if (a[i] == x) {
            return 1;
        }
    }
    return 0;
}

/* a \ b into out; returns its size. */
static int32_t set_minus(const int32_t *a, int32_t na, const int32_t *b, int32_t nb, int32_t *out)
{
    int32_t n = 0;
    for (int32_t i = 0; i < na; i++) {
        if (!in_set(b, nb, a[i])) {
            out[n++] = a[i];
        }
    }
    return n;
}

int bk_reconcile_actions_new(bk_reconcile_actions_t *a, int32_t ntasks)
{
    size_t n = (size_t)ntasks + 1;
    memset(a, 0, sizeof(*a));
    a->keep = calloc(3 * n, sizeof(int32_t)); /* actives + standbys + waiting */
    a->release = calloc(n, sizeof(int32_t));
    a->revoked = calloc(n, sizeof(int32_t));
    a->forget = calloc(2 * n, sizeof(int32_t));
    a->standbys = calloc(n, sizeof(int32_t));
    a->promoted = calloc(n, sizeof(int32_t));
    a->was_standby = calloc(n, 1);
    a->gained = calloc(n, sizeof(int32_t));
    a->running = calloc(n, sizeof(int32_t));
    if (!a->keep || !a->release || !a->revoked || !a->forget || !a->standbys || !a->promoted ||
        !a->was_standby || !a->gained || !a->running) {
        bk_reconcile_actions_free(a);
        return -1;
    }
    return 0;
}

void bk_reconcile_actions_free(bk_reconcile_actions_t *a)
{
    free(a->keep);
    free(a->release);
    free(a->revoked);
    free(a->forget);
    free(a->standbys);
    free(a->promoted);
    free(a->was_standby);
    free(a->gained);
    free(a->running);
    memset(a, 0, sizeof(*a));
}

void bk_reconcile_diff(const bk_member_view_t *view, const bk_reconcile_now_t *now,
                       bk_reconcile_actions_t *a)
{
    int lost = view->lost;
    const int32_t *want = lost ? NULL : view->running;
    const int32_t *want_sb = lost ? NULL : view->standby;
    const int32_t *waiting = lost ? NULL : view->waiting;
    int32_t nwant = lost ? 0 : view->nrunning, nwant_sb = lost ? 0 : view->nstandby;
    int32_t nwaiting = lost ? 0 : view->nwaiting;

    a->change_actives = !same_set(now->running, now->nrunning, want, nwant) || view->nrelease > 0;
    a->stop_standbys = !same_set(now->standing, now->nstanding, want_sb, nwant_sb);
    a->changed = a->change_actives || a->stop_standbys;
    a->log_unchanged = !a->changed && !lost && view->epoch != now->logged_epoch && view->epoch > 0;
    a->nkeep = a->nrelease = a->nrevoked = a->nforget = a->npromoted = a->ngained = 0;
    a->nstandbys = nwant_sb;
    a->nrunning = nwant;
    if (nwant_sb > 0) {
        memcpy(a->standbys, want_sb, (size_t)nwant_sb * sizeof(int32_t));
    }
    if (nwant > 0) {
        memcpy(a->running, want, (size_t)nwant * sizeof(int32_t));
    }
    memcpy(a->was_standby, now->was_standby, (size_t)now->ntasks);
    if (!a->changed) {
        return;
    }
    /* the DBs of tasks this node keeps (or is about to run: waiting for their release) stay
     * open for the new crew and standbys */
    for (int32_t i = 0; i < nwant; i++) {
        a->keep[a->nkeep++] = want[i];
    }
    for (int32_t i = 0; i < nwant_sb; i++) {
        a->keep[a->nkeep++] = want_sb[i];
    }
    for (int32_t i = 0; i < nwaiting; i++) {
        a->keep[a->nkeep++] = waiting[i];
    }
    if (view->nrelease > 0) {
        a->nrelease = view->nrelease;
        memcpy(a->release, view->release, (size_t)view->nrelease * sizeof(int32_t));
    }
    /* actives given up; their progress is forgotten unless they stay here as standbys */
    a->nrevoked = set_minus(now->running, now->nrunning, want, nwant, a->revoked);
    for (int32_t i = 0; i < a->nrevoked; i++) {
        if (!in_set(want_sb, nwant_sb, a->revoked[i])) {
            a->forget[a->nforget++] = a->revoked[i];
        }
    }
    /* standbys given up, unless they become actives here */
    for (int32_t i = 0; i < now->nstanding; i++) {
        int32_t t = now->standing[i];
        if (!in_set(want_sb, nwant_sb, t) && !in_set(want, nwant, t)) {
            a->forget[a->nforget++] = t;
        }
    }
    /* A task this node kept a standby of starts here: a promotion, whether in the same view
     * (a death) or after its previous owner released it (a warm-up move, where the view that
     * drops the standby comes before the one that starts the task). */
    a->ngained = set_minus(want, nwant, now->running, now->nrunning, a->gained);
    for (int32_t i = 0; i < a->ngained; i++) {
        if (now->was_standby[a->gained[i]]) {
            a->promoted[a->npromoted++] = a->gained[i];
        }
    }
    for (int32_t t = 0; t < now->ntasks; t++) {
        int kept = in_set(want_sb, nwant_sb, t);
        a->was_standby[t] = (uint8_t)(kept || (now->was_standby[t] && !in_set(want, nwant, t) &&
                                               in_set(waiting, nwaiting, t)));
    }
}
