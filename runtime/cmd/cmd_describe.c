/* cmd_describe.c - `beck describe`. */
#include "cmd/cmd_describe.h"

#include <stdio.h>
#include <string.h>

#include <lauxlib.h>

#include "engine/vm.h"

int bk_cmd_describe_main(int argc, char **argv)
{
    lua_State *L;
    char err[4096];
    int rc = 1;

    if (argc != 2 || argv[1][0] == '-') {
        FILE *out = argc == 2 ? stdout : stderr;
        fprintf(out, "usage: beck describe TOPOLOGY.lua\n\n"
                     "Prints the subtopologies, processors, stores and topics of a topology.\n");
        return argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) ? 0 : 2;
    }
    L = bk_vm_new();
    if (bk_vm_require(L, "beck.internal.describe", err, sizeof(err)) == 0) {
        lua_getfield(L, -1, "file");
        lua_pushstring(L, argv[1]);
        if (bk_vm_pcall(L, 1, 1, 0, err, sizeof(err)) == 0) {
            fputs(lua_tostring(L, -1), stdout);
            rc = 0;
        }
    }
    if (rc != 0) {
        fprintf(stderr, "beck describe: %s\n", err);
    }
    bk_vm_destroy(L);
    return rc;
}
