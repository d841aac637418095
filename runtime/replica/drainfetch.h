/* drainfetch.h - a drained task's checkpoint (engine/drained.h) brought from the node that
 * holds it, for a task of the next generation built here (docs/repartitioning.md, Building
 * a task). Over the control topic's notes and SFTP, as cold bootstrap does (bootstrap.h):
 *   asker    bk_drainfetch_want sends "drained-want" (req=ID task=S_P) to every node;
 *            the first "drained-here" names host, port and directory, and a worker thread
 *            fetches the manifest and files (sftp.h, verified by size and XXH3-64) into
 *            <state_dir>/<app>/drained/<S_P>/<id>.tmp, renamed to <id> when whole: the
 *            build then finds it as if the task had drained here.
 *   holder   a node that holds the checkpoint answers "drained-here"; one that does not
 *            answers "drained-none", so that the asker gives up at once when no node has
 *            it (its node died), instead of waiting for bootstrap_timeout_ms.
 * A checkpoint that cannot be had (no ssh_key, no holder, a failed fetch, no answer within
 * bootstrap_timeout_ms) is given up: the build replays the changelogs of those key groups.
 * @locality the node's main thread (the fetches run on their own threads). */
#ifndef BK_DRAINFETCH_H
#define BK_DRAINFETCH_H

#include "base/conf.h"
#include "base/task.h"
#include "cluster/member.h"
#include "engine/plan.h"

#define BK_DRAINFETCH_WANT "drained-want"
#define BK_DRAINFETCH_HERE "drained-here"
#define BK_DRAINFETCH_NONE "drained-none"

typedef struct bk_drainfetch_s bk_drainfetch_t;

/* NULL: out of memory. plan, conf and member must outlive it. */
bk_drainfetch_t *bk_drainfetch_new(const bk_plan_t *plan, const bk_conf_t *conf,
                                   bk_member_t *member, const char *node_id);
/* Waits for running fetches (bounded by their timeouts). */
void bk_drainfetch_destroy(bk_drainfetch_t *df);

/* Whether task's drained checkpoint is on this node: 1 yes; 0 not yet (asked for, or being
 * fetched; npeers is how many other nodes may answer); -1 it cannot be had (logged once). */
int bk_drainfetch_want(bk_drainfetch_t *df, bk_task_id_t task, int npeers);

/* A note of one of the three kinds above: 1 taken, 0 another kind. */
int bk_drainfetch_note(bk_drainfetch_t *df, const bk_member_note_t *note);

/* Ends finished fetches and requests past bootstrap_timeout_ms, and asks again (npeers
 * other nodes alive now) for those not answered within 2 s. 1 when any ended (a task
 * waiting for it may start). */
int bk_drainfetch_poll(bk_drainfetch_t *df, int npeers);

#endif
