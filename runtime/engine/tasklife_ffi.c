/* tasklife_ffi.c - a task's life's table as specs read it through FFI (base/ffi_spec.h):
 * spec/01-unit/45-tasklife_spec.lua holds docs/architecture.md's table against it. */
#include "engine/tasklife.h"

#include "base/ffi_spec.h"

int32_t bk_ffi_tasklife_states(void)
{
    return BK_LIFE_NSTATES;
}

const char *bk_ffi_tasklife_name(int32_t state)
{
    return bk_tasklife_name((bk_life_t)state);
}

int32_t bk_ffi_tasklife_allowed(int32_t from, int32_t to)
{
    return bk_tasklife_allowed((bk_life_t)from, (bk_life_t)to);
}
