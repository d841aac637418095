/* plan.c - reads a topology's description out of its Lua VM (cold path). */
#include "engine/plan.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "base/hash.h"
#include "engine/store.h"
#include "engine/vm.h"

void bk_plan_destroy(bk_plan_t *plan)
{
    if (!plan) {
        return;
    }
    for (int i = 0; i < plan->ntopics; i++) {
        free(plan->topics[i].name);
    }
    for (int i = 0; i < plan->nsubs; i++) {
        free(plan->subs[i].topics);
    }
    for (int i = 0; i < plan->nstores; i++) {
        free(plan->stores[i].name);
        free(plan->stores[i].changelog);
        free(plan->stores[i].changelog_other);
        free(plan->stores[i].key_serde);
        free(plan->stores[i].value_serde);
    }
    free(plan->stores);
    for (int i = 0; i < plan->nglobals; i++) {
        free(plan->globals[i].name);
        free(plan->globals[i].topic);
    }
    free(plan->globals);
    free(plan->topics);
    free(plan->subs);
    free(plan->id);
    free(plan->path);
    free(plan->generations);
    for (int i = 0; i < plan->nretired; i++) {
        free(plan->retired[i]);
    }
    free(plan->retired);
    free((void *)plan->sub_retired);
    free((void *)plan->sub_sealed);
    free((void *)plan->topic_ready);
    free(plan->task_table);
    free(plan);
}

void bk_plan_snapshot_dir(const bk_plan_t *plan, const bk_conf_t *conf, char *buf, size_t size)
{
    snprintf(buf, size, "%s/%s/snapshots", bk_conf_str(conf, BK_CONF_STATE_DIR), plan->id);
}

int bk_plan_generation_sub(const bk_plan_t *plan, int of, int g)
{
    int nsubs = plan->nsubs;
    for (int s = 0; s < nsubs; s++) {
        const bk_plan_sub_t *x = &plan->subs[s];
        if (x->of == of && !x->passthrough && x->generation == g && g >= 1) {
            return s;
        }
    }
    if (g == 0 && of >= 0 && of < nsubs && !plan->subs[of].passthrough &&
        plan->subs[of].generation == 0) {
        return of;
    }
    return -1;
}

int bk_plan_prev_generation(const bk_plan_t *plan, int s)
{
    const bk_plan_sub_t *sub = &plan->subs[s];
    if (sub->passthrough || sub->generation < 1 || s == sub->of) {
        return -1; /* generation 1 of the `tasks` setting is the topology's own: no move */
    }
    return bk_plan_generation_sub(plan, sub->of, sub->generation - 1);
}

void bk_plan_task_groups(const bk_plan_t *plan, int s, int p, int *lo, int *hi)
{
    if (plan->subs[s].generation < 1) {
        *lo = 0;
        *hi = BK_HASH_KEY_GROUPS;
        return;
    }
    bk_hash_group_range(p, plan->subs[s].partitions, lo, hi);
}

int bk_plan_sub_logged(const bk_plan_t *plan, int s)
{
    int nstores = plan->nstores;
    for (int i = 0; i < nstores; i++) {
        if (plan->stores[i].sub == s && plan->stores[i].logged) {
            return 1;
        }
    }
    return 0;
}

int bk_plan_gen0_moved(const bk_plan_t *plan, int s)
{
    const bk_plan_sub_t *sub = &plan->subs[s];
    return !sub->passthrough && sub->generation == 0 && sub->of == s &&
           bk_plan_latest_generation(plan, s) >= 1;
}

int bk_plan_latest_generation(const bk_plan_t *plan, int of)
{
    int nsubs = plan->nsubs, g = 0;
    for (int s = 0; s < nsubs; s++) {
        const bk_plan_sub_t *x = &plan->subs[s];
        if (x->of == of && !x->passthrough && x->generation > g) {
            g = x->generation;
        }
    }
    return g;
}

int bk_plan_passthrough_input(const bk_plan_t *plan, int t)
{
    int s = plan->topics[t].sub;
    const bk_plan_sub_t *pass = s >= 0 ? &plan->subs[s] : NULL;
    for (int k = 0; pass && k < pass->ntopics; k++) {
        if (pass->topics[k] == t) {
            return k;
        }
    }
    return 0;
}

int bk_plan_passthrough_of(const bk_plan_t *plan, int of)
{
    int nsubs = plan->nsubs;
    for (int s = 0; s < nsubs; s++) {
        if (plan->subs[s].passthrough && plan->subs[s].of == of) {
            return s;
        }
    }
    return -1;
}

void bk_plan_set_retired(bk_plan_t *plan, int s)
{
    if (plan->sub_retired && s >= 0 && s < plan->cap_subs) {
        atomic_store_explicit(&plan->sub_retired[s], 1, memory_order_release);
    }
}

int bk_plan_retired(const bk_plan_t *plan, int s)
{
    return plan->sub_retired && s >= 0 && s < plan->cap_subs &&
           atomic_load_explicit(&plan->sub_retired[s], memory_order_acquire);
}

void bk_plan_set_sealed(bk_plan_t *plan, int s)
{
    if (plan->sub_sealed && s >= 0 && s < plan->cap_subs) {
        atomic_store_explicit(&plan->sub_sealed[s], 1, memory_order_release);
    }
}

int bk_plan_sealed(const bk_plan_t *plan, int s)
{
    return plan->sub_sealed && s >= 0 && s < plan->cap_subs &&
           atomic_load_explicit(&plan->sub_sealed[s], memory_order_acquire);
}

void bk_plan_set_ready(bk_plan_t *plan, int ntopics, int nstores)
{
    for (int t = 0; plan->topic_ready && t < ntopics && t < plan->cap_topics; t++) {
        atomic_store_explicit(&plan->topic_ready[t], 1, memory_order_release);
    }
    atomic_store(&plan->ready_nstores, nstores);
    atomic_fetch_add(&plan->nready, 1);
}

int bk_plan_topic_ready(const bk_plan_t *plan, int t)
{
    return plan->topic_ready && t >= 0 && t < plan->cap_topics &&
           atomic_load_explicit(&plan->topic_ready[t], memory_order_acquire);
}

int bk_plan_first_task(const bk_plan_t *plan, int s)
{
    int n = 0;
    for (int i = 0; i < s; i++) {
        n += plan->subs[i].partitions;
    }
    return n;
}

int bk_plan_topic_index(const bk_plan_t *plan, const char *name)
{
    for (int i = 0; i < plan->ntopics; i++) {
        if (strcmp(plan->topics[i].name, name) == 0) {
            return i;
        }
    }
    return -1;
}

static int field_bool(lua_State *L, int idx, const char *name)
{
    int v;
    lua_getfield(L, idx, name);
    v = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return v;
}

/* Applies the settings of the app's config table (beck.app{...}). Unknown
 * keys are an error: a misspelt setting silently ignored costs hours. */
static int apply_settings(lua_State *L, int app, const char *path, bk_conf_t *conf, char *errstr,
                          size_t errstr_size)
{
    int rc = 0;
    lua_getfield(L, app, "config");
    lua_pushnil(L);
    while (lua_next(L, -2) != 0) {
        char err[256];
        const char *key;
        int k;
        if (lua_type(L, -2) != LUA_TSTRING) {
            lua_pop(L, 1);
            continue;
        }
        key = lua_tostring(L, -2);
        k = bk_conf_lookup(key);
        if (k < 0) {
            snprintf(errstr, errstr_size,
                     "%s: beck.app: unknown setting '%s' (see beck run --help)", path, key);
            rc = -1;
        } else if (!lua_isstring(L, -1)) {
            snprintf(errstr, errstr_size, "%s: beck.app: setting '%s' must be a string or number",
                     path, key);
            rc = -1;
        } else {
            /* tostring of a copy: lua_tostring on the key would break lua_next */
            lua_pushvalue(L, -1);
            if (bk_conf_set(conf, k, lua_tostring(L, -1), BK_CONF_FROM_TOPOLOGY, err,
                            sizeof(err)) != 0) {
                snprintf(errstr, errstr_size, "%s: %s", path, err);
                rc = -1;
            }
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
        if (rc) {
            lua_pop(L, 2);
            return -1;
        }
    }
    lua_pop(L, 1);
    return 0;
}

void bk_plan_settings_to_app(lua_State *L, int app, const bk_conf_t *conf,
                             const char *generations)
{
    const char *tasks = bk_conf_str(conf, BK_CONF_TASKS);
    lua_getfield(L, app, "config");
    /* --id names the app's own topics too (changelogs, generations) */
    if (bk_conf_str(conf, BK_CONF_APP_ID) &&
        bk_conf_source(conf, BK_CONF_APP_ID) > BK_CONF_FROM_TOPOLOGY) {
        lua_pushstring(L, bk_conf_str(conf, BK_CONF_APP_ID));
        lua_setfield(L, -2, "id");
    }
    if (tasks) {
        lua_pushstring(L, tasks);
    } else {
        lua_pushnil(L);
    }
    lua_setfield(L, -2, "tasks");
    if (generations) {
        lua_pushstring(L, generations);
    } else {
        lua_pushnil(L);
    }
    lua_setfield(L, -2, "generations");
    lua_pop(L, 1);
}

static int field_int(lua_State *L, int idx, const char *name, int dflt)
{
    int v;
    lua_getfield(L, idx, name);
    v = lua_isnumber(L, -1) ? (int)lua_tointeger(L, -1) : dflt;
    lua_pop(L, 1);
    return v;
}

static char *field_str(lua_State *L, int idx, const char *name)
{
    char *v;
    lua_getfield(L, idx, name);
    v = lua_type(L, -1) == LUA_TSTRING ? strdup(lua_tostring(L, -1)) : NULL;
    lua_pop(L, 1);
    return v;
}

/* The length of the list at plan_idx's field `name`, left on the stack. */
static int list_len(lua_State *L, int plan_idx, const char *name)
{
    lua_getfield(L, plan_idx, name);
    return (int)lua_objlen(L, -1);
}

/* Reads the description's topics, subtopologies or stores from index `from` up to `n` into the
 * plan's arrays (room checked by the caller). */
static void read_topics(lua_State *L, int plan_idx, bk_plan_t *plan, int from, int n)
{
    list_len(L, plan_idx, "topics");
    for (int i = from; i < n; i++) {
        bk_plan_topic_t *t = &plan->topics[i];
        lua_rawgeti(L, -1, i + 1);
        t->name = field_str(L, -1, "name");
        t->source = field_bool(L, -1, "source");
        t->sink = field_bool(L, -1, "sink");
        t->internal = field_bool(L, -1, "internal");
        t->keygroups = field_bool(L, -1, "keygroups");
        t->pass_to = field_int(L, -1, "pass_to", 0) - 1;
        t->generation = t->keygroups ? field_int(L, -1, "generation", 1) : 0;
        t->want = field_int(L, -1, "partitions", 0);
        t->sub = field_int(L, -1, "sub", 0) - 1;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

static void read_subs(lua_State *L, int plan_idx, bk_plan_t *plan, int from, int n)
{
    list_len(L, plan_idx, "subtopologies");
    for (int i = from; i < n; i++) {
        bk_plan_sub_t *s = &plan->subs[i];
        lua_rawgeti(L, -1, i + 1);
        s->generation = field_int(L, -1, "generation", 0);
        s->passthrough = field_bool(L, -1, "passthrough");
        s->want = s->passthrough ? field_int(L, -1, "tasks", 0) : 0;
        s->of = field_int(L, -1, "of", i + 1) - 1;
        lua_getfield(L, -1, "topics");
        s->ntopics = (int)lua_objlen(L, -1);
        s->topics = calloc((size_t)s->ntopics + 1, sizeof(int));
        for (int j = 0; j < s->ntopics; j++) {
            lua_rawgeti(L, -1, j + 1);
            s->topics[j] = (int)lua_tointeger(L, -1) - 1;
            lua_pop(L, 1);
        }
        lua_pop(L, 2);
    }
    lua_pop(L, 1);
}

static void read_stores(lua_State *L, int plan_idx, bk_plan_t *plan, int from, int n)
{
    list_len(L, plan_idx, "stores");
    for (int i = from; i < n; i++) {
        bk_plan_store_t *st = &plan->stores[i];
        lua_rawgeti(L, -1, i + 1);
        st->name = field_str(L, -1, "name");
        st->changelog = field_str(L, -1, "changelog");
        st->sub = field_int(L, -1, "sub", 0) - 1;
        st->logged = field_bool(L, -1, "logged");
        st->changelog_other = field_str(L, -1, "changelog_other");
        st->window = field_bool(L, -1, "window");
        st->versioned = field_bool(L, -1, "versioned");
        lua_getfield(L, -1, "retention");
        st->retention_ms = lua_isnumber(L, -1) ? (int64_t)lua_tonumber(L, -1) : 0;
        lua_pop(L, 1);
        lua_getfield(L, -1, "ttl");
        st->ttl_ms = lua_isnumber(L, -1) ? (int64_t)lua_tonumber(L, -1) : 0;
        lua_pop(L, 1);
        st->ttl_wall = field_bool(L, -1, "ttl_wall");
        st->key_serde = field_str(L, -1, "key_serde");
        st->value_serde = field_str(L, -1, "value_serde");
        st->of_store = field_int(L, -1, "of_store", 0) - 1;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

/* Runs the topology file in L and describes it with conf's settings and `generations`:
 * leaves the app and its description on the stack and returns the description's index,
 * or -1 with errstr. `settings`: a conf (conf itself, at load) that the topology's own settings
 * are applied to first, or NULL. */
/* The description's global tables (engine/global.h). */
static void read_globals(lua_State *L, int plan_idx, bk_plan_t *plan)
{
    int n = list_len(L, plan_idx, "globals");
    plan->globals = calloc((size_t)n + 1, sizeof(*plan->globals));
    for (int i = 0; plan->globals && i < n; i++) {
        lua_rawgeti(L, -1, i + 1);
        plan->globals[i].name = field_str(L, -1, "name");
        plan->globals[i].topic = field_str(L, -1, "topic");
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    plan->nglobals = plan->globals ? n : 0;
}

static int describe(lua_State *L, const char *path, const bk_conf_t *conf,
                    const char *generations, bk_conf_t *settings, char *errstr,
                    size_t errstr_size)
{
    int app;
    if (bk_vm_dofile(L, path, 1, errstr, errstr_size) != 0) {
        return -1;
    }
    app = lua_gettop(L);
    if (bk_vm_require(L, "beck.app", errstr, errstr_size) != 0) {
        return -1;
    }
    lua_getfield(L, -1, "is_app");
    lua_pushvalue(L, app);
    lua_call(L, 1, 1);
    if (!lua_toboolean(L, -1)) {
        snprintf(errstr, errstr_size,
                 "%s: the topology must return its app (end the file with `return app`)", path);
        return -1;
    }
    lua_pop(L, 2);
    if (settings && apply_settings(L, app, path, settings, errstr, errstr_size) != 0) {
        return -1;
    }
    bk_plan_settings_to_app(L, app, conf, generations);
    lua_getfield(L, app, "describe");
    lua_pushvalue(L, app);
    if (bk_vm_pcall(L, 1, 1, 0, errstr, errstr_size) != 0) {
        return -1;
    }
    return lua_gettop(L);
}

/* The length of the description's list `name`, and into *cap the room its array is made
 * with: that many and BK_PLAN_SPARE more for later generations (bk_plan_grow). */
static int room(lua_State *L, int plan_idx, const char *name, int *cap)
{
    int n = list_len(L, plan_idx, name);
    lua_pop(L, 1);
    *cap = n + BK_PLAN_SPARE;
    return n;
}

bk_plan_t *bk_plan_load(lua_State *L, const char *path, bk_conf_t *conf, char *errstr,
                        size_t errstr_size)
{
    int top = lua_gettop(L), plan_idx, n;
    bk_plan_t *plan = calloc(1, sizeof(*plan));

    plan->path = strdup(path);
    if ((plan_idx = describe(L, path, conf, NULL, conf, errstr, errstr_size)) < 0) {
        goto fail;
    }
    plan->id = field_str(L, plan_idx, "id");

    n = room(L, plan_idx, "topics", &plan->cap_topics);
    plan->topics = calloc((size_t)plan->cap_topics, sizeof(*plan->topics));
    plan->topic_ready = calloc((size_t)plan->cap_topics, sizeof(*plan->topic_ready));
    read_topics(L, plan_idx, plan, 0, n);
    plan->ntopics = n;

    n = room(L, plan_idx, "subtopologies", &plan->cap_subs);
    plan->subs = calloc((size_t)plan->cap_subs, sizeof(*plan->subs));
    plan->sub_retired = calloc((size_t)plan->cap_subs, sizeof(*plan->sub_retired));
    plan->sub_sealed = calloc((size_t)plan->cap_subs, sizeof(*plan->sub_sealed));
    read_subs(L, plan_idx, plan, 0, n);
    plan->nsubs = n;

    n = room(L, plan_idx, "stores", &plan->cap_stores);
    plan->stores = calloc((size_t)plan->cap_stores, sizeof(*plan->stores));
    read_stores(L, plan_idx, plan, 0, n);
    plan->nstores = n;

    read_globals(L, plan_idx, plan);
    /* made or found before any thread runs (topics.c) */
    bk_plan_set_ready(plan, plan->ntopics, n);
    lua_settop(L, top);
    return plan;

fail:
    lua_settop(L, top);
    bk_plan_destroy(plan);
    return NULL;
}

/* 0 if the description at plan_idx begins with the plan's topics and stores, by name: a
 * later generation only appends. */
static int extends(lua_State *L, int plan_idx, const bk_plan_t *plan, char *errstr,
                   size_t errstr_size)
{
    static const char *const lists[] = {"topics", "stores"};
    for (int l = 0; l < 2; l++) {
        int n = l == 0 ? plan->ntopics : plan->nstores;
        if (list_len(L, plan_idx, lists[l]) < n) {
            snprintf(errstr, errstr_size, "the description has fewer %s than the plan", lists[l]);
            return -1;
        }
        for (int i = 0; i < n; i++) {
            const char *want = l == 0 ? plan->topics[i].name : plan->stores[i].changelog;
            const char *got;
            lua_rawgeti(L, -1, i + 1);
            lua_getfield(L, -1, l == 0 ? "name" : "changelog");
            got = lua_tostring(L, -1);
            if (!got != !want || (got && strcmp(got, want) != 0)) {
                snprintf(errstr, errstr_size, "%s %d of the plan (%s) is not where it was",
                         lists[l], i, want ? want : "-");
                return -1;
            }
            lua_pop(L, 2);
        }
        lua_pop(L, 1);
    }
    if (list_len(L, plan_idx, "subtopologies") < plan->nsubs) {
        snprintf(errstr, errstr_size, "the description has fewer subtopologies than the plan");
        return -1;
    }
    lua_pop(L, 1);
    return 0;
}

/* Whether the task table (if made) has room for the tasks of the subtopologies that the
 * description at plan_idx has from plan->nsubs to ns (a later generation's: its want). */
static int tasks_fit(lua_State *L, int plan_idx, const bk_plan_t *plan, int ns)
{
    int n = plan->ntask_table;
    if (!plan->task_table) {
        return 1;
    }
    lua_getfield(L, plan_idx, "subtopologies");
    for (int s = plan->nsubs; s < ns; s++) {
        lua_rawgeti(L, -1, s + 1);
        n += field_int(L, -1, "tasks", 0);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return n <= plan->cap_task_table;
}

/* The inputs that a move from generation 0 gave to the passthrough it added (app.lua): the
 * topics the plan had whose reader changed in the description. `sub` first, then pass_to:
 * a stream thread that sees pass_to sees the passthrough (plan.h). */
static void handover_inputs(lua_State *L, int plan_idx, bk_plan_t *plan)
{
    int n = plan->ntopics;
    lua_getfield(L, plan_idx, "topics");
    for (int i = 0; i < n; i++) {
        bk_plan_topic_t *t = &plan->topics[i];
        int pass_to;
        lua_rawgeti(L, -1, i + 1);
        pass_to = field_int(L, -1, "pass_to", 0) - 1;
        if (t->source && pass_to >= 0 && t->pass_to < 0) {
            atomic_store(&t->sub, field_int(L, -1, "sub", 0) - 1);
            atomic_store(&t->pass_to, pass_to);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

int bk_plan_grow(bk_plan_t *plan, const bk_conf_t *conf, lua_State *L, const char *generations,
                 char *errstr, size_t errstr_size)
{
    int top = lua_gettop(L), plan_idx, nt, ns, nst, rc = -1;
    size_t have = plan->generations ? strlen(plan->generations) : 0;

    if (!generations || strncmp(generations, have ? plan->generations : "", have) != 0 ||
        (have && generations[have] != ',' && generations[have] != '\0')) {
        snprintf(errstr, errstr_size, "generations %s do not extend the plan's (%s)",
                 generations ? generations : "(none)", have ? plan->generations : "none");
        return -1;
    }
    /* conf holds the topology's settings since bk_plan_load: not applied again */
    if ((plan_idx = describe(L, plan->path, conf, generations, NULL, errstr, errstr_size)) < 0 ||
        extends(L, plan_idx, plan, errstr, errstr_size) != 0) {
        goto done;
    }
    nt = list_len(L, plan_idx, "topics");
    ns = list_len(L, plan_idx, "subtopologies");
    nst = list_len(L, plan_idx, "stores");
    lua_pop(L, 3);
    if (nt > plan->cap_topics || ns > plan->cap_subs || nst > plan->cap_stores ||
        !tasks_fit(L, plan_idx, plan, ns)) {
        snprintf(errstr, errstr_size,
                 "no room for generations %s in this process (%d topics, %d subtopologies, %d "
                 "stores, %d tasks at most)",
                 generations, plan->cap_topics, plan->cap_subs, plan->cap_stores,
                 plan->task_table ? plan->cap_task_table : plan->ntask_table);
        goto done;
    }
    read_topics(L, plan_idx, plan, plan->ntopics, nt);
    for (int i = plan->ntopics; i < nt; i++) {
        plan->topics[i].partitions = plan->topics[i].want; /* created with its task count */
    }
    read_subs(L, plan_idx, plan, plan->nsubs, ns);
    for (int i = plan->nsubs; i < ns; i++) {
        bk_plan_sub_t *sub = &plan->subs[i];
        sub->partitions = sub->passthrough ? sub->want
                          : sub->ntopics   ? plan->topics[sub->topics[0]].want
                                           : 0;
    }
    read_stores(L, plan_idx, plan, plan->nstores, nst);
    /* stores, then topics, then subtopologies and tasks, then the list: a reader that
     * finds a new subtopology finds its stores and topics complete, and one that finds the
     * new list finds every count grown (bk_thread_follow_plan) */
    {
        char **r = realloc(plan->retired, ((size_t)plan->nretired + 1) * sizeof(*r));
        char *now = strdup(generations);
        if (!r || !now) {
            if (r) {
                plan->retired = r;
            }
            free(now);
            snprintf(errstr, errstr_size, "out of memory");
            goto done; /* the entries read stay past the counts, unseen */
        }
        plan->retired = r;
        plan->nstores = nst;
        plan->ntopics = nt;
        handover_inputs(L, plan_idx, plan);
        if (plan->task_table) {
            int n = plan->ntask_table;
            for (int s = plan->nsubs; s < ns; s++) {
                for (int p = 0; p < plan->subs[s].partitions; p++) {
                    plan->task_table[n++] = (bk_task_id_t){s, p};
                }
            }
            plan->nsubs = ns;
            plan->ntask_table = n;
        } else {
            plan->nsubs = ns;
        }
        if (plan->generations) {
            plan->retired[plan->nretired++] = plan->generations;
        }
        plan->generations = now;
    }
    rc = 0;
done:
    lua_settop(L, top);
    return rc;
}

int bk_plan_sub_stores(const bk_plan_t *plan, int sub, bk_store_spec_t *specs, int *idx)
{
    int n = 0;
    for (int s = 0; s < plan->nstores; s++) {
        if (plan->stores[s].sub == sub) {
            specs[n].name = plan->stores[s].name;
            specs[n].logged = plan->stores[s].logged;
            specs[n].window = plan->stores[s].window;
            specs[n].ttl_ms = plan->stores[s].ttl_ms;
            specs[n].ttl_wall = plan->stores[s].ttl_wall;
            idx[n++] = s;
        }
    }
    return n;
}

void bk_plan_task_dir(const bk_plan_t *plan, const bk_conf_t *conf, bk_task_id_t task, char *buf,
                      size_t size)
{
    snprintf(buf, size, "%s/%s/%s", bk_conf_str(conf, BK_CONF_STATE_DIR), plan->id,
             BK_TASK_NAME(task));
}

int bk_plan_make_task_table(bk_plan_t *plan)
{
    int n;
    bk_task_id_t *now, *table;
    if (plan->task_table) {
        return 0;
    }
    now = bk_plan_tasks(plan, &n);
    table = now ? calloc((size_t)n + BK_PLAN_TASK_SPARE, sizeof(*table)) : NULL;
    if (!table) {
        free(now);
        return -1;
    }
    memcpy(table, now, (size_t)n * sizeof(*table));
    free(now);
    plan->cap_task_table = n + BK_PLAN_TASK_SPARE;
    plan->ntask_table = n;
    plan->task_table = table;
    return 0;
}

const bk_task_id_t *bk_plan_task_table(const bk_plan_t *plan, int *ntasks, int *cap)
{
    *ntasks = plan->task_table ? plan->ntask_table : 0;
    *cap = plan->task_table ? plan->cap_task_table : 0;
    return plan->task_table;
}

bk_task_id_t *bk_plan_tasks(const bk_plan_t *plan, int *ntasks)
{
    bk_task_id_t *tasks;
    int n = 0;
    for (int s = 0; s < plan->nsubs; s++) {
        n += plan->subs[s].partitions;
    }
    tasks = calloc((size_t)n + 1, sizeof(*tasks));
    n = 0;
    for (int s = 0; tasks && s < plan->nsubs; s++) {
        for (int p = 0; p < plan->subs[s].partitions; p++) {
            tasks[n++] = (bk_task_id_t){s, p};
        }
    }
    *ntasks = n;
    return tasks;
}
