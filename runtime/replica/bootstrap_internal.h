/* bootstrap_internal.h - cold bootstrap's insides, shared by bootstrap.c (the replica's side:
 * asking, fetching, installing; the loop) and bootstrap_serve.c (the active's side: the
 * snapshots another node asked for, made and announced). Nothing else includes it. */
#ifndef BK_BOOTSTRAP_INTERNAL_H
#define BK_BOOTSTRAP_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "cluster/member.h"
#include "replica/bootstrap.h"

#define MANIFEST_MAX (64u << 20) /* a manifest of BK_MANIFEST_MAX_FILES lines fits */
#define SWEEP_MS 10000
#define RETRY_LATER_MS 2000
#define NO_SNAPSHOT "no snapshot could be made"
/* An active that answers it has no snapshot of a task (it gave the task up as the view
 * changed: a join moves tasks while a joiner asks) is asked again, through the next view's
 * active, this many times before the replica restores from its changelog instead. */
#define MOVED_RETRIES 2

enum { J_IDLE = 0, J_WANTED, J_REQUESTED, J_FETCHING, J_ENDED };
/* Tasks one request may name: their snapshot ids fit in one note. */
#define BATCH_MAX 32

/* One task this node keeps a standby of. */
typedef struct job_s {
    int state;
    int mode;     /* BK_BOOTSTRAP_MODE_* for the next standby runner */
    int standing; /* this node keeps a standby of the task (bk_bootstrap_keep) */
    int batch;    /* the batch it is in (REQUESTED, FETCHING), -1: none */
    char why[512];
    char snap[128]; /* from "snapshot-ready": its snapshot's id, "" if the active made none */
    int ok;
    char err[1024];
    int64_t t0, last_log, hook_at;
    /* a later generation's replica that failed (its active not built yet): asked for again
     * then (mono ms), as it has no changelog to fall back on; 0: none */
    int64_t retry_at;
    int moved_retries; /* asked again as its active had none (MOVED_RETRIES) */
    int later_retries; /* a later generation's replica asked for again since it last had one */
    _Atomic uint64_t bytes, total;
    struct bk_bootstrap_s *b;
    int32_t task;
} job_t;

/* One request of this node to one active, for up to BATCH_MAX tasks, and its fetch: one
 * worker thread reads every manifest and file over the same SSH connection(s). */
typedef struct batch_s {
    struct bk_bootstrap_s *b;
    int used, fetching;
    char req[128];
    char from[BK_MEMBER_MAX_ID + 1], host[256], root[4096];
    int port;
    int ntasks;
    int32_t tasks[BATCH_MAX];
    int64_t deadline;
    pthread_t tid;
    int joinable;
    atomic_int finished;
} batch_t;

/* A request this node serves: the snapshots it made for another node. */
typedef struct served_s {
    char req[128];
    char to[BK_MEMBER_MAX_ID + 1];
    int ntasks;
    int32_t tasks[BATCH_MAX];
    char ids[BATCH_MAX][128]; /* snapshot ids made, "" while pending or failed */
    char got[BATCH_MAX];      /* the thread answered (or could not be asked) */
    int64_t until;            /* dropped then if not fetched (the thread asked may have stopped) */
} served_t;

struct bk_bootstrap_s {
    bk_bootstrap_env_t env;
    int fetch_on;
    pthread_mutex_t lock; /* guards job states (bk_bootstrap_want runs on the standby thread) */
    job_t *jobs;          /* [ntasks] */
    batch_t *batches;     /* [max] */
    served_t *served;     /* [max] */
    int nserved, max;
    unsigned seq;
    int64_t last_sweep;
    char root[4096]; /* <state_dir>/<app>/snapshots */
};

/* bootstrap.c: a task's index by its name, -1; a served request's memory given back; the
 * request of this node's wanted tasks to the active `owner` of the view. */
int32_t bk_bootstrap_task_by_name(const bk_bootstrap_t *b, const char *name);
void bk_bootstrap_remove_served(bk_bootstrap_t *b, served_t *s);
void bk_bootstrap_request(bk_bootstrap_t *b, const bk_member_view_t *view, int32_t owner);
/* bootstrap_serve.c: a request served (by its id, NULL), dropped; a "snapshot-request"
 * note taken (the snapshots asked of the threads running the tasks); the snapshots made
 * since, answered with a "snapshot-ready" note once all of a request's are. */
served_t *bk_bootstrap_served_by_req(bk_bootstrap_t *b, const char *req);
void bk_bootstrap_drop_served(bk_bootstrap_t *b, served_t *s);
void bk_bootstrap_on_request(bk_bootstrap_t *b, const bk_member_note_t *n);
void bk_bootstrap_serve(bk_bootstrap_t *b);

#endif
