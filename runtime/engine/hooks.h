/* hooks.h - the node's own operational hooks: on_assign(tasks), on_revoke(tasks) and
 * on_promote(task) of the topology (app:hook) and of the --hooks file, run on the node's
 * main thread in a VM of their own, never on a stream thread.
 *
 * A hook that raises is logged with its file and line and the node goes on: a hook
 * observes the node's life, it does not decide it.
 * @locality the node's main thread. */
#ifndef BK_HOOKS_H
#define BK_HOOKS_H

#include <stddef.h>
#include <stdint.h>

typedef struct bk_hooks_s bk_hooks_t;

/* Runs the topology file `path` in a new VM and adds the hooks of `hooks_path` (NULL:
 * none). NULL with errstr (file and line) if either fails to load. */
bk_hooks_t *bk_hooks_new(const char *path, const char *hooks_path, char *errstr,
                         size_t errstr_size);
void bk_hooks_destroy(bk_hooks_t *h);

/* Calls hook `name` with a list of task ids ("0_3", ...) if the app has that hook and n > 0.
 * Returns 0, or -1 if it raised (logged). */
int bk_hooks_tasks(bk_hooks_t *h, const char *name, const char *const *tasks, int n);

/* Calls hook `name` with one task id. */
int bk_hooks_task(bk_hooks_t *h, const char *name, const char *task);

/* Cold bootstrap's progress (bootstrap.h), to on_restore with p.kind = "bootstrap": p.task,
 * p.from (the node fetched from), p.bytes, p.total, p.percent, p.mb_per_s, p.eta_s,
 * p.elapsed_s, p.done and, once done, p.ok (false: it fell back to the changelog). */
typedef struct bk_hooks_bootstrap_s {
    const char *task, *from;
    uint64_t bytes, total;
    double elapsed_s, eta_s;
    int done, ok;
} bk_hooks_bootstrap_t;
int bk_hooks_bootstrap(bk_hooks_t *h, const bk_hooks_bootstrap_t *p);
/* A move's progress (docs/repartitioning.md), to on_repartition with p.phase "moved" (the
 * move is on the control topic), "drained" (one more task of the generation it replaces
 * drained) or "complete" (all of them: the new generation alone runs), p.subtopology,
 * p.generation (the new one), p.tasks (its count), p.from_tasks (the count it replaces),
 * p.drained (how many of those have drained). */
typedef struct bk_hooks_repartition_s {
    const char *phase;
    int subtopology, generation, tasks, from_tasks, drained;
} bk_hooks_repartition_t;
int bk_hooks_repartition(bk_hooks_t *h, const bk_hooks_repartition_t *p);

#endif
