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

#endif
