/* vm.c - VM creation, the embedded-module searcher and protected calls. */
#include "engine/vm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

#include "engine/embed.h"

/* -- Embedded modules --------------------------------------------------- */

/* package.loaders entry: serves the modules of lua/ compiled into the binary,
 * with their repo path as chunk name so errors still say file and line. */
static int searcher_embedded(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    char chunk[256];

    for (const bk_embed_t *m = bk_embed_modules; m->name; m++) {
        if (strcmp(m->name, name) == 0) {
            snprintf(chunk, sizeof(chunk), "@%s", m->path);
            if (luaL_loadbuffer(L, m->source, m->size, chunk) != 0) {
                return lua_error(L);
            }
            return 1;
        }
    }
    lua_pushfstring(L, "\n\tno module '%s' embedded in beck", name);
    return 1;
}

/* Inserts the searcher at position 2 of package.loaders: after preload,
 * before the file system, so a stale copy on disk never shadows the binary's. */
static void install_searcher(lua_State *L)
{
    int n;
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "loaders");
    n = (int)lua_objlen(L, -1);
    for (int i = n; i >= 2; i--) {
        lua_rawgeti(L, -1, i);
        lua_rawseti(L, -2, i + 1);
    }
    lua_pushcfunction(L, searcher_embedded);
    lua_rawseti(L, -2, 2);
    lua_pop(L, 2);
}

/* BECK_JIT_LOG=PREFIX: each VM writes LuaJIT's trace log (jit.v) to PREFIX.N, N
 * counting VMs from 1: to see what a topology's record path compiles to, and where
 * its traces abort or exit, in a real run (docs/performance.md). */
static void jit_log(lua_State *L)
{
    static _Atomic int vms;
    const char *prefix = getenv("BECK_JIT_LOG");
    if (!prefix || !*prefix) {
        return;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", prefix, ++vms);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "jit.v");
    if (lua_pcall(L, 1, 1, 0) == 0) {
        lua_getfield(L, -1, "start");
        lua_pushstring(L, path);
        if (lua_pcall(L, 1, 0, 0) != 0) {
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
}

lua_State *bk_vm_new(void)
{
    lua_State *L = luaL_newstate();
    if (!L) {
        return NULL;
    }
    luaL_openlibs(L);
    install_searcher(L);
    jit_log(L);
    return L;
}

void bk_vm_destroy(lua_State *L)
{
    if (L) {
        lua_close(L);
    }
}

/* -- Protected calls ---------------------------------------------------- */

static int traceback_handler(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (!msg) {
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

int bk_vm_pcall(lua_State *L, int nargs, int nresults, int traceback, char *errstr,
                size_t errstr_size)
{
    int base = lua_gettop(L) - nargs, rc;
    const char *msg;

    if (traceback) {
        lua_pushcfunction(L, traceback_handler);
        lua_insert(L, base);
    }
    rc = lua_pcall(L, nargs, nresults, traceback ? base : 0);
    if (traceback) {
        lua_remove(L, base);
    }
    if (rc == 0) {
        return 0;
    }
    msg = lua_tostring(L, -1);
    snprintf(errstr, errstr_size, "%s", msg ? msg : "(error object is not a string)");
    lua_pop(L, 1);
    return -1;
}

int bk_vm_dofile(lua_State *L, const char *path, int nresults, char *errstr, size_t errstr_size)
{
    if (luaL_loadfile(L, path) != 0) {
        snprintf(errstr, errstr_size, "%s", lua_tostring(L, -1));
        lua_pop(L, 1);
        return -1;
    }
    return bk_vm_pcall(L, 0, nresults, 1, errstr, errstr_size);
}

int bk_vm_require(lua_State *L, const char *name, char *errstr, size_t errstr_size)
{
    lua_getglobal(L, "require");
    lua_pushstring(L, name);
    return bk_vm_pcall(L, 1, 1, 1, errstr, errstr_size);
}

int bk_vm_load_hooks(lua_State *L, int app, const char *path, char *errstr, size_t errstr_size)
{
    int top = lua_gettop(L), rc;
    if (!path) {
        return 0;
    }
    if (bk_vm_require(L, "beck.app", errstr, errstr_size) != 0) {
        return -1;
    }
    lua_getfield(L, -1, "load_hooks");
    lua_pushvalue(L, app);
    lua_pushstring(L, path);
    rc = bk_vm_pcall(L, 2, 0, 0, errstr, errstr_size);
    lua_settop(L, top);
    return rc;
}
