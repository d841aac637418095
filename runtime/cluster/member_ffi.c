/* member_ffi.c - the membership view as specs drive it through FFI (base/ffi_spec.h): an
 * observer's view fed records by hand (bk_member_apply_record, no Kafka, no clock), records
 * encoded as a member writes them, and the view read back. Any thread; not on a record
 * path. */
#include "cluster/member_internal.h"

#include <stdlib.h>
#include <string.h>

#include "base/conf.h"
#include "base/ffi_spec.h"
#include "base/wire.h"

/* An observer and the latest copy of its view. */
typedef struct bk_member_spec_s {
    bk_conf_t *conf;
    bk_member_t *m;
    bk_member_view_t view;
} bk_member_spec_t;

bk_member_spec_t *bk_ffi_member_observer_new(int32_t session_ms)
{
    bk_member_spec_t *s = calloc(1, sizeof(*s));
    bk_member_conf_t mc;
    char err[256];

    if (!s || !(s->conf = bk_conf_new())) {
        free(s);
        return NULL;
    }
    memset(&mc, 0, sizeof(mc));
    mc.conf = s->conf;
    mc.app_id = "spec";
    mc.observe = 1;
    mc.session_timeout_ms = session_ms;
    if (!(s->m = bk_member_new_view(&mc, err, sizeof(err)))) {
        bk_conf_destroy(s->conf);
        free(s);
        return NULL;
    }
    return s;
}

void bk_ffi_member_observer_free(bk_member_spec_t *s)
{
    if (s) {
        bk_member_view_clear(&s->view);
        bk_member_destroy(s->m);
        bk_conf_destroy(s->conf);
        free(s);
    }
}

/* Applies one record and copies the view. */
int bk_ffi_member_feed(bk_member_spec_t *s, const char *rec, size_t len, int64_t offset, int64_t ts)
{
    pthread_mutex_lock(&s->m->lock);
    bk_member_apply_record(s->m, rec, len, offset, ts);
    pthread_mutex_unlock(&s->m->lock);
    return bk_member_poll_force(s->m, &s->view) < 0 ? BK_FFI_ERR : BK_FFI_OK;
}

int bk_ffi_member_view(bk_member_spec_t *s, int32_t *npeers, int32_t *leader, uint64_t *epoch,
                       int32_t *ntasks)
{
    *npeers = s->view.npeers;
    *leader = s->view.leader;
    *epoch = s->view.epoch;
    *ntasks = s->view.ntasks;
    return BK_FFI_OK;
}

const char *bk_ffi_member_peer(bk_member_spec_t *s, int32_t i, int32_t *state, uint64_t *inc)
{
    if (i < 0 || i >= s->view.npeers) {
        return NULL;
    }
    *state = s->view.peers[i].state;
    *inc = s->view.peers[i].incarnation;
    return s->view.peers[i].id;
}

int32_t bk_ffi_member_task(bk_member_spec_t *s, int32_t t, int32_t *holder)
{
    if (t < 0 || t >= s->view.ntasks) {
        *holder = -1;
        return -1;
    }
    *holder = s->view.holder[t];
    return s->view.owner[t];
}

/* The view's state as a checkpoint holds it (member_checkpoint.c), without the record
 * header: two views with the same bytes follow the same rules. */
int bk_ffi_member_state(bk_member_spec_t *s, char **buf, size_t *len)
{
    bk_wire_buf_t w = {0};
    char err[256];
    int rc;
    pthread_mutex_lock(&s->m->lock);
    rc = bk_member_checkpoint_encode(s->m, &w, err, sizeof(err));
    pthread_mutex_unlock(&s->m->lock);
    if (rc != 0 || w.oom) {
        free(w.p);
        return BK_FFI_ERR;
    }
    *buf = (char *)w.p;
    *len = w.len;
    return BK_FFI_OK;
}

/* Replaces the view with a checkpoint record's; *last: the offset it describes. */
int bk_ffi_member_load(bk_member_spec_t *s, const char *rec, size_t len, int64_t *last,
                       const char **err)
{
    static __thread char msg[256];
    int rc;
    pthread_mutex_lock(&s->m->lock);
    rc = bk_member_checkpoint_load(s->m, rec, len, last, msg, sizeof(msg));
    pthread_mutex_unlock(&s->m->lock);
    *err = rc == 0 ? NULL : msg;
    if (rc != 0) {
        return BK_FFI_ERR;
    }
    return bk_member_poll_force(s->m, &s->view) < 0 ? BK_FFI_ERR : BK_FFI_OK;
}

/* -- Records as a member writes them (member_leader.c) ---------------------------------- */

static void header(bk_wire_buf_t *w, const char *id, uint64_t inc, int type)
{
    bk_wire_put_u8(w, WIRE_MAGIC);
    bk_wire_put_u8(w, WIRE_VERSION);
    bk_wire_put_u8(w, (uint8_t)type);
    bk_wire_put_str(w, id);
    bk_wire_put_uv(w, inc);
}

static int done(bk_wire_buf_t *w, char **buf, size_t *len)
{
    if (w->oom) {
        free(w->p);
        return BK_FFI_ERR;
    }
    *buf = (char *)w->p;
    *len = w->len;
    return BK_FFI_OK;
}

int bk_ffi_member_rec_heartbeat(const char *id, uint64_t inc, const char *rack, int32_t threads,
                                int32_t ntasks, uint64_t epoch, int32_t session_ms, char **buf,
                                size_t *len)
{
    bk_wire_buf_t w = {0};
    header(&w, id, inc, REC_HEARTBEAT);
    bk_wire_put_str(&w, rack ? rack : "");
    bk_wire_put_str(&w, "");
    bk_wire_put_uv(&w, (uint64_t)threads);
    bk_wire_put_uv(&w, (uint64_t)ntasks);
    bk_wire_put_uv(&w, 1); /* layout: the same for every member of a spec */
    bk_wire_put_uv(&w, epoch);
    bk_wire_put_uv(&w, 0); /* no progress */
    bk_wire_put_uv(&w, 1000);
    bk_wire_put_uv(&w, (uint64_t)session_ms);
    return done(&w, buf, len);
}

/* A heartbeat reporting progress: n tasks (ascending) at their offsets, lag 0. */
int bk_ffi_member_rec_progress(const char *id, uint64_t inc, const int32_t *tasks,
                               const int64_t *offsets, int32_t n, int32_t session_ms, char **buf,
                               size_t *len)
{
    bk_wire_buf_t w = {0};
    int32_t prev = -1;
    header(&w, id, inc, REC_HEARTBEAT);
    bk_wire_put_str(&w, "");
    bk_wire_put_str(&w, "");
    bk_wire_put_uv(&w, 1);
    bk_wire_put_uv(&w, 4);
    bk_wire_put_uv(&w, 1);
    bk_wire_put_uv(&w, 0);
    bk_wire_put_uv(&w, (uint64_t)n);
    for (int32_t i = 0; i < n; i++) {
        bk_wire_put_uv(&w, (uint64_t)(tasks[i] - prev - 1));
        bk_wire_put_sv(&w, offsets[i]);
        bk_wire_put_uv(&w, 0);
        prev = tasks[i];
    }
    bk_wire_put_uv(&w, 1000);
    bk_wire_put_uv(&w, (uint64_t)session_ms);
    return done(&w, buf, len);
}

/* A checkpoint record by `id` holding the view of s. */
int bk_ffi_member_rec_checkpoint(bk_member_spec_t *s, const char *id, uint64_t inc, char **buf,
                                 size_t *len)
{
    bk_wire_buf_t w = {0};
    char err[256];
    int rc;
    header(&w, id, inc, REC_CHECKPOINT);
    pthread_mutex_lock(&s->m->lock);
    rc = bk_member_checkpoint_encode(s->m, &w, err, sizeof(err));
    pthread_mutex_unlock(&s->m->lock);
    if (rc != 0) {
        free(w.p);
        return BK_FFI_ERR;
    }
    return done(&w, buf, len);
}

int bk_ffi_member_rec_leave(const char *id, uint64_t inc, char **buf, size_t *len)
{
    bk_wire_buf_t w = {0};
    header(&w, id, inc, REC_LEAVE);
    return done(&w, buf, len);
}

int bk_ffi_member_rec_assign(const char *id, uint64_t inc, const char *payload, size_t plen,
                             char **buf, size_t *len)
{
    bk_wire_buf_t w = {0};
    header(&w, id, inc, REC_ASSIGN);
    bk_wire_put(&w, payload, plen);
    return done(&w, buf, len);
}

int bk_ffi_member_rec_release(const char *id, uint64_t inc, uint64_t epoch, const int32_t *tasks,
                              int32_t n, char **buf, size_t *len)
{
    bk_wire_buf_t w = {0};
    int32_t prev = -1;
    header(&w, id, inc, REC_RELEASE);
    bk_wire_put_uv(&w, epoch);
    bk_wire_put_uv(&w, (uint64_t)n);
    for (int32_t i = 0; i < n; i++) {
        bk_wire_put_uv(&w, (uint64_t)(tasks[i] - prev - 1));
        prev = tasks[i];
    }
    return done(&w, buf, len);
}

int bk_ffi_member_rec_generation(const char *id, uint64_t inc, int32_t after, int32_t sub,
                                 int32_t tasks, char **buf, size_t *len)
{
    bk_wire_buf_t w = {0};
    header(&w, id, inc, REC_GENERATION);
    bk_wire_put_uv(&w, (uint64_t)after);
    bk_wire_put_uv(&w, (uint64_t)sub);
    bk_wire_put_uv(&w, (uint64_t)tasks);
    return done(&w, buf, len);
}

int bk_ffi_member_rec_drained(const char *id, uint64_t inc, int32_t task, char **buf,
                              size_t *len)
{
    bk_wire_buf_t w = {0};
    header(&w, id, inc, REC_DRAINED);
    bk_wire_put_uv(&w, (uint64_t)task);
    return done(&w, buf, len);
}

const int32_t *bk_ffi_member_drained(bk_member_spec_t *s, int32_t *n)
{
    *n = s->view.ndrained;
    return s->view.drained;
}

const char *bk_ffi_member_generations(bk_member_spec_t *s, int32_t *n)
{
    *n = s->view.ngenerations;
    return s->view.generations;
}
