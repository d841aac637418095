/* cmd_test.c - busted inside the runtime. */
#define _GNU_SOURCE /* RTLD_DEFAULT */

#include "cmd/cmd_test.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>

#include "engine/vm.h"

/* busted.runner decides whether it is standalone from the chunk that calls
 * it, so it is called from a named Lua chunk rather than straight from C. */
static const char runner[] =
    "local output = ...\n"
    /* Declared once per VM here: busted reloads spec files, FFI declarations outlive them. */
    "require 'beck.internal.runtime'\n"
    /* bin/beck-spec only: the entry points only beck's own specs call (base/ffi_spec.h) */
    "if BECK_SPEC_FFI then require 'ffi'.cdef(require 'beck.internal.cdef_spec') end\n"
    "BECK_SPEC_FFI = nil\n"
    "package.path = './?.lua;./?/init.lua;' .. package.path\n"
    "require 'busted.runner'({ standalone = false, output = output })\n";

int bk_cmd_test_main(int argc, char **argv)
{
    lua_State *L;
    char self[PATH_MAX];
    ssize_t n;
    int has_output = 0, has_path = 0, rc;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: beck test [busted options] [PATH...]\n\n"
                   "Runs busted specs (default: spec/) inside beck's runtime: require \"beck\",\n"
                   "\"beck.testing\" and FFI work as in `beck run`. Ends with one line\n"
                   "\"N passed, N failed, N skipped\"; exits non-zero on any failure.\n"
                   "BECK_BIN in the specs' environment is this binary's path.\n"
                   "Busted's own options follow; `beck test -- --help` lists them.\n");
            return 0;
        }
        if (strncmp(argv[i], "-o", 2) == 0 || strncmp(argv[i], "--output", 8) == 0) {
            has_output = 1;
        }
        if (argv[i][0] != '-') {
            has_path = 1;
        }
    }
    /* Specs start nodes and brokers: tell them which binary they run in. */
    n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        setenv("BECK_BIN", self, 0);
    }
    L = bk_vm_new();
    lua_createtable(L, argc, 0);
    lua_pushstring(L, "beck test");
    lua_rawseti(L, -2, 0);
    for (int i = 1, j = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            continue;
        }
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, j++);
    }
    if (!has_path) {
        lua_pushstring(L, "spec");
        lua_rawseti(L, -2, (int)lua_objlen(L, -2) + 1);
    }
    lua_setglobal(L, "arg");
    /* linked in (bin/beck-spec) or not (bin/beck, which ships) */
    lua_pushboolean(L, dlsym(RTLD_DEFAULT, "bk_ffi_reconcile") != NULL);
    lua_setglobal(L, "BECK_SPEC_FFI");
    if (luaL_loadbuffer(L, runner, sizeof(runner) - 1, "@beck test") != 0) {
        fprintf(stderr, "beck test: %s\n", lua_tostring(L, -1));
        bk_vm_destroy(L);
        return 1;
    }
    lua_pushstring(L, has_output ? "utfTerminal" : "beck.internal.busted_output");
    /* On failure busted's exit() raises error() with no value (Lua 5.1 has
     * no way to exit after closing the state); that is a failed run, not a
     * crash. Anything else is a crash of the runner itself. */
    rc = lua_pcall(L, 1, 0, 0);
    if (rc != 0 && !lua_isnil(L, -1)) {
        fprintf(stderr, "beck test: %s\n", lua_tostring(L, -1));
    }
    bk_vm_destroy(L);
    return rc == 0 ? 0 : 1;
}
