/* plan.c - reads a topology's description out of its Lua VM (cold path). */
#include "engine/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

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
    free(plan->topics);
    free(plan->subs);
    free(plan->id);
    free(plan->path);
    free(plan);
}

void bk_plan_snapshot_dir(const bk_plan_t *plan, const bk_conf_t *conf, char *buf, size_t size)
{
    snprintf(buf, size, "%s/%s/snapshots", bk_conf_str(conf, BK_CONF_STATE_DIR), plan->id);
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

void bk_plan_settings_to_app(lua_State *L, int app, const bk_conf_t *conf)
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

bk_plan_t *bk_plan_load(lua_State *L, const char *path, bk_conf_t *conf, char *errstr,
                        size_t errstr_size)
{
    int top = lua_gettop(L), app, plan_idx, n;
    bk_plan_t *plan = calloc(1, sizeof(*plan));

    plan->path = strdup(path);
    if (bk_vm_dofile(L, path, 1, errstr, errstr_size) != 0) {
        goto fail;
    }
    app = lua_gettop(L);
    if (bk_vm_require(L, "beck.app", errstr, errstr_size) != 0) {
        goto fail;
    }
    lua_getfield(L, -1, "is_app");
    lua_pushvalue(L, app);
    lua_call(L, 1, 1);
    if (!lua_toboolean(L, -1)) {
        snprintf(errstr, errstr_size,
                 "%s: the topology must return its app (end the file with `return app`)", path);
        goto fail;
    }
    lua_pop(L, 2);
    if (apply_settings(L, app, path, conf, errstr, errstr_size) != 0) {
        goto fail;
    }
    bk_plan_settings_to_app(L, app, conf);
    lua_getfield(L, app, "describe");
    lua_pushvalue(L, app);
    if (bk_vm_pcall(L, 1, 1, 0, errstr, errstr_size) != 0) {
        goto fail;
    }
    plan_idx = lua_gettop(L);
    lua_getfield(L, plan_idx, "id");
    plan->id = strdup(lua_tostring(L, -1));
    lua_pop(L, 1);

    lua_getfield(L, plan_idx, "topics");
    n = (int)lua_objlen(L, -1);
    plan->ntopics = n;
    plan->topics = calloc((size_t)n, sizeof(*plan->topics));
    for (int i = 0; i < n; i++) {
        bk_plan_topic_t *t = &plan->topics[i];
        lua_rawgeti(L, -1, i + 1);
        lua_getfield(L, -1, "name");
        t->name = strdup(lua_tostring(L, -1));
        lua_pop(L, 1);
        t->source = field_bool(L, -1, "source");
        t->sink = field_bool(L, -1, "sink");
        t->internal = field_bool(L, -1, "internal");
        t->keygroups = field_bool(L, -1, "keygroups");
        t->pass_to = field_int(L, -1, "pass_to", 0) - 1;
        lua_getfield(L, -1, "partitions");
        t->want = lua_isnumber(L, -1) ? (int)lua_tointeger(L, -1) : 0;
        lua_pop(L, 1);
        lua_getfield(L, -1, "sub");
        t->sub = lua_isnumber(L, -1) ? (int)lua_tointeger(L, -1) - 1 : -1;
        lua_pop(L, 2);
    }
    lua_pop(L, 1);

    lua_getfield(L, plan_idx, "subtopologies");
    n = (int)lua_objlen(L, -1);
    plan->nsubs = n;
    plan->subs = calloc((size_t)n, sizeof(*plan->subs));
    for (int i = 0; i < n; i++) {
        bk_plan_sub_t *s = &plan->subs[i];
        lua_rawgeti(L, -1, i + 1);
        s->generation = field_int(L, -1, "generation", 0);
        s->passthrough = field_bool(L, -1, "passthrough");
        s->want = s->passthrough ? field_int(L, -1, "tasks", 0) : 0;
        lua_getfield(L, -1, "topics");
        s->ntopics = (int)lua_objlen(L, -1);
        s->topics = calloc((size_t)s->ntopics, sizeof(int));
        for (int j = 0; j < s->ntopics; j++) {
            lua_rawgeti(L, -1, j + 1);
            s->topics[j] = (int)lua_tointeger(L, -1) - 1;
            lua_pop(L, 1);
        }
        lua_pop(L, 2);
    }
    lua_pop(L, 1);

    lua_getfield(L, plan_idx, "stores");
    n = (int)lua_objlen(L, -1);
    plan->nstores = n;
    plan->stores = calloc((size_t)(n ? n : 1), sizeof(*plan->stores));
    for (int i = 0; i < n; i++) {
        bk_plan_store_t *st = &plan->stores[i];
        lua_rawgeti(L, -1, i + 1);
        lua_getfield(L, -1, "name");
        st->name = strdup(lua_tostring(L, -1));
        lua_getfield(L, -2, "changelog");
        st->changelog = strdup(lua_tostring(L, -1));
        lua_getfield(L, -3, "sub");
        st->sub = (int)lua_tointeger(L, -1) - 1;
        lua_pop(L, 3);
        st->logged = field_bool(L, -1, "logged");
        lua_getfield(L, -1, "changelog_other");
        st->changelog_other = lua_type(L, -1) == LUA_TSTRING ? strdup(lua_tostring(L, -1)) : NULL;
        lua_pop(L, 1);
        st->window = field_bool(L, -1, "window");
        lua_getfield(L, -1, "retention");
        st->retention_ms = lua_isnumber(L, -1) ? (int64_t)lua_tonumber(L, -1) : 0;
        lua_pop(L, 1);
        lua_getfield(L, -1, "ttl");
        st->ttl_ms = lua_isnumber(L, -1) ? (int64_t)lua_tonumber(L, -1) : 0;
        lua_pop(L, 1);
        st->ttl_wall = field_bool(L, -1, "ttl_wall");
        lua_getfield(L, -1, "key_serde");
        st->key_serde = lua_type(L, -1) == LUA_TSTRING ? strdup(lua_tostring(L, -1)) : NULL;
        lua_getfield(L, -2, "value_serde");
        st->value_serde = lua_type(L, -1) == LUA_TSTRING ? strdup(lua_tostring(L, -1)) : NULL;
        lua_pop(L, 3);
    }
    lua_settop(L, top);
    return plan;

fail:
    lua_settop(L, top);
    bk_plan_destroy(plan);
    return NULL;
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
