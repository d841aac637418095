/* bootstrap_mode.h - what cold bootstrap (bootstrap.h) says of each standby task, and the
 * standby runner (standby.h) reads when it opens the task's DB: whether the runner may hand
 * the task to cold bootstrap, and why. Bootstrap owns this state; the runner only reads
 * it. */
#ifndef BK_BOOTSTRAP_MODE_H
#define BK_BOOTSTRAP_MODE_H

enum {
    BK_BOOTSTRAP_MODE_AUTO =
        0, /* when its changelog lost what it needs, or it has much to replay */
    BK_BOOTSTRAP_MODE_FORCE = 1, /* asked for (`beck bootstrap`) */
    BK_BOOTSTRAP_MODE_NEVER = 2, /* a bootstrap failed: restore from the changelog */
    BK_BOOTSTRAP_MODE_GAP = 3,   /* just bootstrapped: only a gap makes it bootstrap again */
    BK_BOOTSTRAP_MODE_BUSY = 4   /* a bootstrap of it is under way: do not open its DB */
};

#endif
