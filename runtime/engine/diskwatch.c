/* diskwatch.c - the state directory's free space, watched (diskwatch.h). */
#include "engine/diskwatch.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#include "base/clock.h"
#include "base/events.h"
#include "base/log.h"

static atomic_llong free_now = -1, size_now = -1;

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    int started, stop;
    char dir[4096];
    int pct;
} w = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

void bk_diskwatch_space(int64_t *free_bytes, int64_t *size_bytes)
{
    *free_bytes = (int64_t)atomic_load(&free_now);
    *size_bytes = (int64_t)atomic_load(&size_now);
}

/* "300 KiB", "12 MiB", "1.5 GiB" into buf. */
static const char *human(int64_t bytes, char *buf, size_t size)
{
    double b = (double)bytes;
    if (b >= 10.0 * (1 << 30)) {
        snprintf(buf, size, "%.0f GiB", b / (1 << 30));
    } else if (b >= (1 << 30)) {
        snprintf(buf, size, "%.1f GiB", b / (1 << 30));
    } else if (b >= (1 << 20)) {
        snprintf(buf, size, "%.0f MiB", b / (1 << 20));
    } else {
        snprintf(buf, size, "%.0f KiB", b / 1024);
    }
    return buf;
}

/* statvfs of the state directory, or of its nearest parent that exists: on a first start
 * the directory is made only when the first task opens, and the disk is the same. */
static int stat_dir(struct statvfs *sv)
{
    char dir[sizeof(w.dir)];
    snprintf(dir, sizeof(dir), "%s", w.dir);
    while (statvfs(dir, sv) != 0) {
        char *slash = strrchr(dir, '/');
        if (errno != ENOENT || strcmp(dir, "/") == 0 || strcmp(dir, ".") == 0) {
            return -1;
        }
        if (!slash) {
            snprintf(dir, sizeof(dir), "."); /* a relative path's first part */
        } else if (slash == dir) {
            dir[1] = '\0'; /* "/" */
        } else {
            *slash = '\0';
        }
    }
    return 0;
}

/* One look: 1 when the disk is short of room, 0 when not, -1 when it cannot be read. */
static int look(int64_t *avail, int64_t *size)
{
    struct statvfs sv;
    if (stat_dir(&sv) != 0) {
        atomic_store(&free_now, -1);
        atomic_store(&size_now, -1);
        return -1;
    }
    *avail = (int64_t)sv.f_bavail * (int64_t)sv.f_frsize;
    *size = (int64_t)sv.f_blocks * (int64_t)sv.f_frsize;
    atomic_store(&free_now, *avail);
    atomic_store(&size_now, *size);
    return *size > 0 && *avail * 100 < *size * w.pct;
}

static void *watch_main(void *arg)
{
    int short_of_room = 0, unreadable = 0;
    int64_t said = 0;
    (void)arg;
    bk_log_set_thread_name("diskwatch");
    pthread_mutex_lock(&w.lock);
    while (!w.stop) {
        struct timespec until;
        int64_t avail = 0, size = 0, now = bk_clock_mono_ms();
        int low = look(&avail, &size);
        char fb[32], sb[32];
        if (low < 0 && !unreadable) {
            bk_log_warn("cannot look at the free space of the state directory %s: %s", w.dir,
                        strerror(errno));
        } else if (low > 0 && (!short_of_room || now - said >= BK_DISKWATCH_SAY_MS)) {
            bk_log_warn("the state directory's disk is nearly full: %s free of %s (%.1f%%, "
                        "under disk_free_warn_pct=%d) in %s; a store's write that finds no "
                        "room stops the node",
                        human(avail, fb, sizeof(fb)), human(size, sb, sizeof(sb)),
                        100.0 * (double)avail / (double)size, w.pct, w.dir);
            bk_events_emit("disk_low", "\"free_bytes\":%lld,\"size_bytes\":%lld,\"pct\":%d",
                           (long long)avail, (long long)size, w.pct);
            said = now;
        } else if (low == 0 && short_of_room) {
            bk_log_info("the state directory's disk has room again: %s free of %s in %s",
                        human(avail, fb, sizeof(fb)), human(size, sb, sizeof(sb)), w.dir);
        }
        unreadable = low < 0;
        if (low >= 0) {
            short_of_room = low;
        }
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += BK_DISKWATCH_CHECK_MS / 1000;
        pthread_cond_timedwait(&w.cond, &w.lock, &until);
    }
    pthread_mutex_unlock(&w.lock);
    return NULL;
}

int bk_diskwatch_start(const bk_conf_t *conf)
{
    int rc = 0;
    const char *dir = bk_conf_str(conf, BK_CONF_STATE_DIR);
    pthread_mutex_lock(&w.lock);
    if (!w.started && dir && bk_conf_int(conf, BK_CONF_DISK_FREE_WARN_PCT) > 0) {
        snprintf(w.dir, sizeof(w.dir), "%s", dir);
        w.pct = (int)bk_conf_int(conf, BK_CONF_DISK_FREE_WARN_PCT);
        w.stop = 0;
        rc = pthread_create(&w.thread, NULL, watch_main, NULL) == 0 ? 0 : -1;
        w.started = rc == 0;
    }
    pthread_mutex_unlock(&w.lock);
    return rc;
}

void bk_diskwatch_stop(void)
{
    pthread_mutex_lock(&w.lock);
    if (!w.started) {
        pthread_mutex_unlock(&w.lock);
        return;
    }
    w.stop = 1;
    pthread_cond_signal(&w.cond);
    pthread_mutex_unlock(&w.lock);
    pthread_join(w.thread, NULL);
    pthread_mutex_lock(&w.lock);
    w.started = 0;
    pthread_mutex_unlock(&w.lock);
}
