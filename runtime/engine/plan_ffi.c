/* plan_ffi.c - a plan loaded and grown by later generations as specs drive it through FFI
 * (base/ffi_spec.h): spec/01-unit/36-plan_grow_spec.lua. Any thread; a VM of its own. */
#include "engine/plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/ffi_spec.h"
#include "engine/vm.h"

static __thread char ffi_err[1024];

/* Appends one line to out[*used..size) (cut at size). */
static void line(char *out, size_t size, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void line(char *out, size_t size, size_t *used, const char *fmt, ...)
{
    va_list ap;
    int n;
    if (*used >= size) {
        return;
    }
    va_start(ap, fmt);
    n = vsnprintf(out + *used, size - *used, fmt, ap);
    va_end(ap);
    *used += n > 0 ? (size_t)n : 0;
}

static void text(const bk_plan_t *plan, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < plan->ntopics; i++) {
        const bk_plan_topic_t *t = &plan->topics[i];
        line(out, size, &used, "topic %d %s sub=%d generation=%d partitions=%d pass_to=%d\n", i,
             t->name, t->sub, t->generation, t->partitions, t->pass_to);
    }
    for (int i = 0; i < plan->nsubs; i++) {
        const bk_plan_sub_t *s = &plan->subs[i];
        line(out, size, &used, "sub %d of=%d generation=%d partitions=%d topics=", i, s->of,
             s->generation, s->partitions);
        for (int j = 0; j < s->ntopics; j++) {
            line(out, size, &used, "%s%d", j ? "," : "", s->topics[j]);
        }
        line(out, size, &used, "\n");
    }
    for (int i = 0; i < plan->nstores; i++) {
        const bk_plan_store_t *st = &plan->stores[i];
        line(out, size, &used, "store %d %s sub=%d changelog=%s of_store=%d\n", i, st->name,
             st->sub, st->logged ? st->changelog : "-", st->of_store);
    }
    {
        int n, cap;
        const bk_task_id_t *tasks = bk_plan_task_table(plan, &n, &cap);
        line(out, size, &used, "tasks %d cap=%d", n, cap);
        for (int i = 0; tasks && i < n; i++) {
            line(out, size, &used, " %d_%d", tasks[i].sub, tasks[i].partition);
        }
        line(out, size, &used, "\n");
    }
}

int bk_ffi_plan_grow(const char *topology, const char *tasks, const char *const *grow,
                     int32_t ngrow, char *out, size_t size, const char **err)
{
    lua_State *L = bk_vm_new();
    bk_conf_t *conf = bk_conf_new();
    bk_plan_t *plan = NULL;
    int rc = BK_FFI_ERR;
    char e[256];

    *err = ffi_err;
    if (!L || !conf) {
        snprintf(ffi_err, sizeof(ffi_err), "out of memory");
        goto done;
    }
    if (tasks && bk_conf_set(conf, BK_CONF_TASKS, tasks, BK_CONF_FROM_CLI, e, sizeof(e)) != 0) {
        snprintf(ffi_err, sizeof(ffi_err), "%s", e);
        goto done;
    }
    if (!(plan = bk_plan_load(L, topology, conf, ffi_err, sizeof(ffi_err)))) {
        goto done;
    }
    /* (the loaded subtopologies' tasks are the cluster's to count: none here) */
    if (bk_plan_make_task_table(plan) != 0) {
        snprintf(ffi_err, sizeof(ffi_err), "out of memory");
        goto done;
    }
    for (int i = 0; i < ngrow; i++) {
        if (bk_plan_grow(plan, conf, L, grow[i], ffi_err, sizeof(ffi_err)) != 0) {
            goto done;
        }
    }
    text(plan, out, size);
    *err = NULL;
    rc = BK_FFI_OK;
done:
    bk_plan_destroy(plan);
    bk_conf_destroy(conf);
    if (L) {
        bk_vm_destroy(L);
    }
    return rc;
}
