/* member.h - cluster membership of one node through its app's control topic
 * (`<app id>-control`, one partition): heartbeats, leave notices, assignments and releases.
 * Every member reads the topic in order (from the latest checkpoint of the view, or its start)
 * and derives the same view from it:
 * who is alive, who leads, the current epoch's assignment and which node holds each task.
 * The leader computes a new assignment (assign.h, published with assigncodec.h) when the
 * live set changes. Moving a task is cooperative: the member tells its node what to release
 * and what it may start, and a gained task starts only once its holder released it or is
 * gone. docs/cluster.md has the rules and why two leaders cannot both win.
 *
 * It does not run tasks, commit offsets or touch state: the node does, on what
 * bk_member_poll() says. It owns one consumer and one producer of the control topic and a
 * thread of its own ("member"). An observer (`beck status`) derives the same view with the
 * consumer only: it never joins, heartbeats, publishes or creates the topic. */
#ifndef BK_MEMBER_H
#define BK_MEMBER_H

#include <stddef.h>
#include <stdint.h>

#include "base/conf.h"

#define BK_MEMBER_HEARTBEAT_MS 1000 /* default heartbeat interval */
#define BK_MEMBER_SESSION_MS 10000  /* default session timeout */
#define BK_MEMBER_MAX_ID 255        /* longest node id, rack or endpoint, in bytes */
#define BK_MEMBER_GENS_MAX 4096     /* longest list of moves a view keeps, in bytes */

typedef struct bk_member_s bk_member_t;

/* What bk_member_new() reads; every pointer is borrowed for the call only, except conf,
 * which must outlive the member. */
typedef struct bk_member_conf {
    const bk_conf_t *conf; /* -b and -X/-F settings for the clients (bk_kafka_new) */
    const char *app_id;    /* the control topic is "<app_id>-control" */
    /* Unique in the app; a restart may reuse it (new incarnation). An observer's names it in
     * the log and takes the notes sent to that id (answers to a command; NULL: "observer"). */
    const char *node_id;
    const char *rack;     /* NULL or "": no rack */
    const char *endpoint; /* where the node serves queries, "host:port"; NULL or "" */
    int32_t threads;      /* stream threads: the member's share of tasks, >= 1 (observer: any) */
    /* Tasks are 0..ntasks-1; every member of the app must agree. An observer may pass 0: the
     * view's ntasks comes from the current assignment, which holds the count. */
    int32_t ntasks;
    /* Names of the tasks, [ntasks] (e.g. "0_3" for subtopology 0, partition 3), or NULL for
     * "0".."ntasks-1": hashed into the layout fingerprint that heartbeats carry, so that a
     * member whose tasks mean something else (another topology version) is given none. */
    const char *const *task_names;
    int32_t standbys; /* K standby replicas per task, >= 0 */
    /* Warm-up (assign.h): with warmup set and K >= 1, the leader keeps a task on a replica
     * at most acceptable_lag records behind while the member balance chose warms up. */
    int warmup;
    int64_t acceptable_lag;
    /* Warm-up: every so often the leader recomputes the epoch, and publishes it when a task
     * held back may move now (0: 5000 ms). */
    int probe_interval_ms;
    int heartbeat_interval_ms; /* 0: BK_MEMBER_HEARTBEAT_MS */
    /* The leader checkpoints the view at least this often (0: 10 minutes), and whenever the
     * records since the last checkpoint outweigh it 4 times (docs/cluster.md, Checkpoints). */
    int checkpoint_interval_ms;
    /* 0: BK_MEMBER_SESSION_MS; > 2 heartbeat intervals. An observer given 0 takes the one the
     * heartbeats it reads announce, which is what the members that wrote them use. */
    int session_timeout_ms;
    /* Called on the member thread after the view changed (see bk_member_poll); it may call
     * any bk_member_* function but bk_member_stop/destroy. NULL: poll instead. */
    void (*on_change)(void *opaque);
    void *opaque;
    /* 1: an observer. It reads the log (from the latest checkpoint) and derives the view as a
     * member does, but never joins, heartbeats or publishes, and refuses a missing control
     * topic instead of creating it (bk_member_start). It has no producer. */
    int observe;
} bk_member_conf_t;

/* A member of the app as the log shows it. */
enum { BK_MEMBER_ALIVE = 0, BK_MEMBER_DEAD, BK_MEMBER_LEFT, BK_MEMBER_REPLACED };

typedef struct bk_member_peer {
    const char *id, *rack, *endpoint; /* owned by the view */
    uint64_t incarnation;
    int32_t threads;
    int state;           /* BK_MEMBER_ALIVE.. */
    int64_t join_offset; /* offset of this incarnation's first heartbeat */
    /* These two change with every heartbeat without changing the view's version: they are as
     * of the last copy (bk_member_poll copies only on a change of version). */
    int64_t last_ts; /* timestamp (ms) of its latest heartbeat */
    uint64_t epoch;  /* the epoch its latest heartbeat reported */
} bk_member_peer_t;

/* One replica's progress as a live peer's latest heartbeat reported it
 * (bk_member_set_progress on that node). */
typedef struct bk_member_progress {
    int32_t peer; /* index into the view's peers */
    int32_t task;
    int64_t offset, lag;
    /* Log time (ms) of the first heartbeat that reported this offset: how long the replica has
     * stood still is log_time - changed_ts. The first report of a task counts as a change. */
    int64_t changed_ts;
} bk_member_progress_t;

/* The view of one member: filled by bk_member_poll() into memory the view owns (reused by
 * the next poll into the same view), freed by bk_member_view_clear(). Zero it before the
 * first poll. Task lists are sorted. */
typedef struct bk_member_view {
    uint64_t version;     /* changes whenever anything below changes */
    uint64_t incarnation; /* this member's; a new one after it was lost */
    uint64_t epoch;       /* the current assignment's epoch; 0: none yet */
    int joined;           /* this incarnation's heartbeat is in the log and it is alive */
    int lost;             /* the control plane is out of reach: stop every active task now */
    int stable;           /* the assignment covers exactly the live members */
    int is_leader;
    const char *error; /* why the member gave up (static text), or NULL */
    int32_t leader;    /* index into peers of the leader, -1: none */
    /* Alive ones first, in join order, then the ended ones. The rules forget an ended member
     * a session after it ended (unless the current epoch names it); an observer still lists
     * the latest 32 forgotten ones at the end, for show. */
    int32_t npeers;
    bk_member_peer_t *peers;
    int32_t nrunning; /* assigned to me and mine to run: run them */
    int32_t *running;
    int32_t nwaiting; /* assigned to me; their previous holder has not released them */
    int32_t *waiting;
    int32_t nrelease; /* not mine any more (or lost): stop, commit, bk_member_released() */
    int32_t *release;
    int32_t nstandby; /* standby replicas of this epoch */
    int32_t *standby;
    int64_t log_time; /* the largest record timestamp seen (ms) */
    int64_t join_ts;  /* timestamp of this incarnation's first heartbeat; 0: none yet */
    /* Has read the log up to where it ended when the member started (and to the end its
     * fetches saw then): from here on the view is the app's present, not a replay of its
     * history. Set once, never cleared. */
    int caught_up;
    int64_t next_offset; /* the next control record the view will read */
    /* Where this member's reading began (0, or the offset after the one the checkpoint it
     * started from describes) and how many records it read to catch up (set with
     * caught_up): what a start costs, which checkpoints keep from growing with the log. */
    int64_t start_from, start_records;
    int session_timeout_ms; /* the one the liveness rule applies (an observer's: announced) */
    /* The moves the leader made, "S=N[,S=N...]" in order ("": none): each adds the next
     * generation of subtopology S, with N tasks (docs/repartitioning.md); the plan is
     * described with it (engine/plan.h, bk_plan_grow). */
    char generations[BK_MEMBER_GENS_MAX + 1];
    int32_t ngenerations;
    /* Tasks (indices of the app's task table) of generations that a move replaces, which
     * have drained to their barriers: every record forwarded to them before the move is in
     * their committed state and changelogs. Sorted. */
    int32_t ndrained;
    int32_t *drained;
    /* The whole app's tasks, for every member (routing, `beck status`). Task t of the current
     * assignment (0..ntasks-1; ntasks is 0 before the first epoch):
     *   owner[t]       the peer the current epoch makes its active, -1 if none. It is the
     *                  incarnation the epoch was made for and may have ended since (check its
     *                  state before routing to it); -1 too once that incarnation is forgotten.
     *   holder[t]      the peer that holds it (may be running it), -1: nobody. A holder other
     *                  than the owner is a handoff in progress (it has not released the task).
     *   standby_of[t * k + j]  its j-th standby replica's peer, as owner; -1: none.
     * Peer indices are into peers[]. */
    int32_t ntasks, k;
    int32_t *owner, *holder, *standby_of;
    /* Progress reported by the latest heartbeat of each live peer, by peer then task. Like a
     * peer's last_ts and epoch it changes without changing the version: it is as of the last
     * copy (bk_member_poll_force copies anyway). */
    int32_t nprogress;
    bk_member_progress_t *progress;
    /* internal: what the arrays hold, and the peers' strings */
    size_t cap_peers, cap_tasks, cap_strings, cap_owner, cap_standby_of, cap_progress;
    size_t cap_drained;
    int32_t *peer_map, *peer_order; /* the member's peer slots <-> indices into peers */
    char *strings;
} bk_member_view_t;

/* Creates a member (clients made, nothing sent). NULL with errstr on a bad conf or a client
 * that cannot be made. Free with bk_member_destroy(). */
bk_member_t *bk_member_new(const bk_member_conf_t *mconf, char *errstr, size_t errstr_size);

/* Creates the control topic when it is missing (on a real cluster through the Admin API with
 * conf's replication factor) and starts the member thread, which reads from the latest
 * checkpoint of the view (docs/cluster.md, Checkpoints) and joins once it has read the log
 * up to its end. Blocks up to ~10 s on metadata.
 * 0, or -1 with errstr. An observer instead fails when the topic is missing. */
int bk_member_start(bk_member_t *member, char *errstr, size_t errstr_size);

/* Copies the current view into *view if it changed since view->version: 1 if it did, 0 if
 * not, -1 if memory ran out (view->version is then 0, so the next poll copies again).
 * @locality any thread */
int bk_member_poll(bk_member_t *member, bk_member_view_t *view);

/* The same, but copies even when the version did not change, so that what changes without it
 * (the peers' last_ts and epoch, progress) is fresh; returns 1 only if the version changed.
 * Costs a full copy each call: for `beck status` and metrics, not a node's loop.
 * @locality any thread */
int bk_member_poll_force(bk_member_t *member, bk_member_view_t *view);

/* This member's incarnation now (the view's, before any poll). @locality any thread */
uint64_t bk_member_incarnation(bk_member_t *member);
/* Where the member keeps the node's lease, in wall-clock ms: the time until which no other
 * member can have taken this one for dead (its own latest heartbeat in the log plus a
 * session less a heartbeat), 0 once it is lost or before its heartbeat is in the log again.
 * The node's stream threads process and commit only within it (engine/thread.h). `lease`
 * must outlive the member; the member thread writes it from its next batch on. */
void bk_member_set_lease(bk_member_t *member, _Atomic int64_t *lease);

/* Frees what polls put in *view and zeroes it. */
void bk_member_view_clear(bk_member_view_t *view);

/* Progress of a task this node holds, for the next heartbeats: `offset` is its input position
 * (an active) or its changelog position (a standby), `lag` how many records its state is
 * behind the changelogs' end (0 for an active). The leader prefers low lags when it moves a
 * task. lag < 0 forgets the task. @locality any thread */
void bk_member_set_progress(bk_member_t *member, int32_t task, int64_t offset, int64_t lag);

/* The node stopped these tasks (committed and closed them) after the view of `epoch` listed
 * them in `release`: publishes a release so that their new owners may start. Tasks this
 * member does not hold are skipped; while lost nothing is published, but the member rejoins
 * only once every task it held is released. 0, or -1 if the release could not be queued
 * (the tasks stay listed). @locality any thread */
int bk_member_released(bk_member_t *member, uint64_t epoch, const int32_t *tasks, int32_t n);

/* The node's task table changed (a later generation grew its plan, or a generation's tasks
 * stopped or started being assignable): tasks are now 0..ntasks-1, no fewer than before, and
 * the leader assigns only those with assignable[t] != 0 (NULL: all), leaving the others
 * unassigned, and gives no standbys to those with BK_MEMBER_ACTIVE_ONLY (tasks that hold no
 * state: a standby would keep nothing); it recomputes its epoch when the current one differs.
 * origin[t] >= 0 (NULL: none) names the task whose state t is built from (the task of the
 * generation before that overlaps it most): a task without a present previous active (never
 * assigned yet, or its node gone) is placed as if it had been that task's, beside it when balance
 * allows, so that its build finds the drained checkpoint on its own node
 * (docs/repartitioning.md). The layout fingerprint stays the one bk_member_new made from the first
 * table, so members whose tables grow at slightly different moments go on sharing tasks. 0, or -1
 * (fewer tasks, too many, or out of memory: nothing changed). @locality any thread */
int bk_member_set_tasks(bk_member_t *member, int32_t ntasks, const uint8_t *assignable,
                        const int32_t *origin);
#define BK_MEMBER_ACTIVE_ONLY 2 /* assignable[t]: an active, no standbys */

/* Notes: short messages between the nodes of an app on the control topic (cold bootstrap's
 * snapshot requests and replies, operator commands). A note goes to one node by id, or to
 * every node (to NULL or ""); a node sees only the notes written after it started, never
 * its own; an observer only those sent to its id. kind: up to BK_MEMBER_MAX_ID bytes;
 * text: up to BK_MEMBER_NOTE_MAX. */
#define BK_MEMBER_NOTE_MAX 2048
typedef struct bk_member_note {
    char from[BK_MEMBER_MAX_ID + 1];
    char kind[BK_MEMBER_MAX_ID + 1];
    char text[BK_MEMBER_NOTE_MAX + 1];
} bk_member_note_t;

/* Queues a note (non-blocking). 0, or -1 (observer, too long, queue full).
 * @locality any thread */
int bk_member_note(bk_member_t *member, const char *to, const char *kind, const char *text);
/* The oldest note for this node not taken yet: 1 and *note filled, or 0.
 * @locality any thread */
int bk_member_take_note(bk_member_t *member, bk_member_note_t *note);
/* The leader adds the next generation of subtopology `sub`, with `tasks` tasks: a record
 * that every view applies if it is still from the leader where it lands and follows
 * `after` moves (the view's ngenerations when the leader decided), so a move is added once.
 * Only the record is queued: the view shows the move once it is read back. 0, or -1 (an
 * observer, a bad count, `after` not the current count, or a producer error). */
int bk_member_add_generation(bk_member_t *member, int32_t sub, int32_t tasks, int32_t after);
/* Task `task` of a generation a move replaces has drained to its barriers (read the barrier
 * of every passthrough task and committed what came before them): a record every view
 * applies, from whoever writes it. Queued only. 0, or -1 (an observer, a producer error).
 * @locality any thread */
int bk_member_drained(bk_member_t *member, int32_t task);
/* A note's text is "key=value" words: the value of `key=` in text into out ("" when
 * missing); `why=` takes the rest of the text. */
void bk_member_note_word(const char *text, const char *key, char *out, size_t size);
/* A note record's value as a tool outside the app writes it (`beck bootstrap`), from a
 * sender id of its own; *buf is malloc'd. 0, or -1 when a field is too long. */
int bk_member_note_encode(const char *from, const char *to, const char *kind, const char *text,
                          uint8_t **buf, size_t *len);

/* Stops the member thread. With `leave`, first publishes a leave notice and waits (up to the
 * session timeout) for its delivery, so that the others take over at once instead of after
 * the session timeout: call it only once the node has stopped and committed every task.
 * 0, or -1 if the leave notice was not delivered. */
int bk_member_stop(bk_member_t *member, int leave);

/* Stops (without a leave notice) if running, closes the clients, frees everything. */
void bk_member_destroy(bk_member_t *member);

#endif
