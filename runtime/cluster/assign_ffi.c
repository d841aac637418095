/* assign_ffi.c - the assignor (assign.h) as specs drive it through FFI (base/ffi_spec.h):
 * a builder fills an input a call at a time, computes, and reads the result back. The
 * codec (assigncodec.h) reads a builder's input and result too. Any thread; not on a
 * record path. */
#include "cluster/assign.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ffi_spec.h"

/* -- The FFI builder ---------------------------------------------------------------------- */

struct bk_assign_builder_s {
    bk_assign_input_t in; /* points into the arrays below while computing */
    bk_assign_result_t res;
    bk_assign_member_t *members; /* strings owned */
    int32_t mcap;
    int32_t *prev_active;  /* [ntasks] */
    int32_t *prev_standby; /* [ntasks * prev_width] */
    int32_t prev_width;
    bk_assign_lag_t *lags;
    int32_t lcap;
    uint8_t *bare; /* [ntasks] or NULL: in.no_standby */
    int computed;
    char err[256];
};

static char *dupstr(const char *s)
{
    size_t n = strlen(s ? s : "") + 1;
    char *d = malloc(n);
    if (d) {
        memcpy(d, s ? s : "", n);
    }
    return d;
}

bk_assign_builder_t *bk_ffi_assign_new(int32_t ntasks, int32_t standbys)
{
    bk_assign_builder_t *b;
    if (ntasks < 0 || standbys < 0) {
        return NULL;
    }
    b = calloc(1, sizeof(*b));
    if (!b) {
        return NULL;
    }
    b->in.ntasks = ntasks;
    b->in.standbys = standbys;
    b->prev_active = malloc(((size_t)ntasks + 1) * sizeof(int32_t));
    if (!b->prev_active) {
        free(b);
        return NULL;
    }
    for (int32_t t = 0; t < ntasks; t++) {
        b->prev_active[t] = -1;
    }
    return b;
}

int32_t bk_ffi_assign_add_member(bk_assign_builder_t *b, const char *id, const char *rack,
                                 const char *endpoint, int32_t threads)
{
    bk_assign_member_t *mem;
    if (b->in.nmembers == b->mcap) {
        int32_t cap = b->mcap ? b->mcap * 2 : 16;
        bk_assign_member_t *m = realloc(b->members, (size_t)cap * sizeof(*m));
        if (!m) {
            snprintf(b->err, sizeof(b->err), "out of memory");
            return BK_FFI_ERR;
        }
        b->members = m;
        b->mcap = cap;
    }
    mem = &b->members[b->in.nmembers];
    mem->id = dupstr(id);
    mem->rack = dupstr(rack);
    mem->endpoint = dupstr(endpoint);
    mem->threads = threads;
    if (!mem->id || !mem->rack || !mem->endpoint) {
        free((char *)mem->id);
        free((char *)mem->rack);
        free((char *)mem->endpoint);
        snprintf(b->err, sizeof(b->err), "out of memory");
        return BK_FFI_ERR;
    }
    return b->in.nmembers++;
}

/* The previous placement of a task: its active (-1: none or gone) and n standbys. */
int bk_ffi_assign_set_prev(bk_assign_builder_t *b, int32_t task, int32_t active,
                           const int32_t *standby, int32_t n)
{
    if (task < 0 || task >= b->in.ntasks || n < 0) {
        snprintf(b->err, sizeof(b->err), "set_prev: task %d or count %d out of range", (int)task,
                 (int)n);
        return BK_FFI_ERR;
    }
    if (n > b->prev_width) {
        /* Widen every row; new cells are empty. */
        size_t T = (size_t)b->in.ntasks;
        int32_t *w = malloc((T * (size_t)n + 1) * sizeof(*w));
        if (!w) {
            snprintf(b->err, sizeof(b->err), "out of memory");
            return BK_FFI_ERR;
        }
        for (size_t t = 0; t < T; t++) {
            for (int32_t j = 0; j < n; j++) {
                w[t * (size_t)n + (size_t)j] =
                    j < b->prev_width ? b->prev_standby[t * (size_t)b->prev_width + (size_t)j] : -1;
            }
        }
        free(b->prev_standby);
        b->prev_standby = w;
        b->prev_width = n;
    }
    b->prev_active[task] = active;
    for (int32_t j = 0; j < b->prev_width; j++) {
        b->prev_standby[(size_t)task * (size_t)b->prev_width + (size_t)j] = j < n ? standby[j] : -1;
    }
    return BK_FFI_OK;
}

int bk_ffi_assign_add_lag(bk_assign_builder_t *b, int32_t task, int32_t member, int64_t lag)
{
    if (b->in.nlags == b->lcap) {
        int32_t cap = b->lcap ? b->lcap * 2 : 64;
        bk_assign_lag_t *l = realloc(b->lags, (size_t)cap * sizeof(*l));
        if (!l) {
            snprintf(b->err, sizeof(b->err), "out of memory");
            return BK_FFI_ERR;
        }
        b->lags = l;
        b->lcap = cap;
    }
    b->lags[b->in.nlags++] = (bk_assign_lag_t){task, member, lag};
    return BK_FFI_OK;
}

const bk_assign_input_t *bk_assign_builder_input(bk_assign_builder_t *b)
{
    b->in.members = b->members;
    b->in.prev_active = b->prev_active;
    b->in.prev_standby = b->prev_standby;
    b->in.prev_width = b->prev_width;
    b->in.lags = b->lags;
    return &b->in;
}

int bk_ffi_assign_set_warmup(bk_assign_builder_t *b, int on, int64_t acceptable_lag)
{
    b->in.warmup = on;
    b->in.acceptable_lag = acceptable_lag;
    return BK_FFI_OK;
}

int bk_ffi_assign_set_no_standby(bk_assign_builder_t *b, int32_t task)
{
    if (task < 0 || task >= b->in.ntasks) {
        snprintf(b->err, sizeof(b->err), "set_no_standby: task %d out of range", (int)task);
        return BK_FFI_ERR;
    }
    if (!b->bare && !(b->bare = calloc((size_t)b->in.ntasks + 1, 1))) {
        snprintf(b->err, sizeof(b->err), "out of memory");
        return BK_FFI_ERR;
    }
    b->bare[task] = 1;
    b->in.no_standby = b->bare;
    return BK_FFI_OK;
}

int32_t bk_ffi_assign_warmups(const bk_assign_builder_t *b)
{
    return b->computed ? b->res.warmups : BK_FFI_ERR;
}

int bk_ffi_assign_compute(bk_assign_builder_t *b)
{
    bk_assign_builder_input(b);
    bk_assign_result_destroy(&b->res);
    b->computed = bk_assign_compute(&b->in, &b->res, b->err, sizeof(b->err)) == 0;
    return b->computed ? BK_FFI_OK : BK_FFI_ERR;
}

/* The last result: actives [ntasks]; standbys [ntasks * *k]. NULL before a compute. */
const int32_t *bk_ffi_assign_active(const bk_assign_builder_t *b)
{
    return b->computed ? b->res.active : NULL;
}

const int32_t *bk_ffi_assign_standby(const bk_assign_builder_t *b, int32_t *k)
{
    *k = b->computed ? b->res.k : 0;
    return b->computed ? b->res.standby : NULL;
}

int bk_ffi_assign_stats(const bk_assign_builder_t *b, int32_t *moved, int32_t *min_moved,
                        int32_t *orphaned, int32_t *promoted)
{
    if (!b->computed) {
        return BK_FFI_ERR;
    }
    *moved = b->res.moved;
    *min_moved = b->res.min_moved;
    *orphaned = b->res.orphaned;
    *promoted = b->res.promoted;
    return BK_FFI_OK;
}

const char *bk_ffi_assign_error(const bk_assign_builder_t *b)
{
    return b->err;
}

void bk_ffi_assign_free(bk_assign_builder_t *b)
{
    if (!b) {
        return;
    }
    for (int32_t i = 0; i < b->in.nmembers; i++) {
        free((char *)b->members[i].id);
        free((char *)b->members[i].rack);
        free((char *)b->members[i].endpoint);
    }
    bk_assign_result_destroy(&b->res);
    free(b->members);
    free(b->prev_active);
    free(b->prev_standby);
    free(b->lags);
    free(b->bare);
    free(b);
}

const bk_assign_result_t *bk_assign_builder_result(const bk_assign_builder_t *b)
{
    return b->computed ? &b->res : NULL;
}
