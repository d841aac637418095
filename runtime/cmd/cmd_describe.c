/* cmd_describe.c - `beck describe`. */
#include "cmd/cmd_describe.h"

#include <stdio.h>
#include <string.h>

#include <lauxlib.h>

#include "engine/vm.h"
#include "cmd/cmd_opts.h"

int bk_cmd_describe_main(int argc, char **argv)
{
    lua_State *L;
    char err[4096];
    int rc = 1;

    {
        const char *path = NULL;
        bk_cmd_args_t args = {"describe", NULL, 0, NULL, &path, 1, 0};
        int parsed = bk_cmd_opts_parse(&args, argc, argv);
        if (parsed != 0 || !path) {
            fprintf(parsed == 1 ? stdout : stderr,
                    "usage: beck describe TOPOLOGY.lua\n\n"
                    "Prints the subtopologies, processors, stores and topics of a topology.\n");
            return parsed == 1 ? 0 : 2;
        }
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
