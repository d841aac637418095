/* plan.h - what C needs to know of a topology: its topics and subtopologies.
 *
 * Built once on the main thread from the topology's beck.app (app:describe()
 * in lua/beck/app.lua), then shared read-only by the stream threads, whose own
 * VMs number topics the same way. Topic partition counts are filled in later
 * from the cluster's metadata (engine/topics.c). */
#ifndef BK_PLAN_H
#define BK_PLAN_H

#include <lua.h>
#include <stddef.h>
#include <stdint.h>

#include "base/conf.h"
#include "base/task.h"

typedef struct bk_plan_topic_s {
    char *name;
    int source;     /* read by a source node */
    int sink;       /* written by a sink node */
    /* subtopology reading it (0-based), -1 for sink-only topics. A move from generation 0
     * (bk_plan_grow) gives an input to the passthrough it gains: `sub` is written before
     * pass_to, and a reader that sees pass_to >= 0 sees the passthrough in `sub`. */
    _Atomic int sub;
    int internal;   /* owned by the app (repartition): created on any cluster */
    int want;       /* partitions asked for by the topology, 0: derive */
    int partitions; /* from the cluster's metadata, 0 until known */
    int keygroups;  /* a generation's topic: records go to the partition owning their key's
                       group (bk_hash_group_owner), not murmur2's */
    _Atomic int pass_to; /* read by a passthrough subtopology: the topic its records are
                            forwarded to as they are (generation 1's), else -1 */
    int generation; /* a generation's topic: which (1, 2, ...), else 0 */
} bk_plan_topic_t;

typedef struct bk_plan_sub_s {
    int ntopics;
    int *topics;    /* indices into the plan's topics */
    int partitions; /* tasks of this subtopology */
    int generation; /* 0: its tasks own keys by input partition; >= 1: by key-group range,
                       reading that generation's topics (the `tasks` setting) */
    int passthrough; /* no nodes: its tasks forward their records to a generation's topic;
                        it has as many tasks as that generation (want), task q reading each
                        input partition p with p mod want = q, so that its input can grow */
    int want;        /* tasks asked for by the topology (a passthrough's), 0: its input's */
    int of;          /* the subtopology whose processors it runs: its own index, but for a
                        later generation (>= 2, appended) that of the one it is a generation
                        of; for a passthrough the one it feeds */
} bk_plan_sub_t;

typedef struct bk_plan_store_s {
    char *name;
    char *changelog; /* <app>-<store>-changelog, -g1 after it in generation 1 */
    char *changelog_other; /* the name under the other generation: state there is refused */
    int logged;
    int window;           /* a window store (store.h) */
    int versioned;        /* a versioned store (window layout: lua/beck/internal/versioned.lua) */
    int64_t retention_ms; /* a window store's retention, 0: not given */
    int64_t ttl_ms;       /* a key-value store's time to live, 0: none */
    int ttl_wall;         /* ... counted on the wall clock, not in record time */
    int sub;              /* subtopology whose tasks hold it (0-based) */
    char *key_serde, *value_serde; /* the serdes' names when the topology gives them, else NULL */
    int of_store; /* a later generation's copy of a store: the index of the store it copies
                     (whose name it has), else -1 */
} bk_plan_store_t;

/* A global table (app:global_table, engine/global.h): every node holds all of it, read from
 * every partition of its topic; no task, no changelog. */
typedef struct bk_plan_global_s {
    char *name;  /* its store's name, as processors and queries ask for it */
    char *topic; /* the topic it is read from */
} bk_plan_global_t;
/* Entries of each kind (topics, subtopologies, stores) a plan can take on top of what it
 * was loaded with, by later generations (bk_plan_grow): the arrays never move, so other
 * threads go on reading them while a generation is added. */
#define BK_PLAN_SPARE 256
/* Tasks the app's task table can take on top of its first count (bk_plan_task_table): the
 * per-task arrays of a node are made this much larger, which costs address space, not
 * memory, until tasks use it. */
#define BK_PLAN_TASK_SPARE 4096

typedef struct bk_plan_s {
    char *id;
    char *path; /* topology file */
    /* The counts only grow (bk_plan_grow), each after its new entries are written: a reader
     * sees a count and the entries below it complete. */
    _Atomic int ntopics;
    bk_plan_topic_t *topics;
    _Atomic int nsubs;
    bk_plan_sub_t *subs;
    _Atomic int nstores;
    bk_plan_store_t *stores;
    int cap_topics, cap_subs, cap_stores;
    int nglobals; /* fixed at load: a later generation adds none */
    bk_plan_global_t *globals;
    /* [cap_subs] a generation retired (every task drained, a later one exists): set by
     * the node's main thread (bk_plan_set_retired), read by the stream threads */
    _Atomic unsigned char *sub_retired;
    /* [cap_subs] a generation whose tasks are all sealed (their changelogs hold their whole
     * state: engine/thread_seal.c), as the node's cleanup read from the app's commits */
    _Atomic unsigned char *sub_sealed;
    /* [cap_topics] the topic exists on the cluster (bk_plan_set_ready): those loaded at
     * once, a later generation's once the node made it. A passthrough switches to a
     * generation's topic only then: a producer to a topic still being made waits, and
     * with it the thread's next commit and everything the thread runs. nready counts the
     * calls, so a thread sees a change. */
    _Atomic unsigned char *topic_ready;
    _Atomic int nready;
    _Atomic int ready_nstores; /* the stores whose changelogs exist: the first this many */
    /* The later generations it describes, "S=N[,S=N...]", NULL: none. A thread starting
     * reads it while the main thread may grow the plan: a replaced list is kept (retired)
     * until the plan is destroyed, never freed under a reader. */
    char *_Atomic generations;
    char **retired;
    int nretired;
    /* The app's task table (bk_plan_task_table), NULL until first asked for; it grows with
     * the plan like the arrays above. */
    bk_task_id_t *task_table;
    _Atomic int ntask_table;
    int cap_task_table;
} bk_plan_t;

/* Gives the app at stack index `app` the settings that change its plan as conf resolved
 * them (command line, environment, topology) and the later generations (NULL: none; the
 * moves made so far, from the app's control topic): every VM of a node must describe the
 * same plan (app.lua's describe reads config.id, config.tasks and config.generations). */
void bk_plan_settings_to_app(lua_State *L, int app, const bk_conf_t *conf,
                             const char *generations);

/* Runs the topology file in L, checks that it returns a beck.app, applies its
 * settings to conf (as BK_CONF_FROM_TOPOLOGY) and builds the plan. On error
 * returns NULL with a message naming file and line. Free with
 * bk_plan_destroy(). */
bk_plan_t *bk_plan_load(lua_State *L, const char *path, bk_conf_t *conf, char *errstr,
                        size_t errstr_size);
void bk_plan_destroy(bk_plan_t *plan);

/* Adds the generations that `generations` ("S=N[,S=N...]", the plan's own list followed
 * by more) has beyond the plan's: the topology in `path` is described again in L with
 * them, and its new topics, subtopologies and stores appended; what the plan has stays at
 * its index. Their partitions are their task counts. conf: the one the plan was loaded
 * with. Main thread, one caller at a time.
 * The task table, once made, gains the new subtopologies' tasks.
 * 0, or -1 with errstr (nothing added) when the list does not extend the plan's, a
 * description fails, or the spare room (BK_PLAN_SPARE, BK_PLAN_TASK_SPARE) is used up. */
int bk_plan_grow(bk_plan_t *plan, const bk_conf_t *conf, lua_State *L, const char *generations,
                 char *errstr, size_t errstr_size);

/* A task: bk_task_id_t (base/task.h). The app's task table numbers every task, subtopology
 * by subtopology, partition by partition; a task's index there is its id on the control
 * topic and its slot on a stream thread. */
/* Every task of the app in that order (free() it); *ntasks their count. */
bk_task_id_t *bk_plan_tasks(const bk_plan_t *plan, int *ntasks);
/* The same table, owned by the plan and shared. Made by bk_plan_make_task_table (on the main
 * thread, once the topics' partition counts are known, before any other thread reads it)
 * with room for BK_PLAN_TASK_SPARE more, to which bk_plan_grow appends the tasks of later
 * generations: a reader may keep the pointer and size its per-task arrays by *cap. *ntasks
 * is the count now. 0, or -1 out of memory. */
int bk_plan_make_task_table(bk_plan_t *plan);
/* The table made, or NULL (*ntasks, *cap 0) before. */
const bk_task_id_t *bk_plan_task_table(const bk_plan_t *plan, int *ntasks, int *cap);

/* The stores of subtopology `sub`'s tasks: fills specs[] (names borrowed from the plan) and
 * idx[] (their plan store indices), each of room plan->nstores; returns how many. */
struct bk_store_spec_s;
int bk_plan_sub_stores(const bk_plan_t *plan, int sub, struct bk_store_spec_s *specs, int *idx);

/* The state directory of a task: <state_dir>/<app>/<task name> (base/task.h). */
void bk_plan_task_dir(const bk_plan_t *plan, const bk_conf_t *conf, bk_task_id_t task, char *buf,
                      size_t size);

/* Where a node keeps the snapshots it makes for cold bootstrap: <state_dir>/<app>/snapshots
 * (snapshot.h, bootstrap.h). */
void bk_plan_snapshot_dir(const bk_plan_t *plan, const bk_conf_t *conf, char *buf, size_t size);

/* Generations (docs/repartitioning.md). `of` is a topology's own subtopology; its
 * generation g >= 1 is a subtopology of the plan (generation 1: `of` itself, with the
 * `tasks` setting; later ones appended by bk_plan_grow). */
/* The subtopology running generation g of `of`, -1: none. Generation 0 is `of` itself while
 * it reads its input by input partition (no `tasks` setting). */
int bk_plan_generation_sub(const bk_plan_t *plan, int of, int g);
/* The latest generation of `of` (0: it has none of its own). */
int bk_plan_latest_generation(const bk_plan_t *plan, int of);
/* The generation before subtopology s's, whose tasks s's are built from by a move, -1:
 * none (s is no generation, or its generation started empty: generation 1 of the `tasks`
 * setting). */
int bk_plan_prev_generation(const bk_plan_t *plan, int s);
/* The key groups [*lo, *hi) that task p of subtopology s may hold: its range in a
 * generation >= 1, every group in generation 0 (by input partition). */
void bk_plan_task_groups(const bk_plan_t *plan, int s, int p, int *lo, int *hi);
/* Subtopology s is generation 0 of its own and a later generation exists: its tasks drain
 * at once (engine/thread_moves.c), the passthrough reads its input. */
int bk_plan_gen0_moved(const bk_plan_t *plan, int s);
/* Subtopology s keeps state in a changelog (a logged store): what a move carries over, and
 * what fixes a generation 0's task count when its input grows (engine/topics.c). */
int bk_plan_sub_logged(const bk_plan_t *plan, int s);
/* The passthrough subtopology feeding `of`'s generations, -1: none. */
int bk_plan_passthrough_of(const bk_plan_t *plan, int of);
/* The index k of input topic t among its passthrough subtopology's topics (0 if none). */
int bk_plan_passthrough_input(const bk_plan_t *plan, int t);
/* Generation subtopology s is retired (node_cleanup.h): nothing writes to its topic again,
 * whose records may be deleted. Set from the main thread, read from any. */
void bk_plan_set_retired(bk_plan_t *plan, int s);
int bk_plan_retired(const bk_plan_t *plan, int s);
/* Generation subtopology s is sealed (node_cleanup.c): a task of it opened without its
 * directory restores from its own changelogs, with no build. */
void bk_plan_set_sealed(bk_plan_t *plan, int s);
int bk_plan_sealed(const bk_plan_t *plan, int s);
/* The first ntopics topics and the changelogs of the first nstores stores exist on the
 * cluster now (main thread): a stream thread makes its producer's handles of a later
 * generation's topics only then (a producer asking for a topic that does not exist yet
 * may have the dev broker make it, with another width). Whether topic t does (any). */
void bk_plan_set_ready(bk_plan_t *plan, int ntopics, int nstores);
int bk_plan_topic_ready(const bk_plan_t *plan, int t);
/* The index in the app's task table of subtopology s's first task (its tasks follow). */
int bk_plan_first_task(const bk_plan_t *plan, int s);

/* Index of a topic by name, -1 if the topology does not use it. */
int bk_plan_topic_index(const bk_plan_t *plan, const char *name);

#endif
