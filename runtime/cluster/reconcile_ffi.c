/* reconcile_ffi.c - bk_reconcile_diff as specs drive it through FFI (base/ffi_spec.h):
 * spec/01-unit/33-reconcile_spec.lua. Built into bin/beck-spec only, not the shipped
 * binary. */
#include "cluster/reconcile.h"

#include <stdlib.h>
#include <string.h>

#include "base/ffi_spec.h"


int bk_ffi_reconcile(int32_t ntasks, const int32_t *running, int32_t nrunning,
                     const int32_t *standing, int32_t nstanding, uint8_t *was_standby,
                     uint64_t logged_epoch, uint64_t epoch, int lost, const int32_t *want,
                     int32_t nwant, const int32_t *want_sb, int32_t nwant_sb,
                     const int32_t *waiting, int32_t nwaiting, const int32_t *release,
                     int32_t nrelease, int32_t *out, int32_t *counts)
{
    bk_member_view_t view;
    bk_reconcile_now_t now = {ntasks,    running,     nrunning,    standing,
                              nstanding, was_standby, logged_epoch};
    bk_reconcile_actions_t a;
    int32_t *lists[8];
    int32_t lens[8], off = 0;

    memset(&view, 0, sizeof(view));
    view.epoch = epoch;
    view.lost = lost;
    view.running = (int32_t *)want;
    view.nrunning = nwant;
    view.standby = (int32_t *)want_sb;
    view.nstandby = nwant_sb;
    view.waiting = (int32_t *)waiting;
    view.nwaiting = nwaiting;
    view.release = (int32_t *)release;
    view.nrelease = nrelease;
    if (bk_reconcile_actions_new(&a, ntasks) != 0) {
        return BK_FFI_ERR;
    }
    bk_reconcile_diff(&view, &now, &a);
    lists[0] = a.keep, lens[0] = a.nkeep;
    lists[1] = a.release, lens[1] = a.nrelease;
    lists[2] = a.revoked, lens[2] = a.nrevoked;
    lists[3] = a.forget, lens[3] = a.nforget;
    lists[4] = a.standbys, lens[4] = a.nstandbys;
    lists[5] = a.promoted, lens[5] = a.npromoted;
    lists[6] = a.gained, lens[6] = a.ngained;
    lists[7] = a.running, lens[7] = a.nrunning;
    for (int i = 0; i < 8; i++) {
        memcpy(out + off, lists[i], (size_t)lens[i] * sizeof(int32_t));
        counts[4 + i] = lens[i];
        off += lens[i];
    }
    counts[0] = a.changed;
    counts[1] = a.log_unchanged;
    counts[2] = a.change_actives;
    counts[3] = a.stop_standbys;
    memcpy(was_standby, a.was_standby, (size_t)ntasks);
    bk_reconcile_actions_free(&a);
    return BK_FFI_OK;
}
