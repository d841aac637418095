/* member_say.c - what a node tells its app's members through the member (member.h): its
 * replicas' progress, the tasks it may be given, the tasks it released, a drained task, a
 * move, and notes between nodes; and the notes it was sent. Each is queued for the member
 * thread, which writes it to the control topic (member_leader.c). Any thread. */
#define _GNU_SOURCE

#include "cluster/member_internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/wire.h"
#include "cluster/assign.h"
#include "cluster/assigncodec.h"
#include "devbroker/devctl.h"
#include "engine/kafka.h"

void bk_member_set_progress(bk_member_t *member, int32_t task, int64_t offset, int64_t lag)
{
    bk_member_t *m = member;
    int32_t i;

    pthread_mutex_lock(&m->plock);
    for (i = 0; i < m->nprog && m->prog[i].task != task; i++) {
    }
    if (lag < 0) {
        if (i < m->nprog) {
            m->prog[i] = m->prog[--m->nprog];
        }
    } else if (i < m->nprog) {
        m->prog[i].offset = offset;
        m->prog[i].lag = lag;
    } else if (task >= 0) { /* (a task the leader does not know yet is not counted) */
        if (m->nprog == m->cap_prog) {
            int32_t cap = m->cap_prog ? m->cap_prog * 2 : 16;
            progress_t *p = realloc(m->prog, (size_t)cap * sizeof(*p));
            if (!p) {
                pthread_mutex_unlock(&m->plock);
                return; /* reported as unknown: the assignor ranks it last */
            }
            m->prog = p;
            m->cap_prog = cap;
        }
        m->prog[m->nprog++] = (progress_t){task, offset, lag, 0};
    }
    pthread_mutex_unlock(&m->plock);
}

int bk_member_set_tasks(bk_member_t *member, int32_t ntasks, const uint8_t *assignable,
                        const int32_t *origin)
{
    bk_member_t *m = member;
    uint8_t *mask = NULL;
    int32_t *origins = NULL;

    if (ntasks > BK_ASSIGNCODEC_MAX_TASKS) {
        return -1;
    }
    if ((assignable && !(mask = malloc((size_t)ntasks + 1))) ||
        (origin && !(origins = malloc(((size_t)ntasks + 1) * sizeof(*origins))))) {
        free(mask);
        return -1;
    }
    if (mask) {
        memcpy(mask, assignable, (size_t)ntasks);
    }
    if (origins) {
        memcpy(origins, origin, (size_t)ntasks * sizeof(*origins));
    }
    pthread_mutex_lock(&m->lock);
    if (ntasks < m->ntasks) {
        pthread_mutex_unlock(&m->lock);
        free(mask);
        free(origins);
        return -1;
    }
    free(m->assignable);
    m->assignable = mask;
    free(m->origin);
    m->origin = origins;
    m->ntasks = ntasks;
    m->version++; /* the view's stable flag may change */
    pthread_mutex_unlock(&m->lock);
    return 0;
}

int bk_member_released(bk_member_t *member, uint64_t epoch, const int32_t *tasks, int32_t n)
{
    bk_member_t *m = member;
    int32_t self, count = 0, prev = -1;
    int32_t *list = malloc(((size_t)n + 1) * sizeof(*list));
    bk_wire_buf_t w = {0};
    int rc = 0;

    if (!list) {
        return -1;
    }
    pthread_mutex_lock(&m->lock);
    for (int32_t k = 0; k < n; k++) {
        if (tasks[k] >= 0 && tasks[k] < m->nown) {
            m->told[tasks[k]] = 0;
        }
    }
    if (m->lost) {
        /* Nothing to publish: the node has stopped them, which is what rejoining waits for. */
        for (int32_t k = 0; k < n; k++) {
            for (int32_t i = 0; i < m->nlost; i++) {
                if (m->lost_tasks[i] == tasks[k]) {
                    m->lost_tasks[i] = m->lost_tasks[--m->nlost];
                    m->version++;
                    break;
                }
            }
        }
        goto done;
    }
    self = bk_member_self_peer(m);
    for (int32_t k = 0; k < n && self >= 0; k++) {
        int32_t t = tasks[k];
        if (t >= 0 && t < m->nown && m->own[t] == self && !m->rel_sent[t]) {
            list[count++] = t;
        }
    }
    if (count == 0) {
        goto done;
    }
    qsort(list, (size_t)count, sizeof(*list), bk_member_cmp_i32);
    bk_member_w_header(&w, m, REC_RELEASE);
    bk_wire_put_uv(&w, epoch);
    bk_wire_put_uv(&w, (uint64_t)count);
    for (int32_t k = 0; k < count; k++) {
        bk_wire_put_uv(&w, (uint64_t)(list[k] - prev - 1));
        prev = list[k];
    }
    if (bk_member_produce(m, REC_RELEASE, &w, bk_clock_wall_ms()) != 0) {
        rc = -1;
        goto done;
    }
    for (int32_t k = 0; k < count; k++) {
        m->rel_sent[list[k]] = 1;
    }
    m->version++;
    bk_log_debug("member %s: released %d tasks of epoch %" PRIu64, m->node_id, count, epoch);

done:
    pthread_mutex_unlock(&m->lock);
    free(list);
    return rc;
}

static void put_note(bk_wire_buf_t *w, const char *to, const char *kind, const char *text)
{
    bk_wire_put_str(w, to ? to : "");
    bk_wire_put_str(w, kind);
    bk_wire_put_str(w, text ? text : "");
}

void bk_member_note_word(const char *text, const char *key, char *out, size_t size)
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

int bk_member_note(bk_member_t *member, const char *to, const char *kind, const char *text)
{
    bk_member_t *m = member;
    bk_wire_buf_t w = {0};
    int rc;
    if (m->observe || strlen(kind) > BK_MEMBER_MAX_ID || (to && strlen(to) > BK_MEMBER_MAX_ID) ||
        (text && strlen(text) > BK_MEMBER_NOTE_MAX)) {
        return -1;
    }
    pthread_mutex_lock(&m->lock);
    bk_member_w_header(&w, m, REC_NOTE);
    put_note(&w, to, kind, text);
    rc = bk_member_produce(m, REC_NOTE, &w, bk_clock_wall_ms());
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int bk_member_add_generation(bk_member_t *member, int32_t sub, int32_t tasks, int32_t after)
{
    bk_member_t *m = member;
    bk_wire_buf_t w = {0};
    int rc = -1;
    if (m->observe || sub < 0 || tasks < 1 || tasks > 4096) {
        return -1;
    }
    pthread_mutex_lock(&m->lock);
    if (after == m->ngens) {
        bk_member_w_header(&w, m, REC_GENERATION);
        bk_wire_put_uv(&w, (uint64_t)after);
        bk_wire_put_uv(&w, (uint64_t)sub);
        bk_wire_put_uv(&w, (uint64_t)tasks);
        rc = bk_member_produce(m, REC_GENERATION, &w, bk_clock_wall_ms());
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int bk_member_drained(bk_member_t *member, int32_t task)
{
    bk_member_t *m = member;
    bk_wire_buf_t w = {0};
    int rc;
    if (m->observe || task < 0) {
        return -1;
    }
    pthread_mutex_lock(&m->lock);
    bk_member_w_header(&w, m, REC_DRAINED);
    bk_wire_put_uv(&w, (uint64_t)task);
    rc = bk_member_produce(m, REC_DRAINED, &w, bk_clock_wall_ms());
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int bk_member_note_encode(const char *from, const char *to, const char *kind, const char *text,
                          uint8_t **buf, size_t *len)
{
    bk_wire_buf_t w = {0};
    if (strlen(from) > BK_MEMBER_MAX_ID || strlen(kind) > BK_MEMBER_MAX_ID ||
        (to && strlen(to) > BK_MEMBER_MAX_ID) || (text && strlen(text) > BK_MEMBER_NOTE_MAX)) {
        return -1;
    }
    bk_wire_put_u8(&w, WIRE_MAGIC);
    bk_wire_put_u8(&w, WIRE_VERSION);
    bk_wire_put_u8(&w, REC_NOTE);
    bk_wire_put_str(&w, from);
    bk_wire_put_uv(&w, bk_member_make_incarnation());
    put_note(&w, to, kind, text);
    if (w.oom) {
        free(w.p);
        return -1;
    }
    *buf = w.p;
    *len = w.len;
    return 0;
}

int bk_member_take_note(bk_member_t *member, bk_member_note_t *note)
{
    bk_member_t *m = member;
    int got = 0;
    pthread_mutex_lock(&m->lock);
    if (m->nnotes > 0) {
        *note = m->notes[0];
        memmove(m->notes, m->notes + 1, (size_t)(m->nnotes - 1) * sizeof(*m->notes));
        m->nnotes--;
        got = 1;
    }
    pthread_mutex_unlock(&m->lock);
    return got;
}
