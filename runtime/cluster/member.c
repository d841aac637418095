/* member.c - a member's life (join, lost, rejoin), its thread, and the API of member.h
 * but what a node says through it (member_say.c). The records are in member_record.c, the
 * view in member_view.c, what it writes and the leader's duty in member_leader.c, view
 * copies in member_copy.c. */
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
#include "base/events.h"
#include "base/log.h"
#include "base/wire.h"
#include "cluster/assign.h"
#include "cluster/assigncodec.h"
#include "devbroker/devctl.h"
#include "engine/kafka.h"

/* -- This member's life: join, lost, rejoin (docs/cluster.md, Lost) ------------------------ */

static void become_lost(bk_member_t *m, const char *why, int64_t now)
{
    int32_t self = bk_member_peer_find(m, m->node_id);
    int64_t lo = 0, hi = 0;

    m->lost = 1;
    m->lost_at = now;
    m->nlost = 0;
    if (m->lease) {
        atomic_store(m->lease, 0); /* nothing more is processed or committed */
    }
    /* What the node may be running: what a view told it to run and it has not released,
     * and whatever else this incarnation still holds (the log may have ended it already). */
    for (int32_t t = 0; t < m->nown; t++) {
        if (m->told[t] || (self >= 0 && m->peers[self].inc == m->inc && m->own[t] == self)) {
            m->lost_tasks[m->nlost++] = t;
        }
    }
    m->version++;
    rd_kafka_get_watermark_offsets(m->consumer, m->topic, 0, &lo, &hi);
    {
        char w[600];
        bk_events_emit("lost", "\"why\":%s,\"held\":%d", bk_events_str(w, sizeof(w), why),
                       m->nlost);
    }
    bk_log_warn("member %s: lost (%s): stop every active task (%d held); read up to offset"
                " %" PRId64 " of %" PRId64 ", log time %" PRId64 " ms behind the clock",
                m->node_id, why, m->nlost, m->next_offset, hi, now - m->log_time);
}

static void check_self(bk_member_t *m, int64_t now, int caught_up)
{
    int32_t self = bk_member_self_peer(m);
    int64_t limit = m->session_ms - m->hb_ms;

    if (m->lost) {
        if (m->nlost == 0 && caught_up && !m->error && now >= m->lost_at + m->backoff) {
            uint64_t inc = bk_member_make_incarnation();
            m->inc = inc > m->inc ? inc : m->inc + 1;
            m->lost = 0;
            m->joined_once = 0;
            m->first_hb = 0;
            m->join_ts = 0;
            m->next_hb = now;
            m->backoff =
                m->backoff * 2 < 8 * (int64_t)m->session_ms ? m->backoff * 2 : 8 * m->session_ms;
            m->version++;
            bk_log_info("member %s: rejoining as incarnation %" PRIu64, m->node_id, m->inc);
        }
        return;
    }
    if (m->joined_once) {
        int32_t other = bk_member_peer_find(m, m->node_id);
        if (self < 0 && bk_member_peer_alive(m, other) && m->peers[other].inc > m->inc) {
            /* Rejoining would replace it, and it us, for ever. */
            m->error = "another member uses this node id";
            become_lost(m, m->error, now);
        } else if (self < 0) {
            become_lost(m, "the log ended this incarnation", now);
        } else if (now - m->peers[self].last_ts > limit) {
            become_lost(m, "own heartbeats not seen back in time", now);
        }
    } else if (m->first_hb && now - m->first_hb > limit) {
        become_lost(m, "own heartbeats never seen back", now);
    }
}

/* The node's lease (bk_member_set_lease): while its own latest heartbeat in the log is at
 * most a session less a heartbeat old, no other member can have taken it for dead (they
 * wait a whole session of log time), so it may process and commit. Past that its tasks may
 * run elsewhere: the stream threads stop at once by their own clock, without waiting for
 * this thread to read the log and find itself lost (a node frozen past its session wakes
 * with threads that would commit first). Lost, or not in the log yet: 0. Under the lock. */
static void publish_lease(bk_member_t *m)
{
    int32_t self;
    if (!m->lease) {
        return;
    }
    self = m->lost || m->phase != PH_RUN ? -1 : bk_member_self_peer(m);
    atomic_store(m->lease, self >= 0 ? m->peers[self].last_ts + m->session_ms - m->hb_ms : 0);
}

/* After a batch: phase, self, leader duty, ticks, heartbeat. Under the lock. */
static void after_batch(bk_member_t *m, int64_t now)
{
    int64_t lo = 0, hi = 0;
    int32_t self;
    int caught_up;

    m->next_wake = now + POLL_MS;
    /* Caught up: read to where the log ended when we started and to the end the last fetch
     * saw. A member joins, and rejoins after it was lost, only then: one that joins behind
     * may never see its own heartbeats in time (on the dev broker, which hands out one
     * record per fetch, joiners of a busy log fell further behind, were lost, rejoined and
     * dragged the others down with the churn). */
    rd_kafka_get_watermark_offsets(m->consumer, m->topic, 0, &lo, &hi);
    caught_up = (m->phase == PH_CATCHUP || m->phase == PH_RUN) && m->next_offset >= hi &&
                m->next_offset >= m->catchup_to;
    if (caught_up && !m->caught_up) {
        m->caught_up = 1;
        m->start_records = m->next_offset - m->start_from;
        m->version++;
    }
    if (m->observe) {
        return; /* it reads, and that is all */
    }
    if (m->phase == PH_CATCHUP && caught_up) {
        m->phase = PH_RUN; /* join */
        m->next_hb = now;
        m->version++;
    }
    if (m->phase != PH_RUN) {
        return;
    }
    if (m->pending && ((m->pending_offset >= 0 && m->next_offset > m->pending_offset) ||
                       m->epoch != m->pending_base)) {
        m->pending = 0;
    }
    check_self(m, now, caught_up);
    publish_lease(m);
    if (m->lost) {
        return;
    }
    self = bk_member_self_peer(m);
    /* The leader need not have read to the end: it is the only one that writes epochs, its
     * own record in flight is `pending`, and an assignment computed on a view a few records
     * old is replaced by the next one. Waiting to catch up cost ~70 ms a change with 100
     * members on the dev broker, which hands out one record per fetch. */
    /* Not only when caught up: a view a batch behind the log is as good a checkpoint (it
     * says which record it follows), and at 400 members the leader is never quite at the
     * end (scripts/bench/settle: joiners read 47,460 records from the first checkpoint
     * while this waited for caught_up). */
    if (self >= 0 && bk_member_leader_peer(m) == self) {
        bk_member_maybe_checkpoint(m, now);
    }
    if (self >= 0 && bk_member_leader_peer(m) == self && !m->pending) {
        if (!bk_member_stable(m)) {
            bk_member_lead(m, now, 0);
        } else if (m->probe_at > 0 && now >= m->probe_at && caught_up) {
            bk_member_lead(m, now, 1);
        }
    }
    if (m->probe_at > 0 && m->probe_at < m->next_wake) {
        m->next_wake = m->probe_at;
    }
    /* A tick from a view behind the log is harmless (the heartbeats it has not read come
     * first in the log) but would be repeated until it catches up. */
    if (self >= 0 && caught_up) {
        bk_member_maybe_tick(m, self, now);
    }
    if (now >= m->next_hb) {
        bk_member_send_heartbeat(m, now);
        m->next_hb = now + m->hb_ms;
    }
    if (m->next_hb < m->next_wake) {
        m->next_wake = m->next_hb;
    }
}

static void dr_msg_cb(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    bk_member_t *m = opaque;
    intptr_t tag = (intptr_t)msg->_private;
    int type = (int)(tag & 0xff);
    (void)rk;

    pthread_mutex_lock(&m->lock);
    if (type == REC_ASSIGN && (!m->pending || tag >> 8 != m->pending_seq)) {
        /* the report of an earlier publication: not about the one in flight */
    } else if ((msg->err == RD_KAFKA_RESP_ERR__PURGE_QUEUE ||
                msg->err == RD_KAFKA_RESP_ERR__PURGE_INFLIGHT) &&
               !m->renewing) {
        /* bk_member_destroy() dropped it on purpose */
    } else if (msg->err) {
        bk_log_warn("member %s: a control record was not delivered: %s", m->node_id,
                    rd_kafka_err2str(msg->err));
        if (type == REC_RELEASE && m->nown) {
            memset(m->rel_sent, 0, (size_t)m->nown); /* list them again */
            m->version++;
        } else if (type == REC_ASSIGN) {
            m->pending = 0;
        } else if (type == REC_LEAVE) {
            m->leave_state = -1;
        }
    } else if (type == REC_ASSIGN) {
        m->pending_offset = msg->offset;
    } else if (type == REC_LEAVE) {
        m->leave_state = 1;
    }
    if (type == REC_CHECKPOINT) {
        bk_member_checkpoint_delivered(m, msg);
    }
    pthread_mutex_unlock(&m->lock);
}

/* -- The member thread --------------------------------------------------------------------- */

static rd_kafka_t *client_new(bk_member_t *m, const char *app_id, bk_kafka_role_t role,
                              int32_t min_bytes, char *errstr, size_t errstr_size);

/* A producer that failed for good (librdkafka's idempotent producer takes some broker answers
 * as fatal, e.g. an out-of-order sequence number after brokers come back) never sends again:
 * without a new one the member would go silent and be lost for ever. What it still held is
 * reported undelivered (a release is listed again, a publication tried again). */
static void renew_producer(bk_member_t *m)
{
    char why[512], err[512];
    rd_kafka_t *old, *fresh;

    if (!m->producer || rd_kafka_fatal_error(m->producer, why, sizeof(why)) == 0) {
        return;
    }
    pthread_mutex_lock(&m->lock);
    old = m->producer;
    m->producer = NULL; /* bk_member_produce refuses meanwhile */
    pthread_mutex_unlock(&m->lock);
    m->renewing = 1;
    rd_kafka_purge(old, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    rd_kafka_flush(old, 1000); /* serves the purged records' reports */
    rd_kafka_destroy(old);
    m->renewing = 0;
    fresh = client_new(m, m->app_id, BK_KAFKA_PRODUCER, 1, err, sizeof(err));
    pthread_mutex_lock(&m->lock);
    m->producer = fresh;
    pthread_mutex_unlock(&m->lock);
    if (fresh) {
        char w[600];
        bk_events_emit("producer_renewed", "\"client\":\"member\",\"error\":%s",
                       bk_events_str(w, sizeof(w), why));
        bk_log_warn("member %s: the control topic's producer failed for good (%s): a new one "
                    "takes its place",
                    m->node_id, why);
    } else {
        bk_log_error("member %s: the control topic's producer failed for good (%s) and no new "
                     "one could be made: %s",
                     m->node_id, why, err);
    }
}

static rd_kafka_t *client_new(bk_member_t *m, const char *app_id, bk_kafka_role_t role,
                              int32_t min_bytes, char *errstr, size_t errstr_size);

static int read_from(bk_member_t *m, int64_t offset)
{
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_resp_err_t err;
    rd_kafka_topic_partition_list_add(list, m->topic, 0)->offset = offset;
    err = rd_kafka_assign(m->consumer, list);
    rd_kafka_topic_partition_list_destroy(list);
    if (err) {
        bk_log_warn("member %s: cannot read %s from offset %" PRId64 ": %s", m->node_id, m->topic,
                    offset, rd_kafka_err2str(err));
        return -1;
    }
    return 0;
}

/* Where to start reading (docs/cluster.md, Checkpoints): the checkpoint whose offset the
 * leader committed, when the log still holds it; else the first record, when the log still
 * holds that; else the end of a log that lost every record (nobody has written for a whole
 * retention: there is nothing to know). A log that lost its first records and has no
 * checkpoint to use yet waits for the leader to write one (it does at once when it knows of
 * none), CKPT_WAIT_MS at most. Called again (a poll later) while the phase stays START. */
static void start_reading(bk_member_t *m, int64_t now)
{
    int64_t lo = 0, hi = 0, ckpt = -1;
    rd_kafka_resp_err_t err =
        rd_kafka_query_watermark_offsets(m->consumer, m->topic, 0, &lo, &hi, 2000);
    rd_kafka_topic_partition_list_t *list;

    if (err) {
        /* a control topic just made is unknown to some brokers for a moment: that is said
         * as info; still so after 30 s, as a warning */
        int64_t since = m->end_err_since ? m->end_err_since : now;
        m->end_err_since = since;
        bk_log(now - since >= 30000 ? BK_LOG_WARN : BK_LOG_INFO,
               "member %s: cannot read the end of %s yet (for %lld s): %s", m->node_id, m->topic,
               (long long)((now - since) / 1000), rd_kafka_err2str(err));
        return;
    }
    m->end_err_since = 0;
    list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, m->topic, 0);
    err = hi > lo ? rd_kafka_committed(m->consumer, list, 5000) : RD_KAFKA_RESP_ERR_NO_ERROR;
    if (!err && !list->elems[0].err) {
        ckpt = list->elems[0].offset;
    } else if (err || list->elems[0].err) {
        bk_log_warn("member %s: cannot read where the latest checkpoint of %s is: %s", m->node_id,
                    m->topic, rd_kafka_err2str(err ? err : list->elems[0].err));
    }
    rd_kafka_topic_partition_list_destroy(list);
    if (err && lo > 0) {
        return; /* ask again */
    }
    pthread_mutex_lock(&m->lock);
    bk_member_view_reset(m);
    m->catchup_to = hi;
    if (ckpt >= lo && ckpt < hi) {
        m->phase = PH_CKPT;
        m->ckpt_at = ckpt;
        m->start_from = ckpt;
    } else if (lo == 0 || lo == hi) {
        m->phase = PH_CATCHUP;
        m->start_from = m->next_offset = lo;
        m->wait_since = 0; /* a later fall off the log's start waits its own CKPT_WAIT_MS */
    } else {
        if (!m->wait_since) {
            m->wait_since = now;
        }
        if (now - m->wait_since > CKPT_WAIT_MS) {
            m->phase = PH_FAILED;
            m->error = "the control topic lost its first records and has no checkpoint to"
                       " start from (docs/cluster.md, Checkpoints)";
            bk_log_error("member %s: %s starts at offset %" PRId64 ": %s", m->node_id, m->topic, lo,
                         m->error);
        } else if (now - m->wait_warned >= 10000) {
            m->wait_warned = now;
            bk_log_warn("member %s: %s starts at offset %" PRId64 " and no checkpoint covers it"
                        " yet: waiting for the leader to write one",
                        m->node_id, m->topic, lo);
        }
    }
    m->version++;
    pthread_mutex_unlock(&m->lock);
    if ((m->phase == PH_CKPT || m->phase == PH_CATCHUP) &&
        read_from(m, m->phase == PH_CKPT ? m->ckpt_at : m->start_from) != 0) {
        m->phase = PH_START;
    }
}

/* The checkpoint record arrived: load it and read from the record after the one it
 * describes; a checkpoint that cannot be used (unreadable, or the records after it are
 * gone) sends the member back to START. 1 when the reader moved (the rest of the batch is
 * from before the move), else 0. Under the lock. */
static int take_checkpoint(bk_member_t *m, const rd_kafka_message_t *msg)
{
    char err[256];
    int64_t last = -1, lo = 0, hi = 0;

    if (msg->offset != m->ckpt_at) {
        return 0;
    }
    rd_kafka_get_watermark_offsets(m->consumer, m->topic, 0, &lo, &hi);
    if (bk_member_checkpoint_load(m, msg->payload, msg->len, &last, err, sizeof(err)) != 0) {
        bk_log_warn("member %s: the checkpoint at offset %" PRId64 " of %s cannot be used: %s",
                    m->node_id, msg->offset, m->topic, err);
    } else if (last + 1 < lo) {
        bk_log_warn("member %s: the checkpoint at offset %" PRId64
                    " needs the records from %" PRId64 ", and %s starts at %" PRId64,
                    m->node_id, msg->offset, last + 1, m->topic, lo);
    } else if (read_from(m, last + 1) == 0) {
        m->phase = PH_CATCHUP;
        m->start_from = last + 1;
        m->wait_since = 0; /* as in start_reading */
        bk_log_info("member %s: starting from the checkpoint at offset %" PRId64 " (the view after"
                    " offset %" PRId64 ", %zu bytes): %" PRId64 " records to read",
                    m->node_id, msg->offset, last, msg->len, m->catchup_to - last - 1);
        return 1;
    }
    bk_member_view_reset(m);
    m->phase = PH_START;
    if (!m->wait_since) {
        m->wait_since = bk_clock_wall_ms();
    }
    return 1;
}

/* A fetch fell off the log's start: records this member has not read are gone. Before it
 * joined it starts over (from a checkpoint); after, its view is no longer the others'. */
static void fell_off(bk_member_t *m)
{
    bk_log_warn("member %s: %s lost records before offset %" PRId64 " that this member had not"
                " read yet",
                m->node_id, m->topic, m->next_offset);
    if (m->phase == PH_RUN && !m->observe) {
        m->phase = PH_FAILED;
        m->error = "the control topic deleted records this member had not read (its retention is"
                   " too short, or this member too slow)";
        bk_log_error("member %s: %s", m->node_id, m->error);
    } else {
        bk_member_view_reset(m);
        m->phase = PH_START;
        m->caught_up = 0;
    }
    m->version++;
}

/* fetch.min.bytes for `n` live members: at most ~FETCHES_PER_S fetches a second while
 * heartbeats flow, in powers of two so that it changes seldom; 1 below 64 members.
 * Every record reaches every member: with fetch.min.bytes=1 the broker answers each fetch
 * as soon as one record arrives, so n members cost it n x n fetches a second (160,000 at
 * 400 members, which saturated a 2-core host). Waiting for ~HB_BYTES x n / FETCHES_PER_S
 * bytes costs a hop ~1 / (2 x FETCHES_PER_S) s on average. */
#define FETCHES_PER_S 50
#define HB_BYTES 64
static int32_t wanted_min_bytes(const bk_member_t *m, int32_t n)
{
    int64_t want = (int64_t)n * HB_BYTES * 1000 / m->hb_ms / FETCHES_PER_S;
    int32_t p = 1;
    if (n < 64) {
        return 1;
    }
    while (p * 2 <= want && p < (1 << 20)) {
        p *= 2;
    }
    return p;
}

/* The member's consumer again with fetch.min.bytes fitted to the cluster's size, reading on
 * from where this one stopped. On the member thread, outside the lock; the checkpoint
 * commit and the watermarks use m->consumer, on this thread too. */
static void refit_consumer(bk_member_t *m, int64_t now)
{
    int32_t live = 0, want;
    char err[256];
    rd_kafka_t *rk, *old;

    if (m->min_bytes < 0 || !m->consumer || m->phase != PH_RUN || now < m->refit_at) {
        return;
    }
    m->refit_at = now + 1000;
    pthread_mutex_lock(&m->lock);
    for (int32_t i = 0; i < m->npeers; i++) {
        live += bk_member_peer_alive(m, i);
    }
    pthread_mutex_unlock(&m->lock);
    want = wanted_min_bytes(m, live);
    /* a factor of 4 either way before changing: a join or death does not flap it */
    if (want == m->min_bytes || (want < m->min_bytes * 4 && want * 4 > m->min_bytes)) {
        return;
    }
    /* the member's app id, not conf's: a bench runs members of other apps on one conf */
    if (!(rk = client_new(m, m->app_id, BK_KAFKA_CONSUMER, want, err, sizeof(err)))) {
        bk_log_warn("member %s: cannot make a consumer with fetch.min.bytes=%d: %s", m->node_id,
                    want, err);
        m->min_bytes = -1;
        return;
    }
    old = m->consumer;
    m->consumer = rk;
    if (read_from(m, m->next_offset) != 0) {
        m->consumer = old;
        rd_kafka_destroy(rk);
        m->min_bytes = -1;
        return;
    }
    pthread_mutex_lock(&m->lock);
    bk_member_drop_commits(m); /* of the old consumer */
    pthread_mutex_unlock(&m->lock);
    rd_kafka_consumer_close(old);
    rd_kafka_destroy(old);
    bk_log_info("member %s: %d members: control topic fetches wait for %d bytes (was %d)",
                m->node_id, live, want, m->min_bytes);
    m->min_bytes = want;
}

static void *member_main(void *arg)
{
    bk_member_t *m = arg;
    rd_kafka_message_t *msgs[MAX_BATCH];
    int busy = 0;

    bk_log_set_thread_name("member");
    while (!m->stop) {
        int timeout = POLL_MS, n = 0;
        int64_t now = bk_clock_wall_ms();
        uint64_t version;

        if (m->phase == PH_START) {
            start_reading(m, now);
        }
        if (m->phase == PH_RUN && m->next_wake - now < timeout) {
            timeout = m->next_wake > now ? (int)(m->next_wake - now) : 0;
        }
        if (busy && timeout > 0) {
            struct timespec ts = {0, (long)(timeout < BATCH_MS ? timeout : BATCH_MS) * 1000000};
            nanosleep(&ts, NULL);
            timeout = 0;
        }
        /* Waits for the first record only; then takes what is already there. */
        for (rd_kafka_message_t *msg = rd_kafka_consumer_poll(m->consumer, timeout); msg;
             msg = n < MAX_BATCH ? rd_kafka_consumer_poll(m->consumer, 0) : NULL) {
            msgs[n++] = msg;
        }
        busy = n > 0;
        now = bk_clock_wall_ms();
        pthread_mutex_lock(&m->lock);
        for (int i = 0; i < n; i++) {
            if (msgs[i]->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET) {
                fell_off(m);
                break;
            } else if (msgs[i]->err) {
                bk_log_debug("member %s: %s: %s", m->node_id, m->topic,
                             rd_kafka_err2str(msgs[i]->err));
            } else if (m->phase == PH_CKPT) {
                if (take_checkpoint(m, msgs[i])) {
                    break;
                }
            } else if (m->phase == PH_CATCHUP || m->phase == PH_RUN) {
                bk_member_apply(m, msgs[i]);
            }
        }
        after_batch(m, now);
        version = m->version;
        pthread_mutex_unlock(&m->lock);
        for (int i = 0; i < n; i++) {
            rd_kafka_message_destroy(msgs[i]);
        }
        if (m->producer) {
            rd_kafka_poll(m->producer, 0);
            renew_producer(m);
        }
        refit_consumer(m, now);
        bk_member_serve_commits(m);
        if (m->on_change && version != m->notified) {
            m->notified = version;
            m->on_change(m->opaque);
        }
    }
    return NULL;
}

/* -- API ----------------------------------------------------------------------------------- */

/* The control topic's clients get these under the user's -X/-F settings, on top of beck's
 * defaults (kafka.c), which suit stream threads. A real broker answers a fetch as soon as a
 * record arrives, so a long fetch wait costs no latency there and keeps an idle member's
 * requests few; the dev broker (librdkafka's mock) answers an empty fetch only after the
 * whole wait (MEASURED.md), so it adds up to that much per hop. 100 ms keeps 100 members'
 * idle fetches at ~1,000/s against the mock (10 ms: 10,000/s, which saturated two cores).
 * Control records are few and latency matters more than batching: no linger. */
/* A fetch past the log's start (records deleted under a member still catching up) must not
 * skip to the earliest record: the view would miss what lay between (member_main). */
static const char *consumer_settings[] = {"fetch.wait.max.ms", "100", "auto.offset.reset", "error",
                                          NULL};
static const char *producer_settings[] = {"linger.ms", "0", NULL};

static rd_kafka_t *client_new(bk_member_t *m, const char *app_id, bk_kafka_role_t role,
                              int32_t min_bytes, char *errstr, size_t errstr_size)
{
    char mb[16];
    const char **defs = role == BK_KAFKA_CONSUMER ? consumer_settings : producer_settings;
    bk_conf_t *conf = bk_conf_new();
    char cid[BK_MEMBER_MAX_ID + 32];
    rd_kafka_t *rk = NULL;

    if (!conf) {
        snprintf(errstr, errstr_size, "out of memory");
        return NULL;
    }
    if (bk_conf_set(conf, BK_CONF_BROKERS, bk_conf_str(m->conf, BK_CONF_BROKERS), BK_CONF_FROM_CLI,
                    errstr, errstr_size) != 0 ||
        bk_conf_set(conf, BK_CONF_APP_ID, app_id, BK_CONF_FROM_CLI, errstr, errstr_size) != 0) {
        goto done;
    }
    for (int i = 0; defs[i]; i += 2) {
        bk_conf_add_kafka(conf, defs[i], defs[i + 1]);
    }
    if (min_bytes > 1) {
        snprintf(mb, sizeof(mb), "%d", min_bytes);
        bk_conf_add_kafka(conf, "fetch.min.bytes", mb);
    }
    for (size_t i = 0; i < bk_conf_kafka_count(m->conf); i++) {
        const char *k, *v;
        bk_conf_kafka_get(m->conf, i, &k, &v);
        bk_conf_add_kafka(conf, k, v);
    }
    snprintf(cid, sizeof(cid), "beck-member-%s", m->node_id);
    rk = bk_kafka_new(conf, role, cid, m, role == BK_KAFKA_PRODUCER ? dr_msg_cb : NULL, errstr,
                      errstr_size);
done:
    bk_conf_destroy(conf);
    return rk;
}

static int copy_str(char *dst, const char *src, const char *what, char *errstr, size_t errstr_size)
{
    size_t n = src ? strlen(src) : 0;
    if (n > BK_MEMBER_MAX_ID) {
        snprintf(errstr, errstr_size, "member: %s is longer than %d bytes", what, BK_MEMBER_MAX_ID);
        return -1;
    }
    memcpy(dst, src ? src : "", n + 1);
    return 0;
}

bk_member_t *bk_member_new_view(const bk_member_conf_t *mconf, char *errstr, size_t errstr_size)
{
    bk_member_t *m = calloc(1, sizeof(*m));
    char name[16];

    if (!m) {
        snprintf(errstr, errstr_size, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&m->lock, NULL);
    pthread_mutex_init(&m->plock, NULL);
    m->observe = mconf->observe;
    if (!mconf->app_id || !mconf->app_id[0] ||
        (!m->observe && (!mconf->node_id || !mconf->node_id[0]))) {
        snprintf(errstr, errstr_size, "member: an app id and a node id are needed");
        goto fail;
    }
    if (copy_str(m->node_id, mconf->node_id && mconf->node_id[0] ? mconf->node_id : "observer",
                 "the node id", errstr, errstr_size) != 0 ||
        copy_str(m->rack, mconf->rack, "the rack", errstr, errstr_size) != 0 ||
        copy_str(m->endpoint, mconf->endpoint, "the endpoint", errstr, errstr_size) != 0 ||
        copy_str(m->topic, mconf->app_id, "the app id", errstr, errstr_size) != 0 ||
        copy_str(m->app_id, mconf->app_id, "the app id", errstr, errstr_size) != 0) {
        goto fail;
    }
    strcat(m->topic, "-control");
    if ((mconf->threads < 1 && !m->observe) || mconf->ntasks < 0 ||
        mconf->ntasks > BK_ASSIGNCODEC_MAX_TASKS || mconf->standbys < 0 ||
        mconf->standbys > BK_ASSIGNCODEC_MAX_K) {
        snprintf(errstr, errstr_size,
                 "member: threads >= 1, 0 <= tasks <= %d and 0 <= standbys"
                 " <= %d are needed",
                 BK_ASSIGNCODEC_MAX_TASKS, BK_ASSIGNCODEC_MAX_K);
        goto fail;
    }
    m->conf = mconf->conf;
    m->threads = mconf->threads > 0 ? mconf->threads : 1;
    m->ntasks = mconf->ntasks;
    m->standbys = mconf->standbys;
    m->warmup = mconf->warmup;
    m->probe_ms = mconf->probe_interval_ms > 0 ? mconf->probe_interval_ms : 5000;
    m->acceptable_lag = mconf->acceptable_lag;
    m->hb_ms =
        mconf->heartbeat_interval_ms > 0 ? mconf->heartbeat_interval_ms : BK_MEMBER_HEARTBEAT_MS;
    m->session_ms =
        mconf->session_timeout_ms > 0 ? mconf->session_timeout_ms : BK_MEMBER_SESSION_MS;
    m->session_announced = m->observe && mconf->session_timeout_ms <= 0;
    if (m->session_ms <= 2 * m->hb_ms) {
        snprintf(errstr, errstr_size,
                 "member: the session timeout (%d ms) must exceed two"
                 " heartbeat intervals (%d ms)",
                 m->session_ms, m->hb_ms);
        goto fail;
    }
    m->min_bytes = 1;
    for (size_t i = 0; i < bk_conf_kafka_count(mconf->conf); i++) {
        const char *k, *v;
        bk_conf_kafka_get(mconf->conf, i, &k, &v);
        m->min_bytes = strcmp(k, "fetch.min.bytes") == 0 ? -1 : m->min_bytes;
    }
    m->ckpt_ms = mconf->checkpoint_interval_ms > 0 ? mconf->checkpoint_interval_ms : CKPT_MS;
    m->on_change = mconf->on_change;
    m->opaque = mconf->opaque;
    m->lost_tasks = malloc(((size_t)m->ntasks + 1) * sizeof(*m->lost_tasks));
    m->notes = calloc(NOTES_MAX, sizeof(*m->notes));
    m->gone = m->observe ? calloc(GONE_MAX, sizeof(*m->gone)) : NULL;
    if (!m->lost_tasks || !m->notes || (m->observe && !m->gone)) {
        snprintf(errstr, errstr_size, "out of memory");
        goto fail;
    }
    m->layout = bk_member_fnv1a(2166136261u, &m->ntasks, sizeof(m->ntasks));
    for (int32_t t = 0; t < m->ntasks; t++) {
        const char *tn = name;
        if (mconf->task_names) {
            tn = mconf->task_names[t];
        } else {
            snprintf(name, sizeof(name), "%d", t);
        }
        m->layout = bk_member_fnv1a(m->layout, tn, strlen(tn) + 1);
    }
    m->inc = bk_member_make_incarnation();
    m->backoff = m->hb_ms;
    m->version = 1;
    m->phase = PH_START;
    m->ckpt_offset = -1;
    m->expire_at = INT64_MIN;
    return m;

fail:
    bk_member_destroy(m);
    return NULL;
}

bk_member_t *bk_member_new(const bk_member_conf_t *mconf, char *errstr, size_t errstr_size)
{
    bk_member_t *m = bk_member_new_view(mconf, errstr, errstr_size);

    if (!m) {
        return NULL;
    }
    m->consumer = client_new(m, mconf->app_id, BK_KAFKA_CONSUMER, 1, errstr, errstr_size);
    if (!m->consumer) {
        goto fail;
    }
    /* An observer writes nothing: without a producer it cannot, by mistake either. */
    m->producer =
        m->observe ? NULL : client_new(m, mconf->app_id, BK_KAFKA_PRODUCER, 1, errstr, errstr_size);
    if (!m->producer && !m->observe) {
        goto fail;
    }
    return m;

fail:
    bk_member_destroy(m);
    return NULL;
}

/* A member starts from the latest checkpoint (docs/cluster.md, Checkpoints), so the log
 * may lose what is older: a week, as Kafka's default. The rules read log time: the broker's
 * clock, not each node's. */
static const char *const control_configs[] = {
    "cleanup.policy",         "delete",        "retention.ms", "604800000", "retention.bytes", "-1",
    "message.timestamp.type", "LogAppendTime", NULL,
};

/* A control topic made by hand with other configs may work until the wrong records are
 * deleted: say so while it is still fixable. */
static void warn_control_configs(const bk_member_t *m, rd_kafka_t *rk, const char *topic)
{
    /* checkpoints come at least this often: a retention 6 times as long keeps several */
    int64_t min_retention = 6 * (int64_t)(m->ckpt_ms > CKPT_MS ? m->ckpt_ms : CKPT_MS);
    char values[4][BK_KAFKA_CONFIG_MAX], err[256];
    const char *names[4];
    long long retention;
    for (int i = 0; i < 4; i++) {
        names[i] = control_configs[2 * i];
    }
    if (bk_kafka_topic_configs(rk, topic, names, 4, values, 10000, err, sizeof(err)) != 0) {
        bk_log_warn("cannot check the configs of control topic %s: %s", topic, err);
        return;
    }
    if (values[0][0] && strcmp(values[0], "delete") != 0) {
        bk_log_warn("control topic %s has cleanup.policy=%s, beck wants delete: compaction keeps"
                    " one record per member and kind, and members that start read a history the"
                    " others never had",
                    topic, values[0]);
    }
    retention = values[1][0] ? strtoll(values[1], NULL, 10) : -1;
    if (retention >= 0 && retention < min_retention) {
        bk_log_warn("control topic %s has retention.ms=%s, beck wants at least %lld: a member"
                    " starts from the latest checkpoint (one every %d ms at least) and the"
                    " records after it, which a shorter retention may delete before it reads them",
                    topic, values[1], (long long)min_retention, m->ckpt_ms);
    }
    if (values[2][0] && strcmp(values[2], "-1") != 0) {
        bk_log_warn("control topic %s has retention.bytes=%s, beck wants -1: a burst of records"
                    " can delete the latest checkpoint, and then no member can start until the"
                    " next",
                    topic, values[2]);
    }
    if (values[3][0] && strcmp(values[3], "LogAppendTime") != 0) {
        bk_log_warn("control topic %s has message.timestamp.type=%s, beck wants LogAppendTime:"
                    " the membership rules read the nodes' clocks instead of the broker's",
                    topic, values[3]);
    }
}

int bk_member_start(bk_member_t *member, char *errstr, size_t errstr_size)
{
    bk_member_t *m = member;
    const char *topics[1] = {m->topic};
    int count = 0;

    /* Never ask a dev broker about the topic by name before it exists: that would make it
     * with 4 partitions. bk_kafka_partitions() reads all topics. */
    if (m->observe) {
        if (bk_kafka_partitions(m->consumer, topics, 1, &count, 10000, errstr, errstr_size) != 0) {
            return -1;
        }
        if (count == 0) {
            snprintf(errstr, errstr_size,
                     "control topic %s does not exist: no node of this app has run with"
                     " --cluster 1 on this cluster",
                     m->topic);
            return -1;
        }
    } else if (bk_kafka_partitions(m->producer, topics, 1, &count, 10000, errstr, errstr_size) !=
               0) {
        return -1;
    }
    if (count == 0 && bk_kafka_create_topic(m->producer, m->topic, 1,
                                            (int)bk_conf_int(m->conf, BK_CONF_REPLICATION_FACTOR),
                                            control_configs, errstr, errstr_size) != 0) {
        return -1;
    }
    if (count > 1) {
        snprintf(errstr, errstr_size, "control topic %s has %d partitions: it must have one",
                 m->topic, count);
        return -1;
    }
    if (count == 1 && !m->observe) { /* observers (beck status) stay quiet */
        char ignored[256];
        int port = bk_kafka_dev_port(); /* not set in this process: the cluster says */
        if (port < 0) {
            port = bk_devctl_discover(m->consumer, 10000, ignored, sizeof(ignored));
        }
        if (port == 0) { /* real Kafka: a dev broker has no configs */
            warn_control_configs(m, m->consumer, m->topic);
        }
    }
    /* The member thread assigns the partition once it knows where to read (start_reading). */
    if (pthread_create(&m->thread, NULL, member_main, m) != 0) {
        snprintf(errstr, errstr_size, "cannot start the member thread");
        return -1;
    }
    m->started = 1;
    bk_log_info("member %s: reading %s (heartbeat %d ms, session %d ms)%s", m->node_id, m->topic,
                m->hb_ms, m->session_ms, m->observe ? " as an observer" : "");
    return 0;
}

int bk_member_stop(bk_member_t *member, int leave)
{
    bk_member_t *m = member;
    bk_wire_buf_t w = {0};
    int rc = 0, send;

    if (m->started) {
        m->stop = 1;
        pthread_join(m->thread, NULL);
        m->started = 0;
    }
    if (!leave) {
        return 0;
    }
    pthread_mutex_lock(&m->lock);
    send = m->phase == PH_RUN && !m->lost && m->first_hb && m->producer;
    m->leave_state = 0;
    if (send) {
        bk_member_w_header(&w, m, REC_LEAVE);
        send = bk_member_produce(m, REC_LEAVE, &w, bk_clock_wall_ms()) == 0;
        rc = send ? 0 : -1;
    }
    pthread_mutex_unlock(&m->lock);
    if (send) {
        rd_kafka_flush(m->producer, m->session_ms);
        pthread_mutex_lock(&m->lock);
        rc = m->leave_state == 1 ? 0 : -1;
        pthread_mutex_unlock(&m->lock);
        bk_log_info("member %s: %s", m->node_id,
                    rc == 0 ? "left" : "the leave notice was not delivered");
    }
    return rc;
}

void bk_member_destroy(bk_member_t *member)
{
    bk_member_t *m = member;
    if (!m) {
        return;
    }
    bk_member_stop(m, 0);
    bk_member_drop_commits(m);
    if (m->consumer) {
        rd_kafka_consumer_close(m->consumer);
        rd_kafka_destroy(m->consumer);
    }
    if (m->producer) {
        /* Whatever is still queued would only tell the others we are alive. */
        rd_kafka_purge(m->producer, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        rd_kafka_flush(m->producer, 1000); /* serves the purged messages' reports */
        rd_kafka_destroy(m->producer);
    }
    for (int32_t i = 0; i < m->npeers; i++) {
        free(m->peers[i].progress);
        free(m->peers[i].spare);
    }
    free(m->peers);
    free(m->gone);
    bk_member_free_assignment(m);
    free(m->lost_tasks);
    free(m->assignable);
    free(m->origin);
    free(m->drained);
    free(m->notes);
    free(m->prog);
    pthread_mutex_destroy(&m->lock);
    pthread_mutex_destroy(&m->plock);
    free(m);
}
