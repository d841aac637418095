/* vm.h - LuaJIT VMs for beck: creation with beck's embedded modules, and
 * protected calls whose errors come back as text naming file and line.
 *
 * One VM per stream thread (and one on the main thread for start-up and
 * `beck test`); a VM is never touched by two threads. Cold-path glue only:
 * per-record calls go through FFI (ffi.h), not the C API. */
#ifndef BK_VM_H
#define BK_VM_H

#include <lua.h>
#include <stddef.h>

/* A VM with the standard libraries, the `beck` modules compiled into the
 * binary (found before anything on package.path), and the Lua paths of the
 * system's packages (busted, cjson). Returns NULL on allocation failure. */
lua_State *bk_vm_new(void);
void bk_vm_destroy(lua_State *L);

/* lua_pcall with a traceback handler. On error returns -1 and writes the
 * message (first line "file:line: message", then the traceback when
 * `traceback` is set) into errstr, leaving the stack as before the call minus
 * the function and arguments. */
int bk_vm_pcall(lua_State *L, int nargs, int nresults, int traceback, char *errstr,
                size_t errstr_size);

/* Loads and runs a Lua file, leaving its `nresults` results on the stack. */
int bk_vm_dofile(lua_State *L, const char *path, int nresults, char *errstr, size_t errstr_size);

/* Adds the hooks of the file `path` (may be NULL: nothing to do) to the app
 * at stack index `app` (beck.app's load_hooks). */
int bk_vm_load_hooks(lua_State *L, int app, const char *path, char *errstr, size_t errstr_size);

/* require(name), leaving the module on the stack. */
int bk_vm_require(lua_State *L, const char *name, char *errstr, size_t errstr_size);

#endif
