/* hooks.c - the node's operational hooks in a VM of their own. */
#include "engine/hooks.h"

#include <stdio.h>
#include <stdlib.h>

#include <lauxlib.h>

#include "base/log.h"
#include "engine/vm.h"

struct bk_hooks_s {
    lua_State *L;
    int ref_hooks; /* the app's hooks table */
};

bk_hooks_t *bk_hooks_new(const char *path, const char *hooks_path, char *errstr, size_t errstr_size)
{
    bk_hooks_t *h = calloc(1, sizeof(*h));
    h->L = bk_vm_new();
    h->ref_hooks = LUA_NOREF;
    if (!h->L || bk_vm_dofile(h->L, path, 1, errstr, errstr_size) != 0 ||
        bk_vm_load_hooks(h->L, lua_gettop(h->L), hooks_path, errstr, errstr_size) != 0) {
        bk_hooks_destroy(h);
        return NULL;
    }
    lua_getfield(h->L, -1, "hooks");
    if (!lua_istable(h->L, -1)) {
        snprintf(errstr, errstr_size, "%s: the app has no hooks table", path);
        bk_hooks_destroy(h);
        return NULL;
    }
    h->ref_hooks = luaL_ref(h->L, LUA_REGISTRYINDEX);
    lua_settop(h->L, 0);
    return h;
}

void bk_hooks_destroy(bk_hooks_t *h)
{
    if (!h) {
        return;
    }
    bk_vm_destroy(h->L);
    free(h);
}

/* Pushes hooks[name] and returns 1 if it is a function; else pushes nothing. */
static int push_hook(bk_hooks_t *h, const char *name)
{
    if (!h || h->ref_hooks == LUA_NOREF) {
        return 0;
    }
    lua_rawgeti(h->L, LUA_REGISTRYINDEX, h->ref_hooks);
    lua_getfield(h->L, -1, name);
    lua_remove(h->L, -2);
    if (!lua_isfunction(h->L, -1)) {
        lua_pop(h->L, 1);
        return 0;
    }
    return 1;
}

static int call(bk_hooks_t *h, const char *name)
{
    char err[2048];
    if (bk_vm_pcall(h->L, 1, 0, 1, err, sizeof(err)) != 0) {
        bk_log_error("hook %s failed: %s", name, err);
        return -1;
    }
    return 0;
}

int bk_hooks_tasks(bk_hooks_t *h, const char *name, const char *const *tasks, int n)
{
    if (n <= 0 || !push_hook(h, name)) {
        return 0;
    }
    lua_createtable(h->L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushstring(h->L, tasks[i]);
        lua_rawseti(h->L, -2, i + 1);
    }
    return call(h, name);
}

int bk_hooks_task(bk_hooks_t *h, const char *name, const char *task)
{
    if (!push_hook(h, name)) {
        return 0;
    }
    lua_pushstring(h->L, task);
    return call(h, name);
}

int bk_hooks_bootstrap(bk_hooks_t *h, const bk_hooks_bootstrap_t *p)
{
    lua_State *L;
    if (!h || !push_hook(h, "on_restore")) {
        return 0;
    }
    L = h->L;
    lua_createtable(L, 0, 12);
    lua_pushstring(L, "bootstrap");
    lua_setfield(L, -2, "kind");
    lua_pushstring(L, p->task);
    lua_setfield(L, -2, "task");
    lua_pushstring(L, p->from);
    lua_setfield(L, -2, "from");
    lua_pushnumber(L, (lua_Number)p->bytes);
    lua_setfield(L, -2, "bytes");
    lua_pushnumber(L, (lua_Number)p->total);
    lua_setfield(L, -2, "total");
    lua_pushnumber(L, p->total ? 100.0 * (double)p->bytes / (double)p->total : 100.0);
    lua_setfield(L, -2, "percent");
    lua_pushnumber(L, p->elapsed_s > 0 ? (double)p->bytes / p->elapsed_s / 1e6 : 0.0);
    lua_setfield(L, -2, "mb_per_s");
    lua_pushnumber(L, p->eta_s);
    lua_setfield(L, -2, "eta_s");
    lua_pushnumber(L, p->elapsed_s);
    lua_setfield(L, -2, "elapsed_s");
    lua_pushboolean(L, p->done);
    lua_setfield(L, -2, "done");
    lua_pushboolean(L, p->ok);
    lua_setfield(L, -2, "ok");
    return call(h, "on_restore");
}

int bk_hooks_repartition(bk_hooks_t *h, const bk_hooks_repartition_t *p)
{
    lua_State *L;
    if (!h || !push_hook(h, "on_repartition")) {
        return 0;
    }
    L = h->L;
    lua_createtable(L, 0, 6);
    lua_pushstring(L, p->phase);
    lua_setfield(L, -2, "phase");
    lua_pushinteger(L, p->subtopology);
    lua_setfield(L, -2, "subtopology");
    lua_pushinteger(L, p->generation);
    lua_setfield(L, -2, "generation");
    lua_pushinteger(L, p->tasks);
    lua_setfield(L, -2, "tasks");
    lua_pushinteger(L, p->from_tasks);
    lua_setfield(L, -2, "from_tasks");
    lua_pushinteger(L, p->drained);
    lua_setfield(L, -2, "drained");
    return call(h, "on_repartition");
}
