/* member_internal.h - the insides of a member (member.h), shared by the files of the
 * membership only: member.c (life, thread, API), member_record.c (the record format),
 * member_view.c (the view folded from the records), member_leader.c (what a member writes,
 * the leader's duty) and member_copy.c (the node's copies of the view). Nothing else
 * includes it. The member's fields belong to its thread; what the node reads goes through
 * bk_member_poll under `lock` (see struct bk_member_s). */
#ifndef BK_MEMBER_INTERNAL_H
#define BK_MEMBER_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>
#include <stdatomic.h>

#include "base/wire.h"
#include "cluster/assigncodec.h"
#include "cluster/member.h"

/* How long an idle member thread waits for a record before it looks at the clock again:
 * bounds how late a lost verdict or a stop request can be (heartbeats wake it on time). */
#define POLL_MS 100
/* After a batch the thread lets records gather this long before it reads again, instead of
 * waking for each: with 100 members each heartbeating once a second, waking per record was
 * most of the cost (context switches). It adds at most this much to every hop. */
#define BATCH_MS 10
/* Records applied under one lock hold. */
#define MAX_BATCH 256
/* A member that expects someone's session to end writes a tick record so that log time
 * reaches the end without waiting for the next heartbeat. The leader ticks first; the next
 * two in join order follow TICK_STAGGER_MS apart in case the leader is the one that died. */
#define TICK_RANKS 3
#define TICK_STAGGER_MS 50
/* Members forgotten by the rules that an observer still shows (as ended peers), the latest
 * ones: `beck status` should say that a node left a minute ago, not that it never was. */
#define GONE_MAX 32

/* -- Records ---------------------------------------------------------------------------------
 * value: u8 magic, u8 version, u8 type, str node id, uvar incarnation, then by type:
 *   HEARTBEAT str rack, str endpoint, uvar threads, uvar ntasks, uvar layout, uvar epoch,
 *             uvar n, n x (uvar task - previous task, svar offset, uvar lag), tasks ascending,
 *             uvar heartbeat interval ms, uvar session timeout ms (both absent from the
 *             records of members built before they were added)
 *   LEAVE     -
 *   ASSIGN    the rest: an assigncodec message (full or delta; epochs in its header)
 *   RELEASE   uvar epoch, uvar n, n x uvar (task - previous task), tasks ascending
 *   TICK      -
 *   NOTE      str to (a node id, "" for every node), str kind, str text (bk_member_note)
 *   CHECKPOINT the rest: the view after an earlier offset (member_checkpoint.c)
 *   GENERATION uvar index (the moves before it), uvar subtopology, uvar tasks: the leader
 *             adds a generation of a subtopology (docs/repartitioning.md)
 * uvar: LEB128; svar: zigzag LEB128; str: uvar length + bytes. The key is "<type>/<node id>"
 * ("h/n1"); nothing reads it. A reader ignores bytes past what it knows, and records of a
 * type or version it does not know (docs/cluster.md, Records). */
#define WIRE_MAGIC 0xbe
#define WIRE_VERSION 1
enum {
    REC_HEARTBEAT = 1,
    REC_LEAVE = 2,
    REC_ASSIGN = 3,
    REC_RELEASE = 4,
    REC_TICK = 5,
    REC_NOTE = 6,
    REC_CHECKPOINT = 7,
    REC_GENERATION = 8,
    REC_DRAINED = 9
};
/* The list of moves a view keeps, "S=N[,S=N...]": at most this many bytes (the plan has room
 * for 256 generations of one subtopology in a process, engine/plan.h). */
#define GENS_MAX BK_MEMBER_GENS_MAX
extern const char bk_member_rec_key_char[];
/* Checkpoints (member_checkpoint.c): the leader writes one when the records since the last
 * outweigh it CKPT_BYTES_FACTOR times (at least CKPT_MIN_BYTES), or CKPT_MS of log time
 * after it; never one over CKPT_MAX_BYTES (Kafka's default record limit is 1 MB). A start
 * that finds none to use in a log whose first records are gone waits CKPT_WAIT_MS for one. */
#define CKPT_BYTES_FACTOR 4
#define CKPT_MIN_BYTES 65536
#define CKPT_MS 600000 /* unless bk_member_conf_t says otherwise */
#define CKPT_MAX_BYTES 900000
#define CKPT_WAIT_MS 60000
/* Notes delivered and not yet taken; more are dropped (with a warning): their senders time
 * out and fall back. */
#define NOTES_MAX 64

/* A record as read; strings and lists point into the record or into `tasks`, which the
 * reader owns. */
typedef struct rec {
    int type;
    char id[BK_MEMBER_MAX_ID + 1];
    uint64_t inc;
    /* HEARTBEAT */
    char rack[BK_MEMBER_MAX_ID + 1], endpoint[BK_MEMBER_MAX_ID + 1];
    int32_t threads, ntasks;
    uint32_t layout;
    uint64_t epoch;        /* also RELEASE */
    bk_wire_reader_t list; /* HEARTBEAT progress, RELEASE tasks: decoded by the applier */
    uint64_t nlist;
    int hb_ms, session_ms; /* HEARTBEAT: the sender's settings, 0: not announced */
    /* ASSIGN, CHECKPOINT */
    const uint8_t *payload;
    size_t payload_len;
    /* GENERATION */
    uint64_t gen_index, gen_sub, gen_tasks;
    /* DRAINED */
    int32_t drained;
    /* NOTE */
    char to[BK_MEMBER_MAX_ID + 1], kind[BK_MEMBER_MAX_ID + 1];
    char text[BK_MEMBER_NOTE_MAX + 1];
} rec_t;

/* -- State -------------------------------------------------------------------------------- */

typedef struct progress {
    int32_t task;
    int64_t offset, lag;
    int64_t changed_ts; /* a peer's: log time when its reported offset last changed */
} progress_t;

/* What the log says about one node id: its latest incarnation. */
typedef struct peer {
    int used;
    char id[BK_MEMBER_MAX_ID + 1], rack[BK_MEMBER_MAX_ID + 1], endpoint[BK_MEMBER_MAX_ID + 1];
    uint32_t id_hash; /* bk_member_id_hash(id): finding a peer compares this first */
    uint64_t inc;
    int32_t threads, ntasks;
    uint32_t layout;
    int state;
    int64_t join_offset, last_ts, end_ts;
    uint64_t epoch;
    progress_t *progress; /* from its latest heartbeat, tasks ascending */
    int32_t nprogress, cap_progress;
    progress_t *spare; /* the list before, while the next heartbeat is decoded; then swapped */
    int32_t cap_spare;
} peer_t;

/* START: finding where to read; CKPT: reading the checkpoint at ckpt_at; CATCHUP: reading
 * to where the log ended at start; RUN: joined. */
enum { PH_START, PH_CKPT, PH_CATCHUP, PH_RUN, PH_FAILED };

struct bk_member_s {
    /* Set by bk_member_new, read-only afterwards. */
    const bk_conf_t *conf;
    char node_id[BK_MEMBER_MAX_ID + 1], rack[BK_MEMBER_MAX_ID + 1];
    char endpoint[BK_MEMBER_MAX_ID + 1], topic[BK_MEMBER_MAX_ID + 16];
    char app_id[BK_MEMBER_MAX_ID + 1]; /* its clients' group id */
    int32_t threads, standbys;
    int warmup; /* assign.h warm-up, with acceptable_lag */
    int64_t acceptable_lag;
    int probe_ms;    /* warm-up: how often the leader looks whether replicas caught up */
    uint32_t layout; /* hash of the task count and names: members that differ share nothing */
    int hb_ms, session_ms;
    int32_t min_bytes;     /* the consumer's fetch.min.bytes; -1: the user's, left alone */
    int64_t refit_at;      /* when the member thread next looks whether it should change */
    int observe;           /* never joins or writes (bk_member_conf_t) */
    int session_announced; /* an observer's session_ms follows the heartbeats' */
    void (*on_change)(void *opaque);
    void *opaque;
    /* Where the member publishes the node's lease (bk_member_set_lease), NULL: nowhere.
     * Written under the lock below. */
    _Atomic int64_t *lease;
    rd_kafka_t *consumer, *producer; /* the producer is replaced under lock (renew_producer) */
    int renewing; /* the member thread purges a failed producer: its reports are failures */
    pthread_t thread;
    int started;
    atomic_int stop;

    pthread_mutex_t lock; /* guards everything below */
    uint64_t version;
    /* The node's tasks (bk_member_set_tasks): the count only grows; assignable[t] 0 keeps
     * the leader from assigning t (NULL: every task). */
    int32_t ntasks;
    uint8_t *assignable;
    int32_t *origin; /* [ntasks] or NULL (bk_member_set_tasks) */
    /* What the log says (docs/cluster.md, The view). */
    int64_t log_time, next_offset;
    /* No session ends before log time passes this (a lower bound): the fold looks at every
     * peer only then, not at every record (with 400 members, per-record scans were most of
     * a member's work). INT64_MIN: look at the next record. */
    int64_t expire_at;
    peer_t *peers;
    int32_t npeers, cap_peers;
    peer_t *gone; /* an observer's [GONE_MAX] forgotten peers, for show only (no progress) */
    int32_t ngone;
    bk_assigncodec_t *cur; /* the current assignment, NULL before the first */
    uint64_t epoch;
    int32_t *slot_peer; /* [cur->nnodes] peer that a slot meant when cur was applied, -1 */
    uint64_t *slot_inc; /* [cur->nnodes] its incarnation then */
    int32_t nown;       /* cur->ntasks */
    int32_t *own;       /* [nown] the peer that holds the task, -1: nobody */
    /* The latest checkpoint record seen (-1: none), log time then, and the bytes of the
     * records since: part of the fold, so any leader knows when the next is due. */
    int64_t ckpt_offset, ckpt_log_time, ckpt_bytes;
    /* The moves made ("S=N,S=N", generations after the first in the order the leader added
     * them; "" none) and how many (docs/repartitioning.md): part of the fold. */
    char gens[GENS_MAX + 1];
    int32_t ngens;
    /* Tasks of a generation that a move replaces, drained to its barriers (the drained
     * records): sorted, part of the fold. */
    int32_t *drained;
    int32_t ndrained, cap_drained;
    uint8_t *rel_sent; /* [nown] this member published a release of it, not yet seen */
    uint8_t *told;     /* [nown] a view listed it in running; the node has not released it */
    /* This member. */
    uint64_t inc;
    int phase;
    int caught_up; /* latched: read up to where the log ended at start (bk_member_view_t) */
    const char *error;
    int64_t catchup_to, next_hb, first_hb, join_ts;
    int64_t start_from;    /* where this member's fold began: 0, a checkpoint's offset + 1, or
                            * the end of a log that had lost all its records */
    int64_t ckpt_at;       /* PH_CKPT: the checkpoint's offset */
    int64_t start_records; /* read from start_from to catch up (bk_member_view_t) */
    int64_t wait_since, wait_warned; /* PH_START: since when no checkpoint could be used */
    int ckpt_pending;                /* the leader's checkpoint in flight */
    int64_t ckpt_len, ckpt_warned;
    int ckpt_ms;                /* the checkpoint interval (CKPT_MS) */
    rd_kafka_queue_t *commit_q; /* checkpoint commits' results, of consumer commit_rk */
    rd_kafka_t *commit_rk;
    int joined_once; /* this incarnation's heartbeat was seen in the log */
    int lost;
    int64_t lost_at, backoff;
    int32_t nlost, *lost_tasks; /* tasks held when lost that the node has not released */
    /* The leader's publication in flight (docs/cluster.md, Publishing). */
    int pending;
    uint64_t pending_base;
    int64_t pending_offset;
    intptr_t pending_seq; /* tags the publication, so that a late report of the one before
                           * cannot clear this one (it did: epoch 2 went out twice) */
    int64_t last_tick;
    /* Warm-up probing: when the leader recomputes the current epoch to see whether warm-up
     * replicas caught up (0: no probe due). Set at every epoch (a new leader does not know
     * whether the one before held tasks back), kept while the result holds tasks back. */
    int64_t probe_at;
    int64_t next_wake;     /* when the member thread must look again: heartbeat, tick */
    int64_t end_err_since; /* start: since when the control topic's end cannot be read (0) */
    int leave_state;       /* 0 in flight, 1 delivered, -1 failed */
    uint64_t notified;

    bk_member_note_t *notes; /* [NOTES_MAX] delivered, not taken yet (under lock) */
    int32_t nnotes;

    pthread_mutex_t plock; /* guards the progress this node reports */
    progress_t *prog;
    int32_t nprog, cap_prog;
};

/* Records (member_record.c). */
int bk_member_rec_parse(const void *buf, size_t len, rec_t *rec);

/* The view (member_view.c): peers, leader, holders, applying a record. */
uint32_t bk_member_fnv1a(uint32_t h, const void *p, size_t n);
uint32_t bk_member_id_hash(const char *id);
int32_t bk_member_leader_peer(const bk_member_t *m);
uint64_t bk_member_make_incarnation(void);
int32_t bk_member_peer_find(const bk_member_t *m, const char *id);
int32_t bk_member_self_peer(const bk_member_t *m);
int32_t bk_member_peer_rank(const bk_member_t *m, int32_t i);
int bk_member_peer_alive(const bk_member_t *m, int32_t i);
void bk_member_apply(bk_member_t *m, const rd_kafka_message_t *msg);
/* Adds task t to the view's drained list (sorted, once); -1 without memory. */
int bk_member_drained_add(bk_member_t *m, int32_t t);
/* Appends "S=N" to the view's list of moves (gens, ngens); -1 if it would not fit. */
int bk_member_gens_append(bk_member_t *m, uint64_t sub, uint64_t tasks);
/* Frees the current assignment and what is derived from it (slots, holders). */
void bk_member_free_assignment(bk_member_t *m);
/* The tables derived from an assignment (the fields of the same names in bk_member_t),
 * made before an assignment replaces the current one so that running out of memory
 * leaves the view as it was. alloc sizes them for `a` (rel_sent and told zeroed) and
 * grows m->lost_tasks to fit; -1 (nothing kept) without memory. take frees the current
 * assignment and installs `a` with the tables. */
typedef struct {
    int32_t *slot_peer;
    uint64_t *slot_inc;
    int32_t *own;
    uint8_t *rel_sent, *told;
} bk_member_tables_t;
int bk_member_tables_alloc(bk_member_t *m, const bk_assigncodec_t *a, bk_member_tables_t *t);
void bk_member_tables_free(bk_member_tables_t *t);
void bk_member_tables_take(bk_member_t *m, bk_assigncodec_t *a, bk_member_tables_t *t);
/* The fold itself: one record (its bytes, offset and timestamp) applied to the view. Reads
 * no clock and no Kafka: spec/01-unit/32-member_view_spec.lua drives it directly. */
void bk_member_apply_record(bk_member_t *m, const void *payload, size_t len, int64_t offset,
                            int64_t ts);

/* Checkpoints (member_checkpoint.c). encode appends the view (after the record header);
 * load replaces the view with the one a checkpoint record holds, *last its offset (the next
 * record to apply is *last + 1): 0, or -1 with errstr and the view untouched. reset empties
 * the view. */
int bk_member_checkpoint_encode(const bk_member_t *m, bk_wire_buf_t *w, char *errstr,
                                size_t errstr_size);
int bk_member_checkpoint_load(bk_member_t *m, const void *payload, size_t len, int64_t *last,
                              char *errstr, size_t errstr_size);
void bk_member_view_reset(bk_member_t *m);
void bk_member_maybe_checkpoint(bk_member_t *m, int64_t now);
void bk_member_checkpoint_delivered(bk_member_t *m, const rd_kafka_message_t *msg);
/* Serves the results of checkpoint commits (the member thread, outside the lock); drops
 * the queue they come on (before its consumer goes). */
void bk_member_serve_commits(bk_member_t *m);
void bk_member_drop_commits(bk_member_t *m);

/* Writing and leading (member_leader.c). */
int bk_member_produce(bk_member_t *m, int type, bk_wire_buf_t *w, int64_t ts);
int bk_member_stable(const bk_member_t *m);
void bk_member_lead(bk_member_t *m, int64_t now, int probe);
void bk_member_maybe_tick(bk_member_t *m, int32_t self, int64_t now);
void bk_member_send_heartbeat(bk_member_t *m, int64_t now);
void bk_member_w_header(bk_wire_buf_t *w, const bk_member_t *m, int type);

/* Copies (member_copy.c). */
int bk_member_cmp_i32(const void *a, const void *b);

/* Life (member.c). bk_member_new without its Kafka clients: the view alone, fed by
 * bk_member_apply_record (member_ffi.c). bk_member_destroy frees it. */
bk_member_t *bk_member_new_view(const bk_member_conf_t *mconf, char *errstr, size_t errstr_size);

#endif
