/* member_checkpoint.c - checkpoints of the view on the control topic, so that a member's
 * start reads what the cluster is now, not the app's whole history (docs/cluster.md,
 * Checkpoints). The leader writes, every so often, a record holding the whole fold state as
 * it stood after the record at offset `last`: log time, the peers (with their join offsets,
 * incarnations, heartbeat times and progress), the current assignment and who holds each
 * task. It commits the record's offset under the app's group on the control partition. A
 * starting member reads that record, loads the state, and replays from last + 1: the
 * records between `last` and the checkpoint, the checkpoint itself (which the fold only
 * notes), and what follows. Loading then replaying gives exactly the view of a member that
 * folded everything from the first record: spec/01-unit/32-member_view_spec.lua compares
 * the two, byte for byte, through this encoding.
 *
 * Runs on the member thread under the member's lock, or on a bare view (member_ffi.c). */
#define _GNU_SOURCE

#include "cluster/member_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "base/log.h"
#include "base/wire.h"
#include "cluster/assigncodec.h"

#define CKPT_FORMAT 1
/* Peers a checkpoint may list (used or not): a bound on what a reader allocates. */
#define CKPT_MAX_PEERS (1 << 20)

/* -- Encoding ------------------------------------------------------------------------------ */

static void put_peer(bk_wire_buf_t *w, const peer_t *p)
{
    int32_t prev = -1;
    bk_wire_put_u8(w, (uint8_t)p->used);
    if (!p->used) {
        return;
    }
    bk_wire_put_str(w, p->id);
    bk_wire_put_str(w, p->rack);
    bk_wire_put_str(w, p->endpoint);
    bk_wire_put_uv(w, p->inc);
    bk_wire_put_uv(w, (uint64_t)p->threads);
    bk_wire_put_uv(w, (uint64_t)p->ntasks);
    bk_wire_put_uv(w, p->layout);
    bk_wire_put_uv(w, (uint64_t)p->state);
    bk_wire_put_sv(w, p->join_offset);
    bk_wire_put_sv(w, p->last_ts);
    bk_wire_put_sv(w, p->end_ts);
    bk_wire_put_uv(w, p->epoch);
    bk_wire_put_uv(w, (uint64_t)p->nprogress);
    for (int32_t j = 0; j < p->nprogress; j++) {
        const progress_t *g = &p->progress[j];
        bk_wire_put_uv(w, (uint64_t)(g->task - prev - 1));
        bk_wire_put_sv(w, g->offset);
        bk_wire_put_uv(w, (uint64_t)g->lag);
        bk_wire_put_sv(w, g->changed_ts);
        prev = g->task;
    }
}

int bk_member_checkpoint_encode(const bk_member_t *m, bk_wire_buf_t *w, char *errstr,
                                size_t errstr_size)
{
    bk_wire_put_uv(w, CKPT_FORMAT);
    bk_wire_put_sv(w, m->next_offset - 1);
    bk_wire_put_sv(w, m->log_time);
    bk_wire_put_uv(w, (uint64_t)m->session_ms);
    bk_wire_put_sv(w, m->ckpt_offset);
    bk_wire_put_sv(w, m->ckpt_log_time);
    bk_wire_put_uv(w, (uint64_t)m->ckpt_bytes);
    bk_wire_put_uv(w, (uint64_t)m->npeers);
    for (int32_t i = 0; i < m->npeers; i++) {
        put_peer(w, &m->peers[i]);
    }
    bk_wire_put_u8(w, m->cur != NULL);
    if (m->cur) {
        uint8_t *buf = NULL;
        size_t len = 0;
        if (bk_assigncodec_encode(m->cur, &buf, &len, errstr, errstr_size) != 0) {
            return -1;
        }
        bk_wire_put_uv(w, len);
        bk_wire_put(w, buf, len);
        free(buf);
        for (int32_t s = 0; s < m->cur->nnodes; s++) {
            bk_wire_put_uv(w, (uint64_t)(m->slot_peer[s] + 1));
            bk_wire_put_uv(w, m->slot_inc[s]);
        }
        for (int32_t t = 0; t < m->nown; t++) {
            bk_wire_put_uv(w, (uint64_t)(m->own[t] + 1));
        }
    }
    /* the list of moves, last: a reader of checkpoints from before it reads none */
    bk_wire_put_str(w, m->gens);
    bk_wire_put_uv(w, (uint64_t)m->ngens);
    /* the drained tasks, after it, when there are any (by difference: a sorted list); so a
     * checkpoint without them ends as before, and one cut short never reads as whole */
    if (m->ndrained > 0) {
        bk_wire_put_uv(w, (uint64_t)m->ndrained);
    }
    for (int32_t i = 0, prev = -1; i < m->ndrained; prev = m->drained[i++]) {
        bk_wire_put_uv(w, (uint64_t)(m->drained[i] - prev - 1));
    }
    if (w->oom) {
        snprintf(errstr, errstr_size, "out of memory");
        return -1;
    }
    return 0;
}

/* -- Decoding ------------------------------------------------------------------------------ */

static void get_id(bk_wire_reader_t *r, char *out)
{
    size_t n = 0;
    const char *s = bk_wire_get_str(r, BK_MEMBER_MAX_ID, &n);
    memcpy(out, s, r->fault ? 0 : n);
    out[r->fault ? 0 : n] = '\0';
}

static int get_peer(bk_wire_reader_t *r, peer_t *p)
{
    int32_t task = -1;
    uint64_t n;
    memset(p, 0, sizeof(*p));
    p->used = bk_wire_get_u8(r) != 0;
    if (!p->used) {
        return r->fault ? -1 : 0;
    }
    get_id(r, p->id);
    p->id_hash = bk_member_id_hash(p->id);
    get_id(r, p->rack);
    get_id(r, p->endpoint);
    p->inc = bk_wire_get_uv(r);
    p->threads = (int32_t)bk_wire_get_uvmax(r, 65536, "a peer's thread count is too large");
    p->ntasks = (int32_t)bk_wire_get_uvmax(r, BK_ASSIGNCODEC_MAX_TASKS, "task count too large");
    p->layout = (uint32_t)bk_wire_get_uv(r);
    p->state = (int)bk_wire_get_uvmax(r, BK_MEMBER_REPLACED, "unknown peer state");
    p->join_offset = bk_wire_get_sv(r);
    p->last_ts = bk_wire_get_sv(r);
    p->end_ts = bk_wire_get_sv(r);
    p->epoch = bk_wire_get_uv(r);
    /* at least 4 bytes an entry: never allocate for more than the bytes left could hold */
    n = bk_wire_get_uvmax(r, r->left / 4, "a progress list longer than the record");
    if (r->fault || !p->id[0]) {
        return -1;
    }
    if (n > 0 && !(p->progress = calloc((size_t)n, sizeof(*p->progress)))) {
        return -1;
    }
    p->cap_progress = (int32_t)n;
    for (uint64_t j = 0; j < n; j++) {
        progress_t *g = &p->progress[j];
        uint64_t d = bk_wire_get_uvmax(r, BK_ASSIGNCODEC_MAX_TASKS, "task out of range");
        task += (int32_t)d + 1;
        g->task = task;
        g->offset = bk_wire_get_sv(r);
        g->lag = (int64_t)bk_wire_get_uvmax(r, INT64_MAX, "negative lag");
        g->changed_ts = bk_wire_get_sv(r);
        if (r->fault || task >= BK_ASSIGNCODEC_MAX_TASKS) {
            return -1;
        }
    }
    p->nprogress = (int32_t)n;
    return 0;
}

static void free_peers(peer_t *peers, int32_t n)
{
    for (int32_t i = 0; peers && i < n; i++) {
        free(peers[i].progress);
        free(peers[i].spare);
    }
    free(peers);
}

void bk_member_view_reset(bk_member_t *m)
{
    free_peers(m->peers, m->npeers);
    m->peers = NULL;
    m->npeers = m->cap_peers = 0;
    bk_member_free_assignment(m);
    m->nown = 0;
    m->epoch = 0;
    m->log_time = 0;
    m->next_offset = 0;
    m->ckpt_offset = -1;
    m->ckpt_log_time = 0;
    m->ckpt_bytes = 0;
    m->gens[0] = '\0';
    m->ngens = 0;
    m->ndrained = 0;
    m->expire_at = INT64_MIN;
    m->version++;
}

int bk_member_checkpoint_load(bk_member_t *m, const void *payload, size_t len, int64_t *last,
                              char *errstr, size_t errstr_size)
{
    rec_t rec;
    bk_wire_reader_t r;
    peer_t *peers = NULL;
    bk_assigncodec_t *cur = NULL;
    bk_member_tables_t t = {0};
    int32_t npeers = 0, ngens = 0, ndrained = 0, *drained = NULL;
    char gens[GENS_MAX + 1] = "";
    int64_t at, log_time, ckpt_offset, ckpt_log_time, ckpt_bytes;
    int session_ms;
    const char *why = "malformed";

    if (bk_member_rec_parse(payload, len, &rec) != 0 || rec.type != REC_CHECKPOINT) {
        snprintf(errstr, errstr_size, "not a checkpoint record");
        return -1;
    }
    bk_wire_reader_init(&r, rec.payload, rec.payload_len);
    if (bk_wire_get_uv(&r) != CKPT_FORMAT) {
        snprintf(errstr, errstr_size, "a checkpoint of an unknown format");
        return -1;
    }
    at = bk_wire_get_sv(&r);
    log_time = bk_wire_get_sv(&r);
    session_ms = (int)bk_wire_get_uvmax(&r, INT32_MAX, "session timeout too large");
    ckpt_offset = bk_wire_get_sv(&r);
    ckpt_log_time = bk_wire_get_sv(&r);
    ckpt_bytes = (int64_t)bk_wire_get_uvmax(&r, INT64_MAX, "byte count too large");
    /* at least a byte a peer */
    npeers = (int32_t)bk_wire_get_uvmax(&r, r.left < CKPT_MAX_PEERS ? r.left : CKPT_MAX_PEERS,
                                        "more peers than the record holds");
    if (r.fault || at < -1) {
        goto fail;
    }
    if (npeers > 0 && !(peers = calloc((size_t)npeers, sizeof(*peers)))) {
        why = "out of memory";
        goto fail;
    }
    for (int32_t i = 0; i < npeers; i++) {
        if (get_peer(&r, &peers[i]) != 0) {
            goto fail;
        }
    }
    if (bk_wire_get_u8(&r)) {
        /* the length first, then the check: r.left before the read would count the
         * length's own bytes (found by fuzz/checkpoint.c: a read past the record) */
        uint64_t n = bk_wire_get_uv(&r);
        char err[256];
        if (!r.fault && n > r.left) {
            r.fault = "an assignment longer than the record";
        }
        if (r.fault) {
            goto fail;
        }
        if (!(cur = bk_assigncodec_decode(r.p, (size_t)n, err, sizeof(err)))) {
            snprintf(errstr, errstr_size, "its assignment cannot be read: %s", err);
            goto out;
        }
        r.p += n;
        r.left -= n;
        if (bk_member_tables_alloc(m, cur, &t) != 0) {
            why = "out of memory";
            goto fail;
        }
        /* Every index names a used peer: the rules never look up another. */
        for (int32_t s = 0; s < cur->nnodes; s++) {
            t.slot_peer[s] =
                (int32_t)bk_wire_get_uvmax(&r, (uint64_t)npeers, "slot's peer") - 1;
            t.slot_inc[s] = bk_wire_get_uv(&r);
            if (t.slot_peer[s] >= 0 && !peers[t.slot_peer[s]].used) {
                goto fail;
            }
        }
        for (int32_t i = 0; i < cur->ntasks; i++) {
            t.own[i] = (int32_t)bk_wire_get_uvmax(&r, (uint64_t)npeers, "holder") - 1;
            if (t.own[i] >= 0 && !peers[t.own[i]].used) {
                goto fail;
            }
        }
    }
    if (!r.fault && r.left > 0) {
        size_t n;
        const char *s = bk_wire_get_str(&r, GENS_MAX, &n);
        ngens = (int32_t)bk_wire_get_uvmax(&r, GENS_MAX, "move count");
        if (!r.fault) {
            memcpy(gens, s, n);
            gens[n] = '\0';
        }
    }
    if (!r.fault && r.left > 0) {
        /* at least a byte a task */
        ndrained = (int32_t)bk_wire_get_uvmax(&r, r.left, "more drained tasks than the record "
                                                         "holds");
        if (!r.fault && ndrained > 0 && !(drained = malloc((size_t)ndrained * sizeof(int32_t)))) {
            why = "out of memory";
            goto fail;
        }
        for (int32_t i = 0, prev = -1; !r.fault && i < ndrained; i++) {
            uint64_t d = bk_wire_get_uvmax(&r, BK_ASSIGNCODEC_MAX_TASKS, "drained task");
            drained[i] = prev = prev + 1 + (int32_t)d;
            if (prev >= BK_ASSIGNCODEC_MAX_TASKS) {
                r.fault = "drained task";
            }
        }
    }
    if (r.fault) {
        goto fail;
    }
    /* Valid as a whole: it replaces the view. */
    bk_member_view_reset(m);
    m->peers = peers;
    m->npeers = m->cap_peers = npeers;
    bk_member_tables_take(m, cur, &t);
    m->log_time = log_time;
    m->next_offset = at + 1;
    m->ckpt_offset = ckpt_offset;
    m->ckpt_log_time = ckpt_log_time;
    m->ckpt_bytes = ckpt_bytes;
    memcpy(m->gens, gens, sizeof(gens));
    m->ngens = ngens;
    free(m->drained);
    m->drained = drained;
    m->ndrained = m->cap_drained = ndrained;
    if (m->session_announced && session_ms > 0) {
        m->session_ms = session_ms;
    }
    m->expire_at = INT64_MIN;
    m->version++;
    *last = at;
    return 0;

fail:
    snprintf(errstr, errstr_size, "%s%s%s", why, r.fault ? ": " : "", r.fault ? r.fault : "");
out:
    free(drained);
    free_peers(peers, npeers);
    bk_assigncodec_destroy(cur);
    bk_member_tables_free(&t);
    return -1;
}

/* -- Writing (the leader) ------------------------------------------------------------------ */

void bk_member_maybe_checkpoint(bk_member_t *m, int64_t now)
{
    bk_wire_buf_t w = {0};
    char err[256];
    int64_t since = m->next_offset - 1 - m->ckpt_offset;
    int64_t bytes_due = m->ckpt_len * CKPT_BYTES_FACTOR;

    if (m->ckpt_pending || !m->producer || since <= 1) {
        return;
    }
    /* Due when the records since the last one outweigh it CKPT_BYTES_FACTOR times (so the
     * checkpoints are at most 1 / CKPT_BYTES_FACTOR of the log, and a start reads at most
     * that many checkpoints' worth of records), when log time has moved CKPT_MS, or at once
     * when the log has no checkpoint this member knows of (a start then waits for one). */
    if (bytes_due < CKPT_MIN_BYTES) {
        bytes_due = CKPT_MIN_BYTES;
    }
    if (m->ckpt_offset >= 0 && m->ckpt_bytes < bytes_due &&
        m->log_time - m->ckpt_log_time < m->ckpt_ms) {
        return;
    }
    bk_member_w_header(&w, m, REC_CHECKPOINT);
    if (bk_member_checkpoint_encode(m, &w, err, sizeof(err)) != 0) {
        free(w.p);
        bk_log_error("member %s: cannot write a checkpoint: %s", m->node_id, err);
        return;
    }
    if (w.len > CKPT_MAX_BYTES) {
        if (now - m->ckpt_warned > 60000) {
            bk_log_warn("member %s: a checkpoint of the control topic would take %zu bytes, more"
                        " than the %d a record may: starts read the history instead",
                        m->node_id, w.len, CKPT_MAX_BYTES);
            m->ckpt_warned = now;
        }
        free(w.p);
        return;
    }
    m->ckpt_len = (int64_t)w.len;
    if (bk_member_produce(m, REC_CHECKPOINT, &w, now) == 0) {
        m->ckpt_pending = 1;
        bk_log_debug("member %s: checkpoint of the view after offset %" PRId64 ", %zu bytes",
                     m->node_id, m->next_offset - 1, (size_t)m->ckpt_len);
    }
}

static void committed(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                      rd_kafka_topic_partition_list_t *offsets, void *opaque)
{
    bk_member_t *m = opaque;
    (void)rk;
    if (!err && offsets && offsets->cnt > 0) {
        err = offsets->elems[0].err;
    }
    if (err) {
        bk_log_warn("member %s: a checkpoint's offset was not committed: %s (starts read from"
                    " the one before)",
                    m->node_id, rd_kafka_err2str(err));
    }
}

/* Its delivery report: where a member starts from now on. The commit's result comes on a
 * queue of its own that the member thread serves (bk_member_serve_commits), so that a
 * failure is said: a checkpoint not committed leaves starts reading from the one before. */
void bk_member_checkpoint_delivered(bk_member_t *m, const rd_kafka_message_t *msg)
{
    rd_kafka_topic_partition_list_t *list;
    rd_kafka_resp_err_t err;

    m->ckpt_pending = 0;
    if (msg->err || !m->consumer) {
        return;
    }
    if (m->commit_q && m->commit_rk != m->consumer) {
        rd_kafka_queue_destroy(m->commit_q);
        m->commit_q = NULL;
    }
    if (!m->commit_q) {
        m->commit_q = rd_kafka_queue_new(m->consumer);
        m->commit_rk = m->consumer;
    }
    list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, m->topic, 0)->offset = msg->offset;
    err = rd_kafka_commit_queue(m->consumer, list, m->commit_q, committed, m);
    rd_kafka_topic_partition_list_destroy(list);
    if (err) {
        bk_log_warn("member %s: cannot commit checkpoint offset %" PRId64 ": %s", m->node_id,
                    msg->offset, rd_kafka_err2str(err));
    }
}

void bk_member_serve_commits(bk_member_t *m)
{
    if (m->commit_q) {
        rd_kafka_queue_poll_callback(m->commit_q, 0);
    }
}

void bk_member_drop_commits(bk_member_t *m)
{
    if (m->commit_q) {
        rd_kafka_queue_destroy(m->commit_q);
        m->commit_q = NULL;
        m->commit_rk = NULL;
    }
}
