/* thread_seal.c - sealing a later generation's task (docs/repartitioning.md, Cleanup): once
 * built, the task writes its whole state to its own changelogs, a slice after each commit,
 * so that they alone hold it and the generations before it can go. The commit after the
 * last slice makes the records durable: the task is then sealed, which its directory
 * (SEALED) and the metadata of its input offsets' commits ("beck.sealed") say, for the
 * node that opens it next and for the nodes' cleanup. Stream thread only.
 *
 * Why a slice read from the DB right after a commit is right: the stores have no write
 * pending then (the cache flushed, the batches written), so each entry written is the
 * value of the key's newest changelog record at that moment, and any later write of the
 * key comes after it in the changelog. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/events.h"
#include "base/ffi.h"
#include "base/log.h"
#include "base/task.h"
#include "engine/changelog.h"
#include "engine/drained.h"
#include "engine/thread_internal.h"

/* Written after a commit, over the thread's tasks: at most BUDGET entries and SLICE_MS of
 * the thread's time (its other tasks wait meanwhile: 20,000 entries took 50-65 ms, which
 * showed as a gap of the other subtopologies' output), in chunks of CHUNK entries; while a
 * seal is under way the thread commits every SEAL_COMMIT_MS at least (thread.c), so a task
 * of 1 M keys seals in a minute or two, in the background of its processing: nothing waits
 * for a seal but the cleanup of older generations. */
#define BUDGET 20000
#define CHUNK 1000
#define SLICE_MS 8
#define SEALED_FILE "SEALED"

/* A seal under way shows as the task's life's "sealing" (a task that drains meanwhile goes
 * on sealing: its life shows "draining"); seal_store[slot] says how far it got, -1: none. */

int bk_thread_seal_init(bk_thread_t *thr)
{
    thr->seal.store = malloc(((size_t)thr->cap + 1) * sizeof(int));
    thr->seal.cursor = calloc((size_t)thr->cap + 1, sizeof(char *));
    thr->seal.curlen = calloc((size_t)thr->cap + 1, sizeof(size_t));
    thr->seal.written = calloc((size_t)thr->cap + 1, sizeof(int64_t));
    for (int s = 0; thr->seal.store && s <= thr->cap; s++) {
        thr->seal.store[s] = -1;
    }
    return thr->seal.store && thr->seal.cursor && thr->seal.curlen && thr->seal.written ? 0 : -1;
}

void bk_thread_seal_free(bk_thread_t *thr)
{
    for (int s = 0; thr->seal.cursor && s < thr->cap; s++) {
        free(thr->seal.cursor[s]);
    }
    free(thr->seal.store);
    free(thr->seal.cursor);
    free(thr->seal.curlen);
    free(thr->seal.written);
}

void bk_thread_seal_forget(bk_thread_t *thr, int slot)
{
    if (!thr->seal.store) {
        return;
    }
    thr->life.sealed[slot] = 0;
    thr->seal.store[slot] = -1;
    free(thr->seal.cursor[slot]);
    thr->seal.cursor[slot] = NULL;
    thr->seal.curlen[slot] = 0;
    thr->seal.written[slot] = 0;
}

void bk_thread_seal_restore(bk_thread_t *thr, int slot, const char *meta)
{
    if (strstr(meta, BK_THREAD_SEALED_META)) {
        thr->life.sealed[slot] = 1;
    }
}

int bk_thread_seal_done(const bk_thread_t *thr, int slot)
{
    return thr->life.sealed && thr->life.sealed[slot];
}

static void task_dir(const bk_thread_t *thr, int slot, char *buf, size_t size)
{
    bk_plan_task_dir(thr->plan, thr->conf, thr->tasks[slot], buf, size);
}

void bk_thread_seal_live(bk_thread_t *thr, int slot)
{
    char dir[4096], err[512];
    if (bk_plan_prev_generation(thr->plan, thr->tasks[slot].sub) < 0 || !thr->dbs[slot]) {
        return; /* only a built task's changelogs lack the state it started from */
    }
    task_dir(thr, slot, dir, sizeof(dir));
    if (thr->life.sealed[slot] || bk_drained_marked(dir, SEALED_FILE)) {
        /* sealed before (here, or where its commits come from) */
        if (!thr->life.sealed[slot] &&
            bk_drained_mark(dir, SEALED_FILE, "sealed\n", err, sizeof(err)) != 0) {
            bk_log_warn("task %s: %s", BK_TASK_NAME(thr->tasks[slot]), err);
        }
        thr->life.sealed[slot] = 1;
        return;
    }
    thr->seal.store[slot] = 0;
    bk_thread_life(thr, slot, BK_LIFE_SEALING);
}

/* The commit covered the last slice: sealed. Its input offsets are committed again with
 * the metadata at the next commit. */
static void sealed(bk_thread_t *thr, int slot)
{
    char dir[4096], err[512], text[64];
    task_dir(thr, slot, dir, sizeof(dir));
    snprintf(text, sizeof(text), "sealed: %lld record(s)\n", (long long)thr->seal.written[slot]);
    if (bk_drained_mark(dir, SEALED_FILE, text, err, sizeof(err)) != 0) {
        bk_log_warn("task %s: %s", BK_TASK_NAME(thr->tasks[slot]), err);
    }
    thr->life.sealed[slot] = 1;
    thr->seal.store[slot] = -1;
    if (bk_tasklife_state(&thr->life, slot) == BK_LIFE_SEALING) {
        bk_thread_life(thr, slot, BK_LIFE_LIVE);
    }
    for (int j = 0; j < thr->tp.nslot[slot]; j++) {
        int i = thr->tp.slot[slot][j];
        /* a partition it has read nothing of, never committed, gets offset 0 (where its
         * next owner would start anyway): the cleanup sees the seal on every partition */
        if (thr->tp.next[i] < 0) {
            thr->tp.next[i] = 0;
        }
        thr->tp.dirty[i] = 1;
    }
    bk_log_info("task %s: sealed: its changelogs hold its whole state (%lld record(s) "
                "written): the generations before it are no longer needed to restore it",
                BK_TASK_NAME(thr->tasks[slot]), (long long)thr->seal.written[slot]);
    bk_events_emit("sealed", "\"task\":\"%s\",\"records\":%lld", BK_TASK_NAME(thr->tasks[slot]),
                   (long long)thr->seal.written[slot]);
}

/* A slice of slot's stores, at most *left entries (taken from it): 0, or -1 with thr->err. */
static int slice(bk_thread_t *thr, int slot, int *left_io)
{
    const bk_plan_t *plan = thr->plan;
    int left = *left_io;
    while (thr->seal.store[slot] < plan->nstores && left > 0) {
        bk_store_t *st = thr->store_of[slot][thr->seal.store[slot]];
        int64_t before = thr->seal.written[slot];
        int done = 1;
        if (st && bk_changelog_write_base(st, &thr->seal.cursor[slot], &thr->seal.curlen[slot],
                                          left, &thr->seal.written[slot], &done) != BK_FFI_OK) {
            snprintf(thr->err, sizeof(thr->err), "task %s: sealing: %s",
                     BK_TASK_NAME(thr->tasks[slot]), bk_ffi_store_error(st));
            return -1;
        }
        left -= (int)(thr->seal.written[slot] - before);
        if (done) {
            thr->seal.store[slot]++;
        }
    }
    /* seal_store at nstores: every store written, durable at the next commit */
    *left_io = left;
    return 0;
}

int bk_thread_seal_after_commit(bk_thread_t *thr)
{
    int left = BUDGET, pending = 0;
    int64_t until = bk_clock_mono_ms() + SLICE_MS;
    for (int i = 0; i < thr->ntasks; i++) {
        int s = thr->owned[i];
        if (!bk_tasklife_running(&thr->life, s) || thr->seal.store[s] < 0) {
            continue;
        }
        if (thr->seal.store[s] >= thr->plan->nstores) {
            sealed(thr, s);
            continue;
        }
        while (thr->seal.store[s] >= 0 && thr->seal.store[s] < thr->plan->nstores && left > 0 &&
               bk_clock_mono_ms() < until) {
            int chunk = left < CHUNK ? left : CHUNK, was = chunk;
            if (slice(thr, s, &chunk) != 0) {
                return -1;
            }
            left -= was - chunk;
        }
        pending |= thr->seal.store[s] >= 0;
    }
    thr->seal.soon = pending; /* the next slice (or the seal) at a commit soon */
    return 0;
}
