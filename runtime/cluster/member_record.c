/* member_record.c - the control topic's records: encoding and decoding (member_internal.h;
 * the format is in its header comment and docs/cluster.md, Records). Any thread. */
#define _GNU_SOURCE

#include "cluster/member_internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "base/log.h"
#include "base/wire.h"
#include "cluster/assign.h"
#include "cluster/assigncodec.h"
#include "devbroker/devctl.h"
#include "engine/kafka.h"

const char bk_member_rec_key_char[] = "?hlartncgd";

/* Copies a string into out[BK_MEMBER_MAX_ID + 1]; longer ones, or ones with a NUL, are bad. */
static void r_str(bk_wire_reader_t *r, char *out)
{
    size_t n;
    const char *s = bk_wire_get_str(r, BK_MEMBER_MAX_ID, &n);
    memcpy(out, s, n);
    out[n] = '\0';
}

/* The settings a heartbeat announces after its progress list (for observers, which have no
 * settings of their own). Read on a copy of the cursor: a record without them, or with a
 * malformed list (which the applier cuts short), is still a heartbeat. */
static void rec_parse_settings(rec_t *rec)
{
    bk_wire_reader_t r = rec->list;
    uint64_t hb, session;

    rec->hb_ms = rec->session_ms = 0;
    if (rec->nlist > (uint64_t)r.left) {
        return; /* at least a byte an entry */
    }
    for (uint64_t k = 0; k < rec->nlist; k++) {
        bk_wire_get_uv(&r);
        bk_wire_get_sv(&r);
        bk_wire_get_uv(&r);
    }
    if (r.fault || r.left == 0) {
        return;
    }
    hb = bk_wire_get_uv(&r);
    session = bk_wire_get_uv(&r);
    /* conf.c's bounds, roughly: nothing a member would send otherwise */
    if (!r.fault && hb > 0 && hb <= 3600 * 1000 && session > 2 * hb &&
        session <= 24 * 3600 * 1000) {
        rec->hb_ms = (int)hb;
        rec->session_ms = (int)session;
    }
}

/* 0, or -1 when the record is not one of ours or is malformed. */
int bk_member_rec_parse(const void *buf, size_t len, rec_t *rec)
{
    bk_wire_reader_t r = {buf, len, NULL};
    uint64_t v;

    if (len < 3 || bk_wire_get_u8(&r) != WIRE_MAGIC || bk_wire_get_u8(&r) != WIRE_VERSION) {
        return -1;
    }
    rec->type = bk_wire_get_u8(&r);
    r_str(&r, rec->id);
    rec->inc = bk_wire_get_uv(&r);
    if (r.fault || !rec->id[0]) {
        return -1;
    }
    switch (rec->type) {
    case REC_HEARTBEAT:
        r_str(&r, rec->rack);
        r_str(&r, rec->endpoint);
        v = bk_wire_get_uv(&r);
        rec->threads = v >= 1 && v <= 65536 ? (int32_t)v : 1;
        v = bk_wire_get_uv(&r);
        rec->ntasks = v <= BK_ASSIGNCODEC_MAX_TASKS ? (int32_t)v : 0;
        rec->layout = (uint32_t)bk_wire_get_uv(&r);
        rec->epoch = bk_wire_get_uv(&r);
        rec->nlist = bk_wire_get_uv(&r);
        rec->list = r;
        rec_parse_settings(rec);
        break;
    case REC_RELEASE:
        rec->epoch = bk_wire_get_uv(&r);
        rec->nlist = bk_wire_get_uv(&r);
        rec->list = r;
        break;
    case REC_ASSIGN:
    case REC_CHECKPOINT:
        rec->payload = r.p;
        rec->payload_len = r.left;
        break;
    case REC_NOTE: {
        size_t n;
        const char *text;
        r_str(&r, rec->to);
        r_str(&r, rec->kind);
        text = bk_wire_get_str(&r, BK_MEMBER_NOTE_MAX, &n);
        if (!r.fault) {
            memcpy(rec->text, text, n);
        }
        rec->text[r.fault ? 0 : n] = '\0';
        break;
    }
    case REC_GENERATION:
        rec->gen_index = bk_wire_get_uvmax(&r, GENS_MAX, "move index");
        rec->gen_sub = bk_wire_get_uvmax(&r, INT32_MAX, "subtopology");
        rec->gen_tasks = bk_wire_get_uvmax(&r, 4096, "task count"); /* key groups */
        break;
    case REC_DRAINED:
        rec->drained = (int32_t)bk_wire_get_uvmax(&r, BK_ASSIGNCODEC_MAX_TASKS, "task");
        break;
    case REC_LEAVE:
    case REC_TICK:
        break;
    default:
        return -1; /* a later version's type: not ours to read */
    }
    return r.fault ? -1 : 0;
}
