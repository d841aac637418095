/* manifest.c - fuzz target: a snapshot manifest (engine/manifest.c), as a replica reads one
 * fetched from another node. What parses must name only safe files. */
#include <stdint.h>
#include <stdlib.h>

#include "engine/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bk_manifest_t m;
    char err[512];
    if (bk_manifest_parse((const char *)data, size, &m, err, sizeof(err)) != 0) {
        return 0;
    }
    for (int i = 0; i < m.nfiles; i++) {
        if (!bk_manifest_name_ok(m.files[i].name)) {
            abort(); /* a name that could leave the snapshot directory was accepted */
        }
    }
    bk_manifest_free(&m);
    return 0;
}
