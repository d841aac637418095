/* ffi_spec.h - the FFI bindings that only specs drive: the assignor and its codec, the
 * membership view, reconcile, the snapshot manifest and install, plan growth, regrouping.
 * Not on any record path, and not loaded by beck's own Lua. Each is defined in a file of its
 * module that includes this header (<module>_ffi.c) and nothing else does: the Makefile
 * links those files into bin/beck-spec only, whose `beck test` declares them (the part
 * between the CDEF markers, cut into the Lua module beck.internal.cdef_spec); bin/beck
 * ships without them. The same rules as ffi.h: plain C declarations, no macros, no
 * includes. */
#ifndef BK_FFI_SPEC_H
#define BK_FFI_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "base/ffi.h" /* the status codes BK_FFI_OK, BK_FFI_ERR */

/* BK_FFI_CDEF_BEGIN */
/* -- Reconcile (cluster/reconcile.h) ----------------------------------------------------
 * bk_reconcile_diff over plain arrays: the node's now (running, standing, was_standby
 * [ntasks], updated in place to the new one) and the view (epoch, lost, want = its running,
 * want_sb = its standby, waiting, release). counts[0..3] = changed, log_unchanged,
 * change_actives, stop_standbys; counts[4..11] = the lengths of keep, release, revoked,
 * forget, standbys, promoted, gained, running, whose elements follow one another in out
 * (at least 11 * (ntasks + 1) elements). */
int bk_ffi_reconcile(int32_t ntasks, const int32_t *running, int32_t nrunning,
                     const int32_t *standing, int32_t nstanding, uint8_t *was_standby,
                     uint64_t logged_epoch, uint64_t epoch, int lost, const int32_t *want,
                     int32_t nwant, const int32_t *want_sb, int32_t nwant_sb,
                     const int32_t *waiting, int32_t nwaiting, const int32_t *release,
                     int32_t nrelease, int32_t *out, int32_t *counts);
/* -- Assignor (assign.h) and its published form (assigncodec.h) -------------------------
 * For specs: build an assignor input a call at a time, compute, read the result; build,
 * encode, decode, diff and apply published assignments. Not on any per-record path.
 * Member and slot indices are 0-based; -1 is "none". Errors: bk_ffi_assign_error(b), or
 * *err pointing at thread-local text valid until the next call. Buffers from encode and
 * delta are freed with bk_ffi_assigncodec_buf_free(). */
typedef struct bk_assign_builder_s bk_assign_builder_t;
typedef struct bk_assigncodec_s bk_assigncodec_t;
/* Assignor (assign.h): ntasks tasks, `standbys` standbys each (K). */
bk_assign_builder_t *bk_ffi_assign_new(int32_t ntasks, int32_t standbys);
/* Returns the member's index, or BK_FFI_ERR. rack and endpoint may be NULL. */
int32_t bk_ffi_assign_add_member(bk_assign_builder_t *b, const char *id, const char *rack,
                                 const char *endpoint, int32_t threads);
int bk_ffi_assign_set_prev(bk_assign_builder_t *b, int32_t task, int32_t active,
                           const int32_t *standby, int32_t n);
int bk_ffi_assign_add_lag(bk_assign_builder_t *b, int32_t task, int32_t member, int64_t lag);
/* Warm-up (assign.h): on, and the acceptable recovery lag. */
int bk_ffi_assign_set_warmup(bk_assign_builder_t *b, int on, int64_t acceptable_lag);
int bk_ffi_assign_set_no_standby(bk_assign_builder_t *b, int32_t task);
int bk_ffi_assign_compute(bk_assign_builder_t *b);
/* After a compute: tasks held on a caught-up replica while another warms up. */
int32_t bk_ffi_assign_warmups(const bk_assign_builder_t *b);
/* After a compute: actives [ntasks], standbys [ntasks * *k], and the movement figures. */
const int32_t *bk_ffi_assign_active(const bk_assign_builder_t *b);
const int32_t *bk_ffi_assign_standby(const bk_assign_builder_t *b, int32_t *k);
int bk_ffi_assign_stats(const bk_assign_builder_t *b, int32_t *moved, int32_t *min_moved,
                        int32_t *orphaned, int32_t *promoted);
const char *bk_ffi_assign_error(const bk_assign_builder_t *b);
void bk_ffi_assign_free(bk_assign_builder_t *b);
/* Published assignments (assigncodec.h). */
bk_assigncodec_t *bk_ffi_assigncodec_new(int32_t nnodes, int32_t ntasks, int32_t k, uint64_t epoch,
                                         uint64_t base_epoch);
int bk_ffi_assigncodec_set_node(bk_assigncodec_t *ac, int32_t slot, const char *id,
                                const char *rack, const char *endpoint, const char **err);
int bk_ffi_assigncodec_set_task(bk_assigncodec_t *ac, int32_t task, int32_t active,
                                const int32_t *standby, int32_t n);
int bk_ffi_assigncodec_validate(const bk_assigncodec_t *ac, const char **err);
int bk_ffi_assigncodec_encode(const bk_assigncodec_t *ac, char **buf, size_t *len,
                              const char **err);
int bk_ffi_assigncodec_delta(const bk_assigncodec_t *prev, const bk_assigncodec_t *next, char **buf,
                             size_t *len, const char **err);
void bk_ffi_assigncodec_buf_free(char *buf);
int bk_ffi_assigncodec_peek(const char *buf, size_t len, int32_t *kind, uint64_t *epoch,
                            uint64_t *base_epoch, const char **err);
bk_assigncodec_t *bk_ffi_assigncodec_decode(const char *buf, size_t len, const char **err);
bk_assigncodec_t *bk_ffi_assigncodec_apply(const bk_assigncodec_t *prev, const char *buf,
                                           size_t len, const char **err);
int bk_ffi_assigncodec_equal(const bk_assigncodec_t *a, const bk_assigncodec_t *b);
void bk_ffi_assigncodec_info(const bk_assigncodec_t *ac, int32_t *nnodes, int32_t *ntasks,
                             int32_t *k, uint64_t *epoch, uint64_t *base_epoch);
const char *bk_ffi_assigncodec_node(const bk_assigncodec_t *ac, int32_t slot, const char **rack,
                                    const char **endpoint);
int32_t bk_ffi_assigncodec_task(const bk_assigncodec_t *ac, int32_t task, int32_t *standby);
bk_assigncodec_t *bk_ffi_assigncodec_from_assign(const bk_assigncodec_t *prev,
                                                 bk_assign_builder_t *b, uint64_t epoch,
                                                 const char **err);
int bk_ffi_assigncodec_to_prev(const bk_assigncodec_t *ac, bk_assign_builder_t *b);
void bk_ffi_assigncodec_free(bk_assigncodec_t *ac);
/* -- Snapshots (engine/manifest.h, engine/snapshot.h, replica/install.h) ------------------
 * *err points at thread-local text valid until the next call. */
/* Parses the manifest in file in_path and, unless out_path is NULL, writes it to out_path
 * with bk_manifest_write. The number of files it lists, or BK_FFI_ERR. */
int bk_ffi_snapshot_manifest_rewrite(const char *in_path, const char *out_path, const char **err);
/* Parses fetched_dir's manifest and installs fetched_dir as task_dir (bk_install_snapshot). */
int bk_ffi_snapshot_install(const char *fetched_dir, const char *task_dir, const char **err);
/* replica/install.h: bk_install_recover */
int bk_ffi_install_recover(const char *app_dir);
/* bk_snapshot_sweep: how many snapshots were removed. */
int bk_ffi_snapshot_sweep(const char *root, int64_t ttl_ms, int64_t now_ms);
int bk_ffi_snapshot_file_xxh3(const char *path, uint64_t *xxh3, uint64_t *size, const char **err);
/* -- The membership view (cluster/member_ffi.c) -----------------------------------------
 * An observer's view fed records by hand, as the member thread feeds it from the control
 * topic; records encoded as members write them (free *buf with
 * bk_ffi_assigncodec_buf_free). Peer indices are into the view's peers, -1: none. */
typedef struct bk_member_spec_s bk_member_spec_t;
bk_member_spec_t *bk_ffi_member_observer_new(int32_t session_ms);
void bk_ffi_member_observer_free(bk_member_spec_t *s);
int bk_ffi_member_feed(bk_member_spec_t *s, const char *rec, size_t len, int64_t offset,
                       int64_t ts);
int bk_ffi_member_view(bk_member_spec_t *s, int32_t *npeers, int32_t *leader, uint64_t *epoch,
                       int32_t *ntasks);
/* A peer's id, state (BK_MEMBER_ALIVE 0, DEAD 1, LEFT 2, REPLACED 3) and incarnation. */
const char *bk_ffi_member_peer(bk_member_spec_t *s, int32_t i, int32_t *state, uint64_t *inc);
/* Task t's owner in the current epoch; its holder into *holder. */
int32_t bk_ffi_member_task(bk_member_spec_t *s, int32_t t, int32_t *holder);
int bk_ffi_member_rec_heartbeat(const char *id, uint64_t inc, const char *rack, int32_t threads,
                                int32_t ntasks, uint64_t epoch, int32_t session_ms, char **buf,
                                size_t *len);
/* Checkpoints (cluster/member_checkpoint.c): the view's state as bytes, and a view replaced
 * by a checkpoint record's (*last: the offset it describes; *err says why not). */
int bk_ffi_member_state(bk_member_spec_t *s, char **buf, size_t *len);
int bk_ffi_member_load(bk_member_spec_t *s, const char *rec, size_t len, int64_t *last,
                       const char **err);
int bk_ffi_member_rec_progress(const char *id, uint64_t inc, const int32_t *tasks,
                               const int64_t *offsets, int32_t n, int32_t session_ms, char **buf,
                               size_t *len);
int bk_ffi_member_rec_checkpoint(bk_member_spec_t *s, const char *id, uint64_t inc, char **buf,
                                 size_t *len);
int bk_ffi_member_rec_leave(const char *id, uint64_t inc, char **buf, size_t *len);
int bk_ffi_member_rec_assign(const char *id, uint64_t inc, const char *payload, size_t plen,
                             char **buf, size_t *len);
int bk_ffi_member_rec_release(const char *id, uint64_t inc, uint64_t epoch, const int32_t *tasks,
                              int32_t n, char **buf, size_t *len);
/* A generation record (the leader's: the next generation of `sub`, following `after` moves)
 * and the view's list of moves ("S=N,..."; *n their count). */
int bk_ffi_member_rec_generation(const char *id, uint64_t inc, int32_t after, int32_t sub,
                                 int32_t tasks, char **buf, size_t *len);
const char *bk_ffi_member_generations(bk_member_spec_t *s, int32_t *n);
/* A drained record (task `task` of a replaced generation drained) and the view's drained
 * tasks (sorted; *n their count). */
int bk_ffi_member_rec_drained(const char *id, uint64_t inc, int32_t task, char **buf, size_t *len);
const int32_t *bk_ffi_member_drained(bk_member_spec_t *s, int32_t *n);
/* -- A plan grown by later generations (engine/plan_ffi.c) -------------------------------
 * Loads `topology` with the tasks setting `tasks` (NULL: none), grows it by each of
 * grow[0..ngrow) in turn (bk_plan_grow) and writes the plan as text into out (size bytes):
 * a line per topic, subtopology and store with its index and fields, and one of the task
 * table ("tasks N cap=C S_P ..."; made after the load, when no subtopology of the topology
 * has its partition count, so it holds the later generations' tasks only). BK_FFI_OK, or
 * BK_FFI_ERR with *err. */
int bk_ffi_plan_grow(const char *topology, const char *tasks, const char *const *grow,
                     int32_t ngrow, char *out, size_t size, const char **err);
/* -- The state move of repartitioning (engine/regroup_ffi.c) ----------------------------
 * bk_regroup_build and bk_regroup_check (engine/regroup.h) with the stats as an array:
 * [0] primary source, [1] linked bytes, [2] copied keys, [3] copied bytes, [4] dropped
 * files, [5] sources used, [6] ms. *err: why not (valid until the next call). */
int bk_ffi_regroup_build(const char *dst, const char *const *srcs, const int32_t *groups,
                         int32_t nsrc, int32_t lo, int32_t hi, int64_t *stats, const char **err);
int bk_ffi_regroup_check(const char *dir, int32_t lo, int32_t hi, int32_t *first_bad,
                         int64_t *nkeys, const char **err);
/* -- Key groups (base/hash.h) -----------------------------------------------------------
 * The task of `ntasks` owning key group `group` (bk_hash_group_owner). */
int32_t bk_ffi_hash_group_owner(int32_t group, int32_t ntasks);
/* -- A task's life (engine/tasklife_ffi.c) ---------------------------------------------
 * The states' count, a state's name, and whether the table lets a task go from one to
 * another (1 or 0). */
int32_t bk_ffi_tasklife_states(void);
const char *bk_ffi_tasklife_name(int32_t state);
int32_t bk_ffi_tasklife_allowed(int32_t from, int32_t to);
/* BK_FFI_CDEF_END */

#endif
