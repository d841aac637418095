/* diskwatch.h - a warning before the state directory's disk fills (docs/reliability.md, A
 * full disk).
 *
 * A full disk stops a node at its first write that fails (a store's flush or checkpoint,
 * a snapshot's install): the operator learns of it only then. The watch looks at the state
 * directory's filesystem every BK_DISKWATCH_CHECK_MS, from a thread of its own, and says
 * once when its free space falls below disk_free_warn_pct of its size, every
 * BK_DISKWATCH_SAY_MS while it stays there, and once when it has room again. */
#ifndef BK_DISKWATCH_H
#define BK_DISKWATCH_H

#include <stdint.h>

#include "base/conf.h"

#define BK_DISKWATCH_CHECK_MS 5000
#define BK_DISKWATCH_SAY_MS 60000

/* Starts the watch of conf's state directory (once per process; later calls, and a
 * disk_free_warn_pct of 0, do nothing). 0, or -1. */
int bk_diskwatch_start(const bk_conf_t *conf);
/* Stops and joins it. */
void bk_diskwatch_stop(void);

/* The state directory's filesystem: free bytes (for an unprivileged user) and its size, as
 * last looked at; -1 each before the first look or when it could not be read.
 * @locality any thread */
void bk_diskwatch_space(int64_t *free_bytes, int64_t *size_bytes);

#endif
