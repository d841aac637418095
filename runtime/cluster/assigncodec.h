/* assigncodec.h - the published form of an assignment: one message per epoch on the control
 * topic that every member reads, instead of a copy per member. It holds a node table (slot ->
 * id, rack, endpoint) and, per task, the slots of its active and standbys as varints; a
 * delta holds only the node slots and tasks that changed since the epoch it is based on.
 * It neither decides placement (assign.h) nor produces or consumes (the membership code).
 * The format, byte by byte, is in docs/assignment.md.
 *
 * Decoding never trusts its input: every count, length and index is checked against the
 * bytes left and the limits below before anything is allocated or read, and the result is
 * validated as a whole, so any byte string gives a valid assignment or an error. */
#ifndef BK_ASSIGNCODEC_H
#define BK_ASSIGNCODEC_H

#include <stddef.h>
#include <stdint.h>

#include "cluster/assign.h"

/* The version written; decoders read 1 as well (docs/assignment.md, Wire format). */
#define BK_ASSIGNCODEC_VERSION 2
enum { BK_ASSIGNCODEC_FULL = 0, BK_ASSIGNCODEC_DELTA = 1 };

/* Limits a decoder enforces (and an encoder refuses to exceed). */
#define BK_ASSIGNCODEC_MAX_NODES 65536
#define BK_ASSIGNCODEC_MAX_TASKS (1 << 24)
#define BK_ASSIGNCODEC_MAX_K 16
#define BK_ASSIGNCODEC_MAX_STR 4096

/* A slot of the node table. An empty slot (a node that left, its slot not yet reused) has
 * id, rack and endpoint "". */
typedef struct bk_assigncodec_node {
    char *id;
    char *rack;
    char *endpoint; /* where the node serves queries, "host:port" */
} bk_assigncodec_node_t;

/* One epoch's assignment. Valid when: epoch > base_epoch; the last slot is not empty (empty
 * slots at the end are trimmed); non-empty ids are unique; every index is -1 or a non-empty
 * slot; a task's replicas are distinct slots; a row's empty standbys (-1) come last.
 * Owns every array and string; freed by bk_assigncodec_destroy(). */
typedef struct bk_assigncodec_s {
    uint64_t epoch;
    uint64_t base_epoch; /* the epoch this one replaces (0: none) */
    int32_t nnodes;
    bk_assigncodec_node_t *nodes; /* [nnodes] */
    int32_t ntasks;
    int32_t k;        /* standby slots per task */
    int32_t *active;  /* [ntasks] slot, -1: unassigned */
    int32_t *standby; /* [ntasks * k] slots, -1: none */
} bk_assigncodec_t;

/* An assignment of nnodes empty slots and ntasks unassigned tasks; NULL if a count is out of
 * the limits or memory is short. */
bk_assigncodec_t *bk_assigncodec_new(int32_t nnodes, int32_t ntasks, int32_t k, uint64_t epoch,
                                     uint64_t base_epoch);
void bk_assigncodec_destroy(bk_assigncodec_t *ac);

/* Fills slot `slot` (strings copied; id "" or NULL empties it). 0, or -1 with errstr. */
int bk_assigncodec_set_node(bk_assigncodec_t *ac, int32_t slot, const char *id, const char *rack,
                            const char *endpoint, char *errstr, size_t errstr_size);

/* 0 if ac is valid (above), else -1 with the first fault in errstr. */
int bk_assigncodec_validate(const bk_assigncodec_t *ac, char *errstr, size_t errstr_size);

/* 1 if a and b are the same assignment (epochs included), else 0. */
int bk_assigncodec_equal(const bk_assigncodec_t *a, const bk_assigncodec_t *b);

/* Encodes a valid ac in full into *buf (malloc'd, the caller frees it) of *len bytes.
 * 0, or -1 with errstr if ac is not valid. */
int bk_assigncodec_encode(const bk_assigncodec_t *ac, uint8_t **buf, size_t *len, char *errstr,
                          size_t errstr_size);

/* Encodes next as a delta against prev (next->base_epoch must be prev->epoch) into *buf
 * (malloc'd, the caller frees it): the node slots and tasks whose content changed, every
 * task past prev's count, and the new counts. 0, or -1 with errstr. */
int bk_assigncodec_delta(const bk_assigncodec_t *prev, const bk_assigncodec_t *next, uint8_t **buf,
                         size_t *len, char *errstr, size_t errstr_size);

/* Reads the header only: kind (BK_ASSIGNCODEC_FULL or _DELTA), epoch and base epoch, so that
 * a member can drop a message that is not based on its current epoch before decoding it.
 * 0, or -1 with errstr. */
int bk_assigncodec_peek(const uint8_t *buf, size_t len, int *kind, uint64_t *epoch,
                        uint64_t *base_epoch, char *errstr, size_t errstr_size);

/* Decodes a full message into a new assignment (the caller destroys it); NULL with errstr
 * on any malformed, truncated or invalid input, or on a delta. */
bk_assigncodec_t *bk_assigncodec_decode(const uint8_t *buf, size_t len, char *errstr,
                                        size_t errstr_size);

/* Applies a delta message to prev (left untouched) into a new assignment (the caller
 * destroys it); NULL with errstr if the message is malformed, is not a delta, is not based
 * on prev->epoch, or gives an invalid assignment. */
bk_assigncodec_t *bk_assigncodec_apply(const bk_assigncodec_t *prev, const uint8_t *buf, size_t len,
                                       char *errstr, size_t errstr_size);

/* The assignment of epoch `epoch` from the assignor's result for `in`, based on prev (NULL:
 * none). A member keeps its slot of prev (found by id; its rack and endpoint are updated);
 * the slots of members gone are emptied; new members take the lowest empty slots in id
 * order, then slots at the end; empty slots at the end are trimmed. Keeping slots is what
 * keeps deltas small. NULL with errstr (epoch <= prev's, out of memory). */
bk_assigncodec_t *bk_assigncodec_from_result(const bk_assigncodec_t *prev,
                                             const bk_assign_input_t *in,
                                             const bk_assign_result_t *res, uint64_t epoch,
                                             char *errstr, size_t errstr_size);

/* The other way: fills the assignor's previous placement of ntasks tasks for the members
 * `members` from ac, by node id: prev_active [ntasks] and prev_standby [ntasks * width]
 * get member indices, -1 where the node is gone, the slot empty or the task new.
 * 0, or -1 when out of memory. */
int bk_assigncodec_to_prev(const bk_assigncodec_t *ac, const bk_assign_member_t *members,
                           int32_t nmembers, int32_t ntasks, int32_t *prev_active,
                           int32_t *prev_standby, int32_t width);

#endif
